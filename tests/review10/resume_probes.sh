#!/usr/bin/env bash
# Attempts on SSE resumption (Last-Event-ID, src/front/serve_replay.c)
# that are blocked today, kept as regression tests: bob's token resuming
# alice's session's stream with its session id and an event id it carries
# (403), alice's second session naming her first session's event (400: an
# id is looked up among the session's own streams), forged ids (another
# stream number, a sequence past the stream's, signs, leading zeros,
# overflow, 5,000 digits: 400), and no session id (400). alice's own resume
# is answered with the result again (the probe works). Exits 1 when one
# gets through, 0 when all are blocked, 77 cannot run.
# Usage: resume_probes.sh CAPSULE
set -u
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
. "$(dirname "$0")/lib.sh" "$1"
# past the 50 ms within which an answer comes as JSON: an SSE stream
agent slow 5000 'sleep 0.5; printf "{\"secret\":%s}\n" "$line"' allow
ta=$(token alice) || exit 77
tb=$(token bob) || exit 77
serve10
url=http://127.0.0.1:$port/mcp V=2025-11-25
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
session() { # TOKEN: a new session's id
  curl -s -D - -o /dev/null "${H[@]}" -H "Authorization: Bearer $1" \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'$V'","capabilities":{},"clientInfo":{"name":"r10","version":"1"}}}' \
    "$url" | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p'
}
s1=$(session "$ta") s2=$(session "$ta")
[ -n "$s1" ] && [ -n "$s2" ] || { echo "SKIP: no session"; exit 77; }
for s in "$s1" "$s2"; do
  curl -s -o /dev/null "${H[@]}" -H "Authorization: Bearer $ta" -H "Mcp-Session-Id: $s" -H "MCP-Protocol-Version: $V" \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url"
done
curl -s -N "${H[@]}" -H "Authorization: Bearer $ta" -H "Mcp-Session-Id: $s1" -H "MCP-Protocol-Version: $V" \
  -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow__dispatch","arguments":{"text":"alice-only"}}}' \
  "$url" >"$W/call.sse"
ids=$(sed -n 's/^id: //p' "$W/call.sse" | tr -d '\r')
first=$(head -1 <<<"$ids")
grep -q alice-only "$W/call.sse" && [ -n "$first" ] || { cat "$W/call.sse"; echo "SKIP: the call's answer was no SSE stream with ids"; exit 77; }
num=${first%%-*} seq=${first#*-}
fail=0
resume() { # TOKEN SESSION LAST_EVENT_ID: status and body
  curl -s -m 20 -w '\n%{http_code}' -H 'Accept: text/event-stream' -H "Authorization: Bearer $1" \
    ${2:+-H "Mcp-Session-Id: $2"} -H "MCP-Protocol-Version: $V" -H "Last-Event-ID: $3" "$url" 2>/dev/null
}
check() { # NAME WANT_STATUS TOKEN SESSION ID
  local out code
  out=$(resume "$3" "$4" "$5")
  code=$(tail -1 <<<"$out")
  if [ "$code" = "$2" ] && ! grep -q alice-only <<<"$out"; then
    echo "  blocked  $1 ($code)"
  else
    echo "  WORKS    $1 (got $code, want $2$(grep -q alice-only <<<"$out" && echo ', the result read'))"
    fail=1
  fi
}
out=$(resume "$ta" "$s1" "$first")
if grep -q alice-only <<<"$out"; then echo "  ok       alice resumes her own stream"; else
  echo "  FAIL     alice's own resume: $(tail -3 <<<"$out" | tr '\n' ' ')"; fail=1; fi
check "bob resumes alice's stream" 403 "$tb" "$s1" "$first"
check "alice's other session names the first's event" 400 "$ta" "$s2" "$first"
check "another stream number" 400 "$ta" "$s1" "$((num + 7))-$seq"
check "a sequence past the stream's" 400 "$ta" "$s1" "$num-$((seq + 100000))"
check "a sign" 400 "$ta" "$s1" "+$num-$seq"
check "a leading zero" 400 "$ta" "$s1" "0$num-$seq"
check "an overflowing number" 400 "$ta" "$s1" "$num-99999999999999999999999"
check "5,000 digits" 400 "$ta" "$s1" "$(printf '9%.0s' $(seq 5000))-1"
check "no session id" 400 "$ta" "" "$first"
kill -0 "$spid" 2>/dev/null || { echo "  WORKS    serve died"; fail=1; }
[ "$fail" = 0 ] && { echo blocked; exit 0; }
exit 1
