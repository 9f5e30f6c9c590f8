# Shared by the review-9 scripts on a PostgreSQL state
# (artifact_name_audit.sh, selu_error_audit_pg.sh): sourced with capsule
# and root set. Skips (exit 77) unless run as root with node, jq,
# examples/selu-node's modules and PostgreSQL; starts PostgreSQL (as uid
# 65534, tests/state/pg-lib.sh) under W, a new directory, and checks that
# capsule opens the state there. Sets W, caps ($W/caps, made), state
# ($PGURL), XDG_STATE_HOME ($W/home), CAPSULE_STATE_KEY; on exit serve,
# the Selu tools' keepers (processes holding a file under $W/home) and
# PostgreSQL are stopped and W removed. Gives start_serve_pg: alice's
# token in $token, serve --grpc on unix:$W/g.sock (skips when it does not
# start).
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the PostgreSQL server runs as uid 65534)"; exit 77; }
command -v node >/dev/null && command -v jq >/dev/null || { echo "SKIP: needs node and jq"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] || { echo "SKIP: examples/selu-node's modules are not installed"; exit 77; }
# shellcheck source=../state/pg-lib.sh
. "$root/tests/state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review9-pg.XXXXXX)
spid=
keepers_pg() { # the Selu tools' keepers: processes holding a file under $W/home
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$W"/home/*) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u | grep -vx "$$"
}
trap '[ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null; sleep 1; for p in $(keepers_pg); do kill -TERM "$p" 2>/dev/null; done; pg_stop immediate; rm -rf "$W"' EXIT
pg_start "$W" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
export XDG_STATE_HOME=$W/home CAPSULE_STATE_KEY=$(printf '%064d' 1)
caps=$W/caps state=$PGURL
mkdir -p "$caps"
"$capsule" --state "$PGURL" policy list >/dev/null 2>&1 || { echo "SKIP: cannot open the PostgreSQL state"; exit 77; }
start_serve_pg() {
  token=$("$capsule" --state "$PGURL" access issue r9 --user alice 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
  [ -n "$token" ] || { echo "SKIP: cannot issue a token"; exit 77; }
  "$capsule" --state "$PGURL" serve --caps "$caps" --grpc "unix:$W/g.sock" 2>"$W/serve.log" &
  spid=$!
  for _ in $(seq 400); do [ -S "$W/g.sock" ] && break; sleep 0.05; done
  [ -S "$W/g.sock" ] || { tail -3 "$W/serve.log"; echo "SKIP: serve --grpc did not start"; exit 77; }
}
