#!/usr/bin/env bash
# Finding (the PostgreSQL state, src/gateway/state.c check_identity): the
# database's own identity rows were used as they came. The fingerprint
# another key left was printed raw in the refusal (ESC sequences from the
# database on the operator's terminal: a retitled window, a cleared
# screen, forged lines), and the state id named a file in the state
# directory (`audit-hwm-ID`): any 16 bytes, '/' and newlines included.
# A database is shared by gateways and their administrators, none of
# whom should write to a terminal or choose a file name here.
# Exits 1 while either is taken, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the PostgreSQL server runs as uid 65534)"; exit 77; }
. "$here/../state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-review7-pg.XXXXXX)
trap 'pg_stop immediate; rm -rf "$work"' EXIT
pg_start "$work" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
psql_c() { pg_as "$pg_bin/psql" -h "$PGSOCK" -U capsule -At -q -c "$1" capsule; }
export XDG_STATE_HOME=$work/home CAPSULE_STATE_KEY=$(printf '%064d' 1)
"$capsule" --state "$PGURL" policy list >/dev/null 2>&1 || { echo "SKIP: cannot open the PostgreSQL state"; exit 77; }
vulnerable=0
# 1. the state id: a name with a newline
psql_c "UPDATE meta SET value = E'ab\\ncd' WHERE key = 'state_id'"
out=$("$capsule" --state "$PGURL" audit verify 2>&1)
if find "$work/home" -name 'audit-hwm-ab*' | grep -q .; then
  echo "VULNERABLE: the database's state id named a file: $(find "$work/home" -name 'audit-hwm-ab*' | head -1 | od -c | head -2)"
  vulnerable=1
else
  echo "state id with a newline: $(echo "$out" | head -2 | cut -c1-200)"
fi
# 2. another key's fingerprint, as escapes
psql_c "UPDATE meta SET value = E'\\x1b]0;pwned\\x07\\x1b[2Jforged' WHERE key = 'key_fingerprint'"
out=$("$capsule" --state "$PGURL" policy list 2>&1)
if printf '%s' "$out" | grep -q $'\x1b'; then
  echo "VULNERABLE: the database's fingerprint reached the terminal raw: $(printf '%s' "$out" | od -c | head -3)"
  vulnerable=1
else
  echo "fingerprint of escapes: $(echo "$out" | head -2 | cut -c1-200)"
fi
[ "$vulnerable" = 0 ] && { echo blocked; exit 0; }
exit 1
