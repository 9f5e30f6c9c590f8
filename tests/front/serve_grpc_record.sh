#!/usr/bin/env bash
# serve --grpc's warm path answers a call once its audit record is written
# into the call's in-flight marker, and appends it to the log right after
# the answer (gateway/audit_later.c). With the append held back after the
# answer (CAPSULE_TEST_RECORD_PAUSE_MS):
# - the marker holds the call's finished record (outcome ok) while the
#   answer is out and the log does not have it yet;
# - `capsule audit` run meanwhile waits for it and lists it;
# - serve killed (SIGKILL) before the append: the next open appends the
#   record from the marker, outcome ok with the result's hash, once;
# - the chain verifies, one record per call.
# Usage: serve_grpc_record.sh CAPSULE ORCHESTRATOR_PROTO
set -u
source "$(dirname "$0")/../lib/gateway.sh" "$1"
orch=$2
needs_grpc_client jq selu-text
work=$(mktemp -d /var/tmp/capsule-serve-grpc-record.XXXXXX)
chmod 755 "$work"
spid=
cleanup() {
  [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
  "$capsule" stop --state "$work/state" text-tools >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
caps=$work/caps state=$work/state
mkdir -p "$caps"
cp -r "$root/examples/selu-text" "$caps/selu-text"
"$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null
token=$("$capsule" access issue rec --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
serve() { # PAUSE_MS: serve --grpc on g.sock, its record appends held back that long
  rm -f "$work/g.sock"
  CAPSULE_TEST_RECORD_PAUSE_MS=$1 "$capsule" serve --caps "$caps" --state "$state" \
    --grpc "unix:$work/g.sock" 2>>"$work/serve.log" &
  spid=$!
  for _ in $(seq 200); do [ -S "$work/g.sock" ] && break; sleep 0.05; done
}
words() { node "$here/grpc_word_count.mjs" "$orch" "unix:$work/g.sock" "$token" "$1" 2>&1; }
records() { # TEXT-WORDS: how many records the log has of calls with N words' text
  "$capsule" audit --json --state "$state" 2>/dev/null |
    jq --arg h "$(printf '{"text":"%s"}' "$1" | sha256sum | cut -d' ' -f1)" \
      '[.[] | select(.args_sha256 == $h)] | length'
}
answered_markers() { # the markers holding a finished record whose tag is whole
  local f
  for f in "$state"/run/calls/*; do
    [ -f "$f" ] || continue
    tr '\0' '\n' <"$f" | awk 'NR == 1 && $0 != "capsule-inflight-v1" { exit 1 } END { exit NR != 11 }' &&
      tr '\0' '\n' <"$f" | sed -n 9p
  done
}
serve 500
[ -S "$work/g.sock" ] || { bad "serve listens: $(tail -3 "$work/serve.log")"; finish "serve --grpc record"; exit; }
[ "$(words 'a b')" = 2 ] || bad "the first call (its instance started) answers"
# the instance warm: the next call takes the warm path
if [ "$(words 'a b c')" = 3 ]; then
  n=$(records 'a b c')
  [ "$n" = 1 ] && ok "a reader right after the answer waits for the record: 1 record" ||
    bad "a reader right after the answer finds $n records of the call, not 1"
else
  bad "a warm call answers"
fi
kill "$spid" && wait "$spid" 2>/dev/null
serve 60000 # held back for a minute: serve is killed before it appends
[ "$(words 'x')" = 1 ] || bad "the first call after a restart answers"
if [ "$(words 'x y z w')" = 4 ]; then
  got=$(answered_markers | tr '\n' ' ')
  case " $got" in
  *" ok "*) ok "the answered call's record is in its marker, outcome ok" ;;
  *) bad "no marker holds the answered call's record (found: ${got:-none})" ;;
  esac
  # the gRPC process (serve's child) and serve, as a crash or the OOM killer would
  for p in $(pgrep -P "$spid"); do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = capsule ] && kill -9 "$p"; done
  kill -9 "$spid"
  wait "$spid" 2>/dev/null
  spid=
  n=$(records 'x y z w')
  [ "$(records x)" = 1 ] || bad "serve killed after the answer: $(records x) records of the call before, not 1"
  [ "$n" = 1 ] && ok "serve killed after the answer: the record appended from its marker, once" ||
    bad "serve killed after the answer: $n records of the call, not 1"
  rec=$("$capsule" audit --json --state "$state" 2>/dev/null | jq -c --arg h \
    "$(printf '{"text":"%s"}' 'x y z w' | sha256sum | cut -d' ' -f1)" '.[] | select(.args_sha256 == $h)')
  [ "$(jq -r '.outcome' <<<"$rec")" = ok ] && [ -n "$(jq -r '.result_sha256 // empty' <<<"$rec")" ] &&
    [ "$(jq -r '.user' <<<"$rec")" = alice ] &&
    ok "the recovered record is the call's as it ended (ok, its result's hash, its user)" ||
    bad "the recovered record: $rec"
else
  bad "a warm call after the restart answers"
fi
t "the chain verifies" 0 '' audit verify --state "$state"
finish "serve --grpc record"
