// tests/e2b/code.mjs: E2B's code interpreter SDK (npm "@e2b/code-interpreter", unmodified) against sandstepd:
// runCode served by sandstep's run_python session.
//
// tests/test-e2b.c runs `node code.mjs AREA` as it runs sdk.mjs (E2B_API_URL and E2B_SANDBOX_URL set to its
// sandstepd, E2B_API_KEY a key of its token file); this prints one JSON object of what each call gave (errors as
// {error: NAME, message}), which the test checks.  AREA: code, idle, readme, contexts.
import { Sandbox } from '@e2b/code-interpreter';
import { report, take, sleep } from './report.mjs';

// What an Execution holds, as plain JSON.
function shown(x) {
  return {
    text: x.text ?? null,
    results: x.results.map((r) => ({ text: r.text ?? null, isMainResult: r.isMainResult })),
    stdout: x.logs.stdout,
    stderr: x.logs.stderr,
    error: x.error ? { name: x.error.name, value: x.error.value, traceback: x.error.traceback } : null,
  };
}

async function code() {
  // The code interpreter's own default template is E2B's image; sandstep's host-root sandbox is 'base'.
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  await take('first', async () => shown(await sbx.runCode('x = 40\nprint("set")')));
  // State is kept between calls; the last expression's value is the main result, as text/plain.
  await take('state', async () => shown(await sbx.runCode('x + 2')));
  // Output streams as it is written: the first line's callback comes before the code ends.
  await take('streamed', async () => {
    const lines = [];
    const started = Date.now();
    const x = await sbx.runCode('import sys, time\nprint("one", flush=True)\ntime.sleep(2)\nprint("two")\n'
                                + 'print("err", file=sys.stderr)',
                                { onStdout: (m) => lines.push({ line: m.line, error: m.error, at: Date.now() - started }),
                                  onStderr: (m) => lines.push({ line: m.line, error: m.error, at: Date.now() - started }) });
    return { lines, ended: Date.now() - started, execution: shown(x) };
  });
  // An exception: its name, value and traceback; the session lives on with its state.
  await take('raised', async () => shown(await sbx.runCode('def f():\n    return 1 / 0\n\nf()')));
  await take('after', async () => shown(await sbx.runCode('x')));
  await take('syntax', async () => shown(await sbx.runCode('y = (')));
  // The interpreter itself ends: the call says so, and the next one runs in a new interpreter and says that.
  await take('died', async () => shown(await sbx.runCode('import os\nprint("bye", flush=True)\nos._exit(3)')));
  await take('afterDeath', async () => shown(await sbx.runCode('x = 40\nx')));
  // What is not served says so.
  await take('language', async () => shown(await sbx.runCode('1', { language: 'js' })));
  // envs: set for that code only; a variable the sandbox had comes back after.
  await take('envs', async () => shown(await sbx.runCode(
    'import os\nos.environ["SANDSTEP_E2B_A"] + "|" + os.environ["HOME"]', { envs: { SANDSTEP_E2B_A: 'b', HOME: '/elsewhere' } })));
  await take('envsAfter', async () => shown(await sbx.runCode(
    'import os\nstr(os.environ.get("SANDSTEP_E2B_A")) + "|" + os.environ["HOME"]')));
  await take('envsBadName', async () => shown(await sbx.runCode('1', { envs: { 'A=B': 'c' } })));
  // The contexts routes, as the SDK would reach them with a key (it sends none to them: see docs/e2b.md).
  await take('contexts', async () => {
    const r = await fetch(`${process.env.E2B_SANDBOX_URL}/contexts`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999',
                 'X-Access-Token': process.env.E2B_API_KEY },
      body: JSON.stringify({ language: 'python' }),
    });
    return { status: r.status, statusText: r.statusText, body: await r.json() };
  });
  // While the session lives, commands run beside it, and it keeps its state.
  await take('beside', async () => (await sbx.commands.run(
    'echo free > /workspace/beside.txt; cat /workspace/beside.txt')).stdout);
  await take('besideKept', async () => shown(await sbx.runCode('open("/workspace/beside.txt").read().strip() + str(x)')));
  // The SDK stops waiting after timeoutMs; the interpreter goes with the call, and the next call says so.
  await take('timeout', async () => shown(await sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 2000 })));
  await take('afterTimeout', async () => shown(await sbx.runCode('x')));
  await take('fresh', async () => shown(await sbx.runCode('y = 1\ny')));
  await take('killed', async () => { await sbx.kill(); return true; });
  await take('afterKill', async () => shown(await sbx.runCode('1')));
}

// A make step provisioned E2B_HANDLE; agent code runs Python in it, then leaves it: after the session's idle time
// (SANDSTEP_TEST_E2B_CODE_IDLE_S) the claim goes back, commands run again, and the next step can claim it.
async function idle() {
    const idleMs = Number(process.env.SANDSTEP_TEST_E2B_CODE_IDLE_S) * 1000;
  const sbx = await Sandbox.connect(process.env.E2B_HANDLE);
  await take('wrote', async () => shown(await sbx.runCode(
    'x = 1\nwith open("/workspace/from-code.txt", "w") as f:\n    f.write(open("/workspace/from-make.txt").read())')));
  // Idle counts from a call's end: a call longer than the idle time, then less than it, keeps the state.
  await take('long', async () => shown(await sbx.runCode(`import time\ntime.sleep(${idleMs / 1000 + 2})\nx = 2`)));
  await sleep(idleMs - 1000);
  await take('kept', async () => shown(await sbx.runCode('x')));
  await sleep(idleMs + 2000);
  await take('command', async () => (await sbx.commands.run('cat /workspace/from-code.txt')).stdout);
  await take('afterIdle', async () => shown(await sbx.runCode('x')));
  await sleep(idleMs + 2000);
}

// The SDK README's example, as it is: no template, so the SDK asks for its own default (code-interpreter-v1).
async function readme() {
  const sbx = await Sandbox.create();
  report.templateId = (await sbx.getInfo()).templateId;
  await sbx.runCode('x = 1');
  const execution = await sbx.runCode('x+=1; x');
  report.text = execution.text;
  await sbx.kill();
}

// Code contexts, as the SDK calls them: with no key, only the sandbox's trafficAccessToken.  The one context,
// 'default', is the Python session; the token opens that sandbox's code routes and nothing else.
async function contexts() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  const other = await Sandbox.create('base', { timeoutMs: 120_000 });
  const token = sbx.trafficAccessToken;
  const url = process.env.E2B_SANDBOX_URL;
  const raw = async (path, headers, init = {}) => {
    const r = await fetch(url + path, { ...init, headers });
    return { status: r.status, body: await r.text() };
  };
  const code = (id) => ({ 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49999' });
  report.token = typeof token === 'string' && token.length > 0;
  report.otherToken = typeof other.trafficAccessToken === 'string' && other.trafficAccessToken !== token;
  report.notKey = token !== process.env.E2B_API_KEY;
  await take('list', async () => await sbx.listCodeContexts());
  await take('create', async () => await sbx.createCodeContext({ language: 'python' }));
  await take('createJs', async () => await sbx.createCodeContext({ language: 'js' }));
  await take('createCwd', async () => await sbx.createCodeContext({ cwd: '/tmp' }));
  await take('set', async () => shown(await sbx.runCode('x = 5', { context: report.create })));
  await take('kept', async () => shown(await sbx.runCode('x', { context: { id: 'default' } })));
  await take('otherContext', async () => shown(await sbx.runCode('1', { context: { id: 'nope' } })));
  // A restart gives the claim back with the state.
  await take('restart', async () => { await sbx.restartCodeContext('default'); return true; });
  await take('freed', async () => (await sbx.commands.run('echo free')).stdout);
  await take('afterRestart', async () => shown(await sbx.runCode('x')));
  // Sandbox.connect hands the same token out (a make step's sandbox is taken over that way).
  await take('connected', async () => {
    const again = await Sandbox.connect(sbx.sandboxId);
    return { same: again.trafficAccessToken === token, contexts: await again.listCodeContexts() };
  });
  await take('remove', async () => { await sbx.removeCodeContext('default'); return true; });
  await take('restartOther', async () => { await sbx.restartCodeContext('nope'); return true; });
  // The token is no key: not for the platform API, envd, sandstepd's own API, another sandbox, or with a key.
  await take('asApiKey', () => raw('/v2/sandboxes', { 'X-API-KEY': token }));
  await take('killWithIt', () => raw(`/sandboxes/${sbx.sandboxId}`, { 'X-API-KEY': token }, { method: 'DELETE' }));
  await take('asAccessToken', () => raw('/contexts', { ...code(sbx.sandboxId), 'X-Access-Token': token }));
  await take('onEnvd', () => raw('/filesystem.Filesystem/ListDir',
    { 'E2B-Traffic-Access-Token': token, 'E2b-Sandbox-Id': sbx.sandboxId, 'Content-Type': 'application/json',
      'Connect-Protocol-Version': '1' },
    { method: 'POST', body: JSON.stringify({ path: '/workspace', depth: 1 }) }));
  await take('asBearer', () => raw('/v1/sandboxes', { Authorization: `Bearer ${token}` }));
  await take('otherSandbox', () => raw('/contexts', { ...code(other.sandboxId), 'E2B-Traffic-Access-Token': token }));
  await take('otherOwn', () => raw('/contexts', { ...code(other.sandboxId),
                                                  'E2B-Traffic-Access-Token': other.trafficAccessToken }));
  await take('forged', () => raw('/contexts', { ...code(sbx.sandboxId),
                                                'E2B-Traffic-Access-Token': token.slice(0, -1) + (token.endsWith('0') ? '1' : '0') }));
  await take('executeWithIt', () => raw('/execute', { ...code(other.sandboxId), 'E2B-Traffic-Access-Token': token,
                                                      'Content-Type': 'application/json' },
                                        { method: 'POST', body: JSON.stringify({ code: '1' }) }));
  await sbx.kill();
  await other.kill();
  await take('afterKill', () => raw('/contexts', { ...code(sbx.sandboxId), 'E2B-Traffic-Access-Token': token }));
}

const areas = { code, idle, readme, contexts };
const area = areas[process.argv[2]];
if (area === undefined) {
  console.error(`usage: node code.mjs ${Object.keys(areas).join('|')}`);
  process.exit(2);
}
await area();
// The SDK leaves its request timer (60 s) running after a call that failed: exit once the report is out.
process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(0));
