// tests/e2b/urls.mjs: uploadUrl() and downloadUrl() of the official E2B SDK (npm "e2b", unmodified) against
// sandstepd, used with plain fetch as E2B documents them (POST multipart/form-data to upload, GET to download).
//
// tests/test-e2b.c runs `node urls.mjs urls` as it runs sdk.mjs and checks the report: what each request gave
// ({status, body}), for good URLs and for each attack on them (a changed signature, path or operation, an expired
// signature, another sandbox's, a killed sandbox's, no signature, a path out of /workspace and /tmp).
import { Sandbox } from 'e2b';
import { report, take, sleep } from './report.mjs';

async function answer(res) {
  const text = await res.text();
  return { status: res.status, body: text };
}

async function upload(url, content) {
  const form = new FormData();
  form.append('file', new Blob([content]), 'ignored-name.txt');
  return answer(await fetch(url, { method: 'POST', body: form }));
}

// @url with its query's @name set to @value.
function withParam(url, name, value) {
  const u = new URL(url);
  u.searchParams.set(name, value);
  return u.toString();
}

const a = await Sandbox.create('base', { secure: true, timeoutMs: 120_000 });
const b = await Sandbox.create('base', { secure: true, timeoutMs: 120_000 });
// Each sandbox's envd access token is its own, not the key; envd's calls carry it and are served.
report.tokens = { a: a.envdAccessToken ?? null, b: b.envdAccessToken ?? null, key: process.env.E2B_API_KEY };
await take('command', async () => (await a.commands.run('echo hi')).stdout);

const up = await a.uploadUrl('/workspace/up.txt');
report.uploadUrl = up;
await take('uploaded', async () => upload(up, 'uploaded bytes\n'));
await take('readBack', async () => await a.files.read('/workspace/up.txt'));
const down = await a.downloadUrl('/workspace/up.txt');
report.downloadUrl = down;
await take('downloaded', async () => answer(await fetch(down)));
// A URL with a deadline, still good.
await take('downloadedInTime', async () => answer(await fetch(await a.downloadUrl('/workspace/up.txt',
  { useSignatureExpiration: 60 }))));

// Attacks: each is refused.
await take('tampered', async () => {
  const sig = new URL(down).searchParams.get('signature');
  const last = sig.at(-1) === 'A' ? 'B' : 'A';
  return answer(await fetch(withParam(down, 'signature', sig.slice(0, -1) + last)));
});
await take('otherPath', async () => answer(await fetch(withParam(down, 'path', '/workspace/other.txt'))));
await take('uploadAsDownload', async () => answer(await fetch(up)));
await take('downloadAsUpload', async () => upload(down, 'not this\n'));
await take('unsigned', async () => answer(await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/workspace/up.txt`)));
await take('expired', async () => {
  const url = await a.downloadUrl('/workspace/up.txt', { useSignatureExpiration: 1 });
  await sleep(2100);
  return answer(await fetch(url));
});
await take('laterExpiration', async () => {
  const url = await a.downloadUrl('/workspace/up.txt', { useSignatureExpiration: 1 });
  return answer(await fetch(withParam(url, 'signature_expiration', String(Math.floor(Date.now() / 1000) + 3600))));
});

// Another sandbox's URL is its own sandbox's: b's file, never a's, and it cannot be turned on a.
await b.files.write('/workspace/up.txt', 'b bytes\n');
const bDown = await b.downloadUrl('/workspace/up.txt');
await take('otherSandbox', async () => answer(await fetch(bDown)));
await take('otherSandboxNamingA', async () => answer(await fetch(bDown, { headers: { 'E2b-Sandbox-Id': a.sandboxId } })));
await b.kill();
await take('killedSandbox', async () => answer(await fetch(bDown)));

// Paths: the rules of files.read and files.write (a link out of /workspace and /tmp is not followed).
await a.commands.run('ln -sf /etc/passwd /workspace/out-link');
await take('readLink', async () => await a.files.read('/workspace/out-link'));
await take('downloadedLink', async () => answer(await fetch(await a.downloadUrl('/workspace/out-link'))));
await take('writeOutside', async () => { await a.files.write('/usr/up.txt', 'x'); return true; });
await take('uploadedOutside', async () => upload(await a.uploadUrl('/usr/up.txt'), 'x'));
await take('uploadedTmp', async () => upload(await a.uploadUrl('/tmp/up.txt'), 'tmp bytes\n'));
await take('readTmp', async () => await a.files.read('/tmp/up.txt'));
await a.kill();
console.log(JSON.stringify(report));
