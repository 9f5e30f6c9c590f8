#!/usr/bin/env bash
# Finding (the PostgreSQL state, src/gateway/db_sql.c gw_db_url_redact,
# db.c, state_migrate.c): the error naming a state URL that cannot be
# reached redacted the password only in the simplest shapes. Printed in
# clear: a password holding an unencoded '/', '?' or a second '@' (the
# whole URL, and libpq's own message quoting a piece of it as the port or
# host), a `pass%77ord=` parameter (libpq decodes the name: a real
# password), `PASSWORD=`, and `state migrate --to` with a mistyped scheme.
# Nothing is listening on 127.0.0.1:1. Exits 1 while a password reaches
# stderr, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe=$("$capsule" --state 'postgresql://u@127.0.0.1:1/db' policy list 2>&1)
grep -q 'cannot connect' <<<"$probe" || { echo "SKIP: no PostgreSQL module here: $probe"; exit 77; }
leaks=0
for url in 'postgresql://u:SECRET1@127.0.0.1:1/db' 'postgresql://u:SEC/RET2@127.0.0.1:1/db' \
  'postgresql://u:SEC@RET3@127.0.0.1:1/db' 'postgresql://u@127.0.0.1:1/db?pass%77ord=SECRET4' \
  'postgresql://u@127.0.0.1:1/db?sslmode=disable&PASSWORD=SECRET5' 'postgresql://u:SEC?RET6@127.0.0.1:1/db' \
  'postgresql://u:SEC#RET7@127.0.0.1:1/db' 'postgresql://u@127.0.0.1:1/db?password=SECRET8'; do
  out=$("$capsule" --state "$url" policy list 2>&1)
  if grep -qE 'SECRET|RET[0-9]|SEC' <<<"$out"; then
    echo "LEAK $url: $out"; leaks=1
  else
    echo "  redacted  $url"
  fi
done
mkdir "$work/from"
out=$("$capsule" state migrate --from "$work/from" --to 'postgre://u:SECRET9@127.0.0.1:1/db' 2>&1)
grep -q SECRET9 <<<"$out" && { echo "LEAK state migrate --to: $out"; leaks=1; } || echo "  redacted  state migrate --to postgre://"
# a valid URL with '@' in a parameter is not taken for a password
out=$("$capsule" --state 'postgresql://127.0.0.1:1/db?user=a@b' policy list 2>&1)
grep -q 'user=a@b' <<<"$out" && echo "  kept      a parameter's '@'" || { echo "BROKEN: $out"; leaks=1; }
[ "$leaks" = 0 ] && { echo blocked; exit 0; }
echo "VULNERABLE: a state password reached the error"
exit 1
