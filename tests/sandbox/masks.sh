#!/usr/bin/env bash
# What the sandbox hides and what it must still reach, as root and as uid
# 65534: deny entries that are symlinks or lie under a symlinked parent,
# capsule's state directories (reached through a symlinked parent, an
# older one under a grant, a grant at or below one refused, `/` granted
# with the state masked), the host's /sys under `--allow-read /`, and, as
# root, a capability under a 0700 directory. Usage: masks.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-masks.XXXXXX)
chmod 755 "$work"
pass=0 fail=0
trap 'rm -rf "$work"' EXIT

ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() {
  fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"
  printf '%s\n' "$3" | head -5 | sed 's/^/         /'
}

# check WHO NAME WANT-STATUS WANT-OUTPUT-REGEX CAPSULE-ARGS...
check() {
  local who=$1 name=$2 want=$3 regex=$4; shift 4
  local out status
  out=$(cd "$work" && as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" timeout 60 "$capsule" run "$@" 2>&1 </dev/null)
  status=$?
  if [[ "|$want|" == *"|$status|"* ]] && echo "$out" | grep -qE -- "$regex"; then
    ok "$who" "$name"
  else
    bad "$who" "$name (exit $status, want $want)" "$out"
  fi
}

setup_user() {
  local who=$1 d="$work/$1"
  mkdir -p "$d/ro/dir" "$d/real/sub" "$d/data/proj" "$d/older" "$work/xdg-$who"
  echo "denied-through-link" >"$d/ro/secret"
  ln -s "$d/ro/secret" "$d/ro/link"
  echo "denied-in-dir" >"$d/ro/dir/file"
  ln -s "$d/ro/dir" "$d/ro/dirlink"
  echo "denied-below-abs-link" >"$d/real/sub/file"
  ln -s "$d/real" "$d/alias"
  echo "visible" >"$d/data/proj/readme"
  ln -s "$d/data" "$d/datalink"
  chmod -R a+rX "$d"
  [ "$who" = root ] || chown -R 65534:65534 "$d" "$work/xdg-$who"
  cat >"$d/deny.json" <<JSON
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$d", "access": "read"}],
                "deny": [{"path": "$d/ro/link"}, {"path": "$d/ro/dirlink"},
                         {"path": "$d/alias/sub"}]}}
JSON
  mkdir -p "$d/host-agent" "$work/shared"
  chmod 777 "$work/shared"
  printf '#!/bin/sh\nexit 0\n' >"$d/host-agent/run.sh"
  cat >"$d/host-agent/agent.toml" <<'TOML'
[agent]
id = "hostagent"
name = "hostagent"
version = "0.1.0"
runtime = "rust-bin"
entry = "run.sh"

[capabilities]
required = ["tool.hostagent"]

[sandbox]
required = false
filesystem = "host"
TOML
  chmod -R a+rX "$d/host-agent"
  ln -s loop "$d/ro/loop"
  cat >"$d/deny-loop.json" <<JSON
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$d", "access": "read"}], "deny": [{"path": "$d/ro/loop/x"}]}}
JSON
  # a manifest's grant is taken as written: through the symlinked parent
  cat >"$d/via-link.json" <<JSON
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$d/datalink/proj", "access": "read"}]}}
JSON
  # state directories this user's capsule has used: one in the project
  # (reached through datalink), one beside it opened once before
  as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" "$capsule" policy set x t allow --force \
    --state "$d/data/proj/.capsule" >/dev/null
  as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" "$capsule" policy set x t allow --force \
    --state "$d/older/state" >/dev/null
  # a copy capsule never opened: found by its key and state.db
  as_user "$who" cp -a "$d/older/state" "$d/data/proj/copied"
}


# hidden WHO NAME CAPSULE-ARGS... -- FILE: FILE must read as absent or empty
hidden() {
  local who=$1 name=$2; shift 2
  local args=("$@") file=${!#}
  unset 'args[${#args[@]}-1]'
  check "$who" "$name" 0 '^HIDDEN$' "${args[@]}" /bin/sh -c \
    'if [ -s "$1" ] && cat "$1" >/dev/null 2>&1; then echo LEAKED; else echo HIDDEN; fi' sh "$file"
}

suite() {
  local u=$1 d="$work/$1"
  setup_user "$u"
  # item 4: deny entries that are symlinks or lie below an absolute symlink
  hidden "$u" deny-symlink-file --config "$d/deny.json" -- "$d/ro/link"
  hidden "$u" deny-symlink-target --config "$d/deny.json" -- "$d/ro/secret"
  hidden "$u" deny-symlink-dir --config "$d/deny.json" -- "$d/ro/dir/file"
  hidden "$u" deny-abs-link-parent --config "$d/deny.json" -- "$d/real/sub/file"
  check "$u" deny-unresolvable-fails-closed 1 'cannot resolve .*loop/x' --config "$d/deny-loop.json" -- /bin/true
  check "$u" deny-leaves-the-rest 0 '^visible$' --config "$d/deny.json" -- /bin/cat "$d/data/proj/readme"
  # item 3: capsule's state, whatever path the grant takes to it
  check "$u" state-via-link-grant-usable 0 '^visible$' --config "$d/via-link.json" --state \
    "$d/data/proj/.capsule" -- /bin/cat "$d/datalink/proj/readme"
  hidden "$u" state-via-symlinked-parent --config "$d/via-link.json" --state "$d/data/proj/.capsule" -- "$d/datalink/proj/.capsule/key"
  hidden "$u" state-older-under-grant --allow-read "$d/older" -- "$d/older/state/key"
  hidden "$u" state-copy-under-grant --config "$d/via-link.json" -- "$d/datalink/proj/copied/key"
  check "$u" state-grant-below-refused 1 'state directory' --allow-read "$d/older/state" -- /bin/true
  check "$u" state-root-grant-usable 0 '^visible$' --allow-read / --state "$d/data/proj/.capsule" \
    -- /bin/cat "$d/data/proj/readme"
  hidden "$u" state-root-grant-masked --allow-read / --state "$d/data/proj/.capsule" -- "$d/older/state/key"
  # item 19: Covenant's filesystem = "host" is the host read-write
  check "$u" covenant-host-writes 0 '^wrote$' --config "$d/host-agent" -- /bin/sh -c \
    "echo host-mode >'$work/shared/from-$u' && echo wrote"
  if [ "$(cat "$work/shared/from-$u" 2>/dev/null)" = host-mode ]; then ok "$u" covenant-host-reached-host
  else bad "$u" covenant-host-reached-host "no $work/shared/from-$u on the host"; fi
  # item 17: the host's /sys under --allow-read /, unless granted itself
  check "$u" sys-masked-under-root 0 '^sys-entries=0$' --allow-read / -- /bin/sh -c 'echo "sys-entries=$(ls -A /sys | wc -l)"'
  check "$u" sys-granted-explicitly 0 '^sys-entries=[1-9]' --allow-read / --allow-read /sys -- /bin/sh -c 'echo "sys-entries=$(ls -A /sys | wc -l)"'
}

# item 22: as root, a capability under a 0700 directory (the sandbox's uid
# cannot traverse it on the host): bound by the tree capsule opened
covenant_0700() {
  local top
  top=$(mktemp -d "$work/private.XXXXXX") # 0700, root's
  mkdir -p "$top/caps/pyagent"
  cat >"$top/caps/pyagent/agent.toml" <<'TOML'
[agent]
id = "pyagent"
name = "pyagent"
version = "0.1.0"
runtime = "python3"
entry = "main.py"

[capabilities]
required = ["tool.pyagent"]

[resources]
cpu_ms_per_task = 5000
memory_mb = 128
network = "off"
TOML
  cat >"$top/caps/pyagent/main.py" <<'PY'
import json, sys
req = json.loads(sys.stdin.readline())
print(json.dumps({"text": "python agent ran on " + req["text"], "sources": []}))
PY
  chmod -R go+rX "$top/caps"
  "$capsule" policy set pyagent dispatch allow --caps "$top/caps" --state "$top/state" >/dev/null
  "$capsule" token issue local tool.pyagent --state "$top/state" >/dev/null # the agent requires it
  local out status
  out=$(timeout 60 "$capsule" call --caps "$top/caps" --state "$top/state" pyagent dispatch '{"text":"x"}' 2>&1)
  status=$?
  if [ "$status" = 0 ] && echo "$out" | grep -q 'python agent ran on x'; then
    ok root covenant-under-0700
  else
    bad root "covenant-under-0700 (exit $status)" "$out"
  fi
}

for who in "${users[@]}"; do
  echo "as $who:"
  suite "$who"
done
[ "$(id -u)" = 0 ] && command -v python3 >/dev/null && [ -x /usr/bin/python3 ] && covenant_0700
echo "masks suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
