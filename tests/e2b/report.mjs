// tests/e2b/report.mjs: what the SDK scripts here share: the report test-e2b.c reads (printed as JSON by each
// script), each call's result or the error it threw by name, a pause, and how long to wait for something.
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

// @ms stretched by SANDSTEP_TEST_TIME_SCALE (a slow host, as the stock-host VM under TCG: docs/hacking.md), for
// a wait for something to happen; never for a pause whose length is what a test checks.
const scale = Math.min(Math.max(Number(process.env.SANDSTEP_TEST_TIME_SCALE) || 1, 1), 100);
export const scaled = (ms) => ms * scale;
