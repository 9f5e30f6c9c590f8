// An MCP session on serve's unix socket that waits for
// notifications/tools/list_changed, then lists the tools, until the list
// holds WANT (another reload, e.g. an earlier change's, may come first):
// prints that list's names, one a line; on timeout, TIMEOUT and the last
// list. Usage: node listen.mjs SOCKET READY_FILE WANT
import net from 'node:net';
import fs from 'node:fs';

const [socket, ready, want] = process.argv.slice(2);
const c = net.createConnection(socket);
let buf = '';
let next = 2;
let last = [];
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
    } else if (m.method === 'notifications/tools/list_changed') {
      send({ jsonrpc: '2.0', id: next++, method: 'tools/list' });
    } else if (typeof m.id === 'number' && m.id >= 2 && m.result) {
      last = m.result.tools.map((t) => t.name);
      if (last.includes(want)) {
        for (const t of last) console.log(t);
        process.exit(0);
      }
    }
  }
});
send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {} } });
setTimeout(() => { console.log('TIMEOUT'); for (const t of last) console.log(t); process.exit(1); }, 60000);
