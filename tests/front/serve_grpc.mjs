// `capsule serve --grpc` driven by the official Node gRPC client with
// Selu's two protos (the seed's CapabilityService, the orchestrator's
// Capability): node serve_grpc.mjs PROTO ORCHESTRATOR_PROTO TARGET TOKEN
// [MODE]. MODE "all" (the default) runs every check; "selu" calls the
// C Selu example (text-tools) through both services; "ready" and
// "not-ready" check the orchestrator's Healthcheck of a serve under
// --capability; "reloaded" calls a capability added while serving;
// "warm" calls text-tools again (its instance warm, the call process
// stopped), "warm-blocked" and "warm-ask" under those policies;
// "warm-edit" writes EDIT_FILE (in its package) between warm calls and
// checks in LOG (its keepers' log) that each edit retired the instance
// and that a new one answered;
// "artifacts" uploads, attaches, makes and downloads artifacts through the
// Node Selu example (node-tools; OTHER_TOKEN another user's), "expired"
// downloads ARTIFACT_ID the shell aged.
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
// UploadInputArtifact: the chunks written, then the stream's end
const upload = (chunks, t) => new Promise((resolve) => {
  const s = orch.UploadInputArtifact(meta(t), { deadline: Date.now() + 120000 }, (err, res) => resolve({ err, res }));
  for (const c of chunks) s.write(c);
  s.end();
});
// DownloadOutputArtifact: every chunk until the stream's end
const download = (id, t) => new Promise((resolve) => {
  const chunks = [];
  const s = orch.DownloadOutputArtifact({ capability_artifact_id: id }, meta(t), { deadline: Date.now() + 60000 });
  s.on('data', (c) => chunks.push(c));
  s.on('error', (err) => resolve({ err, chunks }));
  s.on('end', () => resolve({ chunks }));
});
const ID = /^capsule-artifact-[0-9a-f]{32}$/;
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
if (mode === 'warm-edit') { // EDIT_FILE in the package written between two calls, LOG the keepers' log
  const fs = await import('node:fs');
  const wcall = (text) => new Promise((resolve) => {
    orch.Invoke({ tool_name: 'text-tools.word_count', args_json: enc({ text }) }, meta(token),
      { deadline: Date.now() + 30000 }, (err, res) => resolve({ err, res }));
  });
  const words = (r) => { try { return JSON.parse(r.res.result_json.toString()).words; } catch { return -1; } };
  const count = (re) => (fs.readFileSync(process.env.LOG, 'utf8').match(re) || []).length;
  // an instance retired, and another started: both before the call is answered
  const retired = () => `${count(/the package changed/g)} ${count(/serving leases/g)}`;
  for (let i = 0; i < 3; i++) {
    // warm: the second call leaves its next lease asked ahead, held for
    // the next call a few ms; the edit comes within them
    await wcall('a b');
    const warm = await wcall('a b');
    const before = retired();
    fs.writeFileSync(process.env.EDIT_FILE, `edit ${i}\n`);
    const r = await wcall('x y z');
    const after = retired();
    const [b, a] = [before, after].map((x) => x.split(' ').map(Number));
    words(warm) === 2 && words(r) === 3 && a[0] === b[0] + 1 && a[1] === b[1] + 1
      ? ok(`a call right after an edit (${i + 1}) does not reach the server started before it`)
      : bad(`call after edit ${i + 1}`, `retired, started ${before} -> ${after}: ${JSON.stringify(r)}`);
  }
  finish();
}
if (mode === 'warm-blocked' || mode === 'warm-ask') {
  const r = await ocall('Invoke', { tool_name: 'text-tools.word_count', args_json: enc({ text: 'x' }) }, token);
  const want = mode === 'warm-blocked' ? /blocked by policy/ : /approval required/;
  r.err && r.err.code === grpc.status.PERMISSION_DENIED && want.test(r.err.details)
    ? ok(`${mode}: PERMISSION_DENIED`) : bad(mode, JSON.stringify(r));
  finish();
}
if (mode === 'artifacts') { // the Node Selu example (node-tools) behind serve, as the orchestrator uses it
  const other = process.env.OTHER_TOKEN;
  const text = 'attached text, in three chunks';
  let r = await upload([{ filename: '../dir/in.txt', mime_type: 'text/plain', data: Buffer.from(text.slice(0, 9)) },
    { data: Buffer.from(text.slice(9, 20)) }, { filename: 'ignored.bin', data: Buffer.from(text.slice(20)) }], token);
  const id = r.res && r.res.capability_artifact_id;
  r.res && ID.test(id) && Number(r.res.size_bytes) === text.length && r.res.error === ''
    ? ok('upload: an id capsule issued, the size') : bad('upload', JSON.stringify(r));
  console.log(`uploaded ${id}`);
  r = await upload([{ filename: 'in.txt', data: Buffer.from('again') }], token);
  r.res && ID.test(r.res.capability_artifact_id) && r.res.capability_artifact_id !== id
    ? ok('a second upload: another id') : bad('second upload', JSON.stringify(r));
  // the orchestrator's attachments entry, as its artifacts.rs writes it
  const entry = { filename: 'in.txt', mime_type: 'text/plain', size_bytes: text.length, capability_artifact_id: id };
  r = await ocall('Invoke', { tool_name: 'node-tools.read_attachments', args_json: enc({ attachments: [entry] }), session_id: 's1' }, token);
  try {
    const f = JSON.parse(r.res.result_json.toString()).files[0];
    !r.res.error && f.text === text && f.filename === 'in.txt' && f.size_bytes === text.length
      ? ok('an uploaded artifact reaches the Selu tool (UploadInputArtifact on its instance)') : bad('attach', JSON.stringify(r));
  } catch (e) { bad('attach', `${e} ${JSON.stringify(r)}`); }
  r = await ocall('Invoke', { tool_name: 'node-tools.make_file', args_json: enc({ filename: 'out.txt', text: 'made by the tool' }) }, token);
  let out;
  try {
    out = JSON.parse(r.res.result_json.toString()).artifact;
    !r.res.error && ID.test(out.capability_artifact_id) && out.filename === 'out.txt' && out.mime_type === 'text/plain' &&
      out.size_bytes === 16 && !('path' in out)
      ? ok('an output artifact is named by an id capsule issued') : bad('output artifact', JSON.stringify(r));
  } catch (e) { bad('output artifact', `${e} ${JSON.stringify(r)}`); }
  const outId = out && out.capability_artifact_id;
  console.log(`made ${outId}`);
  r = await download(outId, token);
  const data = Buffer.concat(r.chunks.map((c) => c.data)).toString();
  !r.err && data === 'made by the tool' && r.chunks[0].filename === 'out.txt' && r.chunks[0].mime_type === 'text/plain' &&
    r.chunks[r.chunks.length - 1].done && r.chunks.every((c) => !c.error)
    ? ok('DownloadOutputArtifact: the bytes, the file named, done') : bad('download', JSON.stringify(r));
  r = await download(id, token);
  Buffer.concat(r.chunks.map((c) => c.data)).toString() === text && r.chunks[0].filename === 'in.txt'
    ? ok('an upload downloads as it was sent (its name reduced to one component)') : bad('download upload', JSON.stringify(r));
  // the output artifact goes back in, as the orchestrator hands a made file to another tool
  r = await ocall('Invoke', { tool_name: 'node-tools.read_attachments', args_json: enc({ attachments: [{ capability_artifact_id: outId }] }) }, token);
  try {
    JSON.parse(r.res.result_json.toString()).files[0].text === 'made by the tool'
      ? ok('an output artifact attached to a later call') : bad('output back in', JSON.stringify(r));
  } catch (e) { bad('output back in', `${e} ${JSON.stringify(r)}`); }
  // a Selu tool speaking the seed's contract has no artifacts: refused, naming why
  r = await ocall('Invoke', { tool_name: 'node-seed.read_attachments', args_json: enc({ attachments: [entry] }) }, token);
  r.res && /speaks the seed's CapabilityService, which has no artifacts/.test(r.res.error)
    ? ok('attachments to a Selu tool of the seed\'s contract: a clear error') : bad('seed attachments', JSON.stringify(r));
  // another user's token: not found, whatever the id
  r = await download(outId, other);
  !r.err && r.chunks.length === 1 && /not found or expired/.test(r.chunks[0].error) && r.chunks[0].data.length === 0
    ? ok('another user cannot download it') : bad('other user download', JSON.stringify(r));
  r = await ocall('Invoke', { tool_name: 'node-tools.read_attachments', args_json: enc({ attachments: [entry] }) }, other);
  r.res && /attachments\[0\]: artifact capsule-artifact-[0-9a-f]+ not found or expired/.test(r.res.error)
    ? ok('another user cannot attach it') : bad('other user attach', JSON.stringify(r));
  r = await download('../' + id, token);
  r.chunks.length === 1 && /not found/.test(r.chunks[0].error) ? ok('an id of another form: not found') : bad('bad id', JSON.stringify(r));
  // at once: each upload its own id and bytes
  const many = await Promise.all(Array.from({ length: 6 }, (_, i) =>
    upload([{ filename: `m${i}.txt`, data: Buffer.from(`n${i}`.repeat(1000 * (i + 1))) }], token)));
  const ids = many.map((x) => x.res && x.res.capability_artifact_id);
  const back = await Promise.all(ids.map((x) => download(x, token)));
  new Set(ids).size === 6 && back.every((x, i) => Buffer.concat(x.chunks.map((c) => c.data)).toString() === `n${i}`.repeat(1000 * (i + 1)))
    ? ok('concurrent uploads: each its own id and bytes') : bad('concurrent uploads', JSON.stringify(ids));
  // bytes that are not an UploadInputArtifactChunk: INVALID_ARGUMENT
  const raw = new grpc.Client(target, grpc.credentials.createInsecure());
  r = await new Promise((resolve) => {
    const s = raw.makeClientStreamRequest('/selu.capability.v1.Capability/UploadInputArtifact', (b) => b, (b) => b,
      meta(token), { deadline: Date.now() + 60000 }, (err, res) => resolve({ err, res }));
    s.write(Buffer.from([0x0a, 0x05, 0x61]));
    s.end();
  });
  raw.close();
  r.err && r.err.code === grpc.status.INVALID_ARGUMENT ? ok('a chunk that is not one: INVALID_ARGUMENT') : bad('malformed chunk', JSON.stringify(r));
  // a client that gives up: nothing half-written kept (the shell looks)
  await new Promise((resolve) => {
    const s = orch.UploadInputArtifact(meta(token), { deadline: Date.now() + 60000 }, () => resolve());
    s.write({ filename: 'gave-up.txt', data: Buffer.alloc(100000, 65) });
    setTimeout(() => s.cancel(), 200);
  });
  // bounded: past 32 MiB the upload is refused, nothing kept
  const big = Buffer.alloc(256 << 10, 120);
  r = await upload([{ filename: 'big.bin' }, ...Array.from({ length: 130 }, () => ({ data: big }))], token);
  r.res && !r.res.capability_artifact_id && /larger than/.test(r.res.error)
    ? ok('an upload past the bound is refused') : bad('big upload', JSON.stringify(r && (r.err || { ...r.res })));
  finish();
}
if (mode === 'expired') { // the shell aged the artifact's record: gone
  const r = await download(process.env.ARTIFACT_ID, token);
  r.chunks.length === 1 && /not found or expired/.test(r.chunks[0].error) ? ok('an expired artifact is not found') : bad('expired', JSON.stringify(r));
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
r = await download('x', token);
!r.err && r.chunks.length === 1 && r.chunks[0].done && /not found or expired/.test(r.chunks[0].error)
  ? ok('an unknown artifact: one chunk with the error') : bad('unknown artifact', JSON.stringify(r));
r = await download('x', null);
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('artifact download needs a token') : bad('download no-token', JSON.stringify(r));
r = await upload([{ filename: 'a.txt', data: Buffer.from('a') }], null);
r.err && r.err.code === grpc.status.UNAUTHENTICATED ? ok('artifact upload needs a token') : bad('upload no-token', JSON.stringify(r));
r = await upload([{ filename: 'a.txt', mime_type: 'text/plain', data: Buffer.from('abc') }], token);
r = await ocall('Invoke', { tool_name: 'talk.say', args_json: enc({ text: 'x', attachments: [{ capability_artifact_id: r.res && r.res.capability_artifact_id }] }) }, token);
r.res && /is not a Selu capability: it takes no attachments/.test(r.res.error)
  ? ok('attachments to a tool that is not Selu: a clear error') : bad('attachments to non-Selu', JSON.stringify(r));
finish();
