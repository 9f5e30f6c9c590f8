// `capsule serve --grpc` driven by the official Node gRPC client with
// Selu's proto: node serve_grpc.mjs PROTO TARGET TOKEN. Prints "ok NAME" /
// "FAIL NAME: why" lines; exits 1 on a failure.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, target, token] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const client = new pkg.CapabilityService(target, grpc.credentials.createInsecure());
let failed = 0;
const ok = (n) => console.log(`ok ${n}`);
const bad = (n, why) => { failed++; console.log(`FAIL ${n}: ${why}`); };
const meta = (t) => { const m = new grpc.Metadata(); if (t) m.add('authorization', `Bearer ${t}`); return m; };
const call = (method, req, t) => new Promise((resolve) => {
  client[method](req, meta(t), { deadline: Date.now() + 60000 }, (err, res) => resolve({ err, res }));
});

let r = await call('HealthCheck', {}, token);
r.res && r.res.healthy ? ok('health') : bad('health', r.err && r.err.message);
r = await call('HealthCheck', {}, null);
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('no-token') : bad('no-token', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'echo.dispatch', parameters: '{"text":"hi"}' }, 'capsule_' + '0'.repeat(64));
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('wrong-token') : bad('wrong-token', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'echo.dispatch', parameters: '{"text":"hi"}', context: { session_id: 's1' } }, token);
try {
  const got = JSON.parse(r.res.result);
  r.res.success && got.got && got.got.text === 'hi' ? ok('invoke') : bad('invoke', r.res.result);
} catch (e) { bad('invoke', `${e} ${JSON.stringify(r)}`); }
r = await call('Invoke', { tool_name: 'echo.dispatch', parameters: '{"nottext":1}' }, token);
r.res && !r.res.success && /input schema|text/.test(r.res.error) ? ok('invalid-arguments') : bad('invalid-arguments', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'blocked.dispatch', parameters: '{"text":"hi"}' }, token);
r.err && r.err.code === grpc.status.PERMISSION_DENIED ? ok('blocked') : bad('blocked', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'nosuch.tool', parameters: '{}' }, token);
r.err && r.err.code === grpc.status.NOT_FOUND ? ok('unknown') : bad('unknown', JSON.stringify(r));
const many = await Promise.all(Array.from({ length: 4 }, (_, i) =>
  call('Invoke', { tool_name: 'echo.dispatch', parameters: `{"text":"n${i}"}` }, token)));
many.every((x, i) => x.res && x.res.success && JSON.parse(x.res.result).got.text === `n${i}`)
  ? ok('concurrent') : bad('concurrent', JSON.stringify(many.map((x) => x.err ? x.err.message : x.res.result)));
client.close();
process.exit(failed ? 1 : 0);
