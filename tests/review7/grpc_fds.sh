#!/usr/bin/env bash
# Attempt (serve --grpc, src/front/serve_grpc*.c): the gRPC process and its
# call process hold gRPC's sockets, the socketpair between them, each
# call's request memfd and answer pipe; none may reach a tool. A Covenant
# agent called over gRPC lists its own descriptors and pid 1's (the
# escape suite's hostile program, mode agent-fds). Before that, calls
# without the right bearer token (none, a made-up one, Basic, a suffix)
# must be UNAUTHENTICATED. As root. Exits 1 when
# a descriptor reaches the tool, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
hostile=$(dirname "$capsule")/tests/escape/hostile
[ -x "$hostile" ] || hostile=$root/build/tests/escape/hostile
[ -x "$hostile" ] || { echo "SKIP: build tests/escape/hostile (ninja)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] ||
  { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
a=$caps/agents/fds
mkdir -p "$a"
sed 's/"asker"/"fds"/g' "$caps/agents/asker/agent.toml" >"$a/agent.toml"
cp "$hostile" "$a/hostile"
printf '#!/bin/sh\nexec "$(dirname "$0")/hostile" agent-fds\n' >"$a/run.sh"
chmod -R a+rX "$caps"; chmod 755 "$a/run.sh"
"$capsule" policy set --caps "$caps" --state "$state" fds dispatch allow >/dev/null
tok=$("$capsule" access issue g --user alice --state "$state" 2>/dev/null)
"$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$work/g.sock" 2>"$work/serve.log" &
server=$!
for _ in $(seq 200); do [ -S "$work/g.sock" ] && break; sleep 0.05; done
[ -S "$work/g.sock" ] || { cat "$work/serve.log"; echo "SKIP: serve --grpc did not start"; exit 77; }
cat >"$work/drive.mjs" <<'JS'
import { createRequire } from 'node:module';
const [root, target, token] = process.argv.slice(2);
const require = createRequire(root + '/examples/selu-node/package.json');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const def = loader.loadSync(root + '/proto/selu/capability/v1/capability.proto', { keepCase: true, defaults: true });
const pkg = grpc.loadPackageDefinition(def).selu.capability.v1;
const c = new pkg.CapabilityService(target, grpc.credentials.createInsecure());
const call = (auth) => new Promise((resolve) => {
  const m = new grpc.Metadata(); if (auth) m.add('authorization', auth);
  c.Invoke({ tool_name: 'fds.dispatch', parameters: '{"text":"x"}' }, m, { deadline: Date.now() + 60000 },
    (err, res) => resolve(err ? `ERR ${err.code}` : res.result));
});
/* tokens first: none, another's made up, the right one in another scheme, one with a suffix */
for (const auth of [null, `Bearer capsule_${'0'.repeat(64)}`, `Basic ${token}`, `Bearer ${token}x`])
  console.error(`token ${auth ? auth.slice(0, 12) : 'none'}: ${await call(auth)}`);
console.log(await call(`Bearer ${token}`));
c.close();
JS
out=$(node "$work/drive.mjs" "$root" "unix:$work/g.sock" "$tok" 2>"$work/tokens")
cat "$work/tokens"
[ "$(grep -c ': ERR 16$' "$work/tokens")" = 4 ] ||
  { echo "VULNERABLE: a call without the right bearer token was not refused UNAUTHENTICATED"; exit 1; }
echo "the tool over gRPC: $out"
extra=$(/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
d = d.get("got", d)
print(d["extra"].strip() + (" and pid 1s" if d["init_fds_visible"] else ""))' "$out" 2>/dev/null) ||
  { echo "SKIP: no answer from the tool"; exit 77; }
[ -z "${extra// /}" ] && { echo "blocked: the tool holds 0-2 alone"; exit 0; }
echo "VULNERABLE: descriptors reached the tool: $extra"
exit 1
