// An MCP session on serve's unix socket that waits for
// notifications/tools/list_changed, then lists the tools: prints the
// names, one a line. Usage: node listen.mjs SOCKET READY_FILE
import net from 'node:net';
import fs from 'node:fs';

const [socket, ready] = process.argv.slice(2);
const c = net.createConnection(socket);
let buf = '';
let listed = false;
const send = (m) => c.write(JSON.stringify(m) + '\n');
c.on('data', (d) => {
  buf += d;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const m = JSON.parse(buf.slice(0, nl));
    buf = buf.slice(nl + 1);
    if (m.id === 1) {
      if (!m.result?.capabilities?.tools?.listChanged) { console.log('NO-LIST-CHANGED-CAPABILITY'); process.exit(1); }
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      fs.writeFileSync(ready, 'ready\n');
    } else if (m.method === 'notifications/tools/list_changed' && !listed) {
      listed = true;
      send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    } else if (m.id === 2) {
      for (const t of m.result.tools) console.log(t.name);
      process.exit(0);
    }
  }
});
send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {} } });
setTimeout(() => { console.log('TIMEOUT'); process.exit(1); }, 30000);
