// tests/e2b/killed.mjs: the connections of E2B calls, and the calls a client makes right after commands.kill().
//
// tests/test-e2b.c runs it like sdk.mjs.  Part one speaks HTTP/1.1 on raw sockets: for each kind of answer the
// SDK meets (the platform API's JSON, envd's unary JSON, a command's stream that ends, one killed, the kill
// itself) it sends the request with "Connection: keep-alive", reads the whole answer, and then either sees the
// answer say "Connection: close" and the server close, or sends a second request on the same connection and
// sees it answered.  A server that closes a connection its answer did not say it would close loses the
// client's next request when that request is sent as the close arrives: what undici calls 'other side closed'
// and the SDK 'fetch failed' (that was docs/e2b.md's known problem after commands.kill).
// Part two: ROUNDS (argv[3], default 10) rounds of the SDK starting a background command, killing it by its
// handle and at once making several calls of the same client.
// Prints {contract: {CASE: {connection, closed, second}}, rounds, failures: [...], waited: [...]}.
import net from 'node:net';
import { Sandbox } from 'e2b';

const url = new URL(process.env.E2B_SANDBOX_URL);
const key = process.env.E2B_API_KEY;
const rounds = Number(process.argv[3] ?? 10);
const report = { contract: {}, rounds, failures: [], waited: [] };

function request(method, path, { headers = {}, body = Buffer.alloc(0) } = {}) {
  const head = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, 'Connection: keep-alive',
                `Content-Length: ${body.length}`, `X-API-KEY: ${key}`, `X-Access-Token: ${key}`];
  for (const [name, value] of Object.entries(headers))
    head.push(`${name}: ${value}`);
  return Buffer.concat([Buffer.from(head.join('\r\n') + '\r\n\r\n'), body]);
}

function envelope(json) {
  const payload = Buffer.from(JSON.stringify(json));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

// A socket and what it reads: next() resolves with one whole answer ({status, headers, body}), or null once
// the server has closed the connection (or reset it) before an answer came; closed() after the end.
function open() {
  const socket = net.connect(Number(url.port), url.hostname);
  let buf = Buffer.alloc(0);
  let ended = false;
  let waiter = null;
  const wake = () => { if (waiter) { const w = waiter; waiter = null; w(); } };
  socket.on('data', (d) => { buf = Buffer.concat([buf, d]); wake(); });
  socket.on('end', () => { ended = true; wake(); });
  socket.on('error', () => { ended = true; wake(); });
  socket.on('close', () => { ended = true; wake(); });
  const more = () => new Promise((resolve) => { waiter = resolve; });
  // One answer parsed from the start of buf, or undefined when it is not all there yet.
  function parse() {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0)
      return undefined;
    const lines = buf.subarray(0, end).toString().split('\r\n');
    const headers = {};
    for (const line of lines.slice(1)) {
      const at = line.indexOf(':');
      headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
    }
    const status = Number(lines[0].split(' ')[1]);
    let at = end + 4;
    let body;
    if ((headers['transfer-encoding'] ?? '').toLowerCase() === 'chunked') {
      const parts = [];
      for (;;) {
        const nl = buf.indexOf('\r\n', at);
        if (nl < 0)
          return undefined;
        const size = parseInt(buf.subarray(at, nl).toString(), 16);
        if (buf.length < nl + 2 + size + 2)
          return undefined;
        parts.push(buf.subarray(nl + 2, nl + 2 + size));
        at = nl + 2 + size + 2;
        if (size === 0)
          break;
      }
      body = Buffer.concat(parts);
    } else {
      const n = Number(headers['content-length'] ?? 0);
      if (buf.length < at + n)
        return undefined;
      body = buf.subarray(at, at + n);
      at += n;
    }
    buf = buf.subarray(at);
    return { status, headers, body };
  }
  return {
    socket,
    send: (bytes) => socket.write(bytes),
    text: () => buf.toString('latin1'),
    async next() {
      for (;;) {
        const answer = parse();
        if (answer !== undefined)
          return answer;
        if (ended)
          return null;
        await more();
      }
    },
    async closed(ms) {
      const deadline = Date.now() + ms;
      while (!ended && Date.now() < deadline)
        await Promise.race([more(), new Promise((resolve) => setTimeout(resolve, 50))]);
      return ended;
    },
  };
}

// The connection's fate after @first's answer (@answered: what to do with it), with @second to send next.
async function contract(name, first, second, answered) {
  const c = open();
  c.send(first);
  const answer = await c.next();
  const out = { status: answer?.status ?? null, connection: answer?.headers?.connection ?? null };
  if (answered)
    await answered(answer);
  if ((out.connection ?? '').toLowerCase() === 'close') {
    out.closed = await c.closed(5_000);
  } else {
    // Said nothing, or keep-alive: the connection must take the next request.
    c.send(second);
    const next = await c.next();
    out.second = next === null ? 'closed' : next.status;
  }
  c.socket.destroy();
  report.contract[name] = out;
}

const sbx = await Sandbox.create('base', { timeoutMs: 300_000 });
report.sandboxId = sbx.sandboxId;
const id = { 'E2b-Sandbox-Id': sbx.sandboxId };
const list = request('POST', '/process.Process/List',
                     { headers: { ...id, 'Content-Type': 'application/json' }, body: Buffer.from('{}') });
const start = (cmd) => request('POST', '/process.Process/Start', {
  headers: { ...id, 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1' },
  body: envelope({ process: { cmd: '/bin/sh', args: ['-c', cmd] } }) });

await contract('platform', request('GET', `/sandboxes/${sbx.sandboxId}`), list);
await contract('unary', list, list);
await contract('stream', start('echo hi'), list);
// A command in the background: its stream stays open while the kill is sent on another connection.
{
  const c = open();
  c.send(start('echo started; sleep 60'));
  // The start event, the stream's first, names the command's pid.
  let pid = null;
  while (pid === null && !(await c.closed(0))) {
    pid = Number(/"start":\{"pid":(\d+)\}/.exec(c.text())?.[1] ?? NaN) || null;
    if (pid === null)
      await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const kill = request('POST', '/process.Process/SendSignal', { headers: { ...id, 'Content-Type': 'application/json' },
    body: Buffer.from(JSON.stringify({ process: { pid }, signal: 'SIGNAL_SIGKILL' })) });
  await contract('kill', kill, list);
  const answer = await c.next();
  const out = { status: answer?.status ?? null, connection: answer?.headers?.connection ?? null,
                killed: /signal: killed/.test(answer?.body?.toString() ?? '') };
  if ((out.connection ?? '').toLowerCase() === 'close') {
    out.closed = await c.closed(5_000);
  } else {
    c.send(list);
    const next = await c.next();
    out.second = next === null ? 'closed' : next.status;
  }
  c.socket.destroy();
  report.contract.killedStream = out;
}

async function call(round, name, fn) {
  try {
    await fn();
  } catch (e) {
    report.failures.push({ round, call: name, error: e?.constructor?.name ?? 'Error', message: String(e?.message ?? e) });
  }
}

for (let round = 0; round < rounds; round++) {
  const h = await sbx.commands.run('echo started; sleep 60', { background: true });
  await call(round, 'kill', async () => { if (!(await h.kill())) throw new Error('kill answered false'); });
  await call(round, 'wait', async () => {
    try { await h.wait(); report.waited.push(0); } catch (e) { report.waited.push(e.exitCode ?? String(e)); }
  });
  await call(round, 'list', async () => { await sbx.commands.list(); });
  await call(round, 'exists', async () => { if (!(await sbx.files.exists('/workspace'))) throw new Error('no /workspace'); });
  await call(round, 'info', async () => { await sbx.getInfo(); });
  await call(round, 'run', async () => {
    if ((await sbx.commands.run('echo free')).stdout !== 'free\n')
      throw new Error('wrong output');
  });
}
await sbx.kill();
console.log(JSON.stringify(report));
