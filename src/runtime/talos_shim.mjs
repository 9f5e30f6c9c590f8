// capsule's Talos shim, run as `node --input-type=module -e <this file>`
// inside the tool's sandbox (embedded in capsule at build time).
// Reads one JSON request on stdin: {module, function, args, settings,
// credentials, dataDir}; imports the module, calls the export named by the
// function with (args, context) and writes one line: {"ok": true,
// "result": ...} or {"ok": false, "error": "..."} for a thrown Error. The
// context carries config (settings and credentials merged), dataDir,
// settings and credentials.
import { pathToFileURL } from 'node:url';
import { mkdirSync } from 'node:fs';
let input = '';
for await (const chunk of process.stdin) input += chunk;
const req = JSON.parse(input);
const done = (o) => process.stdout.write(JSON.stringify(o) + '\n', () => process.exit(0));
try {
  mkdirSync(req.dataDir, { recursive: true });
  const mod = await import(pathToFileURL(req.module).href);
  const fn = typeof mod[req.function] === 'function' ? mod[req.function]
    : mod.default && typeof mod.default[req.function] === 'function' ? mod.default[req.function] : null;
  if (!fn) throw new Error(`the module exports no function named ${req.function}`);
  const config = { ...req.settings, ...req.credentials };
  const result = await fn(req.args, { config, dataDir: req.dataDir, settings: req.settings,
                                       credentials: req.credentials });
  done({ ok: true, result: result === undefined ? null : result });
} catch (e) {
  done({ ok: false, error: e instanceof Error ? e.message : String(e) });
}
