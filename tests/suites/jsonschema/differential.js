// Differential test data: a seeded generator of draft 2020-12 schemas and
// instances, judged by ajv (ajv/dist/2020). Prints one JSON line per schema:
// {"schema": S, "instances": [...], "valid": [ajv's verdicts]}; the C driver
// (differential.c) checks that capsule agrees on every case.
// usage: node differential.js [SEED] [COUNT]
'use strict';
const path = require('path');
const modules = path.resolve(process.env.CAPSULE_NODE_MODULES || path.join(__dirname, '../../node_modules'));
const Ajv2020 = require(path.join(modules, 'ajv/dist/2020')).default;

let seed = Number(process.argv[2] || 20251123) >>> 0;
const COUNT = Number(process.argv[3] || 1500);
const INSTANCES = 10;

function rand() { // mulberry32
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (a, b) => a + Math.floor(rand() * (b - a + 1));
const pick = (arr) => arr[Math.floor(rand() * arr.length)];
const chance = (p) => rand() < p;

const NAMES = ['a', 'b', 'c', 'id', 'name', 'tags', 'x-y', 'é', 'n1'];
// binary-exact divisors: ajv divides in floating point, capsule exactly;
// with these both are exact, so they must agree
const DIVISORS = [1, 2, 3, 5, 0.5, 0.25];
const PATTERNS = ['^[a-z]+$', '\\d', '^.{2,4}$', '^\\w+$', 'é', '^(ab)*$', '[A-Z]', '^\\S+$',
  '^a|b$', '\\s', 'x?y+', '^[^0-9]*$', '\\bfoo\\b'];
const STRINGS = ['', 'a', 'ab', 'abc', 'abcd', 'ABC', 'a1', '123', 'é', 'éé', '😀', 'a b',
  'foo', 'foo bar', 'xyy', 'abab', 'ab ab', 'Z', '\u00a0', 'n1', 'x-y', 'id', 'name'];
const TYPES = ['null', 'boolean', 'integer', 'number', 'string', 'array', 'object'];

function scalar() {
  switch (int(0, 6)) {
    case 0: return null;
    case 1: return chance(0.5);
    case 2: return int(-5, 20);
    case 3: return int(-40, 40) / 4;
    case 4: return pick(STRINGS);
    case 5: return int(0, 3);
    default: return pick(STRINGS);
  }
}

function value(depth) {
  if (depth <= 0 || chance(0.5)) return scalar();
  if (chance(0.5)) {
    const n = int(0, 5), a = [];
    for (let i = 0; i < n; i++) a.push(chance(0.3) && a.length ? a[int(0, a.length - 1)] : value(depth - 1));
    return a;
  }
  const n = int(0, 5), o = {};
  for (let i = 0; i < n; i++) o[pick(NAMES)] = value(depth - 1);
  return o;
}

function schema(depth, defs) {
  if (depth <= 0 || chance(0.08)) return chance(0.8) ? {} : chance(0.5);
  const s = {};
  const kw = int(1, 4);
  for (let k = 0; k < kw; k++) {
    switch (int(0, 27)) {
      case 0: s.type = chance(0.7) ? pick(TYPES) : [pick(TYPES), pick(TYPES)].filter((t, i, a) => a.indexOf(t) === i); break;
      case 1: s.enum = [scalar(), scalar(), value(1)]; break;
      case 2: s.const = value(1); break;
      case 3: s.minimum = int(-5, 10) / (chance(0.5) ? 1 : 2); break;
      case 4: s.exclusiveMaximum = int(0, 15) / (chance(0.5) ? 1 : 4); break;
      case 5: s.multipleOf = pick(DIVISORS); break;
      case 6: s.minLength = int(0, 3); s.maxLength = int(1, 5); break;
      case 7: s.pattern = pick(PATTERNS); break;
      case 8: {
        s.properties = {};
        for (let i = int(1, 3); i > 0; i--) s.properties[pick(NAMES)] = schema(depth - 1, defs);
        if (chance(0.5)) s.required = [...new Set([pick(NAMES), pick(NAMES)])];
        break;
      }
      case 9: s.additionalProperties = chance(0.5) ? false : schema(depth - 1, defs); break;
      case 10: s.patternProperties = { [pick(PATTERNS)]: schema(depth - 1, defs) }; break;
      case 11: s.propertyNames = { pattern: pick(PATTERNS) }; break;
      case 12: s.minProperties = int(0, 3); if (chance(0.5)) s.maxProperties = int(1, 4); break;
      case 13: s.dependentRequired = { [pick(NAMES)]: [pick(NAMES)] }; break;
      case 14: s.dependentSchemas = { [pick(NAMES)]: schema(depth - 1, defs) }; break;
      case 15: s.items = schema(depth - 1, defs); break;
      case 16: s.prefixItems = [schema(depth - 1, defs), schema(depth - 1, defs)]; if (chance(0.3)) s.items = false; break;
      case 17: s.contains = schema(depth - 1, defs); if (chance(0.5)) s.minContains = int(0, 2); if (chance(0.5)) s.maxContains = int(1, 3); break;
      case 18: s.uniqueItems = chance(0.8); break;
      case 19: s.minItems = int(0, 3); if (chance(0.5)) s.maxItems = int(1, 4); break;
      case 20: s.allOf = [schema(depth - 1, defs), schema(depth - 1, defs)]; break;
      case 21: s.anyOf = [schema(depth - 1, defs), schema(depth - 1, defs)]; break;
      case 22: s.oneOf = [schema(depth - 1, defs), schema(depth - 1, defs), schema(depth - 1, defs)]; break;
      case 23: s.not = schema(depth - 1, defs); break;
      case 24: s.if = schema(depth - 1, defs); s.then = schema(depth - 1, defs); if (chance(0.6)) s.else = schema(depth - 1, defs); break;
      case 25: s.unevaluatedProperties = chance(0.6) ? false : schema(depth - 1, defs); break;
      case 26: s.unevaluatedItems = chance(0.6) ? false : schema(depth - 1, defs); break;
      case 27: {
        const name = 'd' + Object.keys(defs).length;
        defs[name] = null;
        defs[name] = schema(depth - 1, defs);
        s.$ref = '#/$defs/' + name;
        break;
      }
    }
  }
  return s;
}

// instances that tend to hit the schema's keywords
function instanceFor(s, depth) {
  if (chance(0.35) || typeof s !== 'object') return value(3);
  if (s.properties || s.required || s.patternProperties || s.dependentRequired) {
    const o = {};
    for (const k of Object.keys(s.properties || {})) if (chance(0.7)) o[k] = instanceFor(s.properties[k], depth - 1);
    for (const k of s.required || []) if (chance(0.8)) o[k] = value(1);
    if (chance(0.4)) o[pick(NAMES)] = value(1);
    return o;
  }
  if (s.items || s.prefixItems || s.contains || s.uniqueItems !== undefined) {
    const n = int(0, 5), a = [];
    for (let i = 0; i < n; i++) a.push(chance(0.3) && a.length ? a[0] : value(1));
    return a;
  }
  if (s.const !== undefined && chance(0.5)) return s.const;
  if (s.enum && chance(0.5)) return pick(s.enum);
  return value(2);
}

const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: false });
for (let i = 0; i < COUNT; i++) {
  const defs = {};
  const s = schema(int(1, 4), defs);
  const root = typeof s === 'object' && Object.keys(defs).length ? { ...s, $defs: defs } : s;
  const text = JSON.stringify(root);
  // ajv 8 drops the annotations of some "contains" (e.g. {"contains": {}})
  // when computing unevaluatedItems; the spec and the JSON Schema Test Suite
  // count them. Keep the two keywords apart so verdicts stay comparable.
  if (text.includes('"contains"') && text.includes('"unevaluatedItems"')) continue;
  // ajv 8 skips "contains" on [] when "prefixItems" holds an "if":
  // {"contains":{"type":"string"},"prefixItems":[{"if":{},"then":{}}]} accepts [].
  // Same with "prefixItems": {"prefixItems":[{},false],"contains":{}} accepts [].
  if (text.includes('"contains"') && (text.includes('"if"') || text.includes('"prefixItems"'))) continue;
  // ajv 8 stops collecting annotations at an always-true branch:
  // {"unevaluatedItems":false,"anyOf":[{"items":{}},{}]} rejects [1], though
  // the first branch evaluated every item. No trivial subschemas there.
  if (text.includes('"unevaluated') && /\{\}|true/.test(text)) continue;
  // ajv 8 keeps the annotations of a failed "if":
  // {"if":{"additionalProperties":false},"then":{"minItems":2},
  //  "unevaluatedProperties":{"enum":[null]}} accepts {"b":2}, though a failed
  // subschema evaluates nothing (so "b" must be null).
  if (text.includes('"unevaluated') && text.includes('"if"')) continue;
  let validate;
  try {
    validate = ajv.compile(root);
  } catch (e) {
    continue; // ajv refused the schema (should not happen); not a comparison
  }
  const instances = [], valid = [];
  try {
    for (let j = 0; j < INSTANCES; j++) {
      const inst = instanceFor(root, 3);
      instances.push(inst);
      valid.push(validate(inst));
    }
  } catch (e) {
    // ajv's generated code throws on a few unevaluatedProperties shapes:
    // no verdict to compare against, so the schema is reported and skipped
    process.stdout.write(JSON.stringify({ ajv_error: String(e.message), schema: root }) + '\n');
    continue;
  }
  process.stdout.write(JSON.stringify({ schema: root, instances, valid }) + '\n');
}
