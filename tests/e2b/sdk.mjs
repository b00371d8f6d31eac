// tests/e2b/sdk.mjs: the official E2B SDK (npm "e2b", unmodified) against sandstepd's E2B API.
//
// tests/test-e2b.c runs `node sdk.mjs AREA` with E2B_API_URL and E2B_SANDBOX_URL set to a sandstepd it
// started and E2B_API_KEY a token of its token file; this prints one JSON object of what each call gave
// (errors as {error: NAME, message}), which the test checks.  AREA: lifecycle, scoped, commands, background,
// files, handed, template, stdin, snapshots.
import { Sandbox } from 'e2b';
import { report, take, scaled, sleep } from './report.mjs';

async function lifecycle() {
  // A name and a value that need encoding both ways (the SDK encodes the filter twice).
  const odd = { 'a b&c=d': 'x/y=z&w%' };
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { step: 'e2b', ...odd } });
  report.sandboxId = sbx.sandboxId;
  await take('info', async () => {
    const info = await sbx.getInfo();
    return { sandboxId: info.sandboxId, templateId: info.templateId, state: info.state,
             lifetimeS: Math.round((info.endAt - info.startedAt) / 1000), metadata: info.metadata };
  });
  await take('listed', async () => {
    const items = await Sandbox.list().nextItems();
    return items.map((s) => s.sandboxId);
  });
  // The metadata comes back in list, and list's filter selects by it (every pair must match).
  await take('listedMetadata', async () =>
    (await Sandbox.list().nextItems()).filter((s) => s.sandboxId === sbx.sandboxId).map((s) => s.metadata));
  await take('listedByTag', async () =>
    (await Sandbox.list({ query: { metadata: { step: 'e2b' } } }).nextItems()).map((s) => s.sandboxId));
  await take('listedByOtherTag', async () =>
    (await Sandbox.list({ query: { metadata: { step: 'other' } } }).nextItems()).map((s) => s.sandboxId));
  await take('listedByTwoTags', async () =>
    (await Sandbox.list({ query: { metadata: { step: 'e2b', ...odd } } }).nextItems()).map((s) => s.sandboxId));
  await take('listedBySecondWrong', async () =>
    (await Sandbox.list({ query: { metadata: { step: 'e2b', 'a b&c=d': 'x/y=z&w' } } }).nextItems())
      .map((s) => s.sandboxId));
  await take('connected', async () => (await Sandbox.connect(sbx.sandboxId)).sandboxId);
  // setTimeout sets when the sandbox ends, from now: longer than at create, then shorter.
  await take('setTimeout', async () => {
    await sbx.setTimeout(600_000);
    const longer = Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000);
    await sbx.setTimeout(60_000);
    const shorter = Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000);
    return { longer, shorter };
  });
  // connect's timeout lengthens a sandbox's life, never shortens it.
  await take('connectLonger', async () => {
    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 900_000 });
    const longer = Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000);
    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 });
    const kept = Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000);
    return { longer, kept };
  });
  await take('setTimeoutZero', async () => { await sbx.setTimeout(0); return true; });
  await take('setTimeoutMissing', async () => { await Sandbox.setTimeout('sandstep-00000000000000ff', 60_000); return true; });
  // A sandbox whose timeout is over is gone: neither its info nor a command is served.
  const brief = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { step: 'brief' } });
  report.briefId = brief.sandboxId;
  await take('briefBefore', async () => (await brief.commands.run('echo alive')).stdout);
  await take('briefRunning', async () => await brief.isRunning());
  await brief.setTimeout(1_000);
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  await take('briefRunningAfter', async () => await brief.isRunning());
  await take('briefInfo', async () => (await brief.getInfo()).sandboxId);
  await take('briefRun', async () => (await brief.commands.run('echo alive')).stdout);
  await take('briefListed', async () => (await Sandbox.list().nextItems()).map((s) => s.sandboxId));
  // What has no sandstep meaning says it is not served, in E2B's shape; no snapshot is made here, so none lists.
  await take('pause', async () => { await sbx.pause(); return true; });
  await take('metrics', async () => await sbx.getMetrics());
  await take('snapshots', async () => await Sandbox.listSnapshots().nextItems());
  await take('badMetadata', async () => (await Sandbox.create('base', { metadata: { n: 1 } })).sandboxId);
  await take('otherTemplate', async () => (await Sandbox.create('no-such-template')).sandboxId);
  await take('wrongKey', async () => (await Sandbox.create('base', { apiKey: 'e2b_' + '0'.repeat(40) })).sandboxId);
  // isRunning: true beside a running command (it claims nothing), false once killed.
  await take('running', async () => {
    const h = await sbx.commands.run('sleep 30', { background: true });
    try {
      return await sbx.isRunning();
    } finally {
      await h.kill();
    }
  });
  await take('killed', async () => { await sbx.kill(); return true; });
  await take('runningAfterKill', async () => await sbx.isRunning());
  await take('killedAgain', async () => await Sandbox.kill(sbx.sandboxId));
  await take('listedAfter', async () => (await Sandbox.list().nextItems()).map((s) => s.sandboxId));
  await take('infoAfter', async () => (await Sandbox.getInfo(sbx.sandboxId)).sandboxId);
}

async function commands() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  const streamed = [];
  // A command that exits non-zero throws CommandExitError, which carries its result.
  await take('run', async () => {
    try {
      const r = await sbx.commands.run('echo hi; echo oops >&2; exit 3', { onStdout: (d) => streamed.push(d) });
      return { threw: false, exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
      if (e?.constructor?.name !== 'CommandExitError')
        throw e;
      return { threw: e.constructor.name, exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr };
    }
  });
  report.streamed = streamed.join('');
  await take('cwdEnvs', async () => {
    const r = await sbx.commands.run('pwd; echo "$GREETING"', { cwd: '/tmp', envs: { GREETING: 'hello e2b' } });
    return { exitCode: r.exitCode, stdout: r.stdout };
  });
  // Output streams as it comes: 'ready' arrives although the command never ends (its timeout kills it).
  const early = [];
  await take('timeout', async () => {
    const r = await sbx.commands.run('echo ready; sleep 30', { timeoutMs: 2000, onStdout: (d) => early.push(d) });
    return { exitCode: r.exitCode };
  });
  report.early = early.join('');
  // The killed command let the sandbox go: the next one runs.
  await take('after', async () => (await sbx.commands.run('echo free')).stdout);
  await take('killed', async () => { await sbx.kill(); return true; });
}

// A command in the background, once it runs in the sandbox: its start event says only that sandstepd took it (it
// may still wait for its turn there), its first line that it runs.
async function running(sbx, command) {
  let out = '';
  const h = await sbx.commands.run(`echo up; ${command}`, { background: true, onStdout: (d) => { out += d; } });
  for (let i = 0; i < scaled(30_000) / 50 && !out.includes('up\n'); i++)
    await sleep(50);
  return h;
}

// Commands in the background: a handle at once; list, kill and wait by it; what is not served says so.
async function background() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  const out = [];
  // One that ends by itself: wait() gives its output and exit code (non-zero: CommandExitError).
  await take('ended', async () => {
    const h = await sbx.commands.run('echo bg; exit 4', { background: true, onStdout: (d) => out.push(d) });
    try {
      const r = await h.wait();
      return { pid: h.pid, exitCode: r.exitCode, stdout: r.stdout };
    } catch (e) {
      return { pid: h.pid, threw: e.constructor.name, exitCode: e.exitCode, stdout: e.stdout };
    }
  });
  report.streamed = out.join('');
  // One that runs until killed: listed while it runs (its process as sent), killed by its handle, then gone.
  const h = await sbx.commands.run('echo started; sleep 60', { background: true, envs: { A: 'b' } });
  report.pid = h.pid;
  await take('listed', async () => (await sbx.commands.list()).map((p) => ({ pid: p.pid, cmd: p.cmd, args: p.args,
    envs: p.envs })));
  // Beside it, other calls run at once: a command, one that leaves a process behind (which goes with it, in its
  // own process group, leaving the first command be), and file calls.
  await take('beside', async () => (await sbx.commands.run('echo second')).stdout);
  await take('besideLeaves', async () => (await sbx.commands.run('sleep 601 & echo left')).stdout);
  // One whose child leaves its group (a session of its own) holding its output: the call ends with what it wrote.
  await take('besideEscapes', async () => (await sbx.commands.run('setsid sleep 611 & echo escaped')).stdout);
  await take('besideFiles', async () => {
    await sbx.files.write('/workspace/beside.txt', 'written beside');
    return await sbx.files.read('/workspace/beside.txt');
  });
  await take('besideList', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('besidePs', async () => (await sbx.commands.run(
    'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done')).stdout);
  await take('reconnect', async () => (await sbx.commands.connect(h.pid)).pid);
  await take('stdin', async () => { await sbx.commands.sendStdin(h.pid, 'x\n'); return true; });
  await take('killed', async () => await h.kill());
  await take('waited', async () => {
    try {
      const r = await h.wait();
      return { exitCode: r.exitCode };
    } catch (e) {
      return { threw: e?.constructor?.name, exitCode: e.exitCode, error: e.error ?? null, message: e.message };
    }
  });
  await take('listedAfter', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('killedAgain', async () => await sbx.commands.kill(h.pid));
  await take('killedNever', async () => await sbx.commands.kill(4_000_000));
  // The killed command let the sandbox go: the next one runs.
  await take('after', async () => (await sbx.commands.run('echo free')).stdout);
  // The first of two killed while the second runs beside it: what the first left goes with it, the second runs on.
  const first = await running(sbx, 'sleep 604 & sleep 605');
  const second = await running(sbx, 'sleep 606');
  await take('firstKilled', async () => await first.kill());
  await take('afterFirst', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('afterFirstPs', async () => (await sbx.commands.run(
    'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done')).stdout);
  report.second = second.pid;
  await take('secondKilled', async () => await second.kill());
  // Two beside each other, the first killed: the second keeps their claim, so a snapshot waits for it (then is
  // busy); E2B's setTimeout (a release of the sandbox) leaves the calls beside it going.
  const third = await running(sbx, 'sleep 609');
  const fourth = await running(sbx, 'sleep 610');
  await third.kill();
  await take('snapshotBeside', async () => (await sbx.createSnapshot()).snapshotId);
  await take('setTimeoutBeside', async () => { await sbx.setTimeout(120_000); return true; });
  await take('afterSetTimeout', async () => (await sbx.commands.run('echo still')).stdout);
  await take('fourthListed', async () => (await sbx.commands.list()).map((p) => p.pid));
  report.fourth = fourth.pid;
  await take('fourthKilled', async () => await fourth.kill());
  // A background command's budget is its sandbox's life, which setTimeout moves: past the first end it runs on.
  const brief = await Sandbox.create('base', { timeoutMs: scaled(6000) });
  const long = await brief.commands.run('sleep 600', { background: true, timeoutMs: 0 });
  await brief.setTimeout(120_000);
  await sleep(scaled(9000));
  report.extended = long.pid;
  await take('extendedListed', async () => (await brief.commands.list()).map((p) => p.pid));
  await take('extendedKilled', async () => { await brief.kill(); return true; });
  // A key of another owner neither lists nor kills this sandbox's commands (the SDK cannot even connect to the
  // sandbox with it: its requests are made here).
  const other = { apiKey: process.env.E2B_OTHER_KEY };
  const h2 = await sbx.commands.run('sleep 60', { background: true });
  await take('otherList', async () => {
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/List`, { method: 'POST',
      headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': other.apiKey },
      body: '{}' });
    return { status: res.status, body: await res.json() };
  });
  await take('otherKill', async () => {
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/SendSignal`, { method: 'POST',
      headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': other.apiKey },
      body: JSON.stringify({ process: { pid: h2.pid }, signal: 'SIGNAL_SIGKILL' }) });
    return { status: res.status, body: await res.json() };
  });
  await take('stillListed', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('killedSecond', async () => await sbx.commands.kill(h2.pid));
  await take('pty', async () => (await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })).pid);
  await take('killedSandbox', async () => { await sbx.kill(); return true; });
}

// Templates other than base: an image's reference (E2B_TEST_IMAGE, in a loopback registry) and a name sandstepd
// was started with (box, the same image); what is neither, a file's reference, and an image not there fail.
async function template() {
  const image = process.env.E2B_TEST_IMAGE;
  const probe = 'cat /marker; [ -e /usr/bin/env ] && echo host-usr || echo no-host-usr';
  await take('byReference', async () => {
    const sbx = await Sandbox.create(image, { timeoutMs: 120_000 });
    const r = await sbx.commands.run(probe);
    const listed = (await Sandbox.list().nextItems()).some((s) => s.sandboxId === sbx.sandboxId && s.templateId === image);
    const out = { stdout: r.stdout, templateId: (await sbx.getInfo()).templateId, listed };
    await sbx.kill();
    return out;
  });
  await take('byName', async () => {
    const sbx = await Sandbox.create('box', { timeoutMs: 120_000 });
    const r = await sbx.commands.run(probe);
    const connected = await Sandbox.connect(sbx.sandboxId);
    // An image's files are layers in its jail: watched there.
    const events = [];
    const w = await sbx.files.watchDir('/workspace', (e) => events.push(`${e.type}:${e.name}`));
    await sbx.commands.run('echo x > /workspace/seen.txt');
    for (let i = 0; i < scaled(100) && !events.includes('create:seen.txt'); i++)
      await new Promise((resolve) => setTimeout(resolve, 100));
    await w.stop();
    const out = { stdout: r.stdout, templateId: (await sbx.getInfo()).templateId,
                  connectedTemplate: (await connected.getInfo()).templateId, watched: events };
    await sbx.kill();
    return out;
  });
  await take('base', async () => {
    const sbx = await Sandbox.create({ timeoutMs: 120_000 });
    const r = await sbx.commands.run('[ -e /usr/bin/env ] && echo host-usr || echo no-host-usr');
    const out = { stdout: r.stdout, templateId: (await sbx.getInfo()).templateId };
    await sbx.kill();
    return out;
  });
  await take('unknown', async () => (await Sandbox.create('no-such-template')).sandboxId);
  await take('file', async () => (await Sandbox.create('oci:/etc:x')).sandboxId);
  await take('missing', async () => (await Sandbox.create(image.replace(/:1$/, ':2'))).sandboxId);
}

// A command's stdin (run({stdin: true}), sendStdin, closeStdin) and commands.connect(pid): what the command
// streams from then on, its end included.
async function stdin() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  await take('fed', async () => {
    const h = await sbx.commands.run('read line; echo "got $line"; cat; echo done', { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, 'hello\n');
    await sbx.commands.sendStdin(h.pid, new TextEncoder().encode('more\n'));
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    return { stdout: r.stdout, exitCode: r.exitCode };
  });
  await take('connected', async () => {
    const h = await sbx.commands.run('echo one; read x; echo "two-$x"', { background: true, stdin: true });
    for (let i = 0; i < 200 && !h.stdout.includes('one'); i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    const seen = [];
    const c = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) });
    await sbx.commands.sendStdin(h.pid, 'y\n');
    const r = await c.wait();
    const own = await h.wait();
    return { pid: c.pid === h.pid, stdout: r.stdout, streamed: seen.join(''), exitCode: r.exitCode,
             ownStdout: own.stdout };
  });
  await take('connectedKilled', async () => {
    const h = await sbx.commands.run('sleep 60', { background: true });
    const c = await sbx.commands.connect(h.pid);
    await h.kill();
    try {
      await c.wait();
      return { threw: null };
    } catch (e) {
      return { threw: e?.constructor?.name, exitCode: e.exitCode, error: e.error ?? null };
    }
  });
  await take('noStdin', async () => {
    const h = await sbx.commands.run('sleep 60', { background: true });
    try {
      await sbx.commands.sendStdin(h.pid, 'x');
      return true;
    } finally {
      await h.kill();
    }
  });
  await take('inputGone', async () => { await sbx.commands.sendStdin(4_000_000, 'x'); return true; });
  await take('connectGone', async () => (await sbx.commands.connect(4_000_000)).pid);
  // A key of another owner neither feeds nor watches this sandbox's commands.
  await take('otherInput', async () => {
    const h = await sbx.commands.run('cat', { background: true, stdin: true });
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/SendInput`, { method: 'POST',
      headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId,
                 'X-Access-Token': process.env.E2B_OTHER_KEY },
      body: JSON.stringify({ process: { pid: h.pid },
                             input: { stdin: Buffer.from('theirs\n').toString('base64') } }) });
    const body = await res.json();
    await sbx.commands.closeStdin(h.pid);
    return { status: res.status, code: body.code, stdout: (await h.wait()).stdout };
  });
  await take('after', async () => (await sbx.commands.run('echo free')).stdout);
  await sbx.kill();
}

// Snapshots: createSnapshot() is a fork of the sandbox's files as they are; Sandbox.create(snapshotId) a sandbox
// of them; listSnapshots and deleteSnapshot; another owner's key sees, uses and deletes none.
async function snapshots() {
  const other = { apiKey: process.env.E2B_OTHER_KEY };
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { from: 'snapshots' } });
  report.sandboxId = sbx.sandboxId;
  await sbx.files.write('/workspace/state.txt', 'step 1');
  await take('snapshot', async () => (await sbx.createSnapshot()).snapshotId);
  const snap = report.snapshot;
  await sbx.files.write('/workspace/state.txt', 'step 2');
  await take('fromSnapshot', async () => {
    const made = await Sandbox.create(snap, { timeoutMs: 60_000 });
    const info = await made.getInfo();
    const out = { read: await made.files.read('/workspace/state.txt'), templateId: info.templateId,
                  lifetimeS: Math.round((info.endAt - Date.now()) / 1000),
                  run: (await made.commands.run('cat state.txt; echo " again" >> state.txt', { cwd: '/workspace' })).stdout };
    await made.kill();
    return out;
  });
  await take('sandboxAfter', async () => await sbx.files.read('/workspace/state.txt'));
  await take('snapshotAfter', async () => {
    const made = await Sandbox.create(snap, { timeoutMs: 60_000 });
    const read = await made.files.read('/workspace/state.txt');
    await made.kill();
    return read;
  });
  await take('listed', async () => (await sbx.listSnapshots().nextItems()).map((x) => x.snapshotId));
  await take('listedAll', async () => (await Sandbox.listSnapshots().nextItems()).map((x) => x.snapshotId));
  await take('sandboxes', async () => (await Sandbox.list().nextItems()).map((x) => x.sandboxId));
  await take('otherListed', async () => (await Sandbox.listSnapshots(other).nextItems()).map((x) => x.snapshotId));
  await take('otherSnapshot', async () => (await Sandbox.createSnapshot(sbx.sandboxId, other)).snapshotId);
  await take('otherCreate', async () => (await Sandbox.create(snap, other)).sandboxId);
  await take('otherDelete', async () => await Sandbox.deleteSnapshot(snap, other));
  await take('fromSandbox', async () => (await Sandbox.create(sbx.sandboxId)).sandboxId);
  await take('deleteSandbox', async () => await Sandbox.deleteSnapshot(sbx.sandboxId));
  await take('deleted', async () => await Sandbox.deleteSnapshot(snap));
  await take('deletedAgain', async () => await Sandbox.deleteSnapshot(snap));
  await take('fromDeleted', async () => (await Sandbox.create(snap)).sandboxId);
  await take('snapshotGone', async () => (await Sandbox.createSnapshot('sandstep-00000000000000ff')).snapshotId);
  // A snapshot outlives its sandbox's kill.
  const kept = (await sbx.createSnapshot()).snapshotId;
  await take('killed', async () => { await sbx.kill(); return true; });
  await take('afterKill', async () => {
    const made = await Sandbox.create(kept, { timeoutMs: 60_000 });
    const read = await made.files.read('/workspace/state.txt');
    await made.kill();
    await Sandbox.deleteSnapshot(kept);
    return read;
  });
}

// A key scoped to another owner (E2B_OTHER_KEY) sees nothing of this key's sandbox, nor can it end it.
async function scoped() {
  const other = { apiKey: process.env.E2B_OTHER_KEY };
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  await take('otherList', async () => (await Sandbox.list(other).nextItems()).map((s) => s.sandboxId));
  await take('otherInfo', async () => (await Sandbox.getInfo(sbx.sandboxId, other)).sandboxId);
  await take('otherConnect', async () => (await Sandbox.connect(sbx.sandboxId, other)).sandboxId);
  await take('otherKill', async () => await Sandbox.kill(sbx.sandboxId, other));
  await take('otherSetTimeout', async () => { await Sandbox.setTimeout(sbx.sandboxId, 1_000, other); return true; });
  await take('endAfterOther', async () => Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000));
  await take('ownList', async () => (await Sandbox.list().nextItems()).map((s) => s.sandboxId));
  await take('killed', async () => await Sandbox.kill(sbx.sandboxId));
}

async function files() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  await take('written', async () => {
    const w = await sbx.files.write('/workspace/notes.txt', 'hello from e2b\n');
    return { name: w.name, path: w.path, type: w.type };
  });
  await take('read', async () => await sbx.files.read('/workspace/notes.txt'));
  await take('readByCommand', async () => (await sbx.commands.run('cat /workspace/notes.txt')).stdout);
  await take('writtenOctet', async () =>
    (await sbx.files.write('/tmp/b.bin', new Uint8Array([0, 1, 2, 255]), { useOctetStream: true })).path);
  await take('readBytes', async () => Array.from(await sbx.files.read('/tmp/b.bin', { format: 'bytes' })));
  await take('listed', async () => {
    await sbx.commands.run('mkdir -p /workspace/sub');
    return (await sbx.files.list('/workspace')).map((e) => `${e.name}:${e.type}:${e.path}`).sort();
  });
  await take('exists', async () => await sbx.files.exists('/workspace/notes.txt'));
  await take('existsDir', async () => await sbx.files.exists('/workspace/sub'));
  await take('existsNot', async () => await sbx.files.exists('/workspace/no-such-file'));
  await take('readMissing', async () => await sbx.files.read('/workspace/no-such-file'));
  // Several files in one call (one multipart body), and a gzip-compressed one; a body that says gzip but is not.
  await take('writtenMany', async () => {
    const w = await sbx.files.write([{ path: '/workspace/m/one.txt', data: 'one' },
                                     { path: 'rel.txt', data: 'two' },
                                     { path: '/tmp/three.bin', data: new Uint8Array([3, 0, 3]) }]);
    return { paths: w.map((e) => e.path), one: await sbx.files.read('/workspace/m/one.txt'),
             rel: await sbx.files.read('/workspace/rel.txt'),
             three: Array.from(await sbx.files.read('/tmp/three.bin', { format: 'bytes' })) };
  });
  await take('writtenManyBad', async () =>
    (await sbx.files.write([{ path: '/workspace/ok.txt', data: 'ok' }, { path: '/usr/no.txt', data: 'no' }])).length);
  // Refused: several parts with ?path=, and a part that names no file.
  await take('writtenManyWithPath', async () => {
    const form = new FormData();
    form.append('file', new Blob(['a']), '/workspace/a1.txt');
    form.append('file', new Blob(['b']), '/workspace/b1.txt');
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/workspace/x.txt`, { method: 'POST',
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': process.env.E2B_API_KEY }, body: form });
    return `${res.status} ${await res.text()} ${await sbx.files.exists('/workspace/a1.txt')}`;
  });
  await take('writtenUnnamed', async () => {
    const form = new FormData();
    form.append('file', 'no name');
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/files`, { method: 'POST',
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': process.env.E2B_API_KEY }, body: form });
    return `${res.status} ${await res.text()}`;
  });
  await take('writtenGzip', async () => {
    const text = 'zipped '.repeat(20000);
    await sbx.files.write('/workspace/z.txt', text, { useOctetStream: true, gzip: true });
    return (await sbx.files.read('/workspace/z.txt')) === text;
  });
  // What a gzip body unpacks to is bounded as a body is (1 MiB).
  await take('writtenBomb', async () => {
    const { gzipSync } = await import('node:zlib');
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/workspace/bomb.bin`, { method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip', 'E2b-Sandbox-Id': sbx.sandboxId,
                 'X-Access-Token': process.env.E2B_API_KEY }, body: gzipSync(Buffer.alloc(2 << 20)) });
    return `${res.status} ${await res.text()} ${await sbx.files.exists('/workspace/bomb.bin')}`;
  });
  await take('writtenNotGzip', async () => {
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/workspace/nz.txt`, { method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip', 'E2b-Sandbox-Id': sbx.sandboxId,
                 'X-Access-Token': process.env.E2B_API_KEY }, body: 'plain' });
    return `${res.status} ${await res.text()}`;
  });
  // makeDir: true when made (parents too), false when there already; a file in the way and a read-only place
  // are refused.  A relative path starts in /workspace, as a command's.
  await take('made', async () => await sbx.files.makeDir('/workspace/made/deep'));
  await take('madeAgain', async () => await sbx.files.makeDir('/workspace/made/deep'));
  await take('madeRelative', async () => (await sbx.files.makeDir('rel-dir')) && await sbx.files.exists('/workspace/rel-dir'));
  await take('madeOverFile', async () => await sbx.files.makeDir('/workspace/notes.txt'));
  await take('madeReadOnly', async () => await sbx.files.makeDir('/usr/sandstep-e2b'));
  // A name is a name, never shell: this one would make /workspace/pwned if it were run as a command.
  const odd = "/workspace/$(touch /workspace/pwned) 'q'; touch /workspace/pwned2";
  await take('madeOdd', async () => (await sbx.files.makeDir(odd)) && await sbx.files.exists(odd));
  await take('pwned', async () => (await sbx.files.exists('/workspace/pwned')) || (await sbx.files.exists('/workspace/pwned2')));
  // getInfo: a directory and a file; a missing path is FileNotFoundError.
  await take('infoDir', async () => {
    const i = await sbx.files.getInfo('/workspace/made');
    return { name: i.name, type: i.type, path: i.path };
  });
  await take('infoFile', async () => {
    const i = await sbx.files.getInfo('/workspace/notes.txt');
    return { name: i.name, type: i.type, path: i.path, size: i.size, permissions: i.permissions, mode: i.mode,
             owner: i.owner, modifiedAgoS: Math.round((Date.now() - i.modifiedTime.getTime()) / 1000) };
  });
  // A link: its target's absolute path (a file's, a directory's); what it points to gives the type.
  await take('infoLink', async () => {
    await sbx.commands.run('cd /workspace && ln -sf notes.txt link.txt && ln -sfn made link-dir');
    const f = await sbx.files.getInfo('/workspace/link.txt');
    const d = await sbx.files.getInfo('/workspace/link-dir');
    // Targets with a newline inside, and at the end (a link may name anything).
    await sbx.commands.run('cd /workspace && ln -sfn "$(printf \'in\\nside\')" link-nl && t=$(printf \'end\\nx\') && ln -sfn "${t%x}" link-end');
    const nl = await sbx.files.getInfo('/workspace/link-nl');
    const end = await sbx.files.getInfo('/workspace/link-end');
    return { file: `${f.type} ${f.path} ${f.symlinkTarget}`, dir: `${d.type} ${d.path} ${d.symlinkTarget}`,
             plain: (await sbx.files.getInfo('/workspace/notes.txt')).symlinkTarget ?? 'none',
             nl: `${nl.path}|${nl.symlinkTarget}`, end: `${end.path}|${end.symlinkTarget}` };
  });
  // The writable roots themselves (their parent, '/', is no place of the host-side tools).
  await take('infoWorkspace', async () => {
    const i = await sbx.files.getInfo('/workspace');
    return { name: i.name, type: i.type, path: i.path };
  });
  await take('existsTmp', async () => await sbx.files.exists('/tmp'));
  await take('infoMissing', async () => (await sbx.files.getInfo('/workspace/no-such-file')).name);
  // rename: a file into a directory (its content with it), a directory to a new parent; a missing source.
  await take('renamed', async () => {
    const e = await sbx.files.rename('/workspace/notes.txt', '/workspace/made/moved.txt');
    return { name: e.name, type: e.type, path: e.path, oldExists: await sbx.files.exists('/workspace/notes.txt'),
             content: await sbx.files.read('/workspace/made/moved.txt') };
  });
  await take('renamedDir', async () => {
    const e = await sbx.files.rename('/workspace/made', '/tmp/elsewhere/made2');
    return { name: e.name, type: e.type, path: e.path,
             inside: (await sbx.files.list('/tmp/elsewhere/made2')).map((x) => x.name).sort() };
  });
  // A name may hold a newline: the entry still names it whole.
  await take('renamedNewline', async () => {
    await sbx.files.write('/workspace/nl.txt', 'nl');
    const e = await sbx.files.rename('/workspace/nl.txt', '/workspace/new\nline.txt');
    const i = await sbx.files.getInfo('/workspace/new\nline.txt');
    return { moved: e.path, info: i.path, name: i.name };
  });
  await take('renamedMissing', async () => (await sbx.files.rename('/workspace/no-such-file', '/workspace/x')).path);
  // A destination that climbs resolves in the sandbox's own root: the sandbox's /tmp, never the host's.
  await take('renamedClimbed', async () => {
    await sbx.files.write('/workspace/esc.txt', 'in?');
    return (await sbx.files.rename('/workspace/esc.txt', `/../../../..${process.env.E2B_ESCAPE}`)).path;
  });
  // remove: a tree; then it does not exist; a missing path is no error (as envd's).
  await take('removed', async () => {
    await sbx.files.remove('/tmp/elsewhere');
    return await sbx.files.exists('/tmp/elsewhere/made2/moved.txt') || await sbx.files.exists('/tmp/elsewhere');
  });
  await take('removedMissing', async () => { await sbx.files.remove('/workspace/no-such-file'); return true; });
  await take('removedReadOnly', async () => { await sbx.files.remove('/usr/bin/env'); return true; });
  // A path that climbs out stays in the sandbox: the test checks the host has no such file.
  await take('climbed', async () => (await sbx.files.write(`/../../../..${process.env.E2B_ESCAPE}`, 'out?')).path);
  await take('killed', async () => { await sbx.kill(); return true; });
}

// A make step provisioned E2B_HANDLE and wrote a file in it; agent code takes the sandbox over by its handle.
async function handed() {
  const id = process.env.E2B_HANDLE;
  await take('otherConnect', async () => (await Sandbox.connect(id, { apiKey: process.env.E2B_OTHER_KEY })).sandboxId);
  const sbx = await Sandbox.connect(id);
  report.sandboxId = sbx.sandboxId;
  await take('read', async () => await sbx.files.read('/workspace/from-make.txt'));
  await take('run', async () => (await sbx.commands.run('cat /workspace/from-make.txt; echo agent > agent.txt')).stdout);
  // Left running as the script ends: a command beside a first one that is killed, so that no call claims the
  // sandbox while it runs on.  The DAG's next step waits for it.
  const first = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
  await sbx.commands.run(`sleep ${scaled(3000) / 1000}; echo left > /workspace/left.txt`,
                         { background: true, timeoutMs: 0 });
  await take('firstKilled', async () => await first.kill());
}

const areas = { lifecycle, scoped, commands, background, files, handed, template, stdin, snapshots };
const area = areas[process.argv[2]];
if (area === undefined) {
  console.error(`usage: node sdk.mjs ${Object.keys(areas).join('|')}`);
  process.exit(2);
}
await area();
console.log(JSON.stringify(report));
// The report is whole: a call that failed left the SDK's request timer (60 s) running, which would hold node.
process.exit(0);
