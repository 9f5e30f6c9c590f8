#!/usr/bin/env bash
# Rollback (rollback.enabled): `capsule run` snapshots the writable grants
# before and after; `capsule rollback` lists (newest last, --json with id,
# time, paths), shows, diffs, verifies and restores them (contents, modes,
# symlinks, deletions and additions; exclude_patterns, exclude_globs and
# .gitignore left alone), refuses to restore from a corrupted object (verify
# names it), prunes, and keeps its store out of the tool's sight. With the
# test-hook build, a file that changes while it is read is recorded as
# unstable. As root and as uid 65534. Usage: rollback.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 reads the JSON"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-rollback.XXXXXX)
chmod 755 "$work"
pass=0 fail=0
trap 'rm -rf "$work"' EXIT
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() {
  fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"
  printf '%s\n' "$3" | head -8 | sed 's/^/         /'
}

# the tree as a list: path, type, mode, link target, content hash
tree_of() {
  (cd "$1" && find . -printf '%p %y %m %l\n' | sort && find . -type f -exec sha256sum {} + | sort)
}

# cap WHO ARGS...: capsule as WHO, with WHO's state
cap() {
  local who=$1; shift
  as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" "$capsule" --state "$work/$who/state" "$@"
}

for who in "${users[@]}"; do
  echo "as $who:"
  p="$work/$who/proj"
  mkdir -p "$p/sub/deep" "$p/node_modules/pkg" "$work/xdg-$who" "$work/$who/state"
  echo one >"$p/a.txt"; chmod 640 "$p/a.txt"
  echo two >"$p/sub/b.txt"
  echo three >"$p/sub/deep/c.txt"
  echo module >"$p/node_modules/pkg/index.js"
  echo '*.log' >"$p/.gitignore"
  echo log >"$p/build.log"
  echo scratch >"$p/x.tmp"
  ln -s a.txt "$p/link"
  [ "$who" = root ] || chown -R 65534:65534 "$work/$who" "$work/xdg-$who"
  cat >"$work/$who/cap.json" <<JSON
{"version": "0.1.0", "process": {"exec_strategy": "supervised"},
 "filesystem": {"grants": [{"path": "$p", "access": "readwrite"}]},
 "rollback": {"enabled": true, "exclude_patterns": ["node_modules"], "exclude_globs": ["*.tmp"]}}
JSON
  tree_of "$p" >"$work/$who/before"

  out=$(cap "$who" run --config "$work/$who/cap.json" -- /bin/sh -c \
    "cd $p && echo changed > a.txt && rm -r sub/deep && echo new > new.txt && chmod 700 sub &&
     rm link && ln -s sub link && echo edited > node_modules/pkg/index.js && echo more >> build.log &&
     echo t > x.tmp && ls $work/$who/state/rollback 2>&1; exit 3" 2>&1)
  status=$?
  id=$(echo "$out" | sed -n 's/^capsule run: rollback \([^ ]*\) .*/\1/p')
  if [ "$status" = 3 ] && [ -n "$id" ] && ! echo "$out" | grep -q objects; then
    ok "$who" "run: the command's status, a rollback id, the store out of the tool's sight"
  else
    bad "$who" "run (exit $status, id '$id')" "$out"
  fi
  cap "$who" run --config "$work/$who/cap.json" -- /bin/true 2>/dev/null
  json=$(cap "$who" rollback list --json)
  if python3 -c '
import json, sys
runs = json.loads(sys.argv[1])
assert len(runs) == 2 and runs[0]["id"] == sys.argv[2], runs
assert all({"id", "time", "paths"} <= set(r) and r["paths"] == [sys.argv[3]] for r in runs)
assert runs[0]["time"] <= runs[1]["time"]
' "$json" "$id" "$p" 2>/dev/null; then
    ok "$who" "list --json: id, time, paths; newest last"
  else
    bad "$who" "list --json" "$json"
  fi
  diff=$(cap "$who" rollback diff "$id" 2>&1)
  want="M $p/a.txt
M $p/link
+ $p/new.txt
P $p/sub
- $p/sub/deep
- $p/sub/deep/c.txt"
  [ "$diff" = "$want" ] && ok "$who" "diff: modified, added, removed, mode, link; excludes left out" ||
    bad "$who" "diff" "$diff"
  show=$(cap "$who" rollback show "$id" 2>&1)
  echo "$show" | grep -qE '^before: +root [0-9a-f]{64}, 8 entries' &&
    ok "$who" "show: the Merkle roots and entries" || bad "$who" "show" "$show"

  cap "$who" rollback verify "$id" >/dev/null 2>&1 && ok "$who" "verify: sound" ||
    bad "$who" "verify on a sound store failed" ""
  sum=$(echo one | sha256sum | cut -c1-64) # a.txt before the run
  # small objects live in a pack (objects/packs/NAME.pack at the offset its
  # NAME.idx gives), larger ones loose (objects/AB/CDEF...)
  obj="$work/$who/state/rollback/objects/${sum:0:2}/${sum:2}"
  loc=$(grep -H "^$sum " "$work/$who/state/rollback/objects/packs/"*.idx 2>/dev/null | head -1)
  if [ -n "$loc" ]; then
    obj=${loc%%.idx:*}.pack
    off=$(echo "$loc" | cut -d' ' -f2)
  fi
  cp "$obj" "$work/$who/saved-object"
  if [ -n "$loc" ]; then # one byte of it changed
    printf 'X' | dd of="$obj" bs=1 seek="$off" conv=notrunc 2>/dev/null
  else
    echo corrupted >"$obj"
  fi
  tree_of "$p" >"$work/$who/changed"
  out=$(cap "$who" rollback verify "$id" 2>&1)
  name=$sum
  [ $? = 0 ] || true
  if ! cap "$who" rollback verify "$id" >/dev/null 2>&1 && echo "$out" | grep -q "object $name .*corrupted"; then
    ok "$who" "verify names the corrupted object"
  else
    bad "$who" "verify with a corrupted object" "$out"
  fi
  out=$(cap "$who" rollback restore "$id" 2>&1)
  status=$?
  if [ "$status" = 1 ] && echo "$out" | grep -q "cannot be restored" &&
     diff -q "$work/$who/changed" <(tree_of "$p") >/dev/null; then
    ok "$who" "restore refuses a corrupted store and changes nothing"
  else
    bad "$who" "restore with a corrupted object (exit $status)" "$out"
  fi
  cp "$work/$who/saved-object" "$obj"
  out=$(cap "$who" rollback restore "$id" 2>&1)
  # excluded and ignored files keep what the run wrote: put them back by hand to compare
  echo module >"$p/node_modules/pkg/index.js"; echo log >"$p/build.log"; echo scratch >"$p/x.tmp"
  if [ $? = 0 ] && diff "$work/$who/before" <(tree_of "$p") >/dev/null; then
    ok "$who" "restore: contents, modes, symlinks, deletions and additions as before"
  else
    bad "$who" "restore" "$out
$(diff "$work/$who/before" <(tree_of "$p"))"
  fi

  if [ "${CAPSULE_TEST_HOOKS:-1}" = 1 ]; then
    as_user "$who" sh -c "echo racing > $p/a.txt" # not in the hash cache: it is read
    out=$(as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" CAPSULE_TEST_ROLLBACK_RACE="$p/a.txt" \
      "$capsule" run --state "$work/$who/state" --config "$work/$who/cap.json" -- /bin/true 2>&1)
    rid=$(echo "$out" | sed -n 's/^capsule run: rollback \([^ ]*\) .*/\1/p')
    show=$(cap "$who" rollback show "$rid" 2>&1)
    echo "$show" | grep -q "^unstable:  $p/a.txt (changed while it was read" &&
      ok "$who" "a file changing during the snapshot is recorded as unstable" ||
      bad "$who" "racing writer" "$out
$show"
  fi
  out=$(cap "$who" rollback prune --keep 1 2>&1)
  left=$(cap "$who" rollback list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  [ "$left" = 1 ] && echo "$out" | grep -qE '^pruned [1-9][0-9]* runs and [0-9]+ objects$' &&
    ok "$who" "prune keeps the newest" || bad "$who" "prune ($left left)" "$out"
  # what prune keeps of the store: the hash cache (once lost through "..")
  # and the kept run's objects, packed or loose
  last=$(cap "$who" rollback list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["id"])')
  [ -f "$work/$who/state/rollback/hashcache" ] && cap "$who" rollback verify "$last" >/dev/null 2>&1 &&
    ok "$who" "prune leaves the hash cache and the kept run's objects" ||
    bad "$who" "prune removed too much" "$(ls -R "$work/$who/state/rollback" | head -20)"
  out=$(cap "$who" rollback show no-such-id 2>&1)
  [ $? = 1 ] && echo "$out" | grep -q "no rollback no-such-id" && ok "$who" "an unknown id is refused" ||
    bad "$who" "unknown id" "$out"
done
echo "rollback: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
