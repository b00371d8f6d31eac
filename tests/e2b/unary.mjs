// tests/e2b/unary.mjs: what sandstepd's E2B routes do with unary requests the SDK would never send.
//
// tests/test-e2b.c runs it like sdk.mjs (E2B_API_KEY, E2B_OTHER_KEY a key of another owner); the SDK makes
// the sandbox, then raw requests attack setTimeout, create's metadata, list's filter, envd's Move, MakeDir,
// List and SendSignal.  Prints one JSON object: per case the HTTP status and the error's code and message
// (or the answer).
import { Sandbox } from 'e2b';

const url = process.env.E2B_SANDBOX_URL;
const report = {};

async function call(name, method, path, body, { id, key = process.env.E2B_API_KEY, type = 'application/json' } = {}) {
  const headers = { 'Content-Type': type, 'X-API-Key': key };
  if (id !== undefined)
    headers['E2b-Sandbox-Id'] = id;
  const res = await fetch(`${url}${path}`, { method, headers, body });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text || 'null');
  } catch {
    json = { unparsed: text };
  }
  report[name] = { status: res.status, code: json?.code, message: json?.message, body: json };
}

const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
const id = sbx.sandboxId;
const timeout = `/sandboxes/${id}/timeout`;
// setTimeout's body: a number of seconds above 0, at most ten years.
await call('timeoutString', 'POST', timeout, JSON.stringify({ timeout: '60' }));
await call('timeoutFraction', 'POST', timeout, JSON.stringify({ timeout: 1.5 }));
await call('timeoutNegative', 'POST', timeout, JSON.stringify({ timeout: -5 }));
await call('timeoutHuge', 'POST', timeout, JSON.stringify({ timeout: 10 * 365 * 86400 + 1 }));
await call('timeoutNotJson', 'POST', timeout, '{"timeout": ');
await call('timeoutNone', 'POST', timeout, '{}');
await call('timeoutBadId', 'POST', '/sandboxes/sandstep-zz/timeout', JSON.stringify({ timeout: 60 }));
report.endAfter = Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000);
// create's metadata: string to string.
await call('metadataArray', 'POST', '/sandboxes', JSON.stringify({ templateID: 'base', metadata: ['a'] }));
await call('metadataNested', 'POST', '/sandboxes', JSON.stringify({ templateID: 'base', metadata: { a: { b: 'c' } } }));
// list's filter: what does not decode matches nothing, and the server answers.
await call('filterGarbage', 'GET', '/v2/sandboxes?metadata=' + encodeURIComponent('%ZZ=%00&=&&a'));
// envd's unary calls.
const fs = (op) => `/filesystem.Filesystem/${op}`;
await call('moveNoDest', 'POST', fs('Move'), JSON.stringify({ source: '/workspace/a' }), { id });
await call('moveNoSource', 'POST', fs('Move'), JSON.stringify({ destination: '/workspace/a' }), { id });
await call('makeDirType', 'POST', fs('MakeDir'), JSON.stringify({ path: '/workspace/a' }), { id, type: 'text/plain' });
await call('makeDirNoPath', 'POST', fs('MakeDir'), JSON.stringify({ path: 7 }), { id });
await call('removeOther', 'POST', fs('Remove'), JSON.stringify({ path: '/workspace' }), { id, key: process.env.E2B_OTHER_KEY });
await call('listType', 'POST', '/process.Process/List', '{}', { id, type: 'text/plain' });
await call('listNotJson', 'POST', '/process.Process/List', '[', { id });
await call('signalNoProcess', 'POST', '/process.Process/SendSignal', JSON.stringify({ signal: 9 }), { id });
await call('signalStringPid', 'POST', '/process.Process/SendSignal',
  JSON.stringify({ process: { pid: '1000' }, signal: 'SIGNAL_SIGKILL' }), { id });
await call('signalNoSandbox', 'POST', '/process.Process/SendSignal',
  JSON.stringify({ process: { pid: 1000 }, signal: 'SIGNAL_SIGKILL' }), {});
// The workspace the other key tried to remove is still there.
report.workspaceKept = await sbx.files.exists('/workspace');
await sbx.kill();
console.log(JSON.stringify(report));
