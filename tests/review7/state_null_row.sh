#!/usr/bin/env bash
# Finding (the state's database layer, src/gateway/access.c and others):
# text columns were copied with cap_xstrdup(gw_stmt_text(...)), which is
# NULL for SQL NULL. The schema says NOT NULL, but the database is not
# capsule's to trust: a PostgreSQL server (hostile, or a table whose
# constraint an administrator dropped) answers NULL or fewer columns, an
# edited SQLite state can recreate a table. An access token whose row has
# a NULL user crashed serve (SIGSEGV) on the first HTTP request carrying
# it: every session of every user gone. Here the SQLite state's access
# table is recreated without its constraint.
# Exits 1 while serve crashes, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
tok=$("$capsule" access issue victim --user alice --state "$state" 2>/dev/null)
db=$state/state.db
[ -f "$db" ] || { echo "SKIP: no state.db"; exit 77; }
sqlite3 "$db" "CREATE TABLE a2 (name TEXT PRIMARY KEY, token_sha256 TEXT UNIQUE, user TEXT, operator INTEGER, created TEXT);
  INSERT INTO a2 SELECT * FROM access; DROP TABLE access; ALTER TABLE a2 RENAME TO access;
  UPDATE access SET user = NULL WHERE name = 'victim';" || { echo "SKIP: cannot edit the table"; exit 77; }
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$capsule" serve --caps "$caps" --state "$state" --mcp-http "127.0.0.1:$port" 2>"$work/serve.log" &
server=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}' \
  "http://127.0.0.1:$port/mcp")
sleep 0.5
echo "the request with the edited row's token: ${code:-no answer}"
if ! kill -0 "$server" 2>/dev/null; then
  wait "$server"; rc=$?; server=
  echo "VULNERABLE: serve died (status $rc) on a NULL in its database"; exit 1
fi
out=$("$capsule" access list --state "$state" 2>&1) || true
echo "access list: $(echo "$out" | tr '\n' ' ' | cut -c1-160)"
echo blocked
