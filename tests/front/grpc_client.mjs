// The gRPC front door driven by the official Node gRPC library
// (@grpc/grpc-js, from examples/selu-node's modules) with Selu's proto:
// node grpc_client.mjs PROTO TARGET TOKEN [CA-PEM]. Prints one line per
// check ("ok NAME" / "FAIL NAME: why") and exits 1 on any failure.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const [protoPath, target, token, caPath] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const creds = caPath
  ? grpc.credentials.createSsl(readFileSync(caPath))
  : grpc.credentials.createInsecure();
const client = new pkg.CapabilityService(target, creds);

let failed = 0;
const ok = (name) => console.log(`ok ${name}`);
const bad = (name, why) => { failed++; console.log(`FAIL ${name}: ${why}`); };
const meta = (t) => { const m = new grpc.Metadata(); if (t) m.add('authorization', `Bearer ${t}`); return m; };
const call = (method, req, t) => new Promise((resolve) => {
  client[method](req, meta(t), { deadline: Date.now() + 10000 }, (err, res) => resolve({ err, res }));
});

if (process.env.DRAIN) { // one slow call, during which the test sends SIGTERM
  console.log('calling');
  const d = await call('Invoke', { tool_name: 'slow', parameters: '{}' }, token);
  d.res && d.res.success ? ok('drain: the call in progress finished') : bad('drain', d.err && d.err.message);
  process.exit(failed ? 1 : 0);
}
let r = await call('HealthCheck', {}, token);
r.res && r.res.healthy ? ok('health') : bad('health', r.err && r.err.message);
r = await call('HealthCheck', {}, null);
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('no-token-unauthenticated') : bad('no-token-unauthenticated', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'echo', parameters: '{"a":1}' }, 'wrong');
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('wrong-token-unauthenticated') : bad('wrong-token-unauthenticated', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'echo', parameters: '{"a":1}', context: { session_id: 's1' } }, token);
try {
  const got = JSON.parse(r.res.result);
  got.tool === 'echo' && got.parameters === '{"a":1}' && got.context.session_id === 's1' && r.res.success
    ? ok('invoke-echo') : bad('invoke-echo', r.res.result);
} catch (e) { bad('invoke-echo', `${e} ${JSON.stringify(r)}`); }
// requests compressed by the client (grpc-js: deflate 1, gzip 2), as
// libgrpc took them; one that inflates past the 1 MiB limit is refused
for (const [alg, name] of [[1, 'deflate'], [2, 'gzip']]) {
  const z = new pkg.CapabilityService(target, creds, { 'grpc.default_compression_algorithm': alg });
  const zc = (params) => new Promise((resolve) => z.Invoke({ tool_name: 'echo', parameters: params }, meta(token),
    { deadline: Date.now() + 60000 }, (err, res) => resolve({ err, res })));
  for (const n of [10, 600 << 10]) { // twice: the second after the server's grpc-accept-encoding
    const q = await zc('z'.repeat(n));
    q.res && q.res.success && JSON.parse(q.res.result).parameters === 'z'.repeat(n)
      ? ok(`invoke-${name}-${n}`) : bad(`invoke-${name}-${n}`, q.err ? q.err.message : 'wrong');
  }
  const bomb = await zc('z'.repeat(3 << 20));
  bomb.err && bomb.err.code === grpc.status.RESOURCE_EXHAUSTED && /inflated/.test(bomb.err.details)
    ? ok(`${name}-bomb-refused`) : bad(`${name}-bomb-refused`, bomb.err ? bomb.err.message : 'answered');
  z.close();
}
r = await call('Invoke', { tool_name: 'fail', parameters: '{}' }, token);
r.res && !r.res.success && r.res.error === 'the tool failed on purpose' ? ok('invoke-tool-error') : bad('invoke-tool-error', JSON.stringify(r));
r = await call('Invoke', { tool_name: 'nope', parameters: '{}' }, token);
r.err && r.err.code === grpc.status.NOT_FOUND ? ok('invoke-not-found') : bad('invoke-not-found', JSON.stringify(r));

// a method the server does not have
const raw = new grpc.Client(target, creds);
const unimpl = await new Promise((resolve) => raw.makeUnaryRequest('/selu.capability.v1.CapabilityService/Nope',
  (x) => x, (x) => x, Buffer.alloc(0), meta(token), (err) => resolve(err)));
unimpl && unimpl.code === grpc.status.UNIMPLEMENTED ? ok('unknown-method-unimplemented') : bad('unknown-method-unimplemented', String(unimpl));
// bytes that are not an InvokeRequest
const garbage = await new Promise((resolve) => raw.makeUnaryRequest('/selu.capability.v1.CapabilityService/Invoke',
  (x) => x, (x) => x, Buffer.from([0x0a, 0xff, 0xff, 0xff]), meta(token), (err) => resolve(err)));
garbage && garbage.code === grpc.status.INVALID_ARGUMENT ? ok('malformed-invalid-argument') : bad('malformed-invalid-argument', String(garbage));
// a message past the server's 1 MiB limit
r = await call('Invoke', { tool_name: 'echo', parameters: 'x'.repeat(2 << 20) }, token);
r.err && r.err.code === grpc.status.RESOURCE_EXHAUSTED ? ok('huge-message-refused') : bad('huge-message-refused', r.err ? r.err.message : 'answered');
// an answer larger than the socket takes at once (900 KiB echoed back): all of it comes
r = await call('Invoke', { tool_name: 'echo', parameters: 'y'.repeat(900 << 10) }, token);
r.res && r.res.success && JSON.parse(r.res.result).parameters.length === 900 << 10
  ? ok('large-answer-whole') : bad('large-answer-whole', r.err ? r.err.message : 'cut short');
// 20 slow calls at once against a limit of 8: every one answered, the excess refused
const many = await Promise.all(Array.from({ length: 20 }, () => call('Invoke', { tool_name: 'slow', parameters: '{}' }, token)));
const done = many.filter((x) => x.res && x.res.success).length;
const busy = many.filter((x) => x.err && x.err.code === grpc.status.RESOURCE_EXHAUSTED).length;
done >= 8 && done + busy === 20 ? ok(`concurrent-bounded (${done} served, ${busy} refused)`) : bad('concurrent-bounded', `${done} served, ${busy} refused`);
r = await call('HealthCheck', {}, token);
r.res && r.res.healthy ? ok('still-serving') : bad('still-serving', r.err && r.err.message);
client.close();
raw.close();
process.exit(failed ? 1 : 0);
