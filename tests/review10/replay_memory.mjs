// replay_memory.sh's client: SESSIONS sessions of the 2025-11-25 form,
// 8 at a time, each making one tools/call whose SSE answer is about
// 850 KB (a 400 KB argument echoed: structuredContent and the same as
// text), read to its end and left: the session keeps it for a replay.
// Prints the number of answers read whole.
// Usage: node replay_memory.mjs URL TOKEN SESSIONS
const [url, token, sessions] = process.argv.slice(2);
const V = '2025-11-25';
const big = 'x'.repeat(400 * 1024);
const h = (sid) => ({
  Authorization: `Bearer ${token}`, 'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': V,
  ...(sid ? { 'Mcp-Session-Id': sid } : {}),
});
let left = Number(sessions), read = 0;
async function one() {
  let res = await fetch(url, { method: 'POST', headers: h(), body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: V, capabilities: {}, clientInfo: { name: 'r10', version: '1' } } }) });
  await res.text();
  const sid = res.headers.get('mcp-session-id');
  if (!sid) return;
  await (await fetch(url, { method: 'POST', headers: h(sid), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
  res = await fetch(url, { method: 'POST', headers: h(sid), body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow__dispatch', arguments: { text: big } } }) });
  const text = await res.text();
  if (text.length > 800 * 1024) read++;
}
async function worker() { while (left-- > 0) await one(); }
await Promise.all(Array.from({ length: 8 }, worker));
console.log(read);
