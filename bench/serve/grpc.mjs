// One kept gRPC connection per target, calls interleaved one by one
// (direct, through serve, direct, ...) so load lands on both alike:
// node grpc.mjs PROTO DIRECT_TARGET SERVE_TARGET TOKEN N. Prints one JSON
// object: the p50 and p90 of each, in ms.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, direct, served, token, n] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const a = new pkg.Capability(direct, grpc.credentials.createInsecure());
const b = new pkg.Capability(served, grpc.credentials.createInsecure());
const meta = new grpc.Metadata();
meta.add('authorization', `Bearer ${token}`);
const args = Buffer.from('{"text": "one two three four five"}');
const once = (c, tool) => new Promise((resolve, reject) => {
  const t0 = process.hrtime.bigint();
  c.Invoke({ tool_name: tool, args_json: args }, meta, { deadline: Date.now() + 60000 }, (err, res) => {
    if (err || res.error) reject(new Error(err ? err.message : res.error));
    else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
  });
});
const da = [], db = [];
for (let i = 0; i < 5; i++) { await once(a, 'word_count'); await once(b, 'text-tools.word_count'); }
for (let i = 0; i < Number(n); i++) {
  da.push(await once(a, 'word_count'));
  db.push(await once(b, 'text-tools.word_count'));
}
const q = (xs, p) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor((s.length - 1) * p)]; };
console.log(JSON.stringify({ direct_p50: q(da, 0.5), direct_p90: q(da, 0.9), serve_p50: q(db, 0.5), serve_p90: q(db, 0.9), n: Number(n) }));
a.close(); b.close();
