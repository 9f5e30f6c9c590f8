// The one client both servers get (bench/mcp/run.sh): the official SDK's
// Client over Streamable HTTP, CONC callers sharing one session, calling
// TOOL until N calls are done after 50 warm-up calls; prints calls/s.
// Usage: node client.mjs URL TOOL ARGS_JSON N CONC [BEARER_TOKEN]
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [url, tool, args, n, conc, token] = process.argv.slice(2);
const headers = token ? { authorization: `Bearer ${token}` } : {};
const client = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const call = async () => {
  const r = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  if (r.isError) throw new Error(JSON.stringify(r));
};
for (let i = 0; i < 50; i++) await call();
let left = Number(n);
const t0 = performance.now();
await Promise.all(
  Array.from({ length: Number(conc) }, async () => {
    while (left-- > 0) await call();
  })
);
const s = (performance.now() - t0) / 1000;
console.log((Number(n) / s).toFixed(1));
await client.close();
