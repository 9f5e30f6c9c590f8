// ask_spent_flood.sh's client: alice answers (declines) ASKS questions of
// her own ask tool in the 2026-07-28 form, 16 at a time; then bob asks
// once and accepts. Prints "bob-ran" when bob's accepted call ran,
// "bob-asked-again" when his answer was not taken, else what came.
// Usage: node ask_spent_flood.mjs URL ALICE_TOKEN BOB_TOKEN ASKS
const [url, alice, bob, asks] = process.argv.slice(2);
const V = '2026-07-28';
let nextId = 1;
const meta = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 'review10', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
};
async function post(msg, tok) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': V,
      'Mcp-Method': msg.method, 'Mcp-Name': msg.params.name,
    },
    body: JSON.stringify(msg),
  });
  const text = await res.text();
  for (const ev of text.split('\n\n')) {
    const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (!data) continue;
    const m = JSON.parse(data);
    if (m.id === msg.id) return m;
  }
  try { return JSON.parse(text); } catch { return { text, status: res.status }; }
}
const call = (args, more = {}) =>
  ({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'asker__dispatch', arguments: args, _meta: meta, ...more } });
const answer = (state, action) => ({ inputResponses: { capsule_approval: { action } }, requestState: state });

let left = Number(asks), declined = 0, odd = 0;
async function worker(w) {
  while (left-- > 0) {
    const args = { text: `flood-${w}-${left}` };
    const s = (await post(call(args), alice))?.result?.requestState;
    if (!s) { odd++; continue; }
    const r = await post(call(args, answer(s, 'decline')), alice);
    if (r?.result?.resultType === 'input_required') odd++;
    else declined++;
  }
}
await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
console.error(`alice: ${declined} declined, ${odd} not taken`);
const args = { text: 'bob-needs-this' };
const s = (await post(call(args), bob))?.result?.requestState;
if (!s) { console.log('no-state'); process.exit(0); }
const r = await post(call(args, answer(s, 'accept')), bob);
if (r?.result?.resultType === 'input_required') console.log('bob-asked-again');
else if (JSON.stringify(r).includes('bob-needs-this') && !r?.result?.isError) console.log('bob-ran');
else console.log(JSON.stringify(r).slice(0, 300));
