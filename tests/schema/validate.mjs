// Validates every N.json in a directory against nono's schema and capsule's
// own schema with ajv (draft 2020-12). Prints one line per failure.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.resolve(path.dirname(new URL(import.meta.url).pathname), '../package.json'));
const Ajv2020 = require('ajv/dist/2020').default;

const [nonoPath, capsulePath, dir] = process.argv.slice(2);
const ajv = new Ajv2020({ allErrors: true, strict: false });
const nono = ajv.compile(JSON.parse(fs.readFileSync(nonoPath, 'utf8')));
const own = ajv.compile(JSON.parse(fs.readFileSync(capsulePath, 'utf8')));

let ok = 0, bad = 0;
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
  const name = fs.readFileSync(path.join(dir, f.replace(/json$/, 'name')), 'utf8').trim();
  const doc = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
  for (const [label, v] of [['nono', nono], ['capsule', own]]) {
    if (!v(doc)) {
      bad++;
      console.log(`FAIL ${name} against ${label} schema: ${ajv.errorsText(v.errors)}`);
    }
  }
  ok++;
}
console.log(`show output: ${ok} manifests checked against nono's and capsule's schemas, ${bad} failures`);
process.exit(bad || ok === 0 ? 1 : 0);
