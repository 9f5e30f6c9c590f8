// The relay's edges that the conformance suite does not reach, through
// `capsule mcp --capability conformance` on stdio (examples/mcp-conformance
// sandboxed): a server's requests refused when the client did not declare
// what they need, sampling and elicitation answered, progress only for a
// token, logging/setLevel reaching the server, a server's JSON-RPC error
// passed on, cancellation while the server waits on the client, and the
// audit of it all. Prints "ok NAME" or "FAIL NAME: why"; exits 1 on a failure.
// Usage: node relay.mjs CAPSULE CAPS STATE [WRAPPER...]
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const {
  CallToolResultSchema,
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

async function connect(capabilities) {
  const all = [...wrapper, capsule, 'mcp', '--caps', caps, '--state', state, '--capability', 'conformance'];
  const transport = new StdioClientTransport({ command: all[0], args: all.slice(1), env: { ...process.env }, stderr: 'inherit' });
  const client = new Client({ name: 'capsule-relay-test', version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return client;
}

// a client that declares nothing: the server's requests are refused at once
let c = await connect({});
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
try {
  await c.subscribeResource({ uri: 'test://watched-resource' });
  check('subscribe-not-offered', false, 'accepted');
} catch (e) {
  check('subscribe-not-offered', e.code === -32601, `${e.code} ${e.message}`);
}
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
// cancelled while the server waits for the client's sampling answer
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
await c.close();

// the audit: each request one record, the cancelled call too
const audit = () =>
  JSON.parse(execFileSync(wrapper[0] ?? capsule, [...wrapper.slice(1), ...(wrapper.length ? [capsule] : []), 'audit', '--json', '--state', state]));
let recs = [];
for (let i = 0; i < 100; i++) {
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
process.exit(failed ? 1 : 0);
