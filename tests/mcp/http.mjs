// Drives `capsule serve --mcp-http` with the official MCP TypeScript SDK
// client (StreamableHTTPClientTransport), and with raw HTTP where a client
// would misbehave. Prints "ok NAME" or "FAIL NAME: why" per check.
// Usage: node http.mjs URL TOKEN OTHER_TOKEN SOCKET
import http from 'node:http';
import net from 'node:net';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ElicitRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

const [url, token, other, socket] = process.argv.slice(2);
let failed = 0;
const ok = (name) => console.log(`ok ${name}`);
const fail = (name, why) => { failed++; console.log(`FAIL ${name}: ${why}`); };
const check = (name, cond, why) => (cond ? ok(name) : fail(name, why));
const text = (r) => (r.content && r.content[0] && r.content[0].text) || '';

async function connect(tok, capabilities = {}) {
  const headers = tok ? { Authorization: `Bearer ${tok}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'capsule-http-test', version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return { client, transport };
}

// raw HTTP: status, headers and body
function raw(method, body, headers = {}) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method, headers: {
      'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      let data = '';
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e) }));
    if (body !== undefined) req.write(body);
    req.end();
  });
}
const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
const auth = (tok) => ({ Authorization: `Bearer ${tok}` });

async function refusals() {
  try {
    await connect(null);
    fail('no-token-refused', 'connected');
  } catch (e) {
    check('no-token-refused', /401|Unauthorized/.test(String(e)), String(e));
  }
  try {
    await connect('capsule_' + '0'.repeat(64));
    fail('bad-token-refused', 'connected');
  } catch (e) {
    check('bad-token-refused', /401|Unauthorized/.test(String(e)), String(e));
  }
  const r401 = await raw('POST', init);
  check('401-names-bearer', r401.status === 401 && /Bearer/.test(r401.headers['www-authenticate'] || ''), JSON.stringify(r401.headers));
  const origin = await raw('POST', init, { ...auth(token), Origin: 'http://evil.example' });
  check('foreign-origin-403', origin.status === 403, `${origin.status}`);
  const own = new URL(url);
  const sameOrigin = await raw('POST', init, { ...auth(token), Origin: `http://localhost:${own.port}` });
  check('own-origin-ok', sameOrigin.status === 200, `${sameOrigin.status}`);
  const host = await raw('POST', init, { ...auth(token), Host: `evil.example:${own.port}` });
  check('foreign-host-403', host.status === 403, `${host.status}`);
  const huge = await raw('POST', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(5 << 20) } }), auth(token));
  check('huge-body-413', huge.status === 413, `${huge.status}`);
  const batch = await raw('POST', `[${init}]`, auth(token));
  check('batch-400', batch.status === 400 && /"code":-32600/.test(batch.body), `${batch.status} ${batch.body}`);
  const garbage = await raw('POST', '{nope', auth(token));
  check('parse-error-400', garbage.status === 400 && /-32700/.test(garbage.body), `${garbage.status} ${garbage.body}`);
  const nosession = await raw('POST', '{"jsonrpc":"2.0","id":2,"method":"tools/list"}', auth(token));
  check('no-session-400', nosession.status === 400, `${nosession.status}`);
  const unknown = await raw('POST', '{"jsonrpc":"2.0","id":2,"method":"tools/list"}', { ...auth(token), 'Mcp-Session-Id': 'f'.repeat(32) });
  check('unknown-session-404', unknown.status === 404, `${unknown.status}`);
  const get = await raw('GET', undefined, { ...auth(token), Accept: 'application/json' });
  check('get-without-event-stream-405', get.status === 405, `${get.status}`);
  const getNoSession = await raw('GET', undefined, { ...auth(token), Accept: 'text/event-stream' });
  check('get-stream-needs-session-400', getNoSession.status === 400, `${getNoSession.status}`);
  const path = await raw('POST', init, auth(token)).then(() => new Promise((resolve) => {
    const u = new URL(url);
    http.request({ host: u.hostname, port: u.port, path: '/other', method: 'POST', headers: auth(token) }, (res) => { res.resume(); resolve(res.statusCode); }).end('{}');
  }));
  check('other-path-404', path === 404, `${path}`);
}

async function sessions() {
  const a = await raw('POST', init, auth(token));
  const sid = a.headers['mcp-session-id'];
  check('session-id-issued', /^[0-9a-f]{32}$/.test(sid || ''), JSON.stringify(a.headers));
  const stolen = await raw('POST', '{"jsonrpc":"2.0","id":2,"method":"tools/list"}', { ...auth(other), 'Mcp-Session-Id': sid });
  check('session-of-another-user-403', stolen.status === 403, `${stolen.status}`);
  const del = await raw('DELETE', undefined, { ...auth(token), 'Mcp-Session-Id': sid });
  check('delete-session', del.status === 200, `${del.status}`);
  const after = await raw('POST', '{"jsonrpc":"2.0","id":3,"method":"tools/list"}', { ...auth(token), 'Mcp-Session-Id': sid });
  check('deleted-session-404', after.status === 404, `${after.status}`);
}

async function calls() {
  const { client, transport } = await connect(token);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check('http-list', names.includes('wordcount__dispatch') && names.includes('asker__dispatch') && !names.includes('blocked__dispatch'), names.join(','));
  const r = await client.callTool({ name: 'wordcount__dispatch', arguments: { text: 'one two three' } });
  check('http-call', !r.isError && r.structuredContent?.text === '3 words', JSON.stringify(r));
  const bad = await client.callTool({ name: 'wordcount__dispatch', arguments: { nope: true } });
  check('http-validation-is-error', bad.isError === true && /input schema/.test(text(bad)), JSON.stringify(bad));
  let progress = 0;
  const slow = await client.callTool({ name: 'slow__dispatch', arguments: { text: 'x' } }, undefined, { onprogress: () => { progress++; }, timeout: 300000 });
  check('http-progress', !slow.isError && progress >= 1, `progress ${progress}`);
  await transport.terminateSession();
  await client.close();

  const e = await connect(other, { elicitation: {} });
  let asked = '';
  e.client.setRequestHandler(ElicitRequestSchema, async (req) => { asked = req.params.message; return { action: 'accept' }; });
  const ask = await e.client.callTool({ name: 'asker__dispatch', arguments: { text: 'over http' } });
  check('http-elicitation', !ask.isError && /over http/.test(asked) && /"got"/.test(text(ask)), `${asked} ${JSON.stringify(ask)}`);
  await e.client.close();
}

// The unix socket: newline-delimited JSON-RPC, the peer is the user
function unixSession(lines) {
  return new Promise((resolve) => {
    const c = net.createConnection(socket);
    let out = '';
    c.on('data', (d) => {
      out += d;
      if (out.split('\n').filter(Boolean).length >= lines.length) c.end();
    });
    c.on('close', () => resolve(out.split('\n').filter(Boolean).map((l) => JSON.parse(l))));
    c.on('error', (err) => resolve([{ error: String(err) }]));
    for (const l of lines) c.write(l + '\n');
  });
}

// 2026-07-28: no initialize, no session; each request names its revision
async function modern() {
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  const h = { ...auth(token), 'MCP-Protocol-Version': '2026-07-28' };
  const d = await raw('POST', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: meta } }), { ...h, 'Mcp-Method': 'server/discover' });
  const dj = d.status === 200 ? JSON.parse(d.body) : {};
  check('http-modern-discover', dj.result?.supportedVersions?.includes('2026-07-28') && !d.headers['mcp-session-id'], `${d.status} ${d.body}`);
  const c = await raw('POST', JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'wordcount__dispatch', arguments: { text: 'a' }, _meta: meta } }), { ...h, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'wordcount__dispatch' });
  // an SSE stream, or (an answer that came at once) the JSON object alone
  const data = /application\/json/.test(c.headers?.['content-type'] || '')
    ? [JSON.parse(c.body)]
    : c.body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  const res = data.find((x) => x.id === 2);
  check('http-modern-call', res?.result?.resultType === 'complete' && res?.result?.structuredContent?.text === '1 words', `${c.status} ${c.body}`);
  // 2026-07-28: closing the stream cancels the call (serve.sh finds it audited as stopped)
  const u = new URL(url);
  await new Promise((resolve) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: {
      ...h, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'hang__dispatch', 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream' } }, (res) => { res.destroy(); resolve(); });
    req.on('error', () => resolve());
    req.end(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'hang__dispatch', arguments: { text: 'closed' }, _meta: meta } }));
  });
  const noauth = await raw('POST', JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'server/discover', params: { _meta: meta } }), { 'MCP-Protocol-Version': '2026-07-28' });
  check('http-modern-needs-token', noauth.status === 401, `${noauth.status}`);
}

// A client that leaves mid-stream: the server serves on, the call runs to
// its end (and is audited: serve.sh counts it)
async function disconnect() {
  const a = await raw('POST', init, auth(token));
  const sid = a.headers['mcp-session-id'];
  const u = new URL(url);
  await new Promise((resolve) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: {
      ...auth(token), 'Mcp-Session-Id': sid, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' } }, (res) => {
      res.destroy(); // headers came: the stream is open; leave
      resolve();
    });
    req.on('error', () => resolve());
    req.end(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'slow__dispatch', arguments: { text: 'left' } } }));
  });
  const ping = await raw('POST', '{"jsonrpc":"2.0","id":10,"method":"ping"}', { ...auth(token), 'Mcp-Session-Id': sid });
  check('serves-after-disconnect', ping.status === 200 && /"result":\{\}/.test(ping.body), `${ping.status} ${ping.body}`);
}

// Ids are unique within a session while in flight (answers are routed by
// them): a second request with the id of one still running gets its own
// -32600; the first keeps its answer
async function duplicateIds() {
  const a = await raw('POST', init, auth(token));
  const sid = a.headers['mcp-session-id'];
  const h = { ...auth(token), 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  const call = (name, text) => JSON.stringify({ jsonrpc: '2.0', id: 30, method: 'tools/call', params: { name, arguments: { text } } });
  const first = raw('POST', call('slow__dispatch', 'first'), h); // 3 s
  await new Promise((r) => setTimeout(r, 500));
  const dup = await raw('POST', call('wordcount__dispatch', 'second'), h);
  const messages = (r) => /application\/json/.test(r.headers?.['content-type'] || '')
    ? [JSON.parse(r.body)]
    : r.body.split('\n').filter((l) => l.startsWith('data: ') && l.slice(6).trim()).map((l) => JSON.parse(l.slice(6))); // not the priming event's empty data
  const d = dup.status === 200 ? messages(dup).find((m) => m.id === 30) : null;
  check('duplicate-id-refused', d?.error?.code === -32600 && /in flight/.test(d.error.message), `${dup.status} ${dup.body}`);
  const f = await first;
  const r = f.status === 200 ? messages(f).find((m) => m.id === 30) : null;
  check('duplicate-id-first-answered', r?.result?.structuredContent?.done === true && !r.result.isError, `${f.status} ${f.body}`);
  const again = await raw('POST', call('wordcount__dispatch', 'x y'), h); // answered: the id is free again
  const g = again.status === 200 ? messages(again).find((m) => m.id === 30) : null;
  check('duplicate-id-free-after-answer', g?.result?.structuredContent?.text === '2 words', `${again.status} ${again.body}`);
}

// Sessions are bounded (1,000): past the bound a new one takes the place
// of the least recently used idle session of the user holding the most
// (here this token's), so initialize always gets one; delete them all
// (the evicted ones are 404), start again
async function manySessions() {
  const ids = [];
  let status = 200;
  while (status === 200 && ids.length < 1100) {
    const r = await raw('POST', init, auth(token));
    status = r.status;
    if (status === 200) ids.push(r.headers['mcp-session-id']);
  }
  let deleted = 0, gone = 0;
  for (const sid of ids) {
    const d = (await raw('DELETE', undefined, { ...auth(token), 'Mcp-Session-Id': sid })).status;
    deleted += d === 200;
    gone += d === 404;
  }
  check('sessions-bounded', ids.length === 1100 && gone >= 100 && gone < 200 && deleted + gone === 1100 &&
    (await raw('DELETE', undefined, { ...auth(token), 'Mcp-Session-Id': ids[0] })).status === 404,
  `${ids.length} sessions opened (${status}), ${gone} of them evicted, ${deleted} deleted`);
  const again = await raw('POST', init, auth(token));
  check('sessions-freed', again.status === 200, `then ${again.status}`);
}

async function unix() {
  const answers = await unixSession([init, '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wordcount__dispatch","arguments":{"text":"a b"}}}']);
  check('unix-socket-call', answers[1]?.result?.structuredContent?.text === '2 words', JSON.stringify(answers));
}

try {
  await refusals();
  await sessions();
  await calls();
  await modern();
  await disconnect();
  await duplicateIds();
  await manySessions();
  await unix();
} catch (e) {
  fail('client', e && e.stack ? e.stack : String(e));
}
process.exit(failed ? 1 : 0);
