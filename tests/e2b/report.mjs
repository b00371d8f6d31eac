// tests/e2b/report.mjs: what the SDK scripts here share: the report test-e2b.c reads (printed as JSON by each
// script), each call's result or the error it threw by name, and a pause.
export const report = {};

// What a call gave, or the error it threw, by name: the test checks both.
export async function take(name, fn) {
  try {
    report[name] = await fn();
  } catch (e) {
    report[name] = { error: e?.constructor?.name ?? 'Error', message: String(e?.message ?? e) };
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
