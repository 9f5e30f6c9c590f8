// bench/serve/artifacts.sh's client: node artifacts.mjs PROTO TARGET TOKEN [N]
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
const require = createRequire(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, target, token, n = '30'] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const orch = new pkg.Capability(target, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 64 << 20 });
const meta = () => { const m = new grpc.Metadata(); m.add('authorization', `Bearer ${token}`); return m; };
const upload = (buf) => new Promise((res) => { const s = orch.UploadInputArtifact(meta(), (e, r) => res(r)); for (let o = 0; o < buf.length; o += 256 << 10) s.write({ filename: 'f.bin', data: buf.subarray(o, o + (256 << 10)) }); s.end(); });
const download = (id) => new Promise((res) => { let n = 0; const s = orch.DownloadOutputArtifact({ capability_artifact_id: id }, meta()); s.on('data', (c) => n += c.data.length); s.on('end', () => res(n)); });
const invoke = (args) => new Promise((res) => orch.Invoke({ tool_name: 'node-tools.read_attachments', args_json: Buffer.from(JSON.stringify(args)) }, meta(), (e, r) => res(r)));
const p50 = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
const now = () => Number(process.hrtime.bigint()) / 1e6;
const buf = Buffer.alloc(16 << 20, 7);
let t = [], d = [];
let id;
for (let i = 0; i < 5; i++) { let s = now(); id = (await upload(buf)).capability_artifact_id; t.push(now() - s); s = now(); await download(id); d.push(now() - s); }
console.log(`16 MiB upload p50 ${p50(t).toFixed(1)} ms (${(16 / p50(t) * 1000).toFixed(0)} MiB/s), download p50 ${p50(d).toFixed(1)} ms (${(16 / p50(d) * 1000).toFixed(0)} MiB/s)`);
const small = (await upload(Buffer.from('hello'))).capability_artifact_id;
await invoke({ attachments: [] });
let a = [], b = [];
for (let i = 0; i < Number(n); i++) { let s = now(); await invoke({ attachments: [] }); a.push(now() - s); s = now(); await invoke({ attachments: [{ capability_artifact_id: small }] }); b.push(now() - s); }
console.log(`warm read_attachments p50: no attachment ${p50(a).toFixed(2)} ms, one 5-byte attachment ${p50(b).toFixed(2)} ms`);
orch.close();
