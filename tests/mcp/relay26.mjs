// A relayed third-party server's requests to the client in the sessionless
// 2026-07-28 form, over serve's Streamable HTTP, in raw HTTP (the installed
// @modelcontextprotocol/sdk, 1.x, speaks only the 2025 revisions): through
// `serve --capability conformance --mcp-http` (conformance.sh starts it,
// with CAPSULE_MCP_HOLD_MS shortening a held call's deadline), the
// server's sampling/createMessage and elicitation/create become the call's
// input_required, the call is held with its server waiting, and the retry
// (another request, in a session of its own) carries the client's
// responses to it and gets the server's result. The requestState is
// single-use, this call's and this user's; a retry without the response
// is asked again; a request whose _meta declares nothing has the server
// refused; the same for a prompts/get whose server samples and a
// resources/read whose server elicits (the fixture's
// test_prompt_with_sampling, test://elicited-resource); a user holds at most 8 calls (another user still holds his);
// a held call whose client never comes back is cancelled at its deadline
// and audited. Prints "ok NAME" or "FAIL NAME: why"; exits 1 on a failure.
// Usage: node relay26.mjs URL TOKEN OTHER_TOKEN CAPSULE STATE [WRAPPER...]
import { execFileSync } from 'node:child_process';

const [url, token, other, capsule, state, ...wrapper] = process.argv.slice(2);
const V = '2026-07-28';
let nextId = 1;
let failed = 0;
const check = (name, cond, why) => {
  if (cond) console.log(`ok ${name}`);
  else {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
};
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const cmd = (...args) => {
  const all = [...wrapper, capsule, ...args];
  return execFileSync(all[0], all.slice(1), { encoding: 'utf8' });
};
const audit = () => JSON.parse(cmd('audit', '--json', '--state', state));

const meta = (caps) => ({
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 'relay26.mjs', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': caps
});

// The answer to msg (the transport's standard headers sent): a JSON body,
// or the SSE event carrying its id
async function post(msg, tok = token) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${tok}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': V,
      'Mcp-Method': msg.method,
      ...(msg.params.name ?? msg.params.uri ? { 'Mcp-Name': msg.params.name ?? msg.params.uri } : {})
    },
    body: JSON.stringify(msg)
  });
  const text = await res.text();
  if (!(res.headers.get('content-type') || '').includes('text/event-stream')) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  for (const ev of text.split('\n\n')) {
    const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (data && JSON.parse(data).id === msg.id) return JSON.parse(data);
  }
  return text;
}

const S = { sampling: {} };
const call = (name, args, caps, more = {}, tok = token) =>
  post({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args, _meta: meta(caps), ...more } }, tok);
const text = (m) => m?.result?.content?.map((c) => c.text || '').join('\n') ?? JSON.stringify(m);
const keys = (m) => Object.keys(m?.result?.inputRequests || {});
const sampled = (t) => ({ role: 'assistant', model: 'test', content: { type: 'text', text: t } });
// input_required naming one sampling request for prompt
const asksSampling = (m, prompt) => {
  const [k] = keys(m);
  return m?.result?.resultType === 'input_required' && keys(m).length === 1 &&
    m.result.inputRequests[k].method === 'sampling/createMessage' &&
    m.result.inputRequests[k].params?.messages?.[0]?.content?.text === prompt && /^h1\./.test(m.result.requestState || '');
};
const retry = (prompt, first, responses, caps = S, tok = token) =>
  call('test_sampling', { prompt }, caps, { inputResponses: responses, requestState: first.result.requestState }, tok);

const before = audit().length;
// sampling: input_required, then the retry with the response
let first = await call('test_sampling', { prompt: 'capital?' }, S);
check('http-sampling-input-required', asksSampling(first, 'capital?'), JSON.stringify(first));
let [k] = keys(first);
let m = await retry('capital?', first, { [k]: sampled('Paris') });
check('http-sampling-retry-answered', m?.result?.resultType === 'complete' && text(m) === 'LLM response: Paris', JSON.stringify(m));
m = await retry('capital?', first, { [k]: sampled('again') });
check('http-state-single-use', m?.error?.code === -32602 && /no call waiting/.test(m.error.message), JSON.stringify(m));

// a forged state, another user's retry, another call's: refused, the call still held
first = await call('test_sampling', { prompt: 'mine' }, S);
[k] = keys(first);
const st = first.result?.requestState || '';
const forged = st.slice(0, -1) + (st.endsWith('0') ? '1' : '0');
m = await call('test_sampling', { prompt: 'mine' }, S, { inputResponses: { [k]: sampled('x') }, requestState: forged });
check('http-forged-state-refused', m?.error?.code === -32602 && /not one this server gave/.test(m.error.message), JSON.stringify(m));
m = await retry('mine', first, { [k]: sampled('x') }, S, other);
check('http-other-users-state-refused', m?.error?.code === -32602, JSON.stringify(m));
m = await retry('not mine', first, { [k]: sampled('x') });
check('http-other-calls-state-refused', m?.error?.code === -32602, JSON.stringify(m));
// no response in the retry: asked again (a new state), then answered
m = await retry('mine', first, {});
check('http-unanswered-asked-again', asksSampling(m, 'mine') && m.result.requestState !== st, JSON.stringify(m));
[k] = keys(m);
m = await retry('mine', m, { [k]: sampled('at last') });
check('http-answered-after-asked-again', text(m) === 'LLM response: at last', JSON.stringify(m));

// elicitation, accepted
first = await call('test_elicitation', { message: 'who are you?' }, { elicitation: {} });
[k] = keys(first);
check('http-elicitation-input-required', first?.result?.resultType === 'input_required' &&
  first.result.inputRequests[k]?.method === 'elicitation/create' &&
  first.result.inputRequests[k].params?.message === 'who are you?', JSON.stringify(first));
m = await call('test_elicitation', { message: 'who are you?' }, { elicitation: {} }, {
  inputResponses: { [k]: { action: 'accept', content: { username: 'ada', email: 'ada@example.org' } } },
  requestState: first.result?.requestState
});
check('http-elicitation-accepted', /action=accept, content=\{"username":"ada","email":"ada@example.org"\}/.test(text(m)),
  JSON.stringify(m));

// a server's requests during prompts/get and resources/read: held the same way
const request = (method, params, caps, more = {}, tok = token) =>
  post({ jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: meta(caps), ...more } }, tok);
const P = { name: 'test_prompt_with_sampling', arguments: { topic: 'cats' } };
first = await request('prompts/get', P, S);
check('http-prompt-sampling-input-required', asksSampling(first, 'Write a prompt about cats'), JSON.stringify(first));
[k] = keys(first);
const again = { inputResponses: { [k]: sampled('Meow') }, requestState: first.result?.requestState };
m = await request('prompts/get', P, S, again);
check('http-prompt-retry-answered', m?.result?.resultType === 'complete' &&
  m.result.messages?.[0]?.content?.text === 'Sampled prompt: Meow', JSON.stringify(m));
m = await request('prompts/get', P, S, again);
check('http-prompt-state-single-use', m?.error?.code === -32602 && /no call waiting/.test(m.error.message), JSON.stringify(m));
const R = { uri: 'test://elicited-resource' };
const E = { elicitation: {} };
first = await request('resources/read', R, E);
[k] = keys(first);
check('http-resource-elicitation-input-required', first?.result?.resultType === 'input_required' &&
  keys(first).length === 1 && first.result.inputRequests[k]?.method === 'elicitation/create' &&
  /Which greeting/.test(first.result.inputRequests[k].params?.message), JSON.stringify(first));
const greet = (g, state) => ({ inputResponses: { [k]: { action: 'accept', content: { greeting: g } } }, requestState: state });
const rs = first.result?.requestState || '';
m = await request('resources/read', R, E, greet('x', rs.slice(0, -1) + (rs.endsWith('0') ? '1' : '0')));
check('http-resource-forged-state-refused', m?.error?.code === -32602 && /not one this server gave/.test(m.error.message), JSON.stringify(m));
m = await request('resources/read', R, E, greet('x', rs), other);
check('http-resource-other-users-state-refused', m?.error?.code === -32602, JSON.stringify(m));
m = await request('resources/read', { uri: 'test://static-text' }, E, greet('x', rs));
check('http-resource-other-requests-state-refused', m?.error?.code === -32602, JSON.stringify(m));
m = await request('prompts/get', P, S, greet('x', rs));
check('http-resource-state-refused-for-prompt', m?.error?.code === -32602, JSON.stringify(m));
m = await request('resources/read', R, E, greet('hello', rs));
check('http-resource-retry-answered', m?.result?.resultType === 'complete' &&
  m.result.contents?.[0]?.text === 'Elicited resource: hello', JSON.stringify(m));
m = await request('resources/read', R, E, greet('again', rs));
check('http-resource-state-single-use', m?.error?.code === -32602 && /no call waiting/.test(m.error.message), JSON.stringify(m));
// completion/complete too (the fixture's model-completed topic)
const Q = { ref: { type: 'ref/prompt', name: 'test_prompt_with_sampling' }, argument: { name: 'topic', value: 'ca' } };
first = await request('completion/complete', Q, S);
check('http-complete-sampling-input-required', asksSampling(first, 'Complete the topic ca'), JSON.stringify(first));
[k] = keys(first);
m = await request('completion/complete', Q, S, { inputResponses: { [k]: sampled('cats') }, requestState: first.result?.requestState });
check('http-complete-retry-answered', m?.result?.resultType === 'complete' && m.result.completion?.values?.[0] === 'cats',
  JSON.stringify(m));
// declaring nothing: the server refused (-32601), nothing held
m = await request('resources/read', R, {});
check('http-resource-undeclared-refused-to-server', m?.error && !m.result && /did not declare|elicitation/.test(m.error.message),
  JSON.stringify(m));

// a request declaring nothing (or not what the server asks): the server refused, as before
m = await call('test_sampling', { prompt: 'nobody asks' }, {});
check('http-undeclared-refused-to-server', m?.result?.isError === true && /did not declare/.test(text(m)), JSON.stringify(m));
m = await call('test_sampling', { prompt: 'nobody asks' }, { elicitation: {} });
check('http-other-capability-refused-to-server', m?.result?.isError === true && /sampling/.test(text(m)), JSON.stringify(m));

// the answered calls audited once each, ok
const done = audit().slice(before).filter((x) => x.capability === 'conformance' && x.outcome === 'ok');
check('http-audited-once-each', done.filter((x) => x.tool === 'test_sampling').length === 2 &&
  done.filter((x) => x.tool === 'test_elicitation').length === 1 && done.filter((x) => x.tool === 'prompts/get').length === 1 &&
  done.filter((x) => x.tool === 'resources/read').length === 1, JSON.stringify(done.map((x) => [x.tool, x.outcome])));

// 8 calls of a user held at once; the 9th has its server refused; another
// user's is held still
const n = audit().length;
const held = []; // one after the other: a request names no call, the warm server's keeper gives
for (let i = 0; i < 8; i++) held.push(await call('test_sampling', { prompt: `held ${i}` }, S)); // it to one not waiting
check('http-eight-held', held.every((x, i) => asksSampling(x, `held ${i}`)), JSON.stringify(held.map((x) => x?.result?.resultType)));
m = await call('test_sampling', { prompt: 'ninth' }, S);
check('http-ninth-refused', m?.result?.isError === true && /waiting for its input/.test(text(m)), JSON.stringify(m));
m = await request('prompts/get', P, S); // the same bound for a relayed prompts/get
check('http-ninth-prompt-refused', m?.error && !m.result && /waiting for its input/.test(m.error.message), JSON.stringify(m));
first = await call('test_sampling', { prompt: 'other user' }, S, {}, other);
[k] = keys(first);
m = await retry('other user', first, { [k]: sampled('theirs') }, S, other);
check('http-other-user-held-meanwhile', text(m) === 'LLM response: theirs', JSON.stringify(m));
// and a prompts/get of his, held until its deadline too
const heldPrompt = await request('prompts/get', P, S, {}, other);
check('http-prompt-held-meanwhile', asksSampling(heldPrompt, 'Write a prompt about cats'), JSON.stringify(heldPrompt));

// the client never comes back: each held call cancelled at its deadline, audited
let gone = [], gonePrompt = [];
for (let i = 0; i < 600 && (gone.length < 8 || gonePrompt.length < 1); i++) { // generous: a loaded machine, an ASan build
  await sleep(200);
  const recs = audit().slice(n).filter((x) => /cancelled/.test(x.outcome));
  gone = recs.filter((x) => x.tool === 'test_sampling');
  gonePrompt = recs.filter((x) => x.tool === 'prompts/get');
}
check('http-deadline-cancels-and-audits', gone.length === 8 && gone.every((x) => x.decision === 'allow'),
  JSON.stringify(gone.map((x) => [x.outcome, x.error])));
check('http-prompt-deadline-cancels-and-audits', gonePrompt.length === 1, JSON.stringify(gonePrompt));
m = await request('prompts/get', P, S, { inputResponses: { [keys(heldPrompt)[0]]: sampled('late') }, requestState: heldPrompt.result?.requestState }, other);
check('http-prompt-late-retry-refused', m?.error?.code === -32602 && /no call waiting/.test(m.error.message), JSON.stringify(m));
m = await retry('held 0', held[0], { [keys(held[0])[0]]: sampled('late') });
check('http-late-retry-refused', m?.error?.code === -32602 && /no call waiting/.test(m.error.message), JSON.stringify(m));
// the slots are free again
first = await call('test_sampling', { prompt: 'after' }, S);
[k] = keys(first);
m = await retry('after', first, { [k]: sampled('free') });
check('http-held-again-after-deadline', text(m) === 'LLM response: free', JSON.stringify(m));
try {
  cmd('audit', 'verify', '--state', state);
  check('http-audit-verifies', true, '');
} catch (e) {
  check('http-audit-verifies', false, String(e.stdout || e.message));
}
process.exit(failed ? 1 : 0);
