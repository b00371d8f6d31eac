// tests/e2b/wire.mjs: what sandstepd's envd does with requests the SDK would never send.
//
// tests/test-e2b.c runs it like sdk.mjs (E2B_API_KEY, E2B_OTHER_KEY a key of another owner); the SDK makes
// the sandbox, then raw requests to process.Process/Start attack the Connect envelope, the keys and the
// sandbox's name.  Prints one JSON object: per case the HTTP status and the end-of-stream error's code and
// message (or the JSON error's).
import { Sandbox } from 'e2b';

const url = process.env.E2B_SANDBOX_URL;
const report = {};

function envelope(flags, json, claimed) {
  const payload = Buffer.from(json);
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(claimed ?? payload.length, 1);
  return Buffer.concat([head, payload]);
}

// The last envelope of a streamed answer (its end of stream), parsed; or the body as JSON.
async function call(name, body, { id, key = process.env.E2B_API_KEY, type = 'application/connect+json' } = {}) {
  const headers = { 'Content-Type': type, 'Connect-Protocol-Version': '1' };
  if (id !== undefined)
    headers['E2b-Sandbox-Id'] = id;
  if (key)
    headers['X-Access-Token'] = key;
  const res = await fetch(`${url}/process.Process/Start`, { method: 'POST', headers, body });
  const bytes = Buffer.from(await res.arrayBuffer());
  const out = { status: res.status };
  if ((res.headers.get('content-type') ?? '').startsWith('application/connect+json')) {
    let last = null;
    for (let at = 0; at + 5 <= bytes.length;) {
      const n = bytes.readUInt32BE(at + 1);
      last = { flags: bytes[at], json: JSON.parse(bytes.subarray(at + 5, at + 5 + n).toString()) };
      at += 5 + n;
    }
    out.endFlags = last?.flags;
    out.code = last?.json?.error?.code;
    out.message = last?.json?.error?.message;
  } else {
    const json = JSON.parse(bytes.toString() || '{}');
    out.code = json.code;
    out.message = json.message;
  }
  report[name] = out;
}

const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
const id = sbx.sandboxId;
const start = JSON.stringify({ process: { cmd: '/bin/sh', args: ['-c', 'echo hi'] } });
await call('short', Buffer.from([0, 0, 0]), { id });
await call('lengthLies', envelope(0, start, 100000), { id });
await call('compressed', envelope(1, start), { id });
await call('twoMessages', Buffer.concat([envelope(0, start), envelope(0, start)]), { id });
await call('notJson', envelope(0, '{"process": '), { id });
await call('noCmd', envelope(0, JSON.stringify({ process: { args: ['x'] } })), { id });
await call('badEnvName', envelope(0, JSON.stringify({ process: { cmd: '/bin/true', envs: { 'A=B': 'x' } } })), { id });
await call('stdin', envelope(0, JSON.stringify({ process: { cmd: '/bin/true' }, stdin: true })), { id });
await call('unaryType', envelope(0, start), { id, type: 'application/json' });
await call('noSandbox', envelope(0, start), {});
await call('badSandbox', envelope(0, start), { id: '../../etc' });
await call('otherOwner', envelope(0, start), { id, key: process.env.E2B_OTHER_KEY });
await call('noKey', envelope(0, start), { id, key: null });
await call('tooLarge', envelope(0, JSON.stringify({ process: { cmd: 'x'.repeat(2 * 1024 * 1024) } })), { id });
await call('fine', envelope(0, start), { id });
await sbx.kill();
console.log(JSON.stringify(report));
