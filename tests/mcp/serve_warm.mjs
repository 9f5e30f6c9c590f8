// The warm path of `capsule serve` (docs/serve.md): a call a warm
// third-party MCP server answers runs in serve's own process (a thread on
// its one state connection), not in a child per call. Through `serve
// --capability conformance --mcp-http` (conformance.sh starts it), with
// the SDK's HTTP client: warm calls served by one server process; a call
// waiting on the client's sampling answer has no process of its own under
// serve; cancelling it ends it and audits it; the warm server serves on;
// a session closed mid-call is audited too; the audit chain verifies.
// Prints "ok NAME" or "FAIL NAME: why"; exits 1 on a failure.
// Usage: node serve_warm.mjs URL TOKEN SERVE_PID CAPSULE STATE [WRAPPER...]
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { CreateMessageRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

const [url, token, servePid, capsule, state, ...wrapper] = process.argv.slice(2);
let failed = 0;
const check = (name, cond, why) => {
  if (cond) console.log(`ok ${name}`);
  else {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
};
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

async function connect(capabilities) {
  const client = new Client({ name: 'capsule-serve-warm-test', version: '1.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return { client, transport };
}

// serve's child processes (a call in a child would be one)
function children() {
  const out = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      if (ppid === servePid) out.push(`${p} ${stat.slice(stat.indexOf('('), stat.lastIndexOf(')') + 1)}`);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const cmd = (...args) => {
  const all = [...wrapper, capsule, ...args];
  return execFileSync(all[0], all.slice(1), { encoding: 'utf8' });
};
const audit = () => JSON.parse(cmd('audit', '--json', '--state', state));
// polls (generous: a loaded machine, an ASan build) until cond holds
async function until(cond, tries = 300) {
  for (let i = 0; i < tries; i++) {
    const v = await cond();
    if (v) return v;
    await sleep(100);
  }
  return null;
}

let { client: c } = await connect({ sampling: {} });
const served = async () => (await c.callTool({ name: 'served_calls', arguments: {} })).structuredContent || {};
const s1 = await served(); // the first may start the server (in a child)
const s2 = await served();
const s3 = await served();
check('warm-through-serve', s2.instance && s2.instance === s3.instance && s3.calls === s2.calls + 1, `${JSON.stringify(s1)} ${JSON.stringify(s2)} ${JSON.stringify(s3)}`);

// a call held by the server's sampling request: it runs, and serve has no child for it
let asked;
const waiting = new Promise((res) => (asked = res));
c.setRequestHandler(CreateMessageRequestSchema, () => {
  asked();
  return new Promise(() => {}); // never answered
});
const earlier = new Set(children()); // anything of the suite's still ending is not this call's
const ac = new AbortController();
const call = c.callTool({ name: 'test_sampling', arguments: { prompt: 'held' } }, undefined, { signal: ac.signal, timeout: 600000 });
call.catch(() => {});
await waiting;
const kids = children().filter((k) => !earlier.has(k));
check('warm-call-in-serve-process', kids.length === 0, `serve's children while the call runs: ${kids.join(', ')}`);
const before = audit().length;
ac.abort('the test cancels');
const rec = await until(() => audit().slice(before).find((x) => x.tool === 'test_sampling'));
check('warm-cancel-audited', rec && rec.outcome !== 'ok' && rec.decision === 'allow', JSON.stringify(rec));
const s4 = await served();
check('warm-after-cancel', s4.instance === s3.instance, `${JSON.stringify(s3)} ${JSON.stringify(s4)}`);

// the session ends (DELETE) while a call waits on the client: audited, serve serves on
const held = new Promise((res) => (asked = res));
const n2 = audit().length;
const call2 = c.callTool({ name: 'test_sampling', arguments: { prompt: 'left' } }, undefined, { timeout: 600000 });
call2.catch(() => {});
await held;
await c.transport.terminateSession().catch(() => {});
await c.close().catch(() => {});
const rec2 = await until(() => audit().slice(n2).find((x) => x.tool === 'test_sampling'));
check('warm-session-end-audited', rec2 && rec2.outcome !== 'ok', JSON.stringify(rec2));
({ client: c } = await connect({}));
const s5 = await served();
check('serves-after-session-end', s5.instance === s3.instance, `${JSON.stringify(s3)} ${JSON.stringify(s5)}`);
await c.close();

try {
  cmd('audit', 'verify', '--state', state);
  check('audit-chain-verifies', true);
} catch (e) {
  check('audit-chain-verifies', false, `${e.status} ${e.stdout} ${e.stderr}`);
}
process.exit(failed ? 1 : 0);
