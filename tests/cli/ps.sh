#!/usr/bin/env bash
# Warm instances from the command line (docs/cli.md): `capsule ps [--json]`
# lists the keeper a call started (capability, pid, state, leases, idle,
# started); the keeper's process title names the capability and never the
# call's arguments (/proc/PID/cmdline and comm); `capsule stop CAP` ends
# it, and is refused inside a capsule sandbox. As root and as uid 65534.
# Usage: ps.sh CAPSULE SELU_FAULT_SERVER
set -u
capsule=$(realpath "$1")
fault=$(realpath "$2")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
work=$(mktemp -d /var/tmp/capsule-ps.XXXXXX)
chmod 755 "$work"
caps=$work/caps
keeper_pids() { for f in "$work"/*/s/run/*.status; do [ -f "$f" ] && sed -n 's/^pid=//p' "$f"; done; }
trap 'for p in $(keeper_pids); do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
unset CAPSULE_CAPS CAPSULE_STATE XDG_CONFIG_HOME
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$who" "$1"; }

mkdir -p "$caps/warm"
cp "$fault" "$caps/warm/server"
cat >"$caps/warm/manifest.yaml" <<'YAML'
id: warm
image: example/warm:1.0
tools:
  - {name: echo, description: Echoes., recommended_policy: allow, input_schema: {type: object}}
  - {name: sleep, description: Sleeps., recommended_policy: allow,
     input_schema: {type: object, properties: {ms: {type: integer, maximum: 10000}}, required: [ms]}}
x-capsule:
  command: ["./server", "--mode", "normal"]
  idle_timeout_ms: 60000
  startup_timeout_ms: 5000
YAML

# suite WHO: every case, as root or as uid 65534 (a keeper of its own)
suite() {
  local who=$1 state=$work/$1/s as=()
  [ "$who" = root ] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  mkdir -p "$work/$who" && [ "$who" = root ] || chown 65534:65534 "$work/$who"
  out=$("${as[@]}" "$capsule" ps --state "$state" 2>&1)
  if [ "$?" = 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ]; then ok ps-empty
  else bad "ps-empty"; echo "$out" | head -3; fi

  secret=sk-live-0123456789-TOPSECRET
  if "${as[@]}" "$capsule" call --caps "$caps" --state "$state" warm echo "{\"token\":\"$secret\"}" >/dev/null 2>"$work/err"
  then ok call-starts-keeper; else bad call-starts-keeper; head -3 "$work/err"; fi

  # the keeper shows a lease's end in its status file a moment later
  for _ in $(seq 1 100); do
    "${as[@]}" "$capsule" ps --state "$state" 2>/dev/null | grep -qE ' 0/[0-9]+ ' && break
    sleep 0.1
  done
  json=$("${as[@]}" "$capsule" ps --json --state "$state")
  pid=$(python3 -c '
import json, sys
rows = json.load(sys.stdin)
assert len(rows) == 1, rows
r = rows[0]
assert set(r) == {"capability", "pid", "state", "protocol", "leases", "idle", "started"}, r
assert r["capability"] == "warm" and r["state"] == "serving" and r["leases"].startswith("0/"), r
assert r["protocol"] in ("Capability", "CapabilityService"), r
assert r["idle"].endswith("s") and r["started"].endswith("Z"), r
print(r["pid"])' <<<"$json")
  if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then ok ps-json-lists-keeper; else bad ps-json-lists-keeper; echo "$json"; fi
  text=$("${as[@]}" "$capsule" ps --state "$state")
  if grep -qE "^warm +$pid +serving +Capability(Service)? +0/[0-9]+ " <<<"$text"; then ok ps-text; else bad ps-text; echo "$text"; fi

  # the keeper's title: its capability, not the call's arguments
  if [ -n "$pid" ]; then
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    if ! grep -qF "$secret" "/proc/$pid/cmdline" && grep -q "^capsule keeper warm" <<<"$cmdline"; then
      ok keeper-cmdline-hides-arguments
    else bad "keeper-cmdline-hides-arguments ($cmdline)"; fi
    if [ "$(cat "/proc/$pid/comm")" = capsule-keeper ]; then ok keeper-comm
    else bad "keeper-comm ($(cat "/proc/$pid/comm"))"; fi
    # nothing else alive (the sandbox, the server) shows the secret either (the
    # pattern comes from a file: grep's own command line must not hold it)
    printf '%s\n' "$secret" >"$work/pattern"
    shown=$(grep -lFf "$work/pattern" /proc/[0-9]*/cmdline 2>/dev/null)
    if [ -z "$shown" ]; then ok no-process-shows-secret
    else bad "no-process-shows-secret ($shown)"; fi
  fi

  # the call's own process, while it runs: its title names the capability
  # and the tool, not the arguments
  "${as[@]}" "$capsule" call --caps "$caps" --state "$state" warm sleep "{\"ms\":3000,\"token\":\"$secret\"}" >/dev/null 2>&1 &
  call_pid=$!
  title=""
  for _ in $(seq 100); do
    title=$(tr '\0' ' ' <"/proc/$call_pid/cmdline" 2>/dev/null | sed 's/ *$//')
    case $title in "capsule call warm sleep"*) break ;; esac
    sleep 0.02
  done
  if [ "$title" = "capsule call warm sleep" ] && ! grep -qF "$secret" "/proc/$call_pid/cmdline"; then
    ok call-title-hides-arguments
  else bad "call-title-hides-arguments ($title)"; fi
  wait "$call_pid"

  # stop: refused inside a sandbox, then stops the keeper
  # (without the CAPSULE_SANDBOX marker too: the sandbox itself is recognised;
  # LeakSanitizer, in an ASan build, cannot work in a sandbox)
  "${as[@]}" "$capsule" run --allow-read "$capsule" -- env -u CAPSULE_SANDBOX ASAN_OPTIONS=detect_leaks=0 \
    "$capsule" stop --state "$state" warm >/dev/null 2>"$work/err"
  st=$?
  if [ "$st" = 4 ] && [ -d "/proc/$pid" ]; then ok stop-refused-in-sandbox
  else bad "stop-refused-in-sandbox (exit $st)"; head -3 "$work/err"; fi
  out=$("${as[@]}" "$capsule" stop --state "$state" nosuch 2>&1)
  if [ "$?" = 1 ] && grep -q "no running instance of nosuch" <<<"$out"; then ok stop-unknown
  else bad stop-unknown; echo "$out"; fi
  out=$("${as[@]}" "$capsule" stop --state "$state" warm 2>&1)
  if [ "$?" = 0 ] && grep -q "stopped warm" <<<"$out" && [ ! -d "/proc/$pid" ]; then ok stop-ends-keeper
  else bad stop-ends-keeper; echo "$out"; fi
  out=$("${as[@]}" "$capsule" ps --state "$state")
  if [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [ -z "$(ls "$state"/run/*.status 2>/dev/null)" ]; then
    ok ps-empty-after-stop
  else bad ps-empty-after-stop; echo "$out"; fi
  # the next call starts a new instance
  if "${as[@]}" "$capsule" call --caps "$caps" --state "$state" warm echo '{}' >/dev/null 2>&1 &&
    [ "$("${as[@]}" "$capsule" ps --json --state "$state" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ]
  then ok call-after-stop; else bad call-after-stop; fi
  "${as[@]}" "$capsule" stop --state "$state" warm >/dev/null 2>&1
}
who=root
suite root
if [ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" -a -x "$fault" 2>/dev/null; then
  who=nobody
  suite nobody
fi

echo "ps tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
