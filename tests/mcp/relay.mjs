// The relay's edges that the conformance suite does not reach, through
// `capsule mcp --capability conformance` on stdio (examples/mcp-conformance
// sandboxed): a server's requests refused when the client did not declare
// what they need, sampling and elicitation answered (in a 2026-07-28
// request: input_required, then the retry), progress only for a
// token, logging/setLevel reaching the server, a server's JSON-RPC error
// passed on, cancellation while the server waits on the client, and the
// audit of it all. Prints "ok NAME" or "FAIL NAME: why"; exits 1 on a failure.
// Usage: node relay.mjs CAPSULE CAPS STATE [WRAPPER...]
import { execFileSync } from 'node:child_process';
import { utimesSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const {
  CallToolResultSchema,
  ResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ProgressNotificationSchema
} = require('@modelcontextprotocol/sdk/types.js');

const [capsule, caps, state, ...wrapper] = process.argv.slice(2);
let failed = 0;
const check = (name, cond, why) => {
  if (cond) console.log(`ok ${name}`);
  else {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
};
const text = (r) => (r.content || []).map((c) => c.text || '').join('\n');

async function connect(capabilities, only = ['--capability', 'conformance']) {
  const all = [...wrapper, capsule, 'mcp', '--caps', caps, '--state', state, ...only];
  const transport = new StdioClientTransport({ command: all[0], args: all.slice(1), env: { ...process.env }, stderr: 'inherit' });
  const client = new Client({ name: 'capsule-relay-test', version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return client;
}

let c;
// past the bound on warm servers (CAPSULE_MCP_MAX_WARM=0): each call its own server
process.env.CAPSULE_MCP_MAX_WARM = '0';
c = await connect({});
const servedNow = async () => (await c.callTool({ name: 'served_calls', arguments: {} })).structuredContent || {};
const cold1 = await servedNow();
const cold2 = await servedNow();
check('bounded-cold-past-the-bound', cold1.calls === 1 && cold2.calls === 1 && cold1.instance !== cold2.instance,
  `${JSON.stringify(cold1)} ${JSON.stringify(cold2)}`);
await c.close();
delete process.env.CAPSULE_MCP_MAX_WARM;

// a client that declares nothing: the server's requests are refused at once
c = await connect({});
let r = await c.callTool({ name: 'test_sampling', arguments: { prompt: 'hi' } });
check('sampling-undeclared-refused', r.isError === true && /sampling/i.test(text(r)), JSON.stringify(r));
r = await c.callTool({ name: 'test_elicitation', arguments: { message: 'who?' } });
check('elicitation-undeclared-refused', r.isError === true && /elicit/i.test(text(r)), JSON.stringify(r));
const progress = [];
r = await c.request(
  { method: 'tools/call', params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 7 } } },
  CallToolResultSchema,
  { onprogress: (p) => progress.push(p) }
);
check(
  'progress-relayed-unchanged',
  progress.map((p) => `${p.progress}/${p.total}`).join(',') === '0/100,50/100,100/100',
  JSON.stringify(progress)
);
let stray = 0; // the SDK adds a token of its own when given onprogress: none here
c.setNotificationHandler(ProgressNotificationSchema, () => stray++); // (replaces the SDK's own)
r = await c.callTool({ name: 'test_tool_with_progress', arguments: {} });
check('no-token-no-progress', stray === 0 && !r.isError, `${stray} notifications`);
const logs = [];
c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
await c.setLoggingLevel('error');
await c.callTool({ name: 'test_tool_with_logging', arguments: {} });
check('set-level-error-filters-info', logs.length === 0, JSON.stringify(logs));
await c.setLoggingLevel('debug');
await c.callTool({ name: 'test_tool_with_logging', arguments: {} });
check('set-level-debug-relays-logs', logs.length === 3 && logs[0].data === 'Tool execution started', JSON.stringify(logs));
try {
  await c.readResource({ uri: 'test://no-such-resource' });
  check('server-error-passed-on', false, 'no error');
} catch (e) {
  check('server-error-passed-on', e.code === -32002 && /no-such-resource/.test(e.message), `${e.code} ${e.message}`);
}
// subscriptions (their updates between calls: tests/mcp/warm_watch.sh)
try {
  await c.subscribeResource({ uri: 'test://watched-resource' });
  await c.unsubscribeResource({ uri: 'test://watched-resource' });
  check('subscribe-and-unsubscribe', true, '');
} catch (e) {
  check('subscribe-and-unsubscribe', false, `${e.code} ${e.message}`);
}
try {
  await c.subscribeResource({});
  check('subscribe-needs-uri', false, 'accepted');
} catch (e) {
  check('subscribe-needs-uri', e.code === -32602, `${e.code} ${e.message}`);
}
// the server is kept warm between calls, and started anew after it exits
const served = async () => (await c.callTool({ name: 'served_calls', arguments: {} })).structuredContent || {};
const s1 = await served();
const s2 = await served();
check('warm-between-calls', s1.instance && s1.instance === s2.instance && s2.calls === s1.calls + 1, `${JSON.stringify(s1)} ${JSON.stringify(s2)}`);
r = await c.callTool({ name: 'exit_server', arguments: {} });
check('server-exit-fails-the-call', r.isError === true, JSON.stringify(r));
const s3 = await served();
check('restarted-after-exit', s3.instance && s3.instance !== s2.instance && s3.calls === 1, JSON.stringify(s3));
// a server that floods: the call ends, what is relayed is bounded (4 MiB a call)
let flooded = 0;
c.setNotificationHandler(LoggingMessageNotificationSchema, () => flooded++);
await c.setLoggingLevel('debug');
r = await c.callTool({ name: 'flood_logs', arguments: {} });
check('flood-bounded', text(r) === 'flooded' && flooded > 1000 && flooded < 4200, `${flooded} relayed, ${JSON.stringify(r).slice(0, 200)}`);
r = await c.callTool({ name: 'test_simple_text', arguments: {} });
check('serves-after-flood', text(r) === 'This is a simple text response for testing.', JSON.stringify(r));
// a change in the package (its keeper watches the tree): the next calls get a new server
const old = await served();
const now = new Date();
utimesSync(`${caps}/conformance/server.mjs`, now, now);
let fresh = old;
for (let i = 0; i < 600 && fresh.instance === old.instance; i++) { // generous: a loaded ASan build
  await new Promise((res) => setTimeout(res, 100));
  fresh = await served();
}
check('package-change-new-server', fresh.instance && fresh.instance !== old.instance, `${JSON.stringify(old)} ${JSON.stringify(fresh)}`);
await c.close();

// a client that samples and elicits
c = await connect({ sampling: {}, elicitation: {} });
c.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
  role: 'assistant',
  model: 'test',
  content: { type: 'text', text: `echo ${req.params.messages[0].content.text}` }
}));
c.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));
r = await c.callTool({ name: 'test_sampling', arguments: { prompt: 'ping' } });
check('sampling-answered', text(r) === 'LLM response: echo ping', JSON.stringify(r));
r = await c.callTool({ name: 'test_elicitation', arguments: { message: 'who?' } });
check('elicitation-declined', /action=decline/.test(text(r)), JSON.stringify(r));
// the same calls in the 2026-07-28 form (multi round-trip requests): no
// request from server to client on the call's stream; the call answers
// input_required carrying the server's request, held while the server
// waits, and the retry with the client's response and the requestState
// gets the server's result (tests/mcp/relay26.mjs: the same over HTTP)
let asked26 = 0;
c.setRequestHandler(CreateMessageRequestSchema, async () => {
  asked26++;
  return { role: 'assistant', model: 'test', content: { type: 'text', text: 'asked' } };
});
const v26 = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
const meta26 = { ...v26, 'io.modelcontextprotocol/clientCapabilities': { sampling: {}, elicitation: {} } };
const call26 = (name, args, extra = {}, meta = meta26) =>
  c.request({ method: 'tools/call', params: { name, arguments: args, _meta: meta, ...extra } }, ResultSchema);
const only = (x) => Object.keys(x?.inputRequests || {});
r = await call26('test_sampling', { prompt: 'new' });
let [k26] = only(r);
check('sampling-2026-input-required', asked26 === 0 && r.resultType === 'input_required' && only(r).length === 1 &&
  r.inputRequests[k26].method === 'sampling/createMessage' &&
  r.inputRequests[k26].params?.messages?.[0]?.content?.text === 'new' && /^h1\./.test(r.requestState || ''), JSON.stringify(r));
const state26 = r.requestState;
const sampled = { role: 'assistant', model: 'test', content: { type: 'text', text: 'answered' } };
r = await call26('test_sampling', { prompt: 'new' }, { inputResponses: { [k26]: sampled }, requestState: state26 });
check('sampling-2026-retry-answered', asked26 === 0 && r.resultType === 'complete' && text(r) === 'LLM response: answered',
  JSON.stringify(r));
try {
  r = await call26('test_sampling', { prompt: 'new' }, { inputResponses: { [k26]: sampled }, requestState: state26 });
  check('sampling-2026-state-single-use', false, JSON.stringify(r));
} catch (e) {
  check('sampling-2026-state-single-use', e.code === -32602 && /no call waiting/.test(e.message), `${e.code} ${e.message}`);
}
r = await call26('test_elicitation', { message: 'who?' });
[k26] = only(r);
check('elicitation-2026-input-required', r.resultType === 'input_required' &&
  r.inputRequests[k26]?.method === 'elicitation/create' && r.inputRequests[k26].params?.message === 'who?', JSON.stringify(r));
r = await call26('test_elicitation', { message: 'who?' }, {
  inputResponses: { [k26]: { action: 'accept', content: { username: 'ada', email: 'ada@example.org' } } },
  requestState: r.requestState
});
check('elicitation-2026-retry-accepted', /action=accept, content=\{"username":"ada","email":"ada@example.org"\}/.test(text(r)),
  JSON.stringify(r));
// a prompts/get whose server samples, a resources/read whose server
// elicits: held the same way on stdio (the retry on the same connection)
const req26 = (method, params, extra = {}) =>
  c.request({ method, params: { ...params, _meta: meta26, ...extra } }, ResultSchema);
const P26 = { name: 'test_prompt_with_sampling', arguments: { topic: 'dogs' } };
r = await req26('prompts/get', P26);
[k26] = only(r);
check('prompt-2026-input-required', asked26 === 0 && r.resultType === 'input_required' &&
  r.inputRequests[k26]?.params?.messages?.[0]?.content?.text === 'Write a prompt about dogs', JSON.stringify(r));
r = await req26('prompts/get', P26, { inputResponses: { [k26]: sampled }, requestState: r.requestState });
check('prompt-2026-retry-answered', asked26 === 0 && r.resultType === 'complete' &&
  r.messages?.[0]?.content?.text === 'Sampled prompt: answered', JSON.stringify(r));
r = await req26('resources/read', { uri: 'test://elicited-resource' });
[k26] = only(r);
check('resource-2026-input-required', r.resultType === 'input_required' && r.inputRequests[k26]?.method === 'elicitation/create',
  JSON.stringify(r));
const rstate26 = r.requestState;
try {
  r = await req26('resources/read', { uri: 'test://static-text' }, { inputResponses: {}, requestState: rstate26 });
  check('resource-2026-other-resource-refused', false, JSON.stringify(r));
} catch (e) {
  check('resource-2026-other-resource-refused', e.code === -32602, `${e.code} ${e.message}`);
}
r = await req26('resources/read', { uri: 'test://elicited-resource' }, {
  inputResponses: { [k26]: { action: 'accept', content: { greeting: 'woof' } } },
  requestState: rstate26
});
check('resource-2026-retry-answered', r.resultType === 'complete' && r.contents?.[0]?.text === 'Elicited resource: woof',
  JSON.stringify(r));
// a request whose _meta declares nothing: the server is refused, as before
for (const [tool, args, re] of [['test_sampling', { prompt: 'new' }, /sampling/i], ['test_elicitation', { message: 'new?' }, /elicit/i]]) {
  r = await call26(tool, args, {}, v26);
  check(`${tool}-2026-undeclared-refused-to-server`, asked26 === 0 && r.isError === true && re.test(text(r)) &&
    /did not declare/.test(text(r)), `${asked26} asked; ${JSON.stringify(r)}`);
}
// cancelled while the server waits for the client's sampling answer
const beforeCancel = await served();
let asked;
const waiting = new Promise((res) => (asked = res));
c.setRequestHandler(CreateMessageRequestSchema, () => {
  asked();
  return new Promise(() => {}); // never answered
});
const ac = new AbortController();
const call = c.callTool({ name: 'test_sampling', arguments: { prompt: 'stop me' } }, undefined, { signal: ac.signal });
await waiting;
ac.abort('the test cancels');
try {
  await call;
  check('cancelled', false, 'the call returned');
} catch {
  check('cancelled', true);
}
const s4 = await served();
check('warm-after-cancellation', s4.instance === beforeCancel.instance, `${JSON.stringify(beforeCancel)} ${JSON.stringify(s4)}`);
await c.close();

// every capability served: each MCP server's prompts and resources gathered
c = await connect({}, []);
const plist = (await c.listPrompts()).prompts;
const pa = plist.find((p) => p.name === 'conformance__test_prompt_with_arguments');
check('gathered-prompts', pa && pa._meta?.['io.capsule/capability'] === 'conformance', JSON.stringify(plist.map((p) => p.name)));
const pg = await c.getPrompt({ name: 'conformance__test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } });
check('gathered-prompt-get', /arg1='a', arg2='b'/.test(pg.messages?.[0]?.content?.text || ''), JSON.stringify(pg));
const rlist = (await c.listResources()).resources;
check('gathered-resources', rlist.some((x) => x.uri === 'test://static-text' && x._meta?.['io.capsule/capability'] === 'conformance'), JSON.stringify(rlist.map((x) => x.uri)));
// conformance and paged (the same server) both list it: read from neither
// (a server must not take another's reads; tests/review13/gather_capture.sh
// reads a URI one server names)
try {
  await c.readResource({ uri: 'test://static-text' });
  check('gathered-resource-read-two-servers', false, 'read');
} catch (e) {
  check('gathered-resource-read-two-servers', e.code === -32002, `${e.code} ${e.message}`);
}
try {
  await c.readResource({ uri: 'test://not-listed' });
  check('gathered-unknown-resource', false, 'read');
} catch (e) {
  check('gathered-unknown-resource', e.code === -32002, `${e.code} ${e.message}`);
}
// the paged server (--page-size 2): every page gathered into one answer
const paged = (items) => items.filter((x) => x._meta?.['io.capsule/capability'] === 'paged');
check('gathered-all-pages-resources', paged(rlist).length === 4 && rlist.every((x) => !x.nextCursor), JSON.stringify(paged(rlist).map((x) => x.uri)));
const pagedPrompts = paged(plist);
check('gathered-all-pages-prompts', pagedPrompts.length === plist.filter((p) => p._meta?.['io.capsule/capability'] === 'conformance').length && pagedPrompts.length > 2,
  JSON.stringify(pagedPrompts.map((p) => p.name)));
// a URI no list names, read through the template it fits
try {
  await c.readResource({ uri: 'test://template/7/data' });
  check('gathered-template-read-unlisted', false, 'read before resources/templates/list');
} catch (e) {
  check('gathered-template-read-unlisted', e.code === -32002, `${e.code} ${e.message}`);
}
const tlist = (await c.listResourceTemplates()).resourceTemplates;
check('gathered-templates', tlist.some((x) => x.uriTemplate === 'test://template/{id}/data' && x._meta?.['io.capsule/capability'] === 'paged'), JSON.stringify(tlist));
try { // both servers' templates fit it: read from neither
  await c.readResource({ uri: 'test://template/7/data' });
  check('gathered-template-read-two-servers', false, 'read');
} catch (e) {
  check('gathered-template-read-two-servers', e.code === -32002, `${e.code} ${e.message}`);
}
// completion routed by its ref: a gathered prompt (renamed back) and a template
const cp = await c.complete({ ref: { type: 'ref/prompt', name: 'paged__test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'par' } });
check('gathered-complete-prompt', JSON.stringify(cp.completion?.values) === '["paris","park","party"]', JSON.stringify(cp));
try { // a template both servers list: completed by neither
  await c.complete({ ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: 'pa' } });
  check('gathered-complete-template-two-servers', false, 'completed');
} catch (e) {
  check('gathered-complete-template-two-servers', e.code === -32602, `${e.code} ${e.message}`);
}
try {
  await c.complete({ ref: { type: 'ref/prompt', name: 'nobody__x' }, argument: { name: 'a', value: '' } });
  check('gathered-complete-unknown', false, 'completed');
} catch (e) {
  check('gathered-complete-unknown', e.code === -32602, `${e.code} ${e.message}`);
}
await c.close();

// the audit: each request one record, the cancelled call too
const audit = () =>
  JSON.parse(execFileSync(wrapper[0] ?? capsule, [...wrapper.slice(1), ...(wrapper.length ? [capsule] : []), 'audit', '--json', '--state', state]));
let recs = [];
for (let i = 0; i < 600; i++) {
  recs = audit();
  if (recs.some((x) => x.tool === 'test_sampling' && x.outcome !== 'ok' && x.decision === 'allow')) break;
  await new Promise((res) => setTimeout(res, 100));
}
check(
  'cancelled-call-audited',
  recs.some((x) => x.tool === 'test_sampling' && x.outcome !== 'ok' && x.decision === 'allow'),
  JSON.stringify(recs.filter((x) => x.tool === 'test_sampling'))
);
check(
  'resources-read-audited',
  recs.some((x) => x.tool === 'resources/read' && x.decision === 'mcp-request'),
  JSON.stringify(recs.slice(-3))
);
check(
  'gathered-complete-audited-on-its-server',
  recs.some((x) => x.tool === 'completion/complete' && x.capability === 'paged') &&
    recs.filter((x) => x.capability === 'paged' && x.tool === 'resources/list').length === 2,
  JSON.stringify(recs.filter((x) => x.capability === 'paged').map((x) => x.tool))
);
process.exit(failed ? 1 : 0);
