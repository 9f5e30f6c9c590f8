// Benchmark cases: realistic tool input schemas (what agents send to tools)
// with small to large instances, valid and invalid. Writes JSON to stdout:
// [{"name", "schema", "instances": [...], "valid": [expected verdicts]}]
'use strict';

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 100 },
    days: { type: 'integer', minimum: 1, maximum: 14 },
    units: { enum: ['metric', 'imperial'] },
  },
  required: ['city'],
  additionalProperties: false,
};

const searchFiles = {
  type: 'object',
  properties: {
    query: { type: 'string', minLength: 1 },
    path: { type: 'string', pattern: '^(/[^/\\0]+)*/?$' },
    glob: { type: 'array', items: { type: 'string' }, maxItems: 20 },
    case_sensitive: { type: 'boolean' },
    max_results: { type: 'integer', minimum: 1, maximum: 1000 },
  },
  required: ['query'],
  additionalProperties: false,
};

const createIssue = {
  $defs: {
    label: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{0,49}$' },
    user: { type: 'string', pattern: '^[A-Za-z0-9-]{1,39}$' },
  },
  type: 'object',
  properties: {
    owner: { $ref: '#/$defs/user' },
    repo: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,100}$' },
    title: { type: 'string', minLength: 1, maxLength: 256 },
    body: { type: 'string', maxLength: 65536 },
    labels: { type: 'array', items: { $ref: '#/$defs/label' }, uniqueItems: true, maxItems: 10 },
    assignees: { type: 'array', items: { $ref: '#/$defs/user' }, maxItems: 10 },
    milestone: { type: ['integer', 'null'], minimum: 1 },
  },
  required: ['owner', 'repo', 'title'],
  additionalProperties: false,
};

const sendEmail = {
  type: 'object',
  properties: {
    to: { type: 'array', items: { type: 'string', pattern: '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$' }, minItems: 1 },
    cc: { type: 'array', items: { type: 'string', pattern: '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$' } },
    subject: { type: 'string', maxLength: 998 },
    body: { type: 'string' },
    priority: { enum: ['low', 'normal', 'high'] },
    attachments: {
      type: 'array',
      items: {
        type: 'object',
        properties: { name: { type: 'string' }, size: { type: 'integer', minimum: 0 }, mime: { type: 'string' } },
        required: ['name', 'size'],
      },
    },
  },
  required: ['to', 'subject', 'body'],
  additionalProperties: false,
};

const order = {
  $defs: {
    // integer cents: ajv checks multipleOf 0.01 in binary floating point and
    // rejects 12.34, which would make the valid orders invalid on one side
    money: { type: 'integer', minimum: 0, multipleOf: 1 },
    address: {
      type: 'object',
      properties: {
        street: { type: 'string', minLength: 1 },
        city: { type: 'string', minLength: 1 },
        zip: { type: 'string', pattern: '^[0-9]{5}(-[0-9]{4})?$' },
        country: { type: 'string', minLength: 2, maxLength: 2 },
      },
      required: ['street', 'city', 'country'],
      additionalProperties: false,
    },
    item: {
      type: 'object',
      properties: {
        sku: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{4}$' },
        qty: { type: 'integer', minimum: 1, maximum: 999 },
        price: { $ref: '#/$defs/money' },
        options: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: 8 },
      },
      required: ['sku', 'qty', 'price'],
      additionalProperties: false,
    },
  },
  type: 'object',
  properties: {
    id: { type: 'string', minLength: 8 },
    customer: {
      type: 'object',
      properties: { name: { type: 'string' }, email: { type: 'string' }, vip: { type: 'boolean' } },
      required: ['name'],
    },
    shipping: { $ref: '#/$defs/address' },
    billing: { $ref: '#/$defs/address' },
    items: { type: 'array', items: { $ref: '#/$defs/item' }, minItems: 1 },
    coupon: { oneOf: [{ type: 'null' }, { type: 'string', pattern: '^[A-Z0-9]{6,12}$' }] },
    notes: { type: 'string', maxLength: 2000 },
  },
  required: ['id', 'customer', 'shipping', 'items'],
  additionalProperties: false,
};

// a discriminated union, as tool routers write them
const action = {
  type: 'object',
  properties: { kind: { enum: ['click', 'type', 'scroll', 'wait'] } },
  required: ['kind'],
  allOf: [
    { if: { properties: { kind: { const: 'click' } } }, then: { properties: { x: { type: 'integer' }, y: { type: 'integer' } }, required: ['x', 'y'] } },
    { if: { properties: { kind: { const: 'type' } } }, then: { properties: { text: { type: 'string', maxLength: 10000 } }, required: ['text'] } },
    { if: { properties: { kind: { const: 'scroll' } } }, then: { properties: { dy: { type: 'number' } }, required: ['dy'] } },
  ],
  unevaluatedProperties: false,
};

function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const r = rng(7);
const item = (i) => ({ sku: 'ABC-' + String(1000 + (i % 9000)), qty: 1 + (i % 20), price: Math.round(r() * 10000), options: { color: 'red', size: 'M' } });
const addr = { street: '1 Main St', city: 'Springfield', zip: '12345', country: 'US' };
const orderOf = (n) => ({ id: 'ORD-00012345', customer: { name: 'Ada', email: 'ada@example.com', vip: true }, shipping: addr, billing: addr, items: Array.from({ length: n }, (_, i) => item(i)), coupon: 'SAVE2024', notes: 'leave at the door' });

const cases = [
  { name: 'weather small', schema: weather, instances: [{ city: 'Paris', days: 3, units: 'metric' }, { city: 'Oslo' }, { city: '', days: 30 }, { city: 'Rome', extra: 1 }] },
  { name: 'search_files', schema: searchFiles, instances: [{ query: 'TODO', path: '/src/core', glob: ['*.c', '*.h'], case_sensitive: false, max_results: 50 }, { query: 'x' }, { query: 'x', path: 'relative' }, { query: '', max_results: 0 }] },
  { name: 'create_issue', schema: createIssue, instances: [{ owner: 'octo-org', repo: 'capsule', title: 'Crash on empty manifest', body: 'Steps: ...'.repeat(20), labels: ['bug', 'p1', 'needs-triage'], assignees: ['alice', 'bob'], milestone: 3 }, { owner: 'octo', repo: 'x', title: 'T', labels: ['bug', 'bug'] }, { owner: 'bad owner!', repo: 'x', title: 'T' }] },
  { name: 'send_email', schema: sendEmail, instances: [{ to: ['a@example.com', 'b@example.org'], cc: ['c@example.net'], subject: 'Hi', body: 'Hello there', priority: 'normal', attachments: [{ name: 'a.pdf', size: 1234, mime: 'application/pdf' }] }, { to: [], subject: 'x', body: 'y' }, { to: ['not-an-email'], subject: 'x', body: 'y' }] },
  { name: 'ui_action (if/then, unevaluated)', schema: action, instances: [{ kind: 'click', x: 10, y: 20 }, { kind: 'type', text: 'hello' }, { kind: 'scroll', dy: -3.5 }, { kind: 'click', x: 1 }, { kind: 'wait', extra: true }] },
  { name: 'order 10 items', schema: order, instances: [orderOf(10), Object.assign(orderOf(10), { coupon: 'bad' })] },
  { name: 'order 1000 items', schema: order, instances: [orderOf(1000)] },
  { name: 'order 1000 items, last bad', schema: order, instances: [Object.assign(orderOf(1000), { items: orderOf(1000).items.map((it, i) => i === 999 ? { ...it, qty: 0 } : it) })] },
];

const Ajv2020 = require(require('path').resolve(process.env.CAPSULE_NODE_MODULES || require('path').join(__dirname, '../../tests/node_modules'), 'ajv/dist/2020')).default;
const ajv = new Ajv2020({ strict: false });
for (const c of cases) {
  const v = ajv.compile(c.schema);
  c.valid = c.instances.map((i) => v(i));
}
process.stdout.write(JSON.stringify(cases));
