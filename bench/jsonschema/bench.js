// ajv side of the benchmark: validation only (instances parsed beforehand).
// usage: node bench.js CASES.json SECONDS  -> "name<TAB>instances/s" lines
'use strict';
const fs = require('fs');
const path = require('path');
const modules = path.resolve(process.env.CAPSULE_NODE_MODULES || path.join(__dirname, '../../tests/node_modules'));
const Ajv2020 = require(path.join(modules, 'ajv/dist/2020')).default;
const cases = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const seconds = Number(process.argv[3] || 0.5);
const ajv = new Ajv2020({ strict: false }); // defaults: first error, formats not asserted
let sink = 0;
for (const c of cases) {
  const validate = ajv.compile(c.schema);
  c.instances.forEach((inst, i) => {
    if (validate(inst) !== c.valid[i]) throw new Error(c.name + ': verdict changed');
  });
  // warm up the JIT, then measure
  for (let i = 0; i < 2000 / c.instances.length; i++) for (const inst of c.instances) sink += validate(inst) ? 1 : 0;
  let n = 0;
  const start = process.hrtime.bigint();
  const budget = BigInt(Math.round(seconds * 1e9));
  let elapsed = 0n;
  while (elapsed < budget) {
    for (let k = 0; k < 16; k++) for (const inst of c.instances) { sink += validate(inst) ? 1 : 0; n++; }
    elapsed = process.hrtime.bigint() - start;
  }
  process.stdout.write(`${c.name}\t${(n / (Number(elapsed) / 1e9)).toFixed(0)}\n`);
}
if (sink < 0) console.log(sink);
