'use strict';
// node-tools: a Selu capability in Node.js. It serves
// selu.capability.v1.CapabilityService (Invoke, HealthCheck) with
// @grpc/grpc-js, and declares its tools at run time (tool_source: dynamic):
// the orchestrator calls list_tools to learn about greet and sum.
// Usage: node server.js [ADDRESS]   (default 0.0.0.0:50051, Selu's port)

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// The proto is not committed here a second time. `npm install` runs this
// package's "prepare" script, which copies the repository's
// proto/selu/capability/v1/capability.proto next to this file (gitignored):
// the sandbox shows the capability only its own directory, so the contract
// has to live inside it at run time.
const PROTO = path.join(__dirname, 'capability.proto');
const ADDRESS = process.argv[2] || '0.0.0.0:50051';

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

function invoke(call, callback) {
  const {tool_name: tool, parameters} = call.request;
  // call.request.context carries session_id, user_id, ...; these tools need none of it
  const handler = Object.prototype.hasOwnProperty.call(HANDLERS, tool) ? HANDLERS[tool] : null;
  if (!handler) {
    callback(null, {
      success: false,
      result: '',
      error: `unknown tool "${tool}"; node-tools has ${Object.keys(HANDLERS).join(', ')}`,
    });
    return;
  }
  try {
    callback(null, {success: true, result: JSON.stringify(handler(parameters)), error: ''});
  } catch (e) {
    if (!(e instanceof ToolError)) console.error(`node-tools: ${tool} failed:`, e);
    const error = e instanceof ToolError ? e.message : `${tool}: internal error: ${e.message}`;
    callback(null, {success: false, result: '', error});
  }
}

function main() {
  if (!fs.existsSync(PROTO)) {
    console.error(`node-tools: ${PROTO} is missing; run \`npm install\` in ${__dirname} ` +
      '(its "prepare" script copies it from the repository\'s proto/ directory)');
    process.exit(1);
  }
  const def = protoLoader.loadSync(PROTO, {keepCase: true, defaults: true});
  const service = grpc.loadPackageDefinition(def).selu.capability.v1.CapabilityService.service;
  const server = new grpc.Server();
  server.addService(service, {
    Invoke: invoke,
    HealthCheck: (call, callback) => callback(null, {healthy: true}),
  });
  server.bindAsync(ADDRESS, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error(`node-tools: cannot listen on ${ADDRESS}: ${err.message}`);
      process.exit(1);
    }
    console.error(`node-tools: serving selu.capability.v1.CapabilityService on ${ADDRESS}`);
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
