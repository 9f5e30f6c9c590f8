// Drives `capsule mcp` with the official MCP TypeScript SDK client
// (StdioClientTransport), and with raw lines where the SDK would refuse to
// send what a broken client sends. Prints "ok NAME" or "FAIL NAME: why"
// per check; exits 1 when any failed.
// Usage: node client.mjs CAPSULE CAPS STATE [WRAPPER...]
//   WRAPPER: argv prefix to run capsule under (e.g. setpriv ... as nobody)
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { ElicitRequestSchema, McpError, ToolListChangedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');

const [capsule, caps, state, ...wrapper] = process.argv.slice(2);
let failed = 0;
const ok = (name) => console.log(`ok ${name}`);
const fail = (name, why) => { failed++; console.log(`FAIL ${name}: ${why}`); };
const check = (name, cond, why) => (cond ? ok(name) : fail(name, why));

function argv(extra = []) {
  const all = [...wrapper, capsule, 'mcp', '--caps', caps, '--state', state, ...extra];
  return { command: all[0], args: all.slice(1) };
}

async function connect(capabilities = {}, extra = []) {
  const { command, args } = argv(extra);
  const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
  const client = new Client({ name: 'capsule-test', version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return client;
}

async function listAll(client) {
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
    pages++;
  } while (cursor && pages < 100);
  return { tools, pages };
}

const text = (r) => (r.content && r.content[0] && r.content[0].text) || '';

async function basics() {
  const client = await connect();
  check('negotiated-version', client.getServerVersion()?.name === 'capsule', 'serverInfo.name is not capsule');
  const { tools, pages } = await listAll(client);
  const names = tools.map((t) => t.name);
  check('list-has-allowed', names.includes('wordcount__dispatch') && names.includes('slow__dispatch'), names.join(','));
  check('list-has-ask', names.includes('asker__dispatch'), names.join(','));
  check('blocked-not-listed', !names.includes('blocked__dispatch'), names.join(','));
  check('names-valid', names.every((n) => /^[A-Za-z0-9_-]{1,64}$/.test(n)), names.filter((n) => !/^[A-Za-z0-9_-]{1,64}$/.test(n)).join(','));
  check('names-unique', new Set(names).size === names.length, 'duplicates');
  check('paginated', pages >= 2 && names.filter((n) => n.startsWith('many__fn')).length === 120, `pages ${pages}`);
  const clash = names.filter((n) => n.startsWith('many__do_it'));
  check('collision-suffixed', clash.length === 2 && clash.every((n) => /^many__do_it_[0-9a-f]{6}$/.test(n)), clash.join(','));
  const long = names.filter((n) => n.startsWith('many__long_'));
  check('long-name-cut', long.length === 1 && long[0].length === 64 && /_[0-9a-f]{6}$/.test(long[0]), long.join(','));
  if (long.length === 1) {
    const lr = await client.callTool({ name: long[0], arguments: {} });
    check('long-name-resolves', !lr.isError && lr.structuredContent?.which === 'long', JSON.stringify(lr));
  }
  const wc = tools.find((t) => t.name === 'wordcount__dispatch');
  check('input-schema', wc && wc.inputSchema.type === 'object' && wc.inputSchema.required?.includes('text'), JSON.stringify(wc?.inputSchema));
  check('annotations', wc && wc.annotations?.readOnlyHint === true && wc.annotations?.openWorldHint === false, JSON.stringify(wc?.annotations));
  const again = (await listAll(client)).tools.map((t) => t.name);
  check('deterministic-order', JSON.stringify(again) === JSON.stringify(names), 'order changed');
  // Talos prompt.md: one prompt per plugin that has one, nothing for the others
  check('prompts-declared', client.getServerCapabilities()?.prompts !== undefined, JSON.stringify(client.getServerCapabilities()));
  const prompts = (await client.listPrompts()).prompts;
  check('prompts-talos-only', prompts.length === 1 && prompts[0].name === 'many' && prompts[0].description, JSON.stringify(prompts));
  const pr = await client.getPrompt({ name: 'many' });
  check('prompt-get-text', pr.messages?.[0]?.role === 'user' && pr.messages[0].content?.text === 'Use fn001 to count.\nNever call do.it twice.\n', JSON.stringify(pr));
  try {
    await client.getPrompt({ name: 'wordcount' });
    check('prompt-unknown', false, 'a Covenant agent has no prompt');
  } catch (e) {
    check('prompt-unknown', e.code === -32602, `${e.code} ${e.message}`);
  }

  const r = await client.callTool({ name: 'wordcount__dispatch', arguments: { text: 'one two three' } });
  check('call-allowed', !r.isError && r.structuredContent?.text === '3 words', JSON.stringify(r));
  check('call-text-matches', r.content?.[0]?.type === 'text' && JSON.stringify(JSON.parse(text(r))) === JSON.stringify(r.structuredContent), text(r));
  // the suffix is the first 6 hex digits of SHA-256("CAPABILITY\0TOOL") (docs/mcp.md)
  const suffix = (tool) => createHash('sha256').update(`many\0${tool}`).digest('hex').slice(0, 6);
  for (const [tool, which] of [['do.it', 'dot'], ['do_it', 'underscore']]) {
    const name = `many__do_it_${suffix(tool)}`;
    const r2 = names.includes(name) ? await client.callTool({ name, arguments: {} }) : { isError: true };
    check(`collided-name-resolves-${which}`, !r2.isError && r2.structuredContent?.which === which, `${name}: ${JSON.stringify(r2)}`);
  }

  const bad = await client.callTool({ name: 'wordcount__dispatch', arguments: { txt: 1 } });
  check('validation-is-error', bad.isError === true && /do not match the tool's input schema/.test(text(bad)), JSON.stringify(bad));
  const blocked = await client.callTool({ name: 'blocked__dispatch', arguments: { text: 'x' } });
  check('blocked-call-refused', blocked.isError === true && /blocked by policy/.test(text(blocked)), JSON.stringify(blocked));
  const ask = await client.callTool({ name: 'asker__dispatch', arguments: { text: 'please' } });
  check('ask-without-elicitation-queues', ask.isError === true && /approval required/.test(text(ask)) && /capsule approve/.test(text(ask)), JSON.stringify(ask));
  try {
    await client.callTool({ name: 'no__such', arguments: {} });
    fail('unknown-tool', 'no error');
  } catch (e) {
    check('unknown-tool', e instanceof McpError && e.code === -32602, String(e));
  }
  try {
    await client.request({ method: 'no/such/method', params: {} }, ElicitRequestSchema);
    fail('unknown-method', 'no error');
  } catch (e) {
    check('unknown-method', e instanceof McpError && e.code === -32601, String(e));
  }
  let progress = 0;
  const slow = await client.callTool({ name: 'slow__dispatch', arguments: { text: 'x' } }, undefined, {
    onprogress: () => { progress++; },
    timeout: 60000,
  });
  check('progress-notifications', !slow.isError && progress >= 1, `progress ${progress}, ${JSON.stringify(slow)}`);
  const ac = new AbortController();
  const cancelled = client.callTool({ name: 'hang__dispatch', arguments: { text: 'x' } }, undefined, {
    signal: ac.signal,
    onprogress: () => ac.abort('enough'),
    timeout: 60000,
  });
  try {
    await cancelled;
    fail('cancel', 'the call returned');
  } catch (e) {
    check('cancel', ac.signal.aborted, String(e));
  }
  const pong = await client.ping();
  check('serves-after-cancel', pong && typeof pong === 'object', JSON.stringify(pong));
  await client.close();
}

async function elicitation() {
  for (const [action, expect] of [['accept', false], ['decline', true]]) {
    const client = await connect({ elicitation: {} });
    let asked = '';
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked = req.params.message;
      return { action };
    });
    const r = await client.callTool({ name: 'asker__dispatch', arguments: { text: `elicit-${action}` } });
    check(`elicit-asked-${action}`, /asker/.test(asked) && /dispatch/.test(asked) && asked.includes(`elicit-${action}`), asked);
    check(`elicit-${action}`, r.isError === expect && (expect ? /declined/.test(text(r)) : /"got"/.test(text(r))), JSON.stringify(r));
    await client.close();
  }
}

async function oneCapability() {
  const client = await connect({}, ['--capability', 'wordcount']);
  const { tools } = await listAll(client);
  check('capability-own-names', tools.length === 1 && tools[0].name === 'dispatch', tools.map((t) => t.name).join(','));
  const r = await client.callTool({ name: 'dispatch', arguments: { text: 'a b' } });
  check('capability-call', !r.isError && r.structuredContent?.text === '2 words', JSON.stringify(r));
  await client.close();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A change under --caps: the registry reloaded and the client told
// (notifications/tools/list_changed); a call in flight when its
// capability is removed finishes on the registry it started with.
async function reload() {
  const dir = path.join(caps, 'agents', 'added');
  const client = await connect();
  try {
    check('reload-list-changed-declared', client.getServerCapabilities()?.tools?.listChanged === true, JSON.stringify(client.getServerCapabilities()));
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
    const told = async (n) => {
      for (let i = 0; i < 600 && changed < n; i++) await sleep(50);
      return changed >= n;
    };
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\nIFS= read -r line\ncase $line in *slow*) sleep 2 ;; esac\nprintf \'{"added":%s}\\n\' "$line"\n', { mode: 0o755 });
    const toml = fs.readFileSync(path.join(caps, 'agents', 'asker', 'agent.toml'), 'utf8').replace(/"asker"/g, '"added"');
    fs.writeFileSync(path.join(dir, 'agent.toml'), toml);
    check('reload-told-added', await told(1), `${changed} notifications`);
    let names = (await listAll(client)).tools.map((t) => t.name);
    check('reload-lists-added', names.includes('added__dispatch') && names.includes('wordcount__dispatch'), names.join(','));
    const r = await client.callTool({ name: 'added__dispatch', arguments: { text: 'new' } });
    check('reload-calls-added', !r.isError && /"added"/.test(text(r)), JSON.stringify(r));
    const inFlight = client.callTool({ name: 'added__dispatch', arguments: { text: 'slow' } }, undefined, { timeout: 60000 });
    await sleep(500);
    fs.rmSync(dir, { recursive: true, force: true });
    check('reload-told-removed', await told(2), `${changed} notifications`);
    const done = await inFlight;
    check('reload-in-flight-finishes', !done.isError && /"added"/.test(text(done)), JSON.stringify(done));
    names = (await listAll(client)).tools.map((t) => t.name);
    check('reload-drops-removed', !names.includes('added__dispatch') && names.includes('wordcount__dispatch'), names.join(','));
    try {
      await client.callTool({ name: 'added__dispatch', arguments: { text: 'gone' } });
      fail('reload-removed-not-callable', 'the call ran');
    } catch (e) {
      check('reload-removed-not-callable', e instanceof McpError && e.code === -32602, String(e));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await client.close();
  }
}

// Raw lines: what the SDK would never send
// wait: keep stdin open until that many answers came (a call runs on)
function raw(lines, wait = 0) {
  return new Promise((resolve) => {
    const { command, args } = argv();
    const p = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const count = () => out.split('\n').filter(Boolean).length;
    p.stdout.on('data', (d) => { out += d; if (wait && count() >= wait) p.stdin.end(); });
    p.on('close', (code) => resolve({ code, answers: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)) }));
    for (const l of lines) p.stdin.write(l + '\n');
    if (!wait) p.stdin.end();
  });
}

async function malformed() {
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  const huge = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping', params: { pad: 'x'.repeat(5 << 20) } });
  const { code, answers } = await raw([
    '{"jsonrpc":"2.0","id":0,"method":"tools/list"}',
    init,
    '{this is not json',
    '[{"jsonrpc":"2.0","id":2,"method":"ping"}]',
    huge,
    '{"jsonrpc":"1.0","id":4,"method":"ping"}',
    '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}',
    '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}',
    '{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"bogus"}}',
    '{"jsonrpc":"2.0","method":"no/such/notification"}',
    '{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"1.0.0"}}',
    '{"jsonrpc":"2.0","id":8,"method":"ping"}',
  ]);
  const byId = (id) => answers.find((a) => JSON.stringify(a.id) === JSON.stringify(id));
  const codes = answers.filter((a) => a.id === null).map((a) => a.error?.code);
  check('raw-exit-0', code === 0, `exit ${code}`);
  check('before-initialize', byId(0)?.error?.code === -32600, JSON.stringify(byId(0)));
  check('parse-error', codes.includes(-32700), JSON.stringify(codes));
  check('batch-refused', codes.filter((c) => c === -32600).length >= 3, JSON.stringify(codes));
  check('huge-message', answers.some((a) => a.id === null && /at most/.test(a.error?.message || '')), 'no size error');
  check('wrong-jsonrpc', byId(4)?.error?.code === -32600, JSON.stringify(byId(4)));
  check('bad-params', byId(5)?.error?.code === -32602, JSON.stringify(byId(5)));
  check('bad-cursor', byId(6)?.error?.code === -32602, JSON.stringify(byId(6)));
  check('unsupported-version', byId(7)?.error?.code === -32602 && byId(7)?.error?.data?.supported?.includes('2025-11-25'), JSON.stringify(byId(7)));
  check('serves-after-garbage', byId(8) && byId(8).result && !byId(8).error, JSON.stringify(byId(8)));
  check('no-answer-to-notification', answers.length === 11, `${answers.length} answers`);

  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  const modern = await raw([
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: meta } }),
    JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: meta } }),
    JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'wordcount__dispatch', arguments: { text: 'a b c d' }, _meta: meta } }),
    JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } }),
    JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'asker__dispatch', arguments: { text: 'stdio' },
      _meta: { ...meta, 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } } } }),
    JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: meta } }),
    JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 6 } }),
  ], 6);
  const m = (id) => modern.answers.find((a) => a.id === id);
  check('modern-discover', m(1)?.result?.resultType === 'complete' && m(1)?.result?.supportedVersions?.includes('2026-07-28') && m(1)?.result?.serverInfo?.name === 'capsule', JSON.stringify(m(1)));
  check('modern-list', m(2)?.result?.resultType === 'complete' && m(2)?.result?.tools?.length === 100 && m(2)?.result?.nextCursor && m(2)?.result?.cacheScope === 'private', JSON.stringify(m(2))?.slice(0, 300));
  check('modern-call', m(3)?.result?.resultType === 'complete' && m(3)?.result?.structuredContent?.text === '4 words', JSON.stringify(m(3)));
  check('modern-stdio-input-required', m(5)?.result?.resultType === 'input_required' &&
    m(5).result.inputRequests?.capsule_approval?.method === 'elicitation/create' && typeof m(5).result.requestState === 'string', JSON.stringify(m(5)));
  const ack = modern.answers.find((a) => a.method === 'notifications/subscriptions/acknowledged');
  check('modern-stdio-listen', ack?.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === 6 &&
    ack.params.notifications.toolsListChanged === true && !m(6), JSON.stringify(ack));
  check('modern-unsupported-version', m(4)?.error?.code === -32022 && m(4)?.error?.data?.supported?.includes('2026-07-28') && m(4)?.error?.data?.requested === '2099-01-01', JSON.stringify(m(4)));

  const newer = await raw([JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2099-01-01', capabilities: {} } })]);
  check('newer-version-negotiated', newer.answers[0]?.result?.protocolVersion === '2025-11-25', JSON.stringify(newer.answers[0]));
}

try {
  await basics();
  await elicitation();
  await oneCapability();
  await reload();
  await malformed();
} catch (e) {
  fail('client', e && e.stack ? e.stack : String(e));
}
process.exit(failed ? 1 : 0);
