# Shared by the review-9 scripts: a state with a token for alice (and one
# for bob), a Covenant agent "echo", serve --grpc on a unix socket that
# any local user may reach (as loopback TCP is), and client.mjs (the
# official Node gRPC client with the orchestrator's proto). Source with
# capsule=... set; defines W, caps, state, sock, token, other, drive.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here9=$root/tests/review9
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the attacker runs as uid 65534)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] ||
  { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review9.XXXXXX)
chmod 755 "$W"
spid=
under9() { # DIR: the processes holding a file under DIR (a Selu tool's keeper)
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$1"/*) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u | grep -vx "$$"
}
cleanup9() { # serve drains (its gRPC and call processes with it), else is killed; then the keepers
  if [ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$spid" 2>/dev/null
  fi
  for p in $(under9 "$W"); do kill -TERM "$p" 2>/dev/null; done
  sleep 0.3
  rm -rf "$W"
}
trap cleanup9 EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps state=$W/state sock=$W/g.sock
# R9_NOBODY=1: capsule (serve and every verb) runs as uid 65534 (again9)
as9() { if [ "${R9_NOBODY:-}" = 1 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$W" "$@"; else "$@"; fi; }
cap9() { as9 "$capsule" "$@"; }
if [ "${R9_NOBODY:-}" = 1 ]; then
  mkdir -m 700 "$state" && chown 65534:65534 "$state"
  mkdir -m 755 "$W/s" && chown 65534:65534 "$W/s" && sock=$W/s/g.sock
fi
mkdir -p "$caps/agents/echo"
printf '[agent]\nid = "echo"\nname = "echo"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/echo/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/echo/run.sh"
chmod -R a+rX "$caps"; chmod 755 "$caps/agents/echo/run.sh"
cap9 policy set --caps "$caps" --state "$state" echo dispatch allow >/dev/null ||
  { echo "SKIP: cannot set up a state"; exit 77; }
token=$(cap9 access issue r9 --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
other=$(cap9 access issue r9b --user bob --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
[ -n "$token" ] && [ -n "$other" ] || { echo "SKIP: cannot issue tokens"; exit 77; }
start_serve() { # [ARGS...]: serve --grpc on $sock, reachable by any local user
  # started here, not through as9 (a function: $! would be its subshell's)
  if [ "${R9_NOBODY:-}" = 1 ]; then
    setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$W" \
      "$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$sock" "$@" 2>"$W/serve.log" &
  else
    "$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$sock" "$@" 2>"$W/serve.log" &
  fi
  spid=$!
  for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
  [ -S "$sock" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve --grpc did not start"; exit 77; }
  chmod 666 "$sock"
}
drive() { # MODE [TOKEN]: client.mjs as root
  node "$here9/client.mjs" "$root/proto/selu/orchestrator/capability.proto" "unix:$sock" "${2:-$token}" "$1"
}
drive_nobody() { # MODE [TOKEN]: client.mjs as uid 65534
  setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$W" \
    node "$here9/client.mjs" "$root/proto/selu/orchestrator/capability.proto" "unix:$sock" "${2:-}" "$1"
}
user_dir() { # USER: the store's directory of the user
  echo "$state/run/artifacts/$(printf '%s' "$1" | sha256sum | cut -c1-32)"
}
finish9() { # VERDICT: this run's (0 blocked, 1 not); run as root, the
  # script runs again with capsule as uid 65534, and either not blocked fails
  local v=$1 n=0
  if [ -z "${R9_NOBODY:-}" ]; then
    echo "--- again, capsule as uid 65534"
    R9_NOBODY=1 bash "$0" "$capsule"
    n=$?
    [ "$n" = 77 ] && n=0
  fi
  [ "$v" = 0 ] && [ "$n" = 0 ] && { [ -z "${R9_NOBODY:-}" ] && echo blocked; exit 0; }
  exit 1
}
