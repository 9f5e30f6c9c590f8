// The official TypeScript SDK's own Streamable HTTP server (stateful:
// a session per initialize) serving one trivial tool, `test_simple_text`,
// with no policy, validation or audit: the peer bench/mcp/run.sh measures
// capsule serve against. Usage: node sdk_server.mjs PORT
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { CallToolRequestSchema, ListToolsRequestSchema, isInitializeRequest } = require('@modelcontextprotocol/sdk/types.js');

const sessions = new Map();
function newSession() {
  const server = new Server({ name: 'sdk-bench', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'test_simple_text', description: 'Returns simple text', inputSchema: { type: 'object', properties: {} } }]
  }));
  server.setRequestHandler(CallToolRequestSchema, async () => ({
    content: [{ type: 'text', text: 'This is a simple text response for testing.' }]
  }));
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, transport)
  });
  transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
  server.connect(transport);
  return transport;
}

createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', async () => {
    try {
      const parsed = body ? JSON.parse(body) : undefined;
      const id = req.headers['mcp-session-id'];
      let t = id && sessions.get(id);
      if (!t && parsed && isInitializeRequest(parsed)) t = newSession();
      if (!t) {
        res.writeHead(404).end();
        return;
      }
      await t.handleRequest(req, res, parsed);
    } catch (e) {
      console.error(e);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
}).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('listening'));
