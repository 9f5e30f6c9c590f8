#!/usr/bin/env bash
# A Selu capability added while `capsule serve --mcp-http` runs (none at
# its start) is called warm like one present at the start: serve's
# spawner (`capsule-spawner`, forked at serve's start) has no warm
# process while no Selu capability exists; the reload lists the added
# tool; its first call starts the instance and the warm process
# (`capsule-selu`, the spawner's child), and the next calls are answered
# there with no process made by serve (as root with strace), each
# audited once. Usage: serve_selu_added.sh CAPSULE
set -u
source "$(dirname "$0")/../lib/serve_selu.sh" "$1" serve-selu-added
spid=
cleanup() {
  if [ -n "$spid" ]; then
    for c in $(pgrep -P "$spid"); do pkill -9 -P "$c" 2>/dev/null; done
    pkill -9 -P "$spid" 2>/dev/null
    kill -9 "$spid" 2>/dev/null
  fi
  "$capsule" stop --state "$work/state" text-tools >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
caps=$work/caps state=$work/state
C=(--caps "$caps" --state "$state")
mkdir -p "$caps"
token=$("$capsule" access issue added --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
start_serve && ok "serve listens" || { bad "serve listens: $(tail -3 "$work/serve.log")"; finish "serve selu added"; exit; }
rpc() { # ID METHOD PARAMS: the answer's JSON-RPC message (SSE or JSON)
  curl -sS -m 120 "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' --data \
    "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"$2\",\"params\":$3}" "$url" | sed -n 's/^data: //p; /^{/p' | tail -1
}
call() { rpc "$1" tools/call '{"name":"text-tools__word_count","arguments":{"text":"a b c"}}'; }
words() { jq -e '.result.isError == false and .result.structuredContent.words == 3' >/dev/null <<<"$1"; }
spawner() { pgrep -P "$spid" | while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = capsule-spawner ] && { echo "$p"; break; }; done; }
warm_pid() { local sp; sp=$(spawner); [ -n "$sp" ] && pgrep -P "$sp" | head -1; }
warm_proc() { [ -n "$(warm_pid)" ]; }

sp=$(spawner)
[ -n "$sp" ] && ok "serve has its spawner with no Selu capability" || bad "serve has its spawner with no Selu capability"
[ -z "$(warm_pid)" ] && ok "no warm Selu process while no Selu capability exists" ||
  bad "no warm Selu process while no Selu capability exists ($(warm_pid))"

cp -r "$root/examples/selu-text" "$caps/selu-text"
"$capsule" policy set "${C[@]}" text-tools word_count allow >/dev/null
listed() { rpc 1 tools/list '{}' | jq -e '[.result.tools[].name] | index("text-tools__word_count")' >/dev/null; }
wait_for listed && ok "the reload lists the added Selu tool" || bad "the reload lists the added Selu tool"
words "$(call 2)" && ok "its first call starts the instance and answers" || bad "its first call starts the instance and answers"
wait_for warm_proc && ok "its first call started the warm Selu process ($(cat /proc/"$(warm_pid)"/comm 2>/dev/null))" ||
  bad "its first call started the warm Selu process"
[ "$(cat /proc/"$(warm_pid)"/comm 2>/dev/null)" = capsule-selu ] && ok "the warm process is named capsule-selu" ||
  bad "the warm process is named capsule-selu"

# the warm calls: no process made by serve meanwhile (its threads only)
trace_forks
n=0
for i in 3 4 5 6; do words "$(call $i)" && n=$((n + 1)); done
[ $n = 4 ] && ok "four more calls answered" || bad "four more calls answered ($n)"
if [ $traced = yes ]; then
  traced_forks
  [ -z "$forks" ] && ok "no fork for a warm call of the added capability" ||
    bad "no fork for a warm call of the added capability: $(head -3 <<<"$forks")"
else
  echo "  skip the fork check: it needs root and strace (attached)"
fi
recs=$("$capsule" audit --json --state "$state" 2>/dev/null | jq '[.[] | select(.capability == "text-tools" and .user == "alice")] | length')
[ "$recs" = 5 ] && ok "every call audited once" || bad "every call audited once (5 calls, found $recs)"
finish "serve selu added"
