# A throwaway PostgreSQL for the state tests: initdb in a temporary
# directory, a unix socket in it, no TCP, no system service. Sourced;
# pg_start sets PGDATA_DIR, PGSOCK and PGURL; pg_stop ends it. As root the
# server runs as nobody (initdb refuses root). Tests run it without fsync;
# PG_DURABILITY replaces that (bench/scale: fsync on, synchronous_commit
# off, as SQLite's WAL with synchronous=NORMAL).
pg_bin=""
for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin /usr/local/bin /usr/bin; do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then pg_bin=$d; break; fi
done

pg_as() { # run as the server's user
  if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
  else "$@"; fi
}

pg_start() { # $1: a directory to hold the cluster
  PGDATA_DIR=$1/pgdata
  PGSOCK=$1/pgsock
  mkdir -p "$PGSOCK" "$PGDATA_DIR"
  [ "$(id -u)" -eq 0 ] && chown 65534:65534 "$1" "$PGSOCK" "$PGDATA_DIR"
  chmod 755 "$1"
  pg_as "$pg_bin/initdb" -D "$PGDATA_DIR" -U capsule --auth=trust --locale=C -E UTF8 >"$1/initdb.log" 2>&1 ||
    { cat "$1/initdb.log" >&2; return 1; }
  pg_resume
  pg_as "$pg_bin/createdb" -h "$PGSOCK" -U capsule capsule >/dev/null
  PGURL="postgresql://capsule@/capsule?host=$PGSOCK"
}

pg_resume() {
  pg_as "$pg_bin/pg_ctl" -D "$PGDATA_DIR" -l "$PGDATA_DIR/../pg.log" -w -t 60 \
    -o "-c listen_addresses='' -c unix_socket_directories='$PGSOCK' ${PG_DURABILITY:--c fsync=off} -c max_connections=60" \
    start >/dev/null
}

pg_stop() { # $1: fast (default) or immediate
  [ -n "${PGDATA_DIR:-}" ] && pg_as "$pg_bin/pg_ctl" -D "$PGDATA_DIR" -m "${1:-fast}" -w stop >/dev/null 2>&1 || true
}
