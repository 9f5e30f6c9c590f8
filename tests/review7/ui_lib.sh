# Shared by the review-7 dashboard attacks (sourced): a capabilities
# directory with one Covenant agent `asker` (policy ask), a state owned by
# root with an operator token, `capsule serve --ui 127.0.0.1:0` started;
# sets capsule, work, caps, state, op, U and server. Exits 77 where it
# cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the attacker acts as uid 65534)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
probe=$(mktemp -d)
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; okrun=$?
rm -rf "$probe"
[ "$okrun" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-review7.XXXXXX)
chmod 755 "$work"
server=
trap '[ -n "$server" ] && { kill -9 "$server"; wait "$server"; } 2>/dev/null; rm -rf "$work"' EXIT
export CAPSULE_STATE_KEY=
caps=$work/caps state=$work/state
mkdir -p "$caps/agents/asker" "$state"
chmod 700 "$state"
printf '[agent]\nid = "asker"\nname = "asker"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/asker/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/asker/run.sh"
chmod 755 "$caps/agents/asker/run.sh"
chmod -R a+rX "$caps"
"$capsule" policy set --caps "$caps" --state "$state" asker dispatch ask >/dev/null
op=$("$capsule" access issue op --operator --state "$state" 2>/dev/null)
[ -n "$op" ] || { echo "SKIP: cannot issue a token"; exit 77; }
ui_start() {
  "$capsule" serve --caps "$caps" --state "$state" --ui 127.0.0.1:0 "$@" 2>"$work/serve.log" &
  server=$!
  local a
  for _ in $(seq 1 200); do
    a=$("$capsule" serve status --state "$state" --json 2>/dev/null | grep -o '"ui":"[^"]*"' | cut -d'"' -f4)
    [ -n "$a" ] && break
    sleep 0.1
  done
  [ -n "$a" ] || { cat "$work/serve.log"; echo "SKIP: serve --ui did not start"; exit 77; }
  U=http://$a
}
csrf_of() { grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 | grep -o '[0-9a-f]\{64\}'; }
# sign_in JAR TOKEN: prints the status of POST /login
sign_in() {
  local jar=$1 csrf
  csrf=$(curl -s -c "$jar" -b "$jar" "$U/login" | csrf_of)
  curl -s -o /dev/null -w '%{http_code}' -c "$jar" -b "$jar" --data-urlencode "csrf=$csrf" \
    --data-urlencode "token=$2" "$U/login"
}
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
# ui_base JAR: the URL of the signed-in session's home page: its pages
# live under its own path /s/KEY, its cookie's path (docs/dashboard.md)
ui_base() { echo "$U$(awk -F'\t' '$3 ~ /^\/s\// {p = $3} END {print p}' "$1")/"; }
