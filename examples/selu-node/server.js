'use strict';
// node-tools: a Selu capability in Node.js. With @grpc/grpc-js it serves
// both of Selu's contracts: the seed's selu.capability.v1.CapabilityService
// (Invoke, HealthCheck) and the orchestrator's current
// selu.capability.v1.Capability (Invoke, StreamInvoke, Healthcheck), and it
// declares its tools at run time (tool_source: dynamic): the orchestrator
// calls list_tools to learn about greet and sum.
// Usage: node server.js [--protocol service|capability|both] [ADDRESS]
//   (default both, on 0.0.0.0:50051, Selu's port)

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// The proto is not committed here a second time. `npm install` runs this
// package's "prepare" script, which copies the repository's
// proto/selu/capability/v1/capability.proto next to this file (gitignored):
// the sandbox shows the capability only its own directory, so the contract
// has to live inside it at run time.
// The orchestrator's proto is copied the same way, as orchestrator.proto
// (from proto/selu/orchestrator/capability.proto, MIT, Selu's own).
const PROTO = path.join(__dirname, 'capability.proto');
const ORCH_PROTO = path.join(__dirname, 'orchestrator.proto');
const argv = process.argv.slice(2);
let PROTOCOL = 'both';
if (argv[0] === '--protocol') {
  PROTOCOL = argv[1];
  argv.splice(0, 2);
}
const ADDRESS = argv[0] || '0.0.0.0:50051';

// Longest name greet accepts, and most numbers sum adds; the schemas below
// say the same, and the handlers check again rather than trust the caller.
const MAX_NAME = 200;
const MAX_NUMBERS = 10000;

const TOOLS = [
  {
    name: 'greet',
    description: 'Greet someone by name.',
    input_schema: {
      type: 'object',
      properties: {
        name: {type: 'string', description: 'Who to greet', minLength: 1, maxLength: MAX_NAME},
      },
      required: ['name'],
      additionalProperties: false,
    },
    recommended_policy: 'allow',
  },
  {
    name: 'sum',
    description: 'Add up a list of numbers.',
    input_schema: {
      type: 'object',
      properties: {
        numbers: {
          type: 'array',
          description: 'The numbers to add',
          items: {type: 'number'},
          maxItems: MAX_NUMBERS,
        },
      },
      required: ['numbers'],
      additionalProperties: false,
    },
    recommended_policy: 'allow',
  },
  {
    name: 'make_file',
    description: 'Write text into a new file and hand it back as an artifact.',
    input_schema: {
      type: 'object',
      properties: {
        filename: {type: 'string', minLength: 1, maxLength: 100},
        text: {type: 'string', maxLength: 100000},
      },
      required: ['filename', 'text'],
      additionalProperties: false,
    },
    recommended_policy: 'allow',
  },
  {
    name: 'read_attachments',
    description: 'Read the files attached to the call (their names, sizes and text).',
    input_schema: {type: 'object', properties: {attachments: {type: 'array'}}},
    recommended_policy: 'allow',
  },
  {
    name: 'whoami',
    description: 'What the orchestrator said about this call: the contract, session, thread, credentials.',
    input_schema: {type: 'object', properties: {}, additionalProperties: false},
    recommended_policy: 'allow',
  },
];

// A tool's failure, reported as success=false with this message.
class ToolError extends Error {}

function kindOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return {object: 'an object', string: 'a string', number: 'a number', boolean: 'a boolean'}[typeof v];
}

// The parameters as an object holding exactly the keys the tool takes.
function params(tool, text, keys) {
  let p;
  try {
    p = text === '' ? {} : JSON.parse(text);
  } catch (e) {
    throw new ToolError(`${tool}: the parameters are not valid JSON (${e.message})`);
  }
  if (p === null || typeof p !== 'object' || Array.isArray(p))
    throw new ToolError(`${tool}: the parameters must be a JSON object, not ${kindOf(p)}`);
  for (const k of Object.keys(p))
    if (!keys.includes(k))
      throw new ToolError(`${tool}: unknown parameter "${k}"; it takes ${keys.map((x) => `"${x}"`).join(', ')}`);
  for (const k of keys)
    if (!(k in p)) throw new ToolError(`${tool}: the required parameter "${k}" is missing`);
  return p;
}

const HANDLERS = {
  list_tools: () => ({tools: TOOLS}),
  greet: (text) => {
    const {name} = params('greet', text, ['name']);
    if (typeof name !== 'string') throw new ToolError(`greet: "name" must be a string, not ${kindOf(name)}`);
    const len = [...name].length; // code points, as JSON Schema's maxLength counts
    if (len === 0 || len > MAX_NAME)
      throw new ToolError(`greet: "name" must be 1 to ${MAX_NAME} characters long, not ${len}`);
    return {greeting: `Hello, ${name}`};
  },
  sum: (text) => {
    const {numbers} = params('sum', text, ['numbers']);
    if (!Array.isArray(numbers)) throw new ToolError(`sum: "numbers" must be an array, not ${kindOf(numbers)}`);
    if (numbers.length > MAX_NUMBERS)
      throw new ToolError(`sum: "numbers" has ${numbers.length} items; the limit is ${MAX_NUMBERS}`);
    let total = 0;
    numbers.forEach((n, i) => {
      if (typeof n !== 'number') throw new ToolError(`sum: "numbers"[${i}] must be a number, not ${kindOf(n)}`);
      total += n;
    });
    if (!Number.isFinite(total)) throw new ToolError('sum: the sum is too large to represent');
    return {sum: total};
  },
};

// Artifacts (the orchestrator's contract): uploaded files and made ones,
// by id, in memory for the life of this server, at most MAX_ARTIFACTS.
const MAX_ARTIFACTS = 100;
const MAX_ARTIFACT_BYTES = 16 << 20;
const artifacts = new Map();
let artifactSeq = 0;
function storeArtifact(filename, mimeType, data) {
  if (artifacts.size >= MAX_ARTIFACTS) artifacts.delete(artifacts.keys().next().value);
  const id = `art-${++artifactSeq}`;
  artifacts.set(id, {filename, mime_type: mimeType, data});
  return id;
}

HANDLERS.make_file = (text) => {
  const {filename, text: body} = params('make_file', text, ['filename', 'text']);
  const id = storeArtifact(String(filename), 'text/plain', Buffer.from(String(body)));
  return {artifact: {capability_artifact_id: id, filename: String(filename), mime_type: 'text/plain'}};
};

HANDLERS.read_attachments = (text) => {
  const {attachments} = params('read_attachments', text, ['attachments']);
  if (!Array.isArray(attachments)) throw new ToolError('read_attachments: "attachments" must be an array');
  return {
    files: attachments.map((a) => {
      const stored = artifacts.get(a && a.capability_artifact_id);
      if (!stored) throw new ToolError(`read_attachments: no artifact ${a && a.capability_artifact_id}`);
      return {filename: stored.filename, size_bytes: stored.data.length, text: stored.data.toString('utf8')};
    }),
  };
};

// UploadInputArtifact: chunks in (the first names the file), an id out.
function uploadArtifact(call, callback) {
  const parts = [];
  let filename = '', mimeType = '', size = 0, failed = false;
  call.on('data', (chunk) => {
    if (!parts.length && chunk.filename) filename = chunk.filename;
    if (!parts.length && chunk.mime_type) mimeType = chunk.mime_type;
    size += chunk.data.length;
    if (size > MAX_ARTIFACT_BYTES) failed = true;
    else parts.push(chunk.data);
  });
  call.on('end', () => {
    if (failed) {
      callback(null, {capability_artifact_id: '', size_bytes: size, error: `larger than ${MAX_ARTIFACT_BYTES} bytes`});
      return;
    }
    const id = storeArtifact(filename || 'upload.bin', mimeType || 'application/octet-stream', Buffer.concat(parts));
    callback(null, {capability_artifact_id: id, size_bytes: size, error: ''});
  });
}

// DownloadOutputArtifact: the bytes in two chunks, the first naming the file.
function downloadArtifact(call) {
  const stored = artifacts.get(call.request.capability_artifact_id);
  if (!stored) {
    call.write({data: Buffer.alloc(0), filename: '', mime_type: '', done: true,
      error: `no artifact ${call.request.capability_artifact_id}`});
  } else {
    const half = Math.floor(stored.data.length / 2);
    call.write({data: stored.data.subarray(0, half), filename: stored.filename, mime_type: stored.mime_type,
      done: false, error: ''});
    call.write({data: stored.data.subarray(half), filename: '', mime_type: '', done: true, error: ''});
  }
  call.end();
}

// One call, whichever contract it came in: {result} or {error}.
// context is what the orchestrator said about the call (session_id, ...):
// `whoami` answers it, with the protocol, so a caller can see what arrived.
function run(tool, parameters, context) {
  if (tool === 'whoami') return {result: JSON.stringify(context)};
  const handler = Object.prototype.hasOwnProperty.call(HANDLERS, tool) ? HANDLERS[tool] : null;
  if (!handler)
    return {error: `unknown tool "${tool}"; node-tools has ${Object.keys(HANDLERS).join(', ')}`};
  try {
    return {result: JSON.stringify(handler(parameters))};
  } catch (e) {
    if (!(e instanceof ToolError)) console.error(`node-tools: ${tool} failed:`, e);
    return {error: e instanceof ToolError ? e.message : `${tool}: internal error: ${e.message}`};
  }
}

// The seed's CapabilityService: parameters and a context map in, success out.
function invoke(call, callback) {
  const {tool_name: tool, parameters, context} = call.request;
  const out = run(tool, parameters, {protocol: 'service', ...context});
  callback(null, {success: !out.error, result: out.result || '', error: out.error || ''});
}

// The orchestrator's Capability: args_json and config_json (the declared
// credentials) as bytes, session_id, capability_id, thread_id.
function capabilityContext(r) {
  return {
    protocol: 'capability',
    session_id: r.session_id,
    capability_id: r.capability_id,
    thread_id: r.thread_id,
    config: JSON.parse(r.config_json.length ? r.config_json.toString('utf8') : '{}'),
  };
}

function capabilityInvoke(call, callback) {
  const r = call.request;
  const out = run(r.tool_name, r.args_json.toString('utf8'), capabilityContext(r));
  callback(null, {result_json: Buffer.from(out.result || ''), error: out.error || ''});
}

// StreamInvoke: the result in chunks (two here), the last marked done.
function capabilityStream(call) {
  const r = call.request;
  const out = run(r.tool_name, r.args_json.toString('utf8'), {...capabilityContext(r), streamed: true});
  if (out.error) {
    call.write({data: Buffer.alloc(0), done: true, error: out.error});
  } else {
    const half = Math.floor(out.result.length / 2);
    call.write({data: Buffer.from(out.result.slice(0, half)), done: false, error: ''});
    call.write({data: Buffer.from(out.result.slice(half)), done: true, error: ''});
  }
  call.end();
}

function main() {
  for (const p of [PROTO, ORCH_PROTO]) {
    if (!fs.existsSync(p)) {
      console.error(`node-tools: ${p} is missing; run \`npm install\` in ${__dirname} ` +
        '(its "prepare" script copies it from the repository\'s proto/ directory)');
      process.exit(1);
    }
  }
  if (!['service', 'capability', 'both'].includes(PROTOCOL)) {
    console.error(`node-tools: --protocol takes service, capability or both, not ${PROTOCOL}`);
    process.exit(2);
  }
  // Both protos declare package selu.capability.v1 with messages of the same
  // names: each is loaded into a definition of its own.
  const opts = {keepCase: true, defaults: true};
  const seed = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO, opts)).selu.capability.v1;
  const orch = grpc.loadPackageDefinition(protoLoader.loadSync(ORCH_PROTO, opts)).selu.capability.v1;
  const server = new grpc.Server();
  const served = [];
  if (PROTOCOL !== 'capability') {
    server.addService(seed.CapabilityService.service, {
      Invoke: invoke,
      HealthCheck: (call, callback) => callback(null, {healthy: true}),
    });
    served.push('CapabilityService');
  }
  if (PROTOCOL !== 'service') {
    server.addService(orch.Capability.service, {
      Invoke: capabilityInvoke,
      StreamInvoke: capabilityStream,
      Healthcheck: (call, callback) => callback(null, {ready: true, message: 'ready'}),
      UploadInputArtifact: uploadArtifact,
      DownloadOutputArtifact: downloadArtifact,
    });
    served.push('Capability');
  }
  server.bindAsync(ADDRESS, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error(`node-tools: cannot listen on ${ADDRESS}: ${err.message}`);
      process.exit(1);
    }
    console.error(`node-tools: serving selu.capability.v1.${served.join(' and ')} on ${ADDRESS}`);
  });
  // Finish the calls in flight, but not forever: a stop is a stop. The
  // handlers matter when this runs as PID 1 of its namespace, where a signal
  // without one is ignored.
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => {
      server.forceShutdown();
      process.exit(0);
    }, 1000);
    server.tryShutdown(() => {
      clearTimeout(force);
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
