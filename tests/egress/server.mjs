// Upstreams for the egress tests: one plain HTTP and two HTTPS servers (a
// certificate for 127.0.0.1 from the test CA) on loopback ports the kernel
// picks, printed as JSON on the first line of stdout. Every response echoes
// what arrived: the request line, then the headers, then the body, so a test
// can see what the proxy forwarded (and, by hash, whether a credential
// reached it).
// GET /big?bytes=N streams N bytes (benchmarks); /hang never answers.
// Echoes that try to smuggle an injected secret back past capsule's mask:
// /chunks?size=N&pad=P sends P bytes of padding, the request URL and its
// Authorization header, in chunks of N bytes; /forms sends the
// Authorization header's credential (after "Bearer ") re-encoded: JSON
// with \/, percent-encoded in both cases, base64 and base64url after 0, 1
// and 2 bytes; /gzip sends the echo gzip-compressed whatever was asked.
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import crypto from 'node:crypto';
import zlib from 'node:zlib';

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
  if (url.pathname.endsWith('/chunks')) {
    const size = Number(url.searchParams.get('size') || 1);
    const text = 'x'.repeat(Number(url.searchParams.get('pad') || 0)) +
      `${req.url}\n${req.headers.authorization || ''}\nend\n`;
    res.writeHead(200, {'Content-Type': 'text/plain'}); // chunked
    for (let i = 0; i < text.length; i += size) res.write(text.slice(i, i + size));
    return res.end();
  }
  if (url.pathname.endsWith('/forms')) {
    const v = (req.headers.authorization || '').replace(/^Bearer /, '');
    const pct = encodeURIComponent(v).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
    const forms = {
      json: JSON.stringify({v}).replace(/\//g, '\\/'),
      pct_upper: pct,
      pct_lower: pct.replace(/%[0-9A-F]{2}/g, (s) => s.toLowerCase()),
      unicode: [...v].map((c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')).join(''),
    };
    for (const [i, pre] of ['', 'a', 'ab'].entries()) {
      forms[`b64_${i}`] = Buffer.from(pre + v + 'z').toString('base64');
      forms[`b64url_${i}`] = Buffer.from(pre + v + 'zz').toString('base64url');
    }
    const text = Object.entries(forms).map(([k, f]) => `form ${k}: ${f}\n`).join('');
    res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(text)});
    return res.end(text);
  }
  if (url.pathname.endsWith('/gzip')) {
    const body = zlib.gzipSync(`${req.url}\n${req.headers.authorization || ''}\n`);
    res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Encoding': 'gzip', 'Content-Length': body.length});
    return res.end(body);
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
const servers = [http.createServer(handle), https.createServer(tls, handle), https.createServer(tls, handle),
  https.createServer(tls, handle)];
// CAPSULE_TEST_LISTEN: another address (a veth's, inside a test's own netns)
const listenOn = process.env.CAPSULE_TEST_LISTEN || '127.0.0.1';
await Promise.all(servers.map((s) => new Promise((ok) => s.listen(0, listenOn, ok))));
const [h, s1, s2, s3] = servers.map((s) => s.address().port);
process.stdout.write(JSON.stringify({http: h, https: s1, https2: s2, https3: s3}) + '\n');
