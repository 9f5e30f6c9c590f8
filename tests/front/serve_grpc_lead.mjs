// serve_grpc_lead.sh's client (the official Node gRPC client, Selu's seed
// proto): node serve_grpc_lead.mjs PROTO TARGET TOKEN MODE. Prints a line
// per check: "ok NAME" or "FAIL NAME: why".
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, target, token, mode] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const md = new grpc.Metadata();
md.add('authorization', `Bearer ${token}`);
// two channels: calls of one client that do not share a connection
const a = new pkg.CapabilityService(target, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
const b = new pkg.CapabilityService(target, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
const ok = (name) => console.log(`ok ${name}`);
const bad = (name, why) => console.log(`FAIL ${name}: ${why}`);
const order = [];
const call = (c, tool, params, name) => new Promise((resolve) => {
  c.Invoke({ tool_name: tool, parameters: JSON.stringify(params) }, md, { deadline: Date.now() + 60000 },
    (err, res) => { order.push(name); resolve({ err, res }); });
});
const good = (r) => r.res && r.res.success;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

if (mode === 'warm-up') {
  for (const [tool, params] of [['text-tools.word_count', { text: 'a b' }], ['selu-slow.ok', {}]]) {
    const r = await call(a, tool, params, tool);
    good(r) ? ok(`${tool} answers`) : bad(`${tool} answers`, JSON.stringify(r.err ? r.err.message : r.res));
  }
} else if (mode === 'warm') {
  let r = await call(a, 'text-tools.word_count', { text: 'one two three' }, 'alone');
  good(r) && JSON.parse(r.res.result).words === 3 ? ok('a warm call alone')
    : bad('a warm call alone', JSON.stringify(r.err ? r.err.message : r.res));
  order.length = 0;
  const slow = call(a, 'selu-slow.sleep', { ms: 3000 }, 'slow');
  await sleep(300);
  const fast = await call(b, 'text-tools.word_count', { text: 'x' }, 'fast');
  const s = await slow;
  good(fast) && good(s) ? ok('both warm calls answer')
    : bad('both warm calls answer', JSON.stringify([fast.err && fast.err.message, s.err && s.err.message]));
  order.join() === 'fast,slow' ? ok('a warm call behind a slow warm call is answered first')
    : bad('a warm call behind a slow warm call is answered first', order.join());
} else if (mode === 'cold') {
  order.length = 0;
  const cold = call(a, 'selu-cold.ok', {}, 'cold');
  await sleep(300);
  const fast = await call(b, 'text-tools.word_count', { text: 'x' }, 'fast');
  const c = await cold;
  good(fast) && good(c) ? ok('both calls answer')
    : bad('both calls answer', JSON.stringify([fast.err && fast.err.message, c.err && c.err.message]));
  order.join() === 'fast,cold' ? ok('a warm call behind a call starting an instance is answered first')
    : bad('a warm call behind a call starting an instance is answered first', order.join());
}
a.close();
b.close();
