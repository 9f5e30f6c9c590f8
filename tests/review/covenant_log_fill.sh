#!/bin/bash
# Finding: a Covenant tool's stderr is appended to STATE/logs/<id>.log with
# no bound across calls (src/runtime/covenant.c open_log: O_APPEND, never
# rotated or capped). Each call may add its whole disk limit (100 MiB by
# default, disk_mb here = 1), so a tool called repeatedly fills the disk
# holding capsule's state (the key, state.db, the audit log), after which
# calls whose audit record cannot be written fail. Exits non-zero when the
# log grows past one call's disk limit.
capsule=$(realpath "${1:-build/capsule}")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
a=$tmp/caps/agents/spam; mkdir -p "$a"; chmod -R 755 "$tmp/caps"
cat >"$a/agent.toml" <<'T'
[agent]
id = "spam"
name = "spam"
version = "0.1.0"
runtime = "rust-bin"
entry = "spam.sh"
[capabilities]
required = ["tool.spam"]
[resources]
cpu_ms_per_task = 20000
memory_mb = 64
disk_mb = 1
network = "off"
[sandbox]
required = false
backend = "trusted-local"
filesystem = "read-only-package"
T
printf '#!/bin/sh\nhead -c 50000000 /dev/zero >&2\necho %s\n' "'{\"text\":\"done\"}'" >"$a/spam.sh"
chmod 755 "$a/spam.sh"
S=$tmp/state
"$capsule" policy set --caps "$tmp/caps" --state "$S" spam dispatch allow >/dev/null || exit 2
"$capsule" token issue local tool.spam --state "$S" >/dev/null || exit 2 # the agent requires it
for i in 1 2 3 4; do
  "$capsule" call --caps "$tmp/caps" --state "$S" spam dispatch '{"text":"x"}' >/dev/null 2>&1
done
size=$(stat -c %s "$S/logs/spam.log")
echo "log after 4 calls: $size bytes (disk limit per call: 1048576)"
if [ "$size" -gt 2097152 ]; then
  echo "VULNERABLE: the tool's stderr log grows without bound across calls"; exit 1
fi
echo "blocked"; exit 0
