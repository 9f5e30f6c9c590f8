// One call of the Covenant agent `needy` (capabilities.required =
// ["tool.needy"]) through serve's network front doors, with the official
// clients: MCP Streamable HTTP (the TypeScript SDK) and gRPC (Selu's
// CapabilityService and the orchestrator's Capability, @grpc/grpc-js).
// Usage: node paths.mjs MCP_URL GRPC_TARGET PROTO ORCH_PROTO TOKEN WANT
// WANT "refused": each call is refused, naming the token to issue;
// "runs": each call runs the agent. Prints "ok NAME" / "FAIL NAME: why".
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const grequire = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = grequire('@grpc/grpc-js');
const loader = grequire('@grpc/proto-loader');

const [url, target, proto, orchProto, token, want] = process.argv.slice(2);
const fix = /capsule token issue local tool\.needy/;
let failed = 0;
const ok = (n) => console.log(`ok ${n}`);
const bad = (n, why) => { failed++; console.log(`FAIL ${n}: ${why}`); };
const ran = (s) => { try { return JSON.parse(s).got.text === 'hello'; } catch { return false; } };

// MCP over Streamable HTTP: a refusal is a result with isError and the reason
{
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'capsule-covenant-paths', version: '1.0.0' }, { capabilities: {} });
  try {
    await client.connect(transport);
    const r = await client.callTool({ name: 'needy__dispatch', arguments: { text: 'hello' } });
    const text = (r.content && r.content[0] && r.content[0].text) || '';
    if (want === 'refused') r.isError && fix.test(text) ? ok('mcp-http refused') : bad('mcp-http refused', JSON.stringify(r));
    else !r.isError && ran(text) ? ok('mcp-http runs') : bad('mcp-http runs', JSON.stringify(r));
  } catch (e) { bad(`mcp-http ${want}`, String(e)); }
  await client.close().catch(() => {});
}

// gRPC: a refusal is PERMISSION_DENIED with the reason
const load = (p) => grpc.loadPackageDefinition(loader.loadSync(p, { keepCase: true, defaults: true })).selu.capability.v1;
const service = new (load(proto).CapabilityService)(target, grpc.credentials.createInsecure());
const orch = new (load(orchProto).Capability)(target, grpc.credentials.createInsecure());
const meta = () => { const m = new grpc.Metadata(); m.add('authorization', `Bearer ${token}`); return m; };
const call = (c, req) => new Promise((resolve) => {
  c.Invoke(req, meta(), { deadline: Date.now() + 120000 }, (err, res) => resolve({ err, res }));
});
for (const [name, c, req, result] of [
  ['grpc CapabilityService', service, { tool_name: 'needy.dispatch', parameters: '{"text":"hello"}' },
    (res) => res.success && res.result],
  ['grpc Capability', orch, { tool_name: 'needy.dispatch', args_json: Buffer.from('{"text":"hello"}') },
    (res) => !res.error && res.result_json.toString()],
]) {
  const r = await call(c, req);
  if (want === 'refused') {
    r.err && r.err.code === grpc.status.PERMISSION_DENIED && fix.test(r.err.details)
      ? ok(`${name} refused`) : bad(`${name} refused`, JSON.stringify(r));
  } else {
    r.res && ran(result(r.res)) ? ok(`${name} runs`) : bad(`${name} runs`, JSON.stringify(r));
  }
}
service.close();
orch.close();
process.exit(failed ? 1 : 0);
