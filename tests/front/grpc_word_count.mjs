// One warm-path call through `capsule serve --grpc` with the official Node
// gRPC client (@grpc/grpc-js, from examples/selu-node's modules): the
// orchestrator's Capability.Invoke of text-tools.word_count on TEXT.
// node grpc_word_count.mjs ORCHESTRATOR_PROTO TARGET TOKEN TEXT
// Prints the answer's word count (or "error: ..."); exits 1 on an error.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [orchPath, target, token, text] = process.argv.slice(2);
const def = loader.loadSync(orchPath, { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const orch = new pkg.Capability(target, grpc.credentials.createInsecure());
const meta = new grpc.Metadata();
meta.add('authorization', `Bearer ${token}`);
orch.Invoke({ tool_name: 'text-tools.word_count', args_json: Buffer.from(JSON.stringify({ text })) },
  meta, { deadline: Date.now() + 60000 }, (err, res) => {
    orch.close();
    if (err || res.error) {
      console.log(`error: ${err ? err.message : res.error}`);
      process.exit(1);
    }
    console.log(JSON.parse(res.result_json.toString()).words);
    process.exit(0);
  });
