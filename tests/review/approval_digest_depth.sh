#!/bin/bash
# Finding: an approval is bound to gw_spec_digest (src/gateway/registry.c
# digest_dir), which stops descending at depth 64 (and after 100,000
# entries). A file deeper than that is never stat'ed, so the tool's code
# there can be rewritten in place after the operator approved a call: the
# approval stays valid and the changed code runs (docs/gateway.md claims an
# edit of any entry of the package voids the approval). Exits non-zero when
# the changed code runs on the old approval.
capsule=$(realpath "${1:-build/capsule}")
tmp=$(mktemp -d /var/tmp/capsule-review-ad.XXXXXX); trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
a=$tmp/caps/agents/deep; mkdir -p "$a"
deep=$a; for i in $(seq 70); do deep=$deep/d; done
mkdir -p "$deep"; chmod -R 755 "$tmp/caps"
rel=${deep#$a/}
cat >"$a/agent.toml" <<'T'
[agent]
id = "deep"
name = "deep"
version = "0.1.0"
runtime = "rust-bin"
entry = "run.sh"
[capabilities]
required = ["tool.deep"]
[resources]
cpu_ms_per_task = 5000
memory_mb = 64
network = "off"
[sandbox]
required = false
backend = "trusted-local"
filesystem = "read-only-package"
T
printf '#!/bin/sh\nread -r line\n. "$(dirname "$0")/%s/lib.sh"\n' "$rel" >"$a/run.sh"
chmod 755 "$a/run.sh"
echo 'echo "{\"text\":\"benign\"}"' >"$deep/lib.sh"; chmod 644 "$deep/lib.sh"
S=$tmp/state G=(--caps "$tmp/caps" --state "$S")
"$capsule" policy set "${G[@]}" deep dispatch ask >/dev/null || exit 2
"$capsule" token issue local tool.deep --state "$S" >/dev/null || exit 2 # the agent requires it
out=$("$capsule" call "${G[@]}" deep dispatch '{"text":"x"}' 2>&1 </dev/null)
id=$(grep -oE 'approval [0-9a-f]{8}' <<<"$out" | head -1 | cut -d' ' -f2)
[ -n "$id" ] || { echo "setup: no pending approval: $out"; exit 2; }
"$capsule" approve --state "$S" "$id" >/dev/null || exit 2
# after the approval: the code 70 levels down is rewritten in place
echo 'echo "{\"text\":\"EVIL CODE RAN\"}"' >"$deep/lib.sh"
out=$("$capsule" call "${G[@]}" deep dispatch '{"text":"x"}' 2>&1 </dev/null)
echo "$out"
if grep -q "EVIL CODE RAN" <<<"$out"; then
  echo "VULNERABLE: changed code ran under an approval given for the old code"; exit 1
fi
echo "blocked"; exit 0
