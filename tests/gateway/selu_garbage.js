'use strict';
// A Selu capability server that answers garbage (tests/gateway/selu_contract.sh):
// its Capability/Healthcheck answers bytes that are no HealthResponse
// (--health), or it answers health well and Invoke with bytes that are no
// InvokeResponse (--invoke). Built on @grpc/grpc-js with raw (de)serializers,
// so no proto is needed. Usage: node selu_garbage.js --health|--invoke [ADDRESS]
const grpc = require('@grpc/grpc-js');

const mode = process.argv[2];
const address = process.argv[3] || '0.0.0.0:50051';
const garbage = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]); // a truncated varint field
const ready = Buffer.from([0x08, 0x01]); // HealthResponse{ready: true}
const raw = (path) => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: (b) => b,
  requestDeserialize: (b) => b,
  responseSerialize: (b) => b,
  responseDeserialize: (b) => b,
});
const server = new grpc.Server();
server.addService(
  {
    Healthcheck: raw('/selu.capability.v1.Capability/Healthcheck'),
    Invoke: raw('/selu.capability.v1.Capability/Invoke'),
  },
  {
    Healthcheck: (call, cb) => cb(null, mode === '--health' ? garbage : ready),
    Invoke: (call, cb) => cb(null, garbage),
  });
server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`selu_garbage: cannot listen on ${address}: ${err.message}`);
    process.exit(1);
  }
});
process.on('SIGTERM', () => process.exit(0));
