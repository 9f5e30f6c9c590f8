#!/usr/bin/env bash
# Finding (the PostgreSQL state on the command line, src/cli/main.c):
# `capsule serve --state postgresql://user:PASSWORD@host/db` (the form
# docs show for a state URL) kept the password in the process's command
# line for its whole life: /proc/PID/cmdline, i.e. `ps`, is readable by
# every local user (uid 65534 here). Also --state=URL and the global
# option before the verb. The server here trusts every connection, so any
# password is accepted. Exits 1 while uid 65534 reads the password, 0
# blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the reader is uid 65534)"; exit 77; }
. "$here/../state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-review7-pg.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; pg_stop immediate; rm -rf "$work"' EXIT
pg_start "$work" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
export XDG_STATE_HOME=$work/home CAPSULE_STATE_KEY=$(printf '%064d' 1)
mkdir -p "$work/caps"
url="postgresql://capsule:Hunter2Secret@/capsule?host=$PGSOCK"
vulnerable=0
for form in "--state $url serve --caps $work/caps --socket $work/s1.sock" \
  "serve --state=$url --caps $work/caps --socket $work/s2.sock"; do
  # shellcheck disable=SC2086
  "$capsule" $form 2>"$work/serve.log" &
  pid=$!
  pids+=("$pid")
  sock=$(echo "$form" | grep -o "$work/s[0-9].sock")
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { cat "$work/serve.log"; echo "SKIP: serve did not start"; exit 77; }
  seen=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- cat "/proc/$pid/cmdline" | tr '\0' ' ')
  echo "uid 65534 reads: $seen"
  grep -q Hunter2Secret <<<"$seen" && vulnerable=1
  grep -q 'capsule:\*\{13\}@' <<<"$seen" || { [ "$vulnerable" = 1 ] || { echo "SKIP: unexpected command line"; exit 77; }; }
  kill "$pid"; wait "$pid" 2>/dev/null
done
[ "$vulnerable" = 0 ] && { echo blocked; exit 0; }
echo "VULNERABLE: the state's password is on the command line for every user"
exit 1
