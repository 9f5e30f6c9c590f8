#!/bin/bash
# Finding (forged human-readable output, approvals): `capsule approvals` and
# `capsule approve` show a pending call's arguments cut at 4,000 bytes
# (src/cli/approvals.c describe_approval: cap_escape_fput(args, 4000)), and
# the arguments are the caller's JSON text as sent, insignificant
# whitespace included. An agent (or a prompt-injected one) pads the JSON
# after a harmless first member with 5,000 spaces and puts the member that
# matters after them: the operator reads `{"text":"summarize README.md"
# ...` and approves; the call that runs carries the hidden member too.
# (The approval binds the exact arguments, so nothing else can change
# afterwards: the operator approved what they could not see.)
# Exits 1 when the approved call ran with a member the listing never showed.
capsule=$(realpath "${1:-build/capsule}")
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
chmod 755 "$D"; mkdir -p "$D/caps/echoer"
cat >"$D/caps/echoer/agent.toml" <<'TOML'
[agent]
id = "echoer"
name = "echoer"
version = "0.1.0"
runtime = "rust-bin"
entry = "echo.sh"
[capabilities]
required = ["tool.echoer"]
[resources]
cpu_ms_per_task = 2000
memory_mb = 64
network = "off"
[sandbox]
required = false
backend = "trusted-local"
filesystem = "read-only-package"
TOML
# the agent reports what it was given (whitespace squeezed)
printf '#!/bin/sh\nread -r line\nprintf "{\\"got\\":%%s}\\n" "$(printf %%s "$line" | tr -s " ")"\n' >"$D/caps/echoer/echo.sh"
chmod -R a+rX "$D/caps"; chmod 755 "$D/caps/echoer/echo.sh"
S=$D/state
cap() { (cd /tmp && "$capsule" "$@" </dev/null); }
cap policy set --state "$S" --caps "$D/caps" echoer dispatch ask >/dev/null 2>&1 || { echo "setup failed"; exit 2; }
cap token issue local tool.echoer --state "$S" >/dev/null 2>&1 || { echo "setup failed (token)"; exit 2; }
pad=$(printf '%5000s' '')
args="{\"text\":\"summarize README.md\"$pad,\"parent\":\"HIDDEN-MEMBER-rm-rf-home\"}"
cap call --state "$S" --caps "$D/caps" echoer dispatch "$args" >/dev/null 2>&1
listing=$(cap approvals --state "$S")
id=$(grep -o '^[0-9a-f]\{8\}' <<<"$listing" | head -1)
[ -n "$id" ] || { echo "SKIP: no pending approval"; exit 77; }
shown=$(cap approve --state "$S" "$id")
echo "the operator saw: $(tr -s ' ' <<<"$listing" | head -c 300)"
out=$(cap call --state "$S" --caps "$D/caps" echoer dispatch "$args" 2>&1)
echo "the approved call ran with: $out"
if grep -q HIDDEN-MEMBER <<<"$out" && ! grep -q HIDDEN-MEMBER <<<"$listing$shown"; then
  echo "VULNERABLE: the approved call carried a member neither approvals nor approve showed"; exit 1
fi
echo blocked; exit 0
