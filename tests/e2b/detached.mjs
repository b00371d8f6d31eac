// tests/e2b/detached.mjs: a background command outlives the script that started it (the official E2B SDK, npm
// "e2b", unmodified, against sandstepd).
//
// tests/test-e2b.c runs it as it runs sdk.mjs, one node process per step, each a new client of the sandbox:
//   start              creates a sandbox and starts a background command that reads stdin; once it has said
//                      "begun" the script exits without disconnecting (process.exit), printing {sandboxId, pid}
//   connect ID PID     Sandbox.connect(ID): lists the commands, sends a line (the command then writes 8 MB that no
//                      one reads), writes a file (beside the command), connects to PID after
//                      that, sends a second line and waits for the command's end
//   sleeper ID         starts `sleep 654321` in the background, disconnects from it, lists, and exits, printing
//                      {pid, listedAfterDisconnect}
//   kill ID PID        kills PID by its pid, lists again, and runs a command (the sandbox is free)
//   killsandbox ID     kills the sandbox
// Each prints one JSON object: what each call gave (errors as {error, message}).
import { Sandbox } from 'e2b';
import { report, take, sleep, scaled } from './report.mjs';

const [step, id, pidArg] = process.argv.slice(2);
const pid = Number(pidArg);
async function until(cond, ms = 20_000) {
  for (let i = 0; i < scaled(ms) / 50 && !cond(); i++)
    await sleep(50);
}

if (step === 'start') {
  const sbx = await Sandbox.create('base', { timeoutMs: 300_000 });
  let out = '';
  // timeoutMs: 0: the command has no deadline of its own.
  const h = await sbx.commands.run(
    'echo begun; read a; head -c 8000000 /dev/zero | tr "\\0" x; echo; echo "flooded $a"; touch /workspace/flooded; '
    + 'read b; echo "got $b"; exit 3',
    { background: true, stdin: true, timeoutMs: 0, onStdout: (d) => { out += d; } });
  await until(() => out.includes('begun'));
  report.sandboxId = sbx.sandboxId;
  report.pid = h.pid;
  report.stdout = out;
} else if (step === 'connect') {
  const sbx = await Sandbox.connect(id);
  await take('listed', async () => (await sbx.commands.list()).map((p) => ({ pid: p.pid, args: p.args })));
  await take('sentOne', async () => { await sbx.commands.sendStdin(pid, 'one\n'); return true; });
  // A file call runs beside the command.  Meanwhile the flood goes to no one: it must neither block the command
  // nor reach a later connection.
  await take('beside', async () => { await sbx.files.write('/workspace/beside.txt', 'x'); return true; });
  // Connected once the flood is over, which a file call beside the command sees.
  let flooded = false;
  for (let i = 0; i < scaled(30_000) / 100 && !flooded; i++) {
    flooded = await sbx.files.exists('/workspace/flooded');
    if (!flooded)
      await sleep(100);
  }
  report.flooded = flooded;
  let out = '';
  await take('connected', async () => {
    const h = await sbx.commands.connect(pid, { onStdout: (d) => { out += d; }, timeoutMs: 0 });
    await sbx.commands.sendStdin(pid, 'two\n');
    try {
      const r = await h.wait();
      return { pid: h.pid, exitCode: r.exitCode };
    } catch (e) {
      return { pid: h.pid, threw: e?.constructor?.name, exitCode: e.exitCode };
    }
  });
  report.stdout = out;
  await take('listedAfter', async () => (await sbx.commands.list()).map((p) => p.pid));
} else if (step === 'sleeper') {
  const sbx = await Sandbox.connect(id);
  const h = await sbx.commands.run('exec sleep 654321', { background: true, timeoutMs: 0 });
  report.pid = h.pid;
  // handle.disconnect() closes the stream, and leaves the command running.
  await h.disconnect();
  await sleep(500);
  await take('listedAfterDisconnect', async () => (await sbx.commands.list()).map((p) => p.pid));
} else if (step === 'kill') {
  const sbx = await Sandbox.connect(id);
  await take('listed', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('killed', async () => await sbx.commands.kill(pid));
  await take('listedAfter', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('after', async () => (await sbx.commands.run('echo free')).stdout);
} else if (step === 'killsandbox') {
  const sbx = await Sandbox.connect(id);
  await take('listed', async () => (await sbx.commands.list()).map((p) => p.pid));
  await take('killedSandbox', async () => { await sbx.kill(); return true; });
}
console.log(JSON.stringify(report));
// Exits with its commands' streams still open, as a script that is done with them does.
process.exit(0);
