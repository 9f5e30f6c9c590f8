#!/usr/bin/env bash
# `capsule serve` and the warm keepers when this user's inotify limit is
# reached (fs.inotify.max_user_instances): a helper (inotify_hog.py),
# running as a uid of this test's own, holds every instance that uid may
# open; then, as that uid:
# - serve starts, warns naming the limit and its sysctl, and says
#   `caps_watch: rescan` in `serve status` (--json and text); `doctor`
#   names the limit and that serve's mode;
# - a capability added, then one removed, still reach serve's registry
#   (its rescan), polled without any timing asserted;
# - a warm Selu server's keeper and a warm MCP server's keeper, which can
#   have no package watch, see version.txt rewritten in place before the
#   next call (their digest check);
# - the instances freed, the next reload watches with inotify again;
# - then every watch of the uid held but one (fs.inotify.max_user_watches):
#   a new serve's watch refused partway (ENOSPC), the same warning, mode
#   and rescan; new keepers, whose watch is refused after its first, see
#   edits by their digest.
# Root only: the uid is not 65534, which other suites use at once, so
# their processes keep their instances.
# Usage: serve_inotify_limit.sh CAPSULE SELU_FAULT_SERVER
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (to hold another uid's inotify instances, not the caller's)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv is not installed (util-linux)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
fault=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/serve.sh
. "$here/../lib/serve.sh" "$1" inotify-limit
uid=61729 # nobody else's: its instances are the test's to use up
wrap=(setpriv "--reuid=$uid" "--regid=$uid" --clear-groups -- env HOME="$work/home")
who=limited
"${wrap[@]}" test -x "$capsule" || { echo "SKIP: uid $uid cannot reach $capsule"; exit 77; }
mkdir -p "$work/home" && chown $uid:$uid "$work/home"
cp "$fault" "$work/selu_fault" && chmod 755 "$work/selu_fault"
cp "$here/inotify_hog.py" "$work/" && chmod 644 "$work/inotify_hog.py"

caps=$work/caps
agent() { # ID: a Covenant agent (trusted-local), counted in the registry
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\necho "{}"\n' >"$caps/agents/$1/run.sh"
  chmod -R a+rX "$caps"
}
# a Selu server reporting version.txt as read at its start (tests/review8/package_watch_moved.sh)
selu_pkg() {
  mkdir -p "$1"
  cp "$work/selu_fault" "$1/server"
  cat >"$1/manifest.yaml" <<YAML
id: $2
image: example/$2:1.0
tools:
  - {name: env, description: Reads an environment variable., recommended_policy: allow,
     input_schema: {type: object, properties: {name: {type: string}}, required: [name]}}
x-capsule:
  command: ["sh", "start.sh"]
  idle_timeout_ms: 60000
  startup_timeout_ms: 20000
YAML
  printf 'export VERSION="$(cat version.txt)"; exec ./server --mode normal\n' >"$1/start.sh"
  echo 1 >"$1/version.txt"
}
cat >"$work/mcp_server.py" <<'PY'
import json, sys
VERSION = open("version.txt").read().strip()
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth = m.get("method")
    if meth == "initialize":
        res = {"protocolVersion": m["params"].get("protocolVersion", "2025-06-18"),
               "capabilities": {"tools": {}}, "serverInfo": {"name": "v", "version": "1"}}
    elif meth == "tools/list":
        res = {"tools": [{"name": "ver", "description": "Its version.", "inputSchema": {"type": "object"}}]}
    elif meth == "tools/call":
        res = {"content": [{"type": "text", "text": VERSION}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": res}), flush=True)
PY
mcp_pkg() {
  mkdir -p "$1"
  cp "$work/mcp_server.py" "$1/server.py"
  echo '{"version": "0.1.0", "network": {"mode": "blocked"}, "x-capsule": {"mcp_server": ["python3", "server.py"]}}' >"$1/capability.json"
  echo 1 >"$1/version.txt"
}
mkdir -p "$caps/agents"
agent one
agent two
selu_pkg "$work/selu/wa" wa
mcp_pkg "$work/mcp/wm"
chmod -R a+rwX "$work/selu" "$work/mcp"
state=$work/state
mkdir -p "$state" && chmod 700 "$state" && chown $uid:$uid "$state"
C() { "${wrap[@]}" "$capsule" "$@"; }

# every instance of the uid held
coproc HOG { "${wrap[@]}" python3 "$work/inotify_hog.py" instances; }
pids+=("$HOG_PID")
read -r -t 120 hogsaid <&"${HOG[0]}"
case ${hogsaid:-} in
  held*) echo "  (the hog: $hogsaid)" ;;
  *) echo "SKIP: the uid's inotify instances could not be used up (${hogsaid:-no answer})"; exit 77 ;;
esac
"${wrap[@]}" python3 -c 'import ctypes,sys; sys.exit(0 if ctypes.CDLL(None).inotify_init1(0) < 0 else 1)' &&
  ok "no-instance-left" || bad "no-instance-left (an instance could still be opened)"

serve_start --caps "$caps" --state "$state" && ok "serve-starts" || { bad "serve-starts"; cat "$work/serve-$who.log"; exit 1; }
grep '"level":"warning"' "$work/serve-$who.log" | grep -q 'fs.inotify.max_user_instances' &&
  grep -q 'sysctl -w fs.inotify.max_user_instances' "$work/serve-$who.log" &&
  ok "warns-naming-the-limit" || { bad "warns-naming-the-limit"; cat "$work/serve-$who.log"; }
C serve status --state "$state" --json | grep -q '"caps_watch":"rescan"' && ok "status-json-rescan" ||
  { bad "status-json-rescan"; C serve status --state "$state" --json; }
C serve status --state "$state" | grep -q '^caps_watch  *rescan$' && ok "status-text-rescan" ||
  { bad "status-text-rescan"; C serve status --state "$state"; }
C serve status --state "$state" | grep -q '^caps_watch_error .*max_user_instances' && ok "status-names-why" ||
  bad "status-names-why"
CAPSULE_STATE=$state C doctor >"$work/doctor.out" 2>&1
grep -E '^  inotify +NO .*max_user_instances.*serve here: rescan' "$work/doctor.out" >/dev/null && ok "doctor-names-limit-and-mode" ||
  { bad "doctor-names-limit-and-mode"; grep inotify "$work/doctor.out"; }

count() { C serve status --state "$state" --json | sed -n 's/.*"capabilities":\([0-9]*\).*/\1/p'; }
is_count() { [ "$(count)" = "$1" ]; }
n0=$(count)
agent three
wait_for is_count $((n0 + 1)) && ok "added-capability-seen" || bad "added-capability-seen (capabilities $(count), want $((n0 + 1)))"
rm -rf "$caps/agents/one"
wait_for is_count "$n0" && ok "removed-capability-seen" || bad "removed-capability-seen (capabilities $(count), want $n0)"

# the keepers, without a package watch: the digest sees an edit in place
vcall() { C call --caps "$work/selu" --state "$state.call" wa env '{"name": "VERSION"}' 2>&1 </dev/null; }
mkdir -p "$state.call" && chmod 700 "$state.call" && chown $uid:$uid "$state.call"
check() { [ "$2" = "{\"value\":\"$3\"}" ] && ok "$1" || bad "$1 (the call got $2, the package holds $3)"; }
check selu-keeper-start "$(vcall)" 1
check selu-keeper-warm "$(vcall)" 1
echo 2 >"$work/selu/wa/version.txt"
check selu-keeper-edit-seen "$(vcall)" 2
cat >"$work/mcp_drive.py" <<'PY'
import json, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m):
    p.stdin.write(json.dumps(m) + "\n")
    p.stdin.flush()
def wait(i):
    for line in p.stdout:
        m = json.loads(line)
        if m.get("id") == i:
            return m
    return {}
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
wait(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
names = [t["name"] for t in wait(2).get("result", {}).get("tools", []) if t["name"].endswith("ver")]
send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": names[0] if names else "ver", "arguments": {}}})
r = wait(3)
text = "".join(c.get("text", "") for c in r.get("result", {}).get("content", []))
print('{"value":"%s"}' % text if text else json.dumps(r))
p.stdin.close()
p.wait()
PY
chmod 644 "$work/mcp_drive.py"
C call --caps "$work/mcp" --state "$state.call" wm ver '{}' >/dev/null 2>&1 # discovers the tool
C policy set --caps "$work/mcp" --state "$state.call" wm ver allow >/dev/null
mcall() { "${wrap[@]}" timeout 120 python3 "$work/mcp_drive.py" "$capsule" mcp --caps "$work/mcp" --state "$state.call" 2>/dev/null </dev/null; }
check mcp-keeper-start "$(mcall)" 1
check mcp-keeper-warm "$(mcall)" 1
echo 2 >"$work/mcp/wm/version.txt"
check mcp-keeper-edit-seen "$(mcall)" 2

# the instances given back: the next reload has its watch again
kill "$HOG_PID" 2>/dev/null
wait "$HOG_PID" 2>/dev/null
agent four
watching() { C serve status --state "$state" --json | grep -q '"caps_watch":"inotify"'; }
wait_for watching && ok "inotify-again-after-reload" || { bad "inotify-again-after-reload"; C serve status --state "$state" --json; }
grep -q '"msg":"watching the capabilities with inotify again"' "$work/serve-$who.log" && ok "logs-inotify-again" || bad "logs-inotify-again"
agent five
wait_for is_count $((n0 + 2)) && ok "added-capability-seen-by-inotify" || bad "added-capability-seen-by-inotify (capabilities $(count), want $((n0 + 2)))"
kill -TERM "$server"
wait "$server"
[ $? = 0 ] && ok "serve-stops" || bad "serve-stops"

# every watch of the uid held but one: serve's first watch is its last,
# the next refused (ENOSPC) partway through the tree; a keeper's likewise
echo "  watches:"
mkdir -p "$work/hogfiles" && chown $uid:$uid "$work/hogfiles"
coproc HOG2 { "${wrap[@]}" python3 "$work/inotify_hog.py" watches 1 "$work/hogfiles"; }
pids+=("$HOG2_PID")
read -r -t 120 hogsaid <&"${HOG2[0]}"
if [[ ${hogsaid:-} != held* ]]; then
  echo "  (the watches part skipped: the uid's watches could not be used up: ${hogsaid:-no answer})"
else
  echo "  (the hog: $hogsaid)"
  : >"$work/serve-$who.log"
  serve_start --caps "$caps" --state "$state" && ok "watches: serve-starts" || { bad "watches: serve-starts"; cat "$work/serve-$who.log"; }
  grep '"level":"warning"' "$work/serve-$who.log" | grep -q 'inotify_add_watch: No space left on device: .*fs.inotify.max_user_watches' &&
    ok "watches: warns-naming-the-limit" || { bad "watches: warns-naming-the-limit"; cat "$work/serve-$who.log"; }
  C serve status --state "$state" --json | grep -q '"caps_watch":"rescan"' && ok "watches: status-json-rescan" ||
    { bad "watches: status-json-rescan"; C serve status --state "$state" --json; }
  n1=$(count)
  agent six
  wait_for is_count $((n1 + 1)) && ok "watches: added-capability-seen" || bad "watches: added-capability-seen (capabilities $(count), want $((n1 + 1)))"
  # a new keeper (the edit retires the old one), its watch refused after its first
  echo 3 >"$work/selu/wa/version.txt"
  check "watches: selu-keeper-edit-seen" "$(vcall)" 3
  check "watches: selu-keeper-warm" "$(vcall)" 3
  echo 4 >"$work/selu/wa/version.txt"
  check "watches: selu-keeper-partway-edit-seen" "$(vcall)" 4
  echo 3 >"$work/mcp/wm/version.txt"
  check "watches: mcp-keeper-edit-seen" "$(mcall)" 3
  check "watches: mcp-keeper-warm" "$(mcall)" 3
  echo 4 >"$work/mcp/wm/version.txt"
  check "watches: mcp-keeper-partway-edit-seen" "$(mcall)" 4
  kill -TERM "$server"
  wait "$server"
  [ $? = 0 ] && ok "watches: serve-stops" || bad "watches: serve-stops"
fi
kill "$HOG2_PID" 2>/dev/null
for p in $(sed -n 's/^pid=//p' "$state.call"/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done # the keepers
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
