#!/usr/bin/env bash
# Finding (4510642..788e5ce, gw_package_watch): a warm Selu server's keeper
# watches its package's directories with inotify instead of digesting the
# tree per call, but a watch follows inodes, not the path the capability
# names. Replacing the package by renaming a PARENT (a release directory
# moved aside and a new one put in its place), or by switching a symlinked
# parent (`caps -> releases/v1` flipped to `v2`, an atomic deploy), raises
# no event on the watched inodes: the old server kept answering every call
# with the old code while `capsule call` and `list` read the new manifest.
# A file edited through a hard link outside the package (a `cp -al`
# snapshot, pnpm's store) raised none either. The per-call digest it
# replaced saw all three. Scenario, as root and as uid 65534: a server
# that reports version.txt; each replacement must reach the next call.
# The same for a warm MCP server's keeper, whose first call after the
# move was still served by the old server. Exits 1 when a call is answered
# by the old code, 0 blocked, 77 skip.
# Usage: package_watch_moved.sh CAPSULE [SELU_FAULT_SERVER]
set -u
capsule=$(realpath "${1:-build/capsule}")
fault=$(realpath "${2:-$(dirname "$capsule")/../../tests/gateway/selu_fault}" 2>/dev/null)
[ -f "$fault" ] || fault=$(realpath "$(dirname "$capsule")/tests/gateway/selu_fault" 2>/dev/null)
[ -x "$fault" ] || { echo "SKIP: no selu_fault server (ninja -C build tests/gateway/selu_fault)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3 (the MCP server and client)"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review8-watch.XXXXXX)
chmod 755 "$W"
export CAPSULE_STATE_KEY=
stop_instances() {
  for s in "$W"/*/s; do
    for p in $(sed -n 's/^pid=//p' "$s"/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done
  done
  true
}
trap 'stop_instances; sleep 0.5; rm -rf "$W"' EXIT
cp "$fault" "$W/selu_fault" && chmod 755 "$W/selu_fault" # reachable by uid 65534
fault=$W/selu_fault

# pkg DIR ID VERSION: a Selu capability whose server reports VERSION (read
# from version.txt at its start, through an interpreter: not a ./ program)
pkg() {
  mkdir -p "$1"
  cp "$fault" "$1/server"
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
  echo "$3" >"$1/version.txt"
}

# a third-party MCP server reporting version.txt as read at its start, and
# a client: `capsule mcp` (its keeper outlives it), one tools/call
cat >"$W/mcp_server.py" <<'PY'
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
cat >"$W/mcp_drive.py" <<'PY'
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
chmod 644 "$W"/*.py
# mpkg DIR VERSION: that MCP server's package
mpkg() {
  mkdir -p "$1"
  cp "$W/mcp_server.py" "$1/server.py"
  echo '{"version": "0.1.0", "network": {"mode": "blocked"}, "x-capsule": {"mcp_server": ["python3", "server.py"]}}' >"$1/capability.json"
  echo "$2" >"$1/version.txt"
}

fail=0
# scenario WHO RUN...: every replacement seen by the next call
scenario() {
  local who=$1; shift
  local d=$W/$who
  mkdir -p "$d" && chmod 777 "$d"
  "$@" mkdir -p "$d/s" "$d/rel"
  v() { local caps=$1 id=$2; shift 2; "$@" timeout 120 "$capsule" call --caps "$caps" --state "$d/s" "$id" env '{"name": "VERSION"}' 2>&1 </dev/null; }
  check() { # NAME GOT WANT
    if [ "$2" = "{\"value\":\"$3\"}" ]; then echo "  ok   $who: $1"
    else echo "  VULNERABLE $who: $1: the call got $2, the package holds $3"; fail=1; fi
  }
  # 1. the parent renamed away, a new release in its place
  "$@" bash -c "$(declare -f pkg); fault='$fault'; pkg '$d/caps/wa' wa 1"
  check parent-start "$(v "$d/caps" wa "$@")" 1
  check parent-warm "$(v "$d/caps" wa "$@")" 1
  "$@" mv "$d/caps" "$d/caps.old"
  "$@" bash -c "$(declare -f pkg); fault='$fault'; pkg '$d/caps/wa' wa 2"
  check parent-renamed "$(v "$d/caps" wa "$@")" 2
  # 2. a symlinked parent switched to another release
  "$@" bash -c "$(declare -f pkg); fault='$fault'; pkg '$d/rel/v1/wb' wb 1; pkg '$d/rel/v2/wb' wb 2"
  "$@" ln -s rel/v1 "$d/current"
  check link-start "$(v "$d/current" wb "$@")" 1
  check link-warm "$(v "$d/current" wb "$@")" 1
  "$@" ln -sfn rel/v2 "$d/current.new"
  "$@" mv -T "$d/current.new" "$d/current"
  check link-switched "$(v "$d/current" wb "$@")" 2
  # 3. a file edited through a hard link from outside the package
  "$@" bash -c "$(declare -f pkg); fault='$fault'; pkg '$d/hl/wc' wc 1"
  "$@" ln "$d/hl/wc/version.txt" "$d/outside-link"
  check hardlink-start "$(v "$d/hl" wc "$@")" 1
  check hardlink-warm "$(v "$d/hl" wc "$@")" 1
  "$@" sh -c "echo 3 >'$d/outside-link'"
  check hardlink-edited "$(v "$d/hl" wc "$@")" 3
  # 4. a warm MCP server's keeper (through `capsule mcp`): the parent renamed
  "$@" bash -c "$(declare -f mpkg); W='$W'; mpkg '$d/mcaps/wm' 1"
  "$@" "$capsule" call --caps "$d/mcaps" --state "$d/s" wm ver '{}' >/dev/null 2>&1 # discovers the tool
  "$@" "$capsule" policy set --caps "$d/mcaps" --state "$d/s" wm ver allow >/dev/null
  m() { "$@" timeout 120 python3 "$W/mcp_drive.py" "$capsule" mcp --caps "$d/mcaps" --state "$d/s" 2>/dev/null </dev/null; }
  check mcp-start "$(m "$@")" 1
  check mcp-warm "$(m "$@")" 1
  "$@" mv "$d/mcaps" "$d/mcaps.old"
  "$@" bash -c "$(declare -f mpkg); W='$W'; mpkg '$d/mcaps/wm' 2"
  check mcp-parent-renamed "$(m "$@")" 2
}
scenario root env
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  scenario nobody setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$W/nobody"
fi
[ "$fail" = 0 ] && echo blocked
exit "$fail"
