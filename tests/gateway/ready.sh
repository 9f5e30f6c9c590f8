#!/usr/bin/env bash
# `capsule list` says "ready" only when everything up to exec was checked
# (a dry run of the capability's sandbox finds its entry point reachable and
# executable or readable by the sandbox's user), else "not ready: WHY"; and
# what list says agrees with what `capsule call` does. As root and as uid
# 65534. Usage: ready.sh CAPSULE SELU_SERVER
set -u
source "$(dirname "$0")/../lib/gateway.sh"
selu_server=$(realpath "$2")
work=$(mktemp -d /var/tmp/capsule-ready.XXXXXX)
chmod 755 "$work"
# unmount_under DIR: the Selu volumes capsule mounted below DIR as root
# (gateway/volume_fs.c), before it is removed
unmount_under() { grep -F " $1/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done; }
trap 'unmount_under "$work"; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT

# make_caps DIR: the capabilities under test
make_caps() {
  local caps=$1 a
  for a in good noentry noexec python-noentry; do
    mkdir -p "$caps/agents/$a"
    printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$a" "$a" >"$caps/agents/$a/agent.toml"
    printf '#!/bin/sh\nIFS= read -r line; echo "{\\"ok\\":true}"\n' >"$caps/agents/$a/run.sh"
    chmod 755 "$caps/agents/$a/run.sh"
  done
  rm "$caps/agents/noentry/run.sh"
  chmod 644 "$caps/agents/noexec/run.sh"
  sed -i -e 's/rust-bin/python3/' -e 's/run.sh/main.py/' "$caps/agents/python-noentry/agent.toml"
  mkdir -p "$caps/talos-noindex"
  cat >"$caps/talos-noindex/manifest.json" <<'JSON'
{"id": "talos-noindex", "name": "T", "description": "A Talos plugin without its module.", "version": "1.0.0",
 "logName": "t", "functions": [{"name": "hello", "description": "Greets.", "parameters": {"type": "object"}}]}
JSON
  mkdir -p "$caps/selu-noserver" "$caps/selu-noscript"
  cat >"$caps/selu-noserver/manifest.yaml" <<'YAML'
id: selu-noserver
image: example/x:1.0
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
x-capsule:
  command: ["./server"]
YAML
  sed -e 's/selu-noserver/selu-noscript/' -e 's|\["./server"\]|["sh", "start.sh"]|' \
    "$caps/selu-noserver/manifest.yaml" >"$caps/selu-noscript/manifest.yaml"
  # a Selu environment with a session workspace
  mkdir -p "$caps/selu-workspace"
  cp "$selu_server" "$caps/selu-workspace/server"
  cat >"$caps/selu-workspace/manifest.yaml" <<'YAML'
id: selu-workspace
class: environment
image: example/ws:1.0
filesystem: workspace
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
x-capsule: {command: ["./server", "--mode", "normal"], idle_timeout_ms: 500}
YAML
}

# agrees NAME LIST-LINE CALL-STATUS: "ready" exactly when the call ran
agrees() {
  if { [ "$3" = 0 ] && grep -q ' ready$' <<<"$2"; } || { [ "$3" != 0 ] && grep -q 'not ready' <<<"$2"; }; then
    ok "$1"
  else bad "$1 (call exit $3; list: $2)"; fi
}

# suite WHO RUN...: the cases, capsule run through RUN (as that user)
suite() {
  local who=$1; shift
  local dir=$work/$who caps=$work/$who/caps state=$work/$who/state out
  mkdir -p "$dir"
  make_caps "$caps"
  [ "$who" = root ] || chown -R 65534:65534 "$dir"
  out=$("$@" "$capsule" list --caps "$caps" --state "$state" 2>&1)
  expect() { # expect NAME REGEX
    if grep -qE -- "$2" <<<"$out"; then ok "$who: $1"; else bad "$who: $1"; grep -E "^${3:-.}" <<<"$out" | head -20 | sed 's/^/         /'; fi
  }
  expect ready '^good  \(covenant, stdio-jsonl\)  ready$'
  expect covenant-entry-missing "^noentry .* not ready: $caps/agents/noentry/run.sh does not exist in the sandbox"
  expect covenant-entry-not-executable "^noexec .* not ready: $caps/agents/noexec/run.sh is not executable by the sandbox's user"
  expect covenant-python-entry-missing "^python-noentry .* not ready: .*(main.py does not exist|python3 is not on the sandbox's PATH)"
  expect talos-without-index "^talos-noindex .* not ready: .*(index.ts does not exist|node is not on the sandbox's PATH)"
  expect selu-server-missing "^selu-noserver .* not ready: $caps/selu-noserver/server does not exist"
  expect selu-script-missing "^selu-noscript .* not ready: $caps/selu-noscript/start.sh does not exist"
  # list and call agree: ready exactly when the call runs
  local id said st
  for id in good noentry noexec; do
    "$@" "$capsule" policy set "$id" dispatch allow --caps "$caps" --state "$state" >/dev/null
    said=$(grep -E "^$id " <<<"$out")
    "$@" "$capsule" call --caps "$caps" --state "$state" "$id" dispatch '{"text": "x"}' >/dev/null 2>&1; st=$?
    agrees "$who: list-agrees-with-call-$id" "$said" $st
  done
  said=$(grep -E "^selu-workspace " <<<"$out")
  # a workspace is per session: the call names one (without, it says to)
  "$@" "$capsule" call --caps "$caps" --state "$state" --session s1 selu-workspace ok '{}' >/dev/null 2>&1; st=$?
  agrees "$who: list-agrees-with-call-selu-workspace" "$said" $st
}

echo "as root"
suite root env
if [ "$(id -u)" = 0 ]; then
  # the sandbox's user is not root: a 0600 entry, or one under a 0700
  # directory, may be out of its reach; list must say what call will meet
  mkdir -p "$work/root/private/c/agents"
  cp -r "$work/root/caps/agents/good" "$work/root/private/c/agents/"
  chmod 700 "$work/root/private"
  cp -r "$work/root/caps/agents/good" "$work/root/caps/agents/secret"
  sed -i 's/"good"/"secret"/g' "$work/root/caps/agents/secret/agent.toml"
  chmod 700 "$work/root/caps/agents/secret/run.sh"
  for pair in "private/c:good" "caps:secret"; do
    caps=$work/root/${pair%%:*} id=${pair##*:}
    said=$("$capsule" list --caps "$caps" --state "$work/root/state" 2>&1 | grep -E "^$id ")
    "$capsule" policy set "$id" dispatch allow --caps "$caps" --state "$work/root/state" >/dev/null
    "$capsule" call --caps "$caps" --state "$work/root/state" "$id" dispatch '{"text": "x"}' >/dev/null 2>&1; st=$?
    agrees "root: list-agrees-with-call-${pair%%:*}-$id" "$said" $st
  done
  if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
    echo "as uid 65534"
    suite nobody setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody"
  else
    echo "  note: uid 65534 cannot reach $capsule; the unprivileged half is skipped"
  fi
fi
finish ready
