// tests/e2b/watch.mjs: files.watchDir of the official E2B SDK (npm "e2b", unmodified) against sandstepd.
//
// tests/test-e2b.c runs `node watch.mjs watch` (or `layered`) as it runs sdk.mjs (E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY, E2B_OTHER_KEY a key of another owner; E2B_SANDSTEPD_PID the daemon's pid; for `layered`,
// E2B_STATE_DIR sandstepd's state directory) and checks the report: the events each watch got, what other calls
// gave while it watched, and how each watch ended.
import { Sandbox } from 'e2b';
import { report, take, sleep, scaled } from './report.mjs';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

// A watch whose events ("type:name") and end (null: not yet; 'clean', or the error's message) are kept.
async function watch(sbx, path, opts = {}) {
  const w = { events: [], exit: null };
  w.handle = await sbx.files.watchDir(path, (e) => w.events.push(`${e.type}:${e.name}`), {
    ...opts,
    onExit: (err) => { w.exit = err === undefined ? 'clean' : String(err?.message ?? err); },
  });
  return w;
}

// Waits (up to 10 s, scaled on a slow host) until @cond holds.
async function until(cond) {
  for (let i = 0; i < scaled(100) && !cond(); i++)
    await sleep(100);
}

// The anon_inode:inotify fds sandstepd holds, or null when its fds cannot be read (another user's daemon).
function inotifyFds() {
  const dir = `/proc/${process.env.E2B_SANDSTEPD_PID}/fd`;
  try {
    return readdirSync(dir).filter((fd) => {
      try { return readlinkSync(`${dir}/${fd}`) === 'anon_inode:inotify'; } catch { return false; }
    }).length;
  } catch {
    return null;
  }
}

async function main() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  report.sandboxId = sbx.sandboxId;
  await sbx.commands.run('mkdir -p /workspace/w/sub /tmp/t && ln -s /etc /workspace/etc-link && ln -s / /workspace/root-link');
  report.inotifyBefore = inotifyFds();
  const flat = await watch(sbx, '/workspace/w');
  const deep = await watch(sbx, '/workspace/w', { recursive: true });
  const tmp = await watch(sbx, '/tmp/t');
  report.inotifyWatching = inotifyFds();
  // While they watch, the sandbox's other calls are served (a watch holds no claim).
  await take('run1', async () => (await sbx.commands.run('echo one > /workspace/w/a.txt && echo ok')).stdout);
  await take('run2', async () => (await sbx.commands.run('echo two >> /workspace/w/a.txt && echo ok')).stdout);
  await take('read', async () => await sbx.files.read('/workspace/w/a.txt'));
  await take('run3', async () => (await sbx.commands.run('mv /workspace/w/a.txt /workspace/w/b.txt && echo ok')).stdout);
  await take('run4', async () => (await sbx.commands.run('chmod 600 /workspace/w/b.txt && rm /workspace/w/b.txt && echo ok')).stdout);
  await take('run5', async () => (await sbx.commands.run('echo s > /workspace/w/sub/deep.txt && mkdir /workspace/w/new && echo n > /workspace/w/new/in-new.txt && echo x > /tmp/t/x && echo ok')).stdout);
  await until(() => deep.events.includes('create:new/in-new.txt') && tmp.events.includes('create:x'));
  report.flat = flat.events;
  report.deep = deep.events;
  report.tmp = tmp.events;
  // stop() ends the watch: onExit, and no event after.
  await flat.handle.stop();
  await until(() => flat.exit !== null);
  await sbx.commands.run('echo late > /workspace/w/late.txt');
  await until(() => deep.events.includes('create:late.txt'));
  report.flatAfterStop = flat.events.filter((e) => e.endsWith('late.txt'));
  report.flatExit = flat.exit;
  report.deepSawLate = deep.events.includes('create:late.txt');
  // What is not the sandbox's /workspace or /tmp is refused, through a link too; a file is no directory.
  await take('outside', async () => { await watch(sbx, '/etc'); return true; });
  await take('viaLink', async () => { await watch(sbx, '/workspace/etc-link'); return true; });
  await take('viaRootLink', async () => { await watch(sbx, '/workspace/root-link'); return true; });
  await take('missing', async () => { await watch(sbx, '/workspace/no-such-dir'); return true; });
  // Another owner's key watches nothing of this sandbox (the SDK sends the key as envd's access token).
  await take('other', async () => {
    const body = JSON.stringify({ path: '/workspace/w' });
    const env = Buffer.alloc(5 + Buffer.byteLength(body));
    env.writeUInt32BE(Buffer.byteLength(body), 1);
    env.write(body, 5);
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/filesystem.Filesystem/WatchDir`, { method: 'POST',
      headers: { 'Content-Type': 'application/connect+json', 'E2b-Sandbox-Id': sbx.sandboxId,
                 'X-Access-Token': process.env.E2B_OTHER_KEY },
      body: env });
    return (await res.text()).slice(5);
  });
  // The watched directory removed: its watch ends, saying so.
  await take('goneExit', async () => {
    await sbx.commands.run('mkdir -p /workspace/gone/in');
    const g = await watch(sbx, '/workspace/gone', { recursive: true });
    await sbx.commands.run('rm -r /workspace/gone');
    await until(() => g.exit !== null);
    return g.exit;
  });
  // A recursive watch takes at most 1000 directories: refused at its start past that, ended when it grows past.
  await take('tooMany', async () => {
    await sbx.commands.run('mkdir -p /workspace/many && cd /workspace/many && mkdir $(seq 1 1000)');
    await watch(sbx, '/workspace/many', { recursive: true });
    return true;
  });
  await take('grewExit', async () => {
    await sbx.commands.run('mkdir -p /workspace/grow/0');
    const g = await watch(sbx, '/workspace/grow', { recursive: true });
    await sbx.commands.run('cd /workspace/grow/0 && mkdir $(seq 1 1000)');
    await until(() => g.exit !== null);
    return g.exit;
  });
  await take('afterGrew', async () => (await sbx.commands.run('echo ok')).stdout);
  // kill ends the watches that remain, saying why.
  await sbx.kill();
  await until(() => deep.exit !== null && tmp.exit !== null);
  report.deepExit = deep.exit;
  report.tmpExit = tmp.exit;
  // A snapshot makes the sandbox's files a layer: its watch ends, saying so (the `layered` script watches it
  // again, and a snapshot's sandbox).
  const sbx2 = await Sandbox.create('base', { timeoutMs: 120_000 });
  const before = await watch(sbx2, '/workspace');
  await take('snapshot', async () => (await sbx2.createSnapshot()).snapshotId);
  await until(() => before.exit !== null);
  report.snapshotExit = before.exit;
  await Sandbox.deleteSnapshot(report.snapshot);
  await sbx2.kill();
}

// Whether the jail of sandbox @id runs: its init, as its supervisor last named it, is alive.
function jailRuns(id) {
  try {
    const pid = readFileSync(`${process.env.E2B_STATE_DIR}/sandboxes/${id}/init`, 'utf8').trim().split(/\s+/)[0];
    return /^[0-9]+$/.test(pid) && existsSync(`/proc/${pid}`);
  } catch {
    return false;
  }
}

// Sandboxes whose files are layers (a snapshot's, and one snapshotted), watched through their jail's overlay.
// The test gives jails 2 s of idle time (SANDSTEP_TEST_SUPERVISOR_IDLE_S): a watch keeps its jail past that.
async function layered() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  await sbx.commands.run('mkdir -p /workspace/w/sub && echo base > /workspace/w/base.txt');
  report.snapshot = (await sbx.createSnapshot()).snapshotId;
  const made = await Sandbox.create(report.snapshot, { timeoutMs: 120_000 });
  const deep = await watch(made, '/workspace/w', { recursive: true });
  const own = await watch(sbx, '/workspace/w');
  await take('run1', async () => (await made.commands.run(
    'cd /workspace/w && echo one > a.txt && echo two >> a.txt && mv a.txt b.txt && chmod 600 b.txt && rm b.txt && ' +
    'echo s > sub/deep.txt && mkdir new && echo n > new/in-new.txt && rm base.txt && echo ok')).stdout);
  await take('write', async () => { await made.files.write('/workspace/w/by-files.txt', 'f'); return true; });
  await until(() => deep.events.includes('create:new/in-new.txt') && deep.events.includes('create:by-files.txt'));
  report.deep = [...deep.events];
  // Idle past the jail's idle time: the watch kept the jail, and sees the next command's file.
  await sleep(4000);
  report.exitAfterIdle = deep.exit;
  report.jailAfterIdle = jailRuns(made.sandboxId);
  await take('late', async () => (await made.commands.run('echo late > /workspace/w/late.txt && echo ok')).stdout);
  await until(() => deep.events.includes('create:late.txt'));
  report.deepSawLate = deep.events.includes('create:late.txt');
  // The snapshotted sandbox's watch sees its own files only.
  await sbx.commands.run('echo mine > /workspace/w/mine.txt');
  await until(() => own.events.includes('create:mine.txt'));
  report.own = own.events;
  // Once its watch stops, the jail ends idle.
  await deep.handle.stop();
  await until(() => !jailRuns(made.sandboxId));
  report.jailAfterStop = jailRuns(made.sandboxId);
  // A snapshot of a watched sandbox stops its jail (its files become a layer): the watch ends, saying so.
  await take('snapshot2', async () => (await sbx.createSnapshot()).snapshotId);
  await until(() => own.exit !== null);
  report.ownExit = own.exit;
  // So does a kill.
  const last = await watch(made, '/workspace');
  await made.kill();
  await until(() => last.exit !== null);
  report.killExit = last.exit;
  for (const s of [report.snapshot, report.snapshot2])
    if (typeof s === 'string')
      await Sandbox.deleteSnapshot(s);
  await sbx.kill();
}

if (process.argv[2] === 'layered')
  await layered();
else
  await main();
console.log(JSON.stringify(report));
process.exit(0);
