#!/usr/bin/env bash
# Fails when a tracked file is capsule run-time state: a state database, a
# state key, or anything else capsule writes into a state directory. Run by
# `make check` (and so by CI) on the clean clone.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(git ls-files | grep -E '(^|/)(state\.db(-wal|-shm|-journal)?|key|audit\.hwm|serve\.sock)$' || true)
# a SQLite database under any name
while IFS= read -r f; do
  [ -f "$f" ] || continue
  if head -c 16 "$f" 2>/dev/null | grep -q 'SQLite format 3'; then bad+=$'\n'"$f"; fi
done < <(git ls-files)
bad=$(printf '%s\n' "$bad" | sed '/^$/d' | sort -u)
if [ -n "$bad" ]; then
  echo "error: capsule state is tracked by git (keys and databases are made at run time):" >&2
  printf '  %s\n' $bad >&2
  echo "fix: git rm --cached these files; .gitignore lists the state file names" >&2
  exit 1
fi
echo "tracked files: no capsule state"
