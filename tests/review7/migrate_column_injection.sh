#!/usr/bin/env bash
# Finding (`capsule state migrate`, src/gateway/state_migrate.c): the
# source SQLite state's table and column names were pasted into the SQL
# run on the target PostgreSQL (`INSERT INTO %s (%s, ...) VALUES ...`). The
# source is a state directory, a file its owner (or a tool that could
# write it) edits at will: a column named
#   key, value) SELECT ?2, ?3 FROM lo_import('/etc/hostname') AS x WHERE CAST(?1 AS TEXT) IS NULL OR TRUE --
# makes the migration run its own SELECT on the database server with the
# migrating role's rights (here a superuser reading a server file into a
# large object). Exits 1 while the injected SQL runs, 0 blocked, 77
# cannot run.
capsule=$(realpath "${1:-build/capsule}")
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the PostgreSQL server runs as uid 65534)"; exit 77; }
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }
. "$here/../state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-review7-pg.XXXXXX)
trap 'pg_stop immediate; rm -rf "$work"' EXIT
pg_start "$work" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
src=$work/src
mkdir -p "$src" && chmod 700 "$src"
export CAPSULE_STATE_KEY=
"$capsule" policy set --state "$src" --force some tool allow >/dev/null 2>&1 ||
  "$capsule" access issue x --state "$src" >/dev/null 2>&1
[ -f "$src/state.db" ] || { echo "SKIP: no source state"; exit 77; }
payload="key, value) SELECT ?2, ?3 FROM lo_import('/etc/hostname') AS x WHERE CAST(?1 AS TEXT) IS NULL OR TRUE --"
sqlite3 "$src/state.db" "CREATE TABLE m2 (\"$payload\" TEXT, key TEXT, value TEXT);
  INSERT INTO m2 SELECT NULL, key, value FROM meta; DROP TABLE meta; ALTER TABLE m2 RENAME TO meta;" ||
  { echo "SKIP: cannot edit the source"; exit 77; }
out=$(XDG_STATE_HOME=$work/home "$capsule" state migrate --from "$src" --to "$PGURL" 2>&1)
echo "state migrate: $(echo "$out" | tail -2 | tr '\n' ' ' | cut -c1-300)"
n=$(pg_as "$pg_bin/psql" -h "$PGSOCK" -U capsule -At -q -c 'SELECT count(*) FROM pg_largeobject_metadata' capsule)
echo "large objects on the server after the migration: $n"
[ "$n" = 0 ] && { echo blocked; exit 0; }
echo "VULNERABLE: the source's column name ran as SQL on the target database"
exit 1
