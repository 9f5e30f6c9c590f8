// The sessionless 2026-07-28 form of MCP over serve's Streamable HTTP,
// in raw HTTP (the installed @modelcontextprotocol/sdk, 1.x, speaks only
// the 2025 revisions): client capabilities from each request's _meta,
// policy `ask` as input_required (answered accept, decline, cancel; a
// replayed or forged requestState), the approval queue for a client that
// did not declare elicitation. Prints "ok NAME" or "FAIL NAME: why".
// Usage: node modern.mjs URL TOKEN OTHER_TOKEN
const [url, token, other] = process.argv.slice(2);
const V = '2026-07-28';
let nextId = 1;
const ok = (name) => console.log(`ok ${name}`);
const check = (name, cond, why) => console.log(cond ? `ok ${name}` : `FAIL ${name}: ${why}`);

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

try {
  await ask();
} catch (e) {
  console.log(`FAIL exception: ${e.stack}`);
}
ok('done');
