'use strict';
// A Selu server for tests/state/egress.sh: a warm instance whose tool
// `fetch` makes two requests through capsule's egress proxy (HTTP_PROXY),
// one to a host:port the manifest allows and one to a port it does not,
// during the call. Serves both of Selu's contracts (the seed's
// CapabilityService and the orchestrator's Capability) on port 50051, with
// @grpc/grpc-js from examples/selu-node/node_modules (copied beside it).
const path = require('path');
const http = require('http');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// GET url through the proxy: resolves to the body's length and the status
function get(url) {
  const proxy = new URL(process.env.HTTP_PROXY || process.env.http_proxy);
  const target = new URL(url);
  return new Promise((resolve) => {
    const req = http.request({host: proxy.hostname, port: proxy.port, method: 'GET', path: url,
      headers: {Host: target.host, Connection: 'close'}}, (res) => {
      let n = 0;
      res.on('data', (c) => { n += c.length; });
      res.on('end', () => resolve({status: res.statusCode, bytes: n}));
      res.on('error', () => resolve({status: 0, bytes: n}));
    });
    req.on('error', () => resolve({status: 0, bytes: 0}));
    req.end();
  });
}

async function run(tool, text) {
  if (tool !== 'fetch') return {error: `unknown tool "${tool}"`};
  const p = JSON.parse(text || '{}');
  const allowed = await get(p.allowed);
  const refused = await get(p.refused);
  return {result: JSON.stringify({got: allowed.bytes, refused: refused.status})};
}

const opts = {keepCase: true, defaults: true};
const seed = grpc.loadPackageDefinition(protoLoader.loadSync(path.join(__dirname, 'capability.proto'), opts))
  .selu.capability.v1;
const orch = grpc.loadPackageDefinition(protoLoader.loadSync(path.join(__dirname, 'orchestrator.proto'), opts))
  .selu.capability.v1;
const server = new grpc.Server();
server.addService(seed.CapabilityService.service, {
  Invoke: (call, cb) => run(call.request.tool_name, call.request.parameters).then((out) =>
    cb(null, {success: !out.error, result: out.result || '', error: out.error || ''})),
  HealthCheck: (call, cb) => cb(null, {healthy: true}),
});
server.addService(orch.Capability.service, {
  Invoke: (call, cb) => run(call.request.tool_name, call.request.args_json.toString('utf8')).then((out) =>
    cb(null, {result_json: Buffer.from(out.result || ''), error: out.error || ''})),
  StreamInvoke: (call) => run(call.request.tool_name, call.request.args_json.toString('utf8')).then((out) => {
    call.write({data: Buffer.from(out.result || ''), done: true, error: out.error || ''});
    call.end();
  }),
  Healthcheck: (call, cb) => cb(null, {ready: true, message: 'ready'}),
});
server.bindAsync('0.0.0.0:50051', grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`egress-selu: cannot listen: ${err.message}`);
    process.exit(1);
  }
});
process.on('SIGTERM', () => process.exit(0));
