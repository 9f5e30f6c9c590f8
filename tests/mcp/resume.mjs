// Resumable streams of `capsule serve --mcp-http` (docs/serve.md "Resuming
// a stream"), driven by the official MCP TypeScript SDK client
// (StreamableHTTPClientTransport), whose connections a fetch wrapper can
// cut (the fetch aborted: its socket destroyed) and whose reconnections it
// can hold back:
// - a call's SSE answer cut after its first progress notification: the
//   client resumes it (GET with Last-Event-ID, its resumption token) and
//   gets every progress notification and the result exactly once;
// - the session's GET stream cut while resources/updated notifications
//   is sent (the client's reconnection held back meanwhile): the resumed
//   stream brings the missed one, once;
// - an event id given to another session (or unknown) replays nothing:
//   400; the same id in its own session replays the call's events.
// Prints "ok NAME" or "FAIL NAME: why" per check.
// Usage: node resume.mjs URL TOKEN WITH_RESOURCES(0|1)
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ResourceUpdatedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');

const [url, token, withResources] = process.argv.slice(2);
let failed = 0;
const ok = (name) => console.log(`ok ${name}`);
const fail = (name, why) => { failed++; console.log(`FAIL ${name}: ${why}`); };
const check = (name, cond, why) => (cond ? ok(name) : fail(name, why));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(cond, ms = 60000) { // no timing asserted: only that it happens
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (cond()) return true;
  return cond();
}

// A fetch whose SSE answers can be cut, and whose GETs can be held back.
function cuttable() {
  const f = {
    live: new Set(), gets: [], hold: null,
    fetch: async (u, init = {}) => {
      const method = (init.method || 'GET').toUpperCase();
      const headers = new Headers(init.headers);
      if (method === 'GET') {
        f.gets.push(headers.get('last-event-id'));
        if (f.hold) await f.hold;
      }
      const ac = new AbortController();
      const signal = init.signal ? AbortSignal.any([init.signal, ac.signal]) : ac.signal;
      const res = await fetch(u, { ...init, signal });
      if (!(res.headers.get('content-type') || '').startsWith('text/event-stream') || !res.body) return res;
      const entry = { method, ac };
      f.live.add(entry); // until its stream ends
      const body = res.body.pipeThrough(new TransformStream({ flush: () => { f.live.delete(entry); } }));
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    },
    cut: (method) => { // destroys the connections of the SSE answers to method
      let n = 0;
      for (const e of f.live) if (e.method === method) { e.ac.abort(); f.live.delete(e); n++; }
      return n;
    },
  };
  return f;
}

async function connect(f) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } }, fetch: f ? f.fetch : undefined,
    reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 2000, reconnectionDelayGrowFactor: 1.5, maxRetries: 20 } });
  const client = new Client({ name: 'capsule-resume-test', version: '1.0.0' }, { capabilities: {} });
  const errors = [];
  client.onerror = (e) => errors.push(String(e));
  await client.connect(transport);
  return { client, transport, errors };
}

// raw HTTP GET with a Last-Event-ID: status and body, read until a
// result or the end (then the connection closed)
function resumeRaw(session, lastEventId) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'GET', headers: {
      Accept: 'text/event-stream', Authorization: `Bearer ${token}`, 'Mcp-Session-Id': session,
      'MCP-Protocol-Version': '2025-11-25', 'Last-Event-ID': lastEventId } }, (res) => {
      let data = '';
      const done = () => { req.destroy(); resolve({ status: res.statusCode, body: data }); };
      res.on('data', (d) => { data += d; if (/"result"/.test(data)) done(); });
      res.on('end', done);
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e) }));
    req.setTimeout(60000, () => req.destroy());
    req.end();
  });
}

const f = cuttable();
const a = await connect(f);
const tokens = [];
// 1. a call's SSE answer cut after its first progress notification
{
  const progress = [];
  let cutDone = 0;
  let result;
  try {
    result = await a.client.callTool({ name: 'ticker__dispatch', arguments: { text: 'x' } }, undefined, {
      timeout: 60000, resetTimeoutOnProgress: true,
      onresumptiontoken: (t) => tokens.push(t),
      onprogress: (p) => { progress.push(p.progress); if (progress.length === 1) cutDone = f.cut('POST'); },
    });
  } catch (e) {
    result = { isError: true, error: String(e) };
  }
  check('post-stream-cut', cutDone === 1, `${cutDone} streams cut`);
  const resumes = f.gets.filter((id) => id);
  check('post-resumed-with-last-event-id', resumes.length >= 1, `GETs: ${JSON.stringify(f.gets)}`);
  check('post-result-once', !result.isError && /done/.test(JSON.stringify(result)) &&
    !a.errors.some((e) => /unknown message ID/i.test(e)), `${JSON.stringify(result).slice(0, 200)} ${a.errors.join('; ').slice(0, 300)}`);
  const consecutive = progress.every((v, i) => v === i + 1);
  check('post-progress-each-once', progress.length >= 3 && consecutive, `progress ${JSON.stringify(progress)}`);
  check('post-resumption-tokens', tokens.length >= 2 && tokens.every((t) => /^[0-9]+-[0-9]+$/.test(t)), JSON.stringify(tokens));
}

// 2. another session (or an unknown id) gets nothing of it; its own session gets its events again
{
  const b = await connect(null);
  const first = tokens[0] || '1-1';
  const other = await resumeRaw(b.transport.sessionId, first);
  check('other-session-id-refused', other.status === 400 && !/progress|done/.test(other.body), `${other.status} ${other.body.slice(0, 200)}`);
  const unknown = await resumeRaw(a.transport.sessionId, '999999-1');
  check('unknown-id-refused', unknown.status === 400, `${unknown.status} ${unknown.body.slice(0, 200)}`);
  const garbage = await resumeRaw(a.transport.sessionId, '1-x');
  check('malformed-id-refused', garbage.status === 400, `${garbage.status} ${garbage.body.slice(0, 200)}`);
  const own = await resumeRaw(a.transport.sessionId, first);
  const events = own.body.split('\n\n').filter((e) => /^data: \{/m.test(e));
  check('own-session-replays', own.status === 200 && events.length >= 3 && /"result"/.test(own.body) &&
    events.every((e) => /^id: [0-9]+-[0-9]+$/m.test(e)), `${own.status} ${own.body.slice(0, 400)}`);
  await b.client.close();
}

// 3. the session's GET stream cut while updates are sent
if (withResources === '1') {
  let updates = 0;
  a.client.setNotificationHandler(ResourceUpdatedNotificationSchema, () => { updates++; });
  await a.client.listResources(); // what the session routes resources/subscribe by
  await a.client.subscribeResource({ uri: 'test://counter' });
  await a.client.callTool({ name: 'mcp-c__touch', arguments: {} });
  check('get-update-live', await until(() => updates >= 1), `${updates} updates`);
  let release;
  f.hold = new Promise((r) => { release = r; });
  const before = f.gets.length;
  const cut = f.cut('GET');
  // one touch while the stream is cut (its update is sent 200 ms after
  // the answer; the client's reconnection, held, comes a second later)
  await a.client.callTool({ name: 'mcp-c__touch', arguments: {} });
  await until(() => f.gets.length > before, 30000);
  f.hold = null;
  release();
  const resumed = await until(() => updates >= 2);
  check('get-stream-cut', cut === 1, `${cut} GET streams cut`);
  check('get-resumed-with-last-event-id', f.gets.slice(before).some((id) => /^[0-9]+-[0-9]+$/.test(id || '')), JSON.stringify(f.gets));
  check('get-missed-update-replayed', resumed, `${updates} updates, 2 expected`);
  await a.client.callTool({ name: 'mcp-c__touch', arguments: {} });
  await until(() => updates >= 3);
  check('get-updates-each-once', updates === 3, `${updates} updates, 3 expected`);
}
await a.client.close();
ok('all-checks-ran');
process.exit(failed ? 1 : 0);
