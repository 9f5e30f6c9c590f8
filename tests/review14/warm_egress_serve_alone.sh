#!/usr/bin/env bash
# Review 14, continued (a warm server's egress spool, src/gateway/
# egress_spool.c; docs/state.md, "A warm instance's egress"): what a warm
# server's proxy decides with no call leased waits in a spool file, which
# the next state open stores. With serve running alone, no command opens
# the state: a keeper that ended (here: retired after its package changed)
# left a spool nobody stored while serve ran, however long. serve now
# stores what processes gone left every SERVE_RECOVER_MS (10 s). The
# probe's request after its call must reach the state's egress log once,
# with no call, while serve alone runs: the database is read with sqlite3,
# which recovers nothing. Exits 1 while it is not stored (60 s), 0 when it
# is stored once, 77 when it cannot run here.
# Usage: warm_egress_serve_alone.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review14-egress-alone
proxied_probe
retired_after_later
rows=0
for _ in $(seq 1 600); do # no capsule command: serve alone stores it
  later_rows >/dev/null
  [ "$rows" -ge 1 ] 2>/dev/null && break
  sleep 0.1
done
later_rows
free=$(sqlite3 "$state/state.db" "SELECT COUNT(*) FROM egress WHERE host = 'denied-later.invalid' AND call_seq IS NULL" 2>&1)
[ "$rows" = 1 ] && [ "$free" = 1 ] && { echo "held: stored once by serve, with no call"; exit 0; }
[ "$rows" -ge 1 ] 2>/dev/null && { echo "FAIL: $rows rows ($free with no call): stored more than once"; exit 1; }
echo "FAIL: a retired keeper's egress spool was not stored while serve ran alone (60 s)"
exit 1
