# Shared by the gateway suites written as scripts (tests/gateway): sourced
# with $1 = capsule. Sets capsule, skips (exit 77) where the sandbox's
# namespaces cannot be created, and gives ok/bad (counting pass/fail), t
# (one capsule command checked for its exit status and output; the output
# stays in $out) and finish (the summary line and the exit status).
capsule=$(realpath "$1")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
export CAPSULE_STATE_KEY= # the key file in the state directory
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
# t NAME WANT-STATUS REGEX ARGS...: capsule ARGS (stdin from /dev/null)
t() {
  local name=$1 want=$2 regex=$3; shift 3
  local status
  out=$("$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
# finish SUITE: the counts; fails unless something passed and nothing failed
finish() {
  echo "$1 tests: $pass passed, $fail failed"
  [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
}
# selu_slow CAPS FAULT: CAPS/selu-slow, a Selu capability on
# tests/gateway/selu_fault.c (FAULT, its binary) whose hang tool never
# answers and whose ok tool answers at once
selu_slow() {
  mkdir -p "$1/selu-slow"
  cp "$2" "$1/selu-slow/server"
  cat >"$1/selu-slow/manifest.yaml" <<'YAML'
id: selu-slow
image: example/selu-slow:1.0
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
  - {name: hang, description: Never answers., recommended_policy: allow, input_schema: {type: object}}
x-capsule:
  command: ["./server"]
YAML
}
# needs_grpc_client [jq] [selu-text]: sets here (the script's directory)
# and root (the checkout); skips (exit 77) unless node and the Node gRPC
# modules (scripts/deps.sh test) are there, and jq, and the C Selu example
# built (make build), when named
needs_grpc_client() {
  here=$(cd "$(dirname "$0")" && pwd)
  root=$(cd "$here/../.." && pwd)
  command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
  case " $* " in *" jq "*) command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; } ;; esac
  [ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] ||
    { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
  case " $* " in
  *" selu-text "*)
    [ -x "$root/examples/selu-text/capability" ] ||
      { echo "SKIP: examples/selu-text is not built (make build builds it)"; exit 77; } ;;
  esac
}
