// Attempts on held 2026-07-28 calls (src/front/mcp_hold.c) past what
// tests/mcp/relay26.mjs checks. Prints "blocked NAME", "ok NAME" or
// "WORKS NAME: why"; exits 1 when an attack works.
// Usage: node hold_probes.mjs URL ALICE_TOKEN BOB_TOKEN SERVE_PID CAPSULE STATE
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

const [url, alice, bob, spid, capsule, state] = process.argv.slice(2);
const V = '2026-07-28';
let nextId = 1;
let failed = 0;
const say = (what, name, cond, why) => {
  if (cond) console.log(`${what} ${name}`);
  else {
    failed++;
    console.log(`WORKS ${name}: ${why}`);
  }
};
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const audit = () => JSON.parse(execFileSync(capsule, ['audit', '--json', '--state', state], { encoding: 'utf8' }));
const meta = (caps) => ({
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 'hold_probes.mjs', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': caps
});

async function post(msg, tok, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${tok}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...headers
    },
    body: JSON.stringify(msg)
  });
  const text = await res.text();
  const out = { status: res.status, session: res.headers.get('mcp-session-id') };
  if (!(res.headers.get('content-type') || '').includes('text/event-stream')) {
    try {
      return { ...out, ...JSON.parse(text) };
    } catch {
      return { ...out, text };
    }
  }
  for (const ev of text.split('\n\n')) {
    const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (data && JSON.parse(data).id === msg.id) return { ...out, ...JSON.parse(data) };
  }
  return { ...out, text };
}
const h26 = (name) => ({ 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': name });
const S = { sampling: {} };
const call = (tok, prompt, more = {}, headers = h26('test_sampling')) =>
  post({ jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name: 'test_sampling', arguments: { prompt }, _meta: meta(S), ...more } }, tok, headers);
const text = (m) => m?.result?.content?.map((c) => c.text || '').join('\n') ?? JSON.stringify(m);
const keys = (m) => Object.keys(m?.result?.inputRequests || {});
const held = (m, prompt) => m?.result?.resultType === 'input_required' &&
  JSON.stringify(m.result.inputRequests).includes(JSON.stringify(prompt)) && /^h1\./.test(m.result.requestState || '');
const sampled = (t) => ({ role: 'assistant', model: 'test', content: { type: 'text', text: t } });
const answer = (first, t) => ({ inputResponses: { [keys(first)[0]]: sampled(t) }, requestState: first.result.requestState });
// a 2025-11-25 session of tok's
async function session(tok) {
  const m = await post({ jsonrpc: '2.0', id: nextId++, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'p', version: '1' } } }, tok);
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, tok,
    { 'Mcp-Session-Id': m.session, 'MCP-Protocol-Version': '2025-11-25' });
  return m.session;
}
const count = (dir) => { try { return readdirSync(dir).length; } catch { return -1; } };

// 1. alice's held call, retried in one of her 2025 sessions: refused (the
// stream would move into a session with its own state), the call held still
let first = await call(alice, 'alice secret 1');
if (!held(first, 'alice secret 1')) {
  console.log(`SKIP: no call held: ${JSON.stringify(first)}`);
  process.exit(77);
}
const sa = await session(alice);
let m = await call(alice, 'alice secret 1', answer(first, 'via 2025'), { ...h26('test_sampling'), 'Mcp-Session-Id': sa });
say('blocked', "alice's retry in her 2025 session", !/via 2025/.test(text(m)), JSON.stringify(m));
console.log(`  (answered: ${JSON.stringify(m.error || m.result || m.status)})`);
// 2. bob's retry of alice's state, sessionless and in his own 2025 session
m = await call(bob, 'alice secret 1', answer(first, 'bob answers'));
say('blocked', "bob's sessionless retry of alice's state", m?.error?.code === -32602 && !/bob answers/.test(text(m)), JSON.stringify(m));
const sb = await session(bob);
m = await call(bob, 'alice secret 1', answer(first, 'bob answers'), { ...h26('test_sampling'), 'Mcp-Session-Id': sb });
say('blocked', "bob's retry of alice's state in his 2025 session", !/bob answers/.test(text(m)), JSON.stringify(m));
// alice's session named by bob
m = await call(bob, 'alice secret 1', answer(first, 'bob answers'), { ...h26('test_sampling'), 'Mcp-Session-Id': sa });
say('blocked', "bob's retry in alice's 2025 session", m.status === 403 && !/bob answers/.test(text(m)), JSON.stringify(m));
// none of them consumed or cancelled it
m = await call(alice, 'alice secret 1', answer(first, 'alice answers'));
say('ok', "alice's own retry still answered", text(m) === 'LLM response: alice answers', JSON.stringify(m));

// 3. bob's call while alice's is held: bob's input request is his own
first = await call(alice, 'alice secret 2');
const bobs = await call(bob, 'bob prompt');
say('blocked', "alice's server request given to bob's call",
  held(bobs, 'bob prompt') && !JSON.stringify(bobs).includes('alice secret'), JSON.stringify(bobs));
m = await call(bob, 'bob prompt', answer(bobs, 'bob done'));
say('ok', "bob's own call answered", text(m) === 'LLM response: bob done', JSON.stringify(m));

// 4. two retries at once with one state: one is answered, the other refused
const both = await Promise.all([call(alice, 'alice secret 2', answer(first, 'one')),
  call(alice, 'alice secret 2', answer(first, 'two'))]);
const answered = both.filter((x) => /^LLM response: (one|two)$/.test(text(x))).length;
const refused = both.filter((x) => x?.error?.code === -32602).length;
say('blocked', 'a state used twice at once', answered === 1 && refused === 1, JSON.stringify(both));

// 5. clients that never come back, twice 8: serve's descriptors and threads
// do not grow from the first round to the second; each call audited once
const fds = `/proc/${spid}/fd`, tasks = `/proc/${spid}/task`;
const n0 = audit().length;
const level = [];
for (let round = 0; round < 2; round++) {
  const hs = [];
  for (let i = 0; i < 8; i++) hs.push(await call(alice, `never ${round} ${i}`));
  if (!hs.every((x, i) => held(x, `never ${round} ${i}`))) {
    say('ok', `round ${round}: 8 held`, false, JSON.stringify(hs.map((x) => x?.result?.resultType || x?.error)));
    break;
  }
  let gone = 0;
  for (let i = 0; i < 600 && gone < 8 * (round + 1); i++) { // generous: a loaded machine, an ASan build
    await sleep(200);
    gone = audit().slice(n0).filter((x) => x.tool === 'test_sampling' && /cancelled/.test(x.outcome)).length;
  }
  say('ok', `round ${round}: each held call cancelled at its deadline`, gone === 8 * (round + 1), `${gone} cancelled`);
  await sleep(1500); // the threads joined, the connections back in the pool
  level.push([count(fds), count(tasks)]);
}
console.log(`  (descriptors, threads after each round: ${JSON.stringify(level)})`);
if (level.length === 2)
  say('blocked', 'descriptors or threads left by abandoned held calls',
    level[1][0] <= level[0][0] + 2 && level[1][1] <= level[0][1] + 1, `fds, threads per round: ${JSON.stringify(level)}`);
const rows = audit().slice(n0).filter((x) => x.tool === 'test_sampling');
say('ok', 'each abandoned call audited once', rows.length === 16, `${rows.length} rows for 16 calls`);
process.exit(failed ? 1 : 0);
