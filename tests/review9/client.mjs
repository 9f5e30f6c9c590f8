// The review-9 scripts' gRPC client (the official Node client, the
// orchestrator's proto): node client.mjs PROTO TARGET TOKEN MODE, the
// mode's parameters in the environment; prints one JSON line (or lines
// the scripts read) and exits 0, or 2 when the client itself failed.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, target, token, mode] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const env = process.env;
const mk = () => new pkg.Capability(target, grpc.credentials.createInsecure(),
  { 'grpc.max_send_message_length': 64 << 20 });
const orch = mk();
const meta = (t) => { const m = new grpc.Metadata(); if (t) m.add('authorization', `Bearer ${t}`); return m; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = (o) => console.log(JSON.stringify(o));
const errOf = (e) => e && { code: e.code, details: e.details };
const upload = (chunks, t = token, c = orch) => new Promise((resolve) => {
  const s = c.UploadInputArtifact(meta(t), { deadline: Date.now() + 120000 }, (err, res) => resolve({ err: errOf(err), res }));
  for (const ch of chunks) s.write(ch);
  s.end();
});
// an upload begun on a channel of its own, its first chunk naming the file:
// [the stream, a promise of its answer]
const begin = (filename, ms) => {
  const c = mk();
  let s;
  const done = new Promise((resolve) => {
    s = c.UploadInputArtifact(meta(token), { deadline: Date.now() + ms },
      (err, res) => { resolve({ err: errOf(err), res }); c.close(); });
  });
  s.write({ filename });
  return [s, done];
};
const invoke = (tool, args, t = token) => new Promise((resolve) => {
  orch.Invoke({ tool_name: tool, args_json: Buffer.from(JSON.stringify(args)) }, meta(t),
    { deadline: Date.now() + 120000 }, (err, res) => resolve({ err: errOf(err), res: res && { result: res.result_json.toString(), error: res.error } }));
});
const health = (t = token) => new Promise((resolve) => {
  orch.Healthcheck({}, meta(t), { deadline: Date.now() + 20000 }, (err, res) => resolve({ err: errOf(err), res }));
});

if (mode === 'hog') { // HOG_N calls without a token that send nothing, held HOG_MS
  const n = Number(env.HOG_N || 70);
  const calls = [];
  let refused = 0, ended = 0;
  for (let i = 0; i < n; i++) {
    // each on a channel of its own, as many peers would
    const c = mk();
    const s = c.UploadInputArtifact(meta(null), { deadline: Date.now() + 120000 }, (err) => {
      ended++;
      if (err && err.code === grpc.status.UNAUTHENTICATED) refused++;
    });
    calls.push([c, s]);
  }
  await sleep(Number(env.HOG_MS || 8000));
  out({ held: n - ended, refused });
  for (const [c, s] of calls) { s.cancel(); c.close(); }
  process.exit(0);
}
if (mode === 'health') { out(await health()); process.exit(0); }
if (mode === 'upload') { // UPLOAD_NAME, UPLOAD_BYTES
  const r = await upload([{ filename: env.UPLOAD_NAME_JSON ? JSON.parse(env.UPLOAD_NAME_JSON) : env.UPLOAD_NAME || 'a.txt', mime_type: 'text/plain',
    data: Buffer.alloc(Number(env.UPLOAD_BYTES || 3), 0x61) }]);
  out(r);
  process.exit(0);
}
if (mode === 'uploads') { // UPLOADS_N sequential tiny uploads: how many stored
  let stored = 0, last = null;
  for (let i = 0; i < Number(env.UPLOADS_N); i++) {
    const r = await upload([{ filename: `s${i}.txt`, data: Buffer.from('x') }]);
    if (r.res && r.res.capability_artifact_id) stored++; else last = r;
  }
  out({ stored, last });
  process.exit(0);
}
if (mode === 'concurrent') { // CONC_N uploads begun at once (their first chunk), then CONC_BYTES each
  const n = Number(env.CONC_N), bytes = Number(env.CONC_BYTES || 1);
  const begun = Array.from({ length: n }, (_, i) => begin(`c${i}.bin`, 240000));
  const streams = begun.map(([s]) => s), done = begun.map(([, d]) => d);
  await sleep(Number(env.CONC_WAIT_MS || 3000)); // every upload begun
  const data = Buffer.alloc(Math.min(bytes, 2 << 20), 0x62);
  for (const s of streams) {
    for (let sent = 0; sent < bytes; sent += data.length) s.write({ data: sent + data.length <= bytes ? data : data.subarray(0, bytes - sent) });
    s.end();
  }
  const rs = await Promise.all(done);
  out({ stored: rs.filter((r) => r.res && r.res.capability_artifact_id).length,
    refused: rs.filter((r) => !(r.res && r.res.capability_artifact_id)).map((r) => r.err || r.res.error).slice(0, 2) });
  process.exit(0);
}
if (mode === 'hold') { // HOLD_N uploads begun (a first chunk each), kept alive (a byte every 2 s) until the file HOLD_UNTIL exists, then ended
  const begun = Array.from({ length: Number(env.HOLD_N) }, (_, i) => begin(`h${i}.bin`, 300000));
  const streams = begun.map(([s]) => s), done = begun.map(([, d]) => d);
  while (!fs.existsSync(env.HOLD_UNTIL)) {
    for (const s of streams) s.write({ data: Buffer.from('h') });
    await sleep(2000);
  }
  for (const s of streams) s.end();
  const rs = await Promise.all(done);
  out({ stored: rs.filter((r) => r.res && r.res.capability_artifact_id).length,
    failed: rs.filter((r) => !(r.res && r.res.capability_artifact_id)).map((r) => r.err || r.res.error).slice(0, 2) });
  process.exit(0);
}
if (mode === 'attach-many') { // one upload named ATTACH_N times in an echo call's attachments
  const u = await upload([{ filename: 'one.txt', data: Buffer.from('one') }]);
  const id = u.res && u.res.capability_artifact_id;
  if (!id) { out({ failed: u }); process.exit(2); }
  const attachments = Array.from({ length: Number(env.ATTACH_N) }, () => ({ capability_artifact_id: id }));
  const r = await invoke(env.ATTACH_TOOL || 'echo.dispatch', { attachments });
  out({ id, err: r.err, error: r.res && r.res.error && r.res.error.slice(0, 300) });
  process.exit(0);
}
if (mode === 'attach-big') { // ATTACH_N calls at once, each attaching one upload of ATTACH_BYTES to TOOL
  const part = Buffer.alloc(2 << 20, 0x63);
  const u = await upload([{ filename: 'big.bin' },
    ...Array.from({ length: Math.ceil(Number(env.ATTACH_BYTES) / part.length) }, () => ({ data: part }))]);
  const id = u.res && u.res.capability_artifact_id;
  if (!id) { out({ failed: u }); process.exit(2); }
  const rs = await Promise.all(Array.from({ length: Number(env.ATTACH_N) },
    () => invoke(env.TOOL, { attachments: [{ capability_artifact_id: id }] })));
  out({ id, results: rs.map((r) => (r.err ? r.err.details : r.res.error || r.res.result).replace(/^.*log: [^)]*\): /, '').slice(0, 120)).slice(0, 3) });
  process.exit(0);
}
if (mode === 'invoke') { out(await invoke(env.TOOL, JSON.parse(env.ARGS || '{}'))); process.exit(0); }
const download = (id, t = token, cancelAfter = 0) => new Promise((resolve) => {
  const chunks = [];
  const s = orch.DownloadOutputArtifact({ capability_artifact_id: id }, meta(t), { deadline: Date.now() + 60000 });
  s.on('data', (c) => { chunks.push(c); if (cancelAfter && chunks.length >= cancelAfter) s.cancel(); });
  s.on('error', (err) => resolve({ err: errOf(err), chunks }));
  s.on('end', () => resolve({ chunks }));
});
if (mode === 'download') { // DOWNLOAD_ID
  const r = await download(env.DOWNLOAD_ID);
  out({ err: r.err, got: r.chunks.map((c) => c.data.toString() + (c.error ? '|' + c.error : '')).join('') });
  process.exit(0);
}
if (mode === 'probes') { // attempts; one JSON line each
  const names = ['../../../../tmp/r9-escape', '/etc/r9-passwd', '..', '.hidden', 'a\\..\\b', 'x'.repeat(5000)];
  for (const n of names) {
    const r = await upload([{ filename: n, data: Buffer.from('n') }]);
    out({ probe: 'name', sent: n.slice(0, 40), id: r.res && r.res.capability_artifact_id, err: r.err });
  }
  const mine = (await upload([{ filename: 'alice.txt', data: Buffer.from('secret') }])).res.capability_artifact_id;
  const theirs = await download(mine, env.OTHER_TOKEN);
  out({ probe: 'other-user', got: theirs.chunks.map((c) => c.data.toString() + c.error).join(''), err: theirs.err });
  for (const id of ['../' + mine, mine + '/../x', mine.toUpperCase(), mine + '\n', 'capsule-artifact-' + '0'.repeat(32)]) {
    const r = await download(id);
    out({ probe: 'id', sent: id, got: r.chunks.map((c) => c.data.toString() + '|' + c.error).join('') });
  }
  // a chunk that is not an UploadInputArtifactChunk: raw bytes
  const raw = await new Promise((resolve) => {
    const s = orch.makeClientStreamRequest('/selu.capability.v1.Capability/UploadInputArtifact', (b) => b, (b) => b,
      meta(token), { deadline: Date.now() + 20000 }, (err, res) => resolve({ err: errOf(err), res }));
    s.write(Buffer.from([0xff, 0xff, 0xff, 0x0f]));
    s.end();
  });
  out({ probe: 'garbage', err: raw.err });
  const big = await upload([{ filename: 'big.bin', data: Buffer.alloc((4 << 20) + 10) }]);
  out({ probe: 'oversize', err: big.err, res: big.res });
  // cancelled mid-stream, both ways
  const big3 = (await upload([{ filename: 'three.bin', data: Buffer.alloc(3 << 20, 1) }])).res.capability_artifact_id;
  // 30 each way, 8 at a time: the most streams one user may have open
  for (let i = 0; i < 30; i += 8) await Promise.all(Array.from({ length: Math.min(8, 30 - i) }, () => download(big3, token, 1)));
  for (let i = 0; i < 30; i += 8) await Promise.all(Array.from({ length: Math.min(8, 30 - i) }, () => new Promise((resolve) => {
    const c = mk();
    const s = c.UploadInputArtifact(meta(token), { deadline: Date.now() + 20000 }, () => { c.close(); resolve(); });
    s.write({ filename: 'cut.bin', data: Buffer.alloc(1 << 20) });
    setTimeout(() => s.cancel(), 300);
  })));
  out({ probe: 'cancels', health: await health() });
  process.exit(0);
}
console.error(`unknown mode ${mode}`);
process.exit(2);
