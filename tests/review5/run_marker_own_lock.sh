#!/bin/bash
# Finding (79375af): a `capsule run` whose manifest takes a credential from
# capsule's store opens the state while the sandbox starts (proxy_new ->
# store_lookup -> gw_state_open), after its audit marker was written and
# locked. That open recovers markers: recover_one opens the run's own
# marker, sees its own pid, and closes the descriptor, and closing any
# descriptor of a file drops every POSIX record lock the process holds on
# it. The marker is then unlocked while the run goes on: the next capsule
# that opens the state (an audit, a call, another run) records the run as
# "interrupted" and removes its marker, and the outcome the run writes when
# it ends (exit status, killed by a limit) is lost. As root and as uid 65534.
# Exits 1 when a run still going is recorded "interrupted" (or its outcome is
# lost), 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
W=$(mktemp -d /var/tmp/capsule-review5-lock.XXXXXX); trap 'rm -rf "$W"' EXIT
chmod 777 "$W"; mkdir -p "$W/tool"; chmod 755 "$W/tool"
cat >"$W/tool/capability.json" <<'JSON'
{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["api.example.com"]},
 "credentials": [{"name": "tok", "upstream": "https://api.example.com", "source": "TOKEN", "env_var": "TOK"}]}
JSON
chmod 644 "$W/tool/capability.json"
export CAPSULE_STATE_KEY=
users=(root); [ "$(id -u)" = 0 ] && users+=(nobody)
as() { if [ "$1" = nobody ]; then shift; setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$W" "$@"; else shift; "$@"; fi; }
cd /tmp || exit 77
vuln=0
for who in "${users[@]}"; do
  s=$W/state-$who
  echo secret | as "$who" "$capsule" cred set --state "$s" --shared TOKEN --scope system >/dev/null 2>&1 ||
    { echo "SKIP: cannot store a credential as $who"; exit 77; }
  as "$who" "$capsule" run --state "$s" --config "$W/tool" -- /bin/sh -c 'sleep 3; exit 7' >/dev/null 2>&1 &
  pid=$!
  sleep 1.5
  as "$who" "$capsule" audit --state "$s" >/dev/null 2>&1 # any open of the state
  wait "$pid"
  out=$(as "$who" "$capsule" audit --state "$s" 2>&1)
  echo "$who: $(grep ' run ' <<<"$out")"
  if ! grep -q ' run .*exit 7' <<<"$out"; then
    echo "VULNERABLE ($who): the run, still going, was recorded as interrupted; its outcome (exit 7) is lost"; vuln=1
  fi
done
[ "$vuln" = 1 ] && exit 1
echo blocked; exit 0
