# Shared by the thirteenth review's scripts: CAPSULE, a work directory, a
# capabilities directory with two MCP-server capabilities (aaa listed
# first, zzz), each tests/review13/lists/server.py in a mode of its own,
# and mcp_drive: `capsule mcp` on stdio driven by lists/drive.py.
# Usage: . lib.sh CAPSULE NAME
set -u
capsule=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
work=$(mktemp -d "/var/tmp/capsule-$2.XXXXXX")
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
caps=$work/caps state=$work/state
mkdir -p "$caps" && mkdir -m 700 "$state"
for c in aaa zzz; do
  mkdir "$caps/$c"
  cp "$here/lists/server.py" "$here/lists/capability.json" "$caps/$c/"
done
chmod -R a+rX "$caps"
# modes AAA ZZZ
modes() { echo "$1" >"$caps/aaa/mode" && echo "$2" >"$caps/zzz/mode"; }
# mcp_drive REQUEST...: the answers, one a line, then "hwm KB"
mcp_drive() {
  timeout 600 python3 "$here/lists/drive.py" \
    "[\"$capsule\",\"mcp\",\"--caps\",\"$caps\",\"--state\",\"$state\"]" "$@" 2>>"$work/drive.err"
}
