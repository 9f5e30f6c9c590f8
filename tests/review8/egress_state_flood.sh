#!/usr/bin/env bash
# Finding (the egress log in the state, gateway/egress_store.c): a call's
# egress decisions are kept in memory and stored after its audit record,
# at most GW_EGRESS_BATCH_MAX (4,096) rows, each string up to about 1 KiB
# before escaping (4 KiB after), so one call could put tens of MB into the
# state (a shared PostgreSQL) and every call of a looping agent as much
# again; the file log it replaced capped a run at 64 MiB. A tool asks the
# proxy for distinct denied hosts with 1 KiB paths (no two alike, so
# nothing coalesces) for 20 s; the rows one call left are measured.
# As root and as uid 65534. Exits 1 when one call stored more than
# 1.1 MiB of egress text, 0 blocked, 77 skip. Usage: egress_state_flood.sh CAPSULE
set -u
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review8-egress.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps
mkdir -p "$caps/agents/flood"
printf '[agent]\nid = "flood"\nname = "flood"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 120000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/flood/agent.toml"
cat >"$caps/agents/flood/flood.py" <<'PY'
import os, socket, sys, time
from urllib.parse import urlsplit
sys.stdin.readline()
proxy = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy") or ""
u = urlsplit(proxy)
sent = 0
end = time.time() + float(sys.argv[1])
while u.hostname and time.time() < end:
    host = "h%d-%s.invalid" % (sent, "x" * 40)
    req = "GET http://%s/%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (host, "p%d" % sent + "a" * 1000, host)
    try:
        s = socket.create_connection((u.hostname, u.port or 80), 5)
        s.sendall(req.encode())
        s.recv(4096)
        s.close()
    except OSError:
        pass
    sent += 1
print('{"sent":%d,"proxy":"%s"}' % (sent, proxy))
PY
printf '#!/bin/sh\nexec python3 "$(dirname "$0")/flood.py" 20\n' >"$caps/agents/flood/run.sh"
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/flood/run.sh"
fail=0
for who in root nobody; do
  st=$W/st-$who wrap=()
  mkdir -m 700 "$st"
  if [ "$who" = nobody ]; then
    command -v setpriv >/dev/null || continue
    chown 65534:65534 "$st"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$st")
  fi
  "${wrap[@]}" "$capsule" policy set flood dispatch allow --caps "$caps" --state "$st" >/dev/null &&
    "${wrap[@]}" "$capsule" grant flood --host "granted.invalid:80" --caps "$caps" --state "$st" >/dev/null ||
    { echo "FAIL $who: setup"; exit 1; }
  out=$("${wrap[@]}" timeout 300 "$capsule" call --caps "$caps" --state "$st" flood dispatch '{"text":"x"}' 2>&1 </dev/null)
  echo "$who: call: $out" | head -3
  grep -q '"sent":[1-9]' <<<"$out" || { echo "SKIP: the tool reached no proxy ($out)"; exit 77; }
  read -r rows bytes suppressed < <(python3 -c 'import sqlite3,sys
db = sqlite3.connect(sys.argv[1])
r = db.execute("SELECT count(*), coalesce(sum(length(coalesce(host, \"\")) + length(coalesce(path, \"\")) + length(coalesce(reason, \"\")) + length(coalesce(kind, \"\")) + length(coalesce(method, \"\")) + length(coalesce(credential, \"\"))), 0), coalesce(sum(CASE WHEN decision = \"suppressed\" THEN count ELSE 0 END), 0) FROM egress WHERE capability = ?", ("flood",)).fetchone()
print(*r)' "$st/state.db")
  echo "$who: one call stored $rows egress rows, $bytes bytes of text ($suppressed decisions counted, not stored)"
  if [ "$bytes" -gt 1153433 ]; then echo "VULNERABLE $who: one call put $bytes bytes into the state's egress log"; fail=1
  else echo "  ok   $who: bounded"; fi
done
[ "$fail" = 0 ] && echo blocked
exit "$fail"
