// Upstreams for the egress tests: one plain HTTP and two HTTPS servers (a
// certificate for 127.0.0.1 from the test CA) on loopback ports the kernel
// picks, printed as JSON on the first line of stdout. Every response echoes
// what arrived: the request line, then the headers, then the body, so a test
// can see what the proxy forwarded (and, by hash, whether a credential
// reached it).
// GET /big?bytes=N streams N bytes (benchmarks); /hang never answers.
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import crypto from 'node:crypto';

const sha = (s) => crypto.createHash('sha256').update(s).digest('hex');

const [keyFile, certFile] = process.argv.slice(2);
const chunk = Buffer.alloc(1 << 16, 0x61);

function handle(req, res) {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/hang') return; // never answers
  if (url.pathname === '/big') {
    let left = Number(url.searchParams.get('bytes') || 0);
    res.writeHead(200, {'Content-Type': 'application/octet-stream', 'Content-Length': left});
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once('drain', pump);
      }
      res.end();
    };
    return pump();
  }
  const parts = [];
  req.on('data', (d) => parts.push(d));
  req.on('end', () => {
    // what arrived, and its SHA-256: capsule scrubs an injected secret from
    // the response the tool sees, so tests compare hashes
    let text = `${req.method} ${req.url}\nurl#sha256: ${sha(req.url)}\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      text += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\n`;
      text += `${req.rawHeaders[i]}#sha256: ${sha(req.rawHeaders[i + 1])}\n`;
    }
    text += `\n${Buffer.concat(parts).toString()}\n`;
    res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(text)});
    res.end(text);
  });
}

const tls = {key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile)};
const servers = [http.createServer(handle), https.createServer(tls, handle), https.createServer(tls, handle)];
// CAPSULE_TEST_LISTEN: another address (a veth's, inside a test's own netns)
const listenOn = process.env.CAPSULE_TEST_LISTEN || '127.0.0.1';
await Promise.all(servers.map((s) => new Promise((ok) => s.listen(0, listenOn, ok))));
const [h, s1, s2] = servers.map((s) => s.address().port);
process.stdout.write(JSON.stringify({http: h, https: s1, https2: s2}) + '\n');
