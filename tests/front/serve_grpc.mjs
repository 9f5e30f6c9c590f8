// `capsule serve --grpc` driven by the official Node gRPC client with
// Selu's two protos (the seed's CapabilityService, the orchestrator's
// Capability): node serve_grpc.mjs PROTO ORCHESTRATOR_PROTO TARGET TOKEN
// [MODE]. MODE "all" (the default) runs every check; "selu" calls the
// C Selu example (text-tools) through both services; "ready" and
// "not-ready" check the orchestrator's Healthcheck of a serve under
// --capability; "reloaded" calls a capability added while serving;
// "warm" calls text-tools again (its instance warm, the call process
// stopped), "warm-blocked" and "warm-ask" under those policies.
// Prints "ok NAME" / "FAIL NAME: why" lines; exits 1 on a failure.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, orchPath, target, token, mode = 'all'] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const client = new pkg.CapabilityService(target, grpc.credentials.createInsecure());
const odef = loader.loadSync(orchPath, { keepCase: true, defaults: true });
const opkg = grpc.loadPackageDefinition(odef).selu.capability.v1;
const orch = new opkg.Capability(target, grpc.credentials.createInsecure());
let failed = 0;
const ok = (n) => console.log(`ok ${n}`);
const bad = (n, why) => { failed++; console.log(`FAIL ${n}: ${why}`); };
const meta = (t) => { const m = new grpc.Metadata(); if (t) m.add('authorization', `Bearer ${t}`); return m; };
const call = (method, req, t, c = client) => new Promise((resolve) => {
  c[method](req, meta(t), { deadline: Date.now() + 60000 }, (err, res) => resolve({ err, res }));
});
const ocall = (method, req, t) => call(method, req, t, orch);
const ostream = (req, t) => new Promise((resolve) => {
  const chunks = [];
  const s = orch.StreamInvoke(req, meta(t), { deadline: Date.now() + 60000 });
  s.on('data', (c) => chunks.push(c));
  s.on('error', (err) => resolve({ err, chunks }));
  s.on('end', () => resolve({ chunks }));
});
const enc = (o) => Buffer.from(JSON.stringify(o));
const finish = () => { client.close(); orch.close(); process.exit(failed ? 1 : 0); };

if (mode === 'ready' || mode === 'not-ready') {
  const r = await ocall('Healthcheck', {}, token);
  const want = mode === 'ready';
  r.res && r.res.ready === want && (want ? r.res.message === 'ready' : r.res.message.length > 0)
    ? ok(`orchestrator healthcheck ${mode}`) : bad(`orchestrator healthcheck ${mode}`, JSON.stringify(r));
  if (!want) console.log(`why: ${r.res && r.res.message}`);
  finish();
}
if (mode === 'selu') {
  for (const [c, name] of [[orch, 'Capability'], [client, 'CapabilityService']]) {
    const r = c === orch
      ? await ocall('Invoke', { tool_name: 'text-tools.word_count', args_json: enc({ text: 'a b c' }) }, token)
      : await call('Invoke', { tool_name: 'text-tools.word_count', parameters: '{"text":"a b c"}' }, token);
    const out = r.res && (c === orch ? r.res.result_json.toString() : r.res.result);
    try {
      JSON.parse(out).words === 3 ? ok(`a warm Selu tool through ${name}`) : bad(`selu ${name}`, JSON.stringify(r));
    } catch (e) { bad(`selu ${name}`, `${e} ${JSON.stringify(r)}`); }
  }
  finish();
}
if (mode === 'warm') { // the call process is stopped: only the warm path answers
  const wcall = (args) => new Promise((resolve) => {
    orch.Invoke({ tool_name: 'text-tools.word_count', args_json: enc(args) }, meta(token),
      { deadline: Date.now() + 30000 }, (err, res) => resolve({ err, res }));
  });
  let r = await wcall({ text: 'one two' });
  r.res && !r.res.error && JSON.parse(r.res.result_json.toString()).words === 2
    ? ok('a warm Selu call without the call process') : bad('warm call', JSON.stringify(r));
  r = await wcall({ text: 7 });
  r.res && /input schema/.test(r.res.error) ? ok('warm path validates the arguments')
    : bad('warm validation', JSON.stringify(r));
  // at once, on the channel kept to the instance: each call gets its own answer
  const texts = Array.from({ length: 8 }, (_, i) => Array(i + 1).fill('w').join(' '));
  const all = await Promise.all(texts.map((text) => wcall({ text })));
  const counts = all.map((x) => { try { return JSON.parse(x.res.result_json.toString()).words; } catch { return -1; } });
  counts.every((c, i) => c === i + 1) ? ok('concurrent warm calls each get their own answer')
    : bad('concurrent warm calls', JSON.stringify(counts));
  finish();
}
if (mode === 'warm-blocked' || mode === 'warm-ask') {
  const r = await ocall('Invoke', { tool_name: 'text-tools.word_count', args_json: enc({ text: 'x' }) }, token);
  const want = mode === 'warm-blocked' ? /blocked by policy/ : /approval required/;
  r.err && r.err.code === grpc.status.PERMISSION_DENIED && want.test(r.err.details)
    ? ok(`${mode}: PERMISSION_DENIED`) : bad(mode, JSON.stringify(r));
  finish();
}
if (mode === 'reloaded') {
  const r = await ocall('Invoke', { tool_name: 'late.dispatch', args_json: enc({ text: 'late' }) }, token);
  r.res && !r.res.error && JSON.parse(r.res.result_json.toString()).got.text === 'late'
    ? ok('a capability added while serving is called') : bad('reloaded', JSON.stringify(r));
  finish();
}

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

// The orchestrator's Capability service, on the same address
r = await ocall('Healthcheck', {}, token);
r.res && r.res.ready ? ok('orchestrator healthcheck') : bad('orchestrator healthcheck', JSON.stringify(r));
r = await ocall('Healthcheck', {}, null);
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('orchestrator no-token') : bad('orchestrator no-token', JSON.stringify(r));
r = await ocall('Invoke', { tool_name: 'echo.dispatch', args_json: enc({ text: 'o' }), config_json: enc({ KEY: 'x' }), session_id: 's', thread_id: 't', capability_id: 'capsule' }, token);
try {
  const got = JSON.parse(r.res.result_json.toString());
  !r.res.error && got.got.text === 'o' ? ok('orchestrator invoke') : bad('orchestrator invoke', JSON.stringify(r));
} catch (e) { bad('orchestrator invoke', `${e} ${JSON.stringify(r)}`); }
r = await ocall('Invoke', { tool_name: 'echo.dispatch', args_json: enc({ nottext: 1 }) }, token);
r.res && r.res.error && /input schema|text/.test(r.res.error) && r.res.result_json.length === 0
  ? ok('orchestrator invalid-arguments') : bad('orchestrator invalid-arguments', JSON.stringify(r));
r = await ocall('Invoke', { tool_name: 'echo.dispatch', args_json: Buffer.from('{"text":"a\0b"}') }, token);
r.err && r.err.code === grpc.status.INVALID_ARGUMENT ? ok('orchestrator NUL in args_json') : bad('orchestrator NUL in args_json', JSON.stringify(r));
r = await ocall('Invoke', { tool_name: 'blocked.dispatch', args_json: enc({ text: 'hi' }) }, token);
r.err && r.err.code === grpc.status.PERMISSION_DENIED ? ok('orchestrator blocked') : bad('orchestrator blocked', JSON.stringify(r));
let st = await ostream({ tool_name: 'echo.dispatch', args_json: enc({ text: 'streamed' }) }, token);
try {
  const data = Buffer.concat(st.chunks.map((c) => c.data)).toString();
  !st.err && st.chunks.length >= 1 && st.chunks[st.chunks.length - 1].done && JSON.parse(data).got.text === 'streamed'
    ? ok('orchestrator stream-invoke') : bad('orchestrator stream-invoke', JSON.stringify(st));
} catch (e) { bad('orchestrator stream-invoke', `${e} ${JSON.stringify(st)}`); }
st = await ostream({ tool_name: 'echo.dispatch', args_json: enc({ nottext: 1 }) }, token);
!st.err && st.chunks.length === 1 && st.chunks[0].done && st.chunks[0].error
  ? ok('orchestrator stream-invoke error chunk') : bad('orchestrator stream-invoke error chunk', JSON.stringify(st));
r = await new Promise((resolve) => orch.DownloadOutputArtifact({ capability_artifact_id: 'x' }, meta(token))
  .on('error', (err) => resolve({ err })).on('end', () => resolve({})).on('data', () => {}));
r.err && r.err.code === grpc.status.UNIMPLEMENTED ? ok('artifact calls refused as unimplemented') : bad('artifacts', JSON.stringify(r));
finish();
