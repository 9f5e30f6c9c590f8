// The artifact calls' streams of the gRPC server module (the test driver's
// handler, tests/front/grpc_serve_driver.c) driven by the Node gRPC client
// with the orchestrator's proto: node grpc_streams.mjs PROTO TARGET TOKEN.
// An upload's chunks in order, a download's out, and streams that stall:
// the server (its idle bound 1 s) ends them, and keeps serving.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, target, token] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const orch = new (grpc.loadPackageDefinition(def).selu.capability.v1.Capability)(target, grpc.credentials.createInsecure());
let failed = 0;
const ok = (n) => console.log(`ok ${n}`);
const bad = (n, why) => { failed++; console.log(`FAIL ${n}: ${why}`); };
const meta = () => { const m = new grpc.Metadata(); m.add('authorization', `Bearer ${token}`); return m; };
const opts = () => ({ deadline: Date.now() + 60000 });
const upload = (chunks, end = true) => new Promise((resolve) => {
  const s = orch.UploadInputArtifact(meta(), opts(), (err, res) => resolve({ err, res }));
  for (const c of chunks) s.write(c);
  if (end) s.end();
});
const download = (id) => new Promise((resolve) => {
  const chunks = [];
  const s = orch.DownloadOutputArtifact({ capability_artifact_id: id }, meta(), opts());
  s.on('data', (c) => chunks.push(c));
  s.on('error', (err) => resolve({ err, chunks }));
  s.on('end', () => resolve({ chunks }));
});

let r = await upload([{ filename: 'a.bin', mime_type: 'x/y', data: Buffer.alloc(1000) }, { data: Buffer.alloc(24) }, { data: Buffer.alloc(0) }]);
r.res && r.res.capability_artifact_id === '3 chunks, first a.bin x/y' && Number(r.res.size_bytes) === 1024
  ? ok('upload: every chunk, in order') : bad('upload', JSON.stringify(r));
{ // the chunks compressed by the client (gzip)
  const z = new (grpc.loadPackageDefinition(def).selu.capability.v1.Capability)(target, grpc.credentials.createInsecure(),
    { 'grpc.default_compression_algorithm': 2 });
  const q = await new Promise((resolve) => {
    const s = z.UploadInputArtifact(meta(), opts(), (err, res) => resolve({ err, res }));
    s.write({ filename: 'z.bin', mime_type: 'x/z', data: Buffer.alloc(300000, 7) });
    s.write({ data: Buffer.alloc(100000, 9) });
    s.end();
  });
  q.res && q.res.capability_artifact_id === '2 chunks, first z.bin x/z' && Number(q.res.size_bytes) === 400000
    ? ok('upload: gzip chunks inflated') : bad('upload: gzip chunks inflated', JSON.stringify(q));
  z.close();
}
r = await upload([]);
r.res && r.res.capability_artifact_id === '0 chunks, first ' ? ok('upload of no chunk') : bad('empty upload', JSON.stringify(r));
r = await download('5');
r.chunks.map((c) => c.data.toString()).join(',') === '0,1,2,3,4' && r.chunks[0].filename === 'n.txt' &&
  r.chunks[4].done && !r.chunks[3].done ? ok('download: the chunks in order, the last done') : bad('download', JSON.stringify(r));
// 16 MiB in 64 chunks: more than the client's window, the last chunks still
// going out when the handler returns
r = await download('big');
r.chunks.length === 64 && r.chunks.reduce((n, c) => n + c.data.length, 0) === 16 << 20 &&
  r.chunks[63].done && r.chunks[63].data[0] === 63 && !r.err
  ? ok('download: 16 MiB, every byte') : bad('download big', r.err ? r.err.message : `${r.chunks.length} chunks`);
r = await download('x');
r.chunks.length === 1 && r.chunks[0].error === 'no such artifact' ? ok('download: an error chunk') : bad('download error', JSON.stringify(r));
// a client that sends a chunk, then nothing, never ending its stream
r = await upload([{ filename: 'stall', data: Buffer.alloc(10) }], false);
r.err ? ok(`a stalled upload is ended by the server (${r.err.code})`) : bad('stalled upload', JSON.stringify(r));
// one that opens the call and sends nothing at all
r = await upload([], false);
r.err ? ok(`an upload that never sends is ended by the server (${r.err.code})`) : bad('silent upload', JSON.stringify(r));
r = await upload([{ data: Buffer.alloc(1) }]);
r.res && r.res.size_bytes == 1 ? ok('the server still serves after them') : bad('after stalls', JSON.stringify(r));
orch.close();
process.exit(failed ? 1 : 0);
