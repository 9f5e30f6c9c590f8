// serve_grpc_cancel.sh's client (the official Node gRPC client, Selu's
// seed proto): node serve_grpc_cancel.mjs PROTO TARGET TOKEN TOOL PARAMS
// DEADLINE_MS [CANCEL_FILE]. Calls TOOL once with a deadline of
// DEADLINE_MS (0: none); with CANCEL_FILE, cancels the call once that
// file exists. Prints the call's gRPC status code and, for a call that
// succeeded, "result JSON".
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoPath, target, token, tool, params, deadlineMs, cancelFile] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const client = new pkg.CapabilityService(target, grpc.credentials.createInsecure());
const md = new grpc.Metadata();
md.add('authorization', `Bearer ${token}`);
const opts = Number(deadlineMs) > 0 ? { deadline: Date.now() + Number(deadlineMs) } : {};
const call = client.Invoke({ tool_name: tool, parameters: params }, md, opts, (err, res) => {
  if (err) console.log(`status ${err.code} ${err.details}`);
  else console.log(`status 0\nresult ${JSON.stringify(res)}`);
  client.close();
  process.exit(0);
});
if (cancelFile) {
  const poll = setInterval(() => {
    if (fs.existsSync(cancelFile)) {
      clearInterval(poll);
      call.cancel();
    }
  }, 50);
}
