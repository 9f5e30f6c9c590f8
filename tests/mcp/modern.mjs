// The sessionless 2026-07-28 form of MCP over serve's Streamable HTTP,
// in raw HTTP (the installed @modelcontextprotocol/sdk, 1.x, speaks only
// the 2025 revisions): client capabilities from each request's _meta,
// policy `ask` as input_required (answered accept, decline, cancel; a
// replayed or forged requestState), the approval queue for a client that
// did not declare elicitation. Prints "ok NAME" or "FAIL NAME: why".
// Then subscriptions/listen: acknowledged, notifications/tools/list_changed
// when a capability appears in the caps directory (the shell adds it once
// DIR/listening exists), the per-user bound (429) and a slot freed by a
// client's close, the graceful end when serve stops (the shell sends
// SIGTERM once DIR/stop exists).
// Usage: node modern.mjs URL TOKEN OTHER_TOKEN DIR
import fs from 'node:fs';

const [url, token, other, dir] = process.argv.slice(2);
const V = '2026-07-28';
let nextId = 1;
const ok = (name) => console.log(`ok ${name}`);
const check = (name, cond, why) => console.log(cond ? `ok ${name}` : `FAIL ${name}: ${why}`);
const fail = (name, why) => console.log(`FAIL ${name}: ${why}`);

const meta = (caps) => ({
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 'modern.mjs', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': caps,
});

// The headers a 2026 client sends with each request (the transport's
// "Standard headers"), overridden by extra
function headers(msg, tok, extra = {}) {
  const h = {
    Authorization: `Bearer ${tok}`,
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': V,
    'Mcp-Method': msg.method,
  };
  const name = msg.params?.name ?? msg.params?.uri;
  if (name !== undefined) h['Mcp-Name'] = name;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete h[k];
    else h[k] = v;
  }
  return h;
}

// The answer to msg: a JSON body, or the SSE event carrying its id;
// {status, body} where body is the JSON-RPC message (or the text)
async function post(msg, { tok = token, extra } = {}) {
  const res = await fetch(url, { method: 'POST', headers: headers(msg, tok, extra), body: JSON.stringify(msg) });
  const type = res.headers.get('content-type') || '';
  const text = await res.text();
  if (!type.includes('text/event-stream')) {
    let body = text;
    try { body = JSON.parse(text); } catch { /* not JSON: the text */ }
    return { status: res.status, body };
  }
  for (const ev of text.split('\n\n')) {
    const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (!data) continue;
    const m = JSON.parse(data);
    if (m.id === msg.id) return { status: res.status, body: m };
  }
  return { status: res.status, body: text };
}

const call = (name, args, caps, more = {}) =>
  ({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args, _meta: meta(caps), ...more } });
const text = (r) => r?.result?.content?.[0]?.text ?? JSON.stringify(r);
const E = { elicitation: {} };

async function ask() {
  // no elicitation declared in _meta: the approval queue, as a 2025 client without it
  let r = await post(call('asker__dispatch', { text: 'queued' }, {}));
  check('ask-undeclared-queues', r.body?.result?.isError === true && /approval required/.test(text(r.body)) &&
    r.body.result.resultType === 'complete', JSON.stringify(r.body));
  // declared: input_required, naming the capability, the tool and the arguments
  const first = await post(call('asker__dispatch', { text: 'yes-please' }, E));
  const ir = first.body?.result;
  const q = ir?.inputRequests?.capsule_approval;
  check('ask-input-required', ir?.resultType === 'input_required' && q?.method === 'elicitation/create' &&
    q.params.mode === 'form' && /asker/.test(q.params.message) && /dispatch/.test(q.params.message) &&
    q.params.message.includes('yes-please') && typeof ir.requestState === 'string', JSON.stringify(first.body));
  const state = ir?.requestState;
  // the retry with the human's answer: accept runs the call
  const answer = (action) => ({ inputResponses: { capsule_approval: { action } }, requestState: state });
  r = await post(call('asker__dispatch', { text: 'yes-please' }, E, answer('accept')));
  check('ask-accepted-runs', r.body?.result?.isError === false && /"got"/.test(text(r.body)) &&
    /yes-please/.test(text(r.body)), JSON.stringify(r.body));
  // the same answer again: spent, asked again, nothing runs
  r = await post(call('asker__dispatch', { text: 'yes-please' }, E, answer('accept')));
  check('ask-replay-asks-again', r.body?.result?.resultType === 'input_required' &&
    r.body.result.requestState !== state, JSON.stringify(r.body));
  // another call's arguments, another user, a forged state: refused
  r = await post(call('asker__dispatch', { text: 'other-args' }, E, answer('accept')));
  check('ask-state-other-args-refused', r.body?.error?.code === -32602, JSON.stringify(r.body));
  const fresh = (await post(call('asker__dispatch', { text: 'mine' }, E))).body?.result?.requestState;
  r = await post(call('asker__dispatch', { text: 'mine' }, E,
    { inputResponses: { capsule_approval: { action: 'accept' } }, requestState: fresh }), { tok: other });
  check('ask-state-other-user-refused', r.body?.error?.code === -32602, JSON.stringify(r.body));
  const forged = typeof fresh === 'string' ? fresh.replace(/.$/, (c) => (c === '0' ? '1' : '0')) : 'x';
  r = await post(call('asker__dispatch', { text: 'mine' }, E,
    { inputResponses: { capsule_approval: { action: 'accept' } }, requestState: forged }));
  check('ask-state-forged-refused', r.body?.error?.code === -32602, JSON.stringify(r.body));
  // decline and cancel: the tool does not run, the answer says why
  for (const action of ['decline', 'cancel']) {
    const args = { text: `no-${action}` };
    const s = (await post(call('asker__dispatch', args, E))).body?.result?.requestState;
    r = await post(call('asker__dispatch', args, E, { inputResponses: { capsule_approval: { action } }, requestState: s }));
    check(`ask-${action}-refused`, r.body?.result?.isError === true && /declined/.test(text(r.body)) &&
      !/"got"/.test(text(r.body)), JSON.stringify(r.body));
  }
  // a retry without the answer (the client did not ask): asked again
  r = await post(call('asker__dispatch', { text: 'mine' }, E, { requestState: fresh }));
  check('ask-no-answer-asks-again', r.body?.result?.resultType === 'input_required', JSON.stringify(r.body));
}

// A subscriptions/listen stream: its events as they come
function listen(id, notifications, { tok = token } = {}) {
  const ac = new AbortController();
  const msg = { jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: meta({}) } };
  const events = [];
  let wake = null;
  const status = fetch(url, { method: 'POST', headers: headers(msg, tok), body: JSON.stringify(msg), signal: ac.signal })
    .then(async (res) => {
      if (!res.body || !(res.headers.get('content-type') || '').includes('text/event-stream')) {
        events.push({ status: res.status, body: await res.text() });
        wake?.();
        return res.status;
      }
      const dec = new TextDecoder();
      let buf = '';
      try {
        for await (const chunk of res.body) {
          buf += dec.decode(chunk, { stream: true });
          let at;
          while ((at = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, at);
            buf = buf.slice(at + 2);
            const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
            if (data) events.push(JSON.parse(data));
            wake?.();
          }
        }
      } catch { /* aborted */ }
      events.push({ ended: true });
      wake?.();
      return res.status;
    }, () => { events.push({ ended: true }); wake?.(); return 0; });
  // the next event, within 60 s
  let seen = 0;
  const next = async (ms = 60000) => {
    const until = Date.now() + ms;
    while (seen >= events.length && Date.now() < until)
      await new Promise((r) => { wake = r; setTimeout(r, 500); });
    return seen < events.length ? events[seen++] : { timeout: true };
  };
  return { next, close: () => ac.abort(), status };
}

const sid = (m) => m?.params?._meta?.['io.modelcontextprotocol/subscriptionId'] ?? m?.result?._meta?.['io.modelcontextprotocol/subscriptionId'];
const waitFile = async (f) => { for (let i = 0; i < 1200 && !fs.existsSync(f); i++) await new Promise((r) => setTimeout(r, 100)); };

// A stream acknowledged, asked again while serve refuses it for the
// bound (a client's close is seen within serve's keep-alive); null after 60 s
async function opened(id, filter = { toolsListChanged: true }) {
  for (let i = 0; i < 240; i++) {
    const t = listen(id + i, filter);
    const m = await t.next();
    if (m.method === 'notifications/subscriptions/acknowledged') return t;
    if (m.status !== 429) return null;
    await new Promise((r) => setTimeout(r, 250));
  }
  return null;
}

async function subscriptions() {
  const l = listen(100, { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['file:///x'] });
  let m = await l.next();
  check('listen-acknowledged', m.method === 'notifications/subscriptions/acknowledged' && sid(m) === 100 &&
    m.params.notifications.toolsListChanged === true && !('resourceSubscriptions' in m.params.notifications),
    JSON.stringify(m));
  fs.writeFileSync(`${dir}/listening`, '');
  m = await l.next();
  check('listen-list-changed', m.method === 'notifications/tools/list_changed' && sid(m) === 100, JSON.stringify(m));
  const list = await post({ jsonrpc: '2.0', id: nextId++, method: 'tools/list', params: { _meta: meta({}) } });
  const names = (list.body?.result?.tools ?? []).map((t) => t.name);
  check('listen-new-tool-listed', names.includes('added__dispatch'), names.join(','));
  m = await l.next(2000); // a stream tells nothing it was not asked for
  check('listen-nothing-else', m.timeout === true || m.method === 'notifications/tools/list_changed', JSON.stringify(m));
  l.close();
  // the per-user bound: more streams than serve allows are refused; one a
  // client closes frees its place
  const many = [];
  for (let i = 0; i < 16; i++) {
    const t = await opened(200 + i * 100);
    if (!t) return fail('listen-bounded-per-user', `stream ${i} not opened`);
    many.push(t);
  }
  const over = listen(300, { toolsListChanged: true });
  m = await over.next();
  check('listen-bounded-per-user', m.status === 429, JSON.stringify(m));
  const bob = listen(301, { toolsListChanged: true }, { tok: other });
  m = await bob.next();
  check('listen-bound-is-per-user', m.method === 'notifications/subscriptions/acknowledged', JSON.stringify(m));
  bob.close();
  many[0].close();
  const again = await opened(400);
  check('listen-close-frees-slot', again !== null, 'still refused 60 s after a close');
  again?.close();
  for (const t of many.slice(1)) t.close();
  // serve stops: the stream is answered (the graceful end), then ends
  await new Promise((r) => setTimeout(r, 100));
  const last = await opened(500, {});
  check('listen-empty-filter-acknowledged', last !== null, 'not opened');
  if (!last) return;
  fs.writeFileSync(`${dir}/stop`, '');
  m = await last.next();
  check('listen-graceful-end', m.id >= 500 && m.result?.resultType === 'complete' && sid(m) === m.id, JSON.stringify(m));
  m = await last.next();
  check('listen-stream-ends', m.ended === true, JSON.stringify(m));
}

// The standard headers checked against the body: a mismatch, or one
// missing, is HTTP 400 with HeaderMismatch (-32020) for that request
async function headerChecks() {
  const mismatch = (r) => r.status === 400 && r.body?.error?.code === -32020 && /Header mismatch/.test(r.body.error.message);
  const echo = () => call('echo__dispatch', { text: 'h' }, {});
  let m = echo();
  let r = await post(m);
  check('headers-matching-accepted', r.status === 200 && r.body?.result?.isError === false, JSON.stringify(r));
  m = echo();
  r = await post(m, { extra: { 'Mcp-Name': 'asker__dispatch' } });
  check('headers-name-mismatch-400', mismatch(r) && r.body.id === m.id, JSON.stringify(r));
  r = await post(echo(), { extra: { 'Mcp-Method': 'tools/list' } });
  check('headers-method-mismatch-400', mismatch(r), JSON.stringify(r));
  r = await post(echo(), { extra: { 'Mcp-Method': undefined } });
  check('headers-method-missing-400', mismatch(r), JSON.stringify(r));
  r = await post(echo(), { extra: { 'Mcp-Name': undefined } });
  check('headers-name-missing-400', mismatch(r), JSON.stringify(r));
  r = await post(echo(), { extra: { 'MCP-Protocol-Version': undefined } });
  check('headers-version-missing-400', mismatch(r), JSON.stringify(r));
  r = await post({ jsonrpc: '2.0', id: nextId++, method: 'tools/list', params: {} });
  check('headers-version-without-meta-400', mismatch(r), JSON.stringify(r));
  const b64 = (v) => `=?base64?${Buffer.from(v).toString('base64')}?=`;
  r = await post(echo(), { extra: { 'Mcp-Name': b64('echo__dispatch') } });
  check('headers-name-base64-accepted', r.status === 200 && r.body?.result?.isError === false, JSON.stringify(r));
  r = await post(echo(), { extra: { 'Mcp-Name': b64('asker__dispatch') } });
  check('headers-name-base64-mismatch-400', mismatch(r), JSON.stringify(r));
  r = await post(echo(), { extra: { 'Mcp-Name': '=?base64?***?=' } });
  check('headers-name-bad-base64-400', mismatch(r), JSON.stringify(r));
  // a method serve does not have: 404 with -32601 (the transport's way)
  m = { jsonrpc: '2.0', id: nextId++, method: 'no/such', params: { _meta: meta({}) } };
  r = await post(m);
  check('method-unknown-404', r.status === 404 && r.body?.error?.code === -32601 && r.body.id === m.id, JSON.stringify(r));
  // a revision serve does not serve: 400 with UnsupportedProtocolVersionError
  for (const v of ['2099-01-01', '2025-11-25']) {
    m = echo();
    m.params._meta['io.modelcontextprotocol/protocolVersion'] = v;
    r = await post(m, { extra: { 'MCP-Protocol-Version': v } });
    check(`headers-version-${v}-unsupported-400`, r.status === 400 && r.body?.error?.code === -32022 &&
      r.body.error.data?.supported?.includes(V) && r.body.error.data.requested === v, JSON.stringify(r));
  }
}

try {
  await headerChecks();
  await ask();
  await subscriptions();
} catch (e) {
  console.log(`FAIL exception: ${e.stack}`);
}
ok('done');
