#!/usr/bin/env bash
# serve --mcp-http bounds a user's calls in flight across all its sessions
# (each session has 16 of its own, and a user may open hundreds): a token
# holder opening sessions and filling each with slow calls would otherwise
# run a sandbox for each, sixteen times a session. With
# CAPSULE_SERVE_USER_CALLS=3, alice's fourth call at once (over two
# sessions) is refused as a tool error naming the bound, bob's call meanwhile
# is served, and once alice's end a new one of hers runs. As the user
# running the tests (root, or uid 65534 in CI).
# Usage: user_calls.sh CAPSULE
. "$(dirname "$0")/two_users.sh" "$1" user-calls
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
mkdir -p "$caps/agents/slow"
# a Covenant agent answering after 3 s: its calls stay in flight meanwhile
printf '[agent]\nid = "slow"\nname = "slow"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/slow/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; sleep 3; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/slow/run.sh"
chmod -R a+rX "$work" && chmod 755 "$caps/agents/slow/run.sh"
"$capsule" policy set --caps "$caps" --state "$state" slow dispatch allow >/dev/null || { echo "FAIL: policy set"; exit 1; }
users
serve_http CAPSULE_SERVE_USER_CALLS=3
python3 "$(dirname "$0")/user_calls.py" "$port" "$alice" "$bob"
serve_end $?
