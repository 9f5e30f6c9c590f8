// One kept gRPC connection per target, calls interleaved one by one
// (direct, through serve, [through the other serve,] then the same
// rotated by one, ...) so load and order land on all alike: node grpc.mjs PROTO DIRECT_TARGET SERVE_TARGET TOKEN
// N [OTHER_TARGET OTHER_TOKEN]. With RELAY_TARGET in the environment (a
// bare byte relay in front of the direct server: what a second hop costs
// before anything is done on it), that too. Prints one JSON object: the
// p50, p90 and p99 of each, in ms.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, direct, served, token, n, other, otherToken] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const meta = (t) => { const m = new grpc.Metadata(); m.add('authorization', `Bearer ${t}`); return m; };
const targets = [
  { name: 'direct', c: new pkg.Capability(direct, grpc.credentials.createInsecure()), tool: 'word_count', md: new grpc.Metadata() },
  { name: 'serve', c: new pkg.Capability(served, grpc.credentials.createInsecure()), tool: 'text-tools.word_count', md: meta(token) },
];
if (process.env.RELAY_TARGET) targets.push({ name: 'relay', c: new pkg.Capability(process.env.RELAY_TARGET, grpc.credentials.createInsecure()), tool: 'word_count', md: new grpc.Metadata() });
if (other) targets.push({ name: 'other', c: new pkg.Capability(other, grpc.credentials.createInsecure()), tool: 'text-tools.word_count', md: meta(otherToken) });
const args = Buffer.from('{"text": "one two three four five"}');
const once = (t) => new Promise((resolve, reject) => {
  const t0 = process.hrtime.bigint();
  t.c.Invoke({ tool_name: t.tool, args_json: args }, t.md, { deadline: Date.now() + 60000 }, (err, res) => {
    if (err || res.error) reject(new Error(err ? err.message : res.error));
    else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
  });
});
for (let i = 0; i < 5; i++) for (const t of targets) await once(t);
const times = targets.map(() => []);
// each round starts one target further on: every target follows every
// other as often (the call right after another target's measured 0.06
// ms faster here than the same build's right after its own kind)
for (let i = 0; i < Number(n); i++) {
  for (let j = 0; j < targets.length; j++) {
    const k = (i + j) % targets.length;
    times[k].push(await once(targets[k]));
  }
}
const q = (xs, p) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor((s.length - 1) * p)]; };
const out = { n: Number(n) };
for (const [k, t] of targets.entries()) { out[`${t.name}_p50`] = q(times[k], 0.5); out[`${t.name}_p90`] = q(times[k], 0.9); out[`${t.name}_p99`] = q(times[k], 0.99); }
console.log(JSON.stringify(out));
for (const t of targets) t.c.close();
