#!/usr/bin/env bash
# `make run`: capsule's main job on the bundled examples: check each
# capability (all four formats) and print the resolved manifest of each.
set -euo pipefail
capsule=$(realpath "${1:-build/capsule}") # before the cd: a path relative to the caller
cd "$(dirname "$0")/.."
examples=(examples/web-search examples/covenant examples/weather examples/repo-build)
echo "== capsule check ${examples[*]}"
"$capsule" check "${examples[@]}"
for e in examples/web-search examples/covenant/agents/summarize examples/weather examples/repo-build; do
  echo
  echo "== capsule show $e"
  "$capsule" show "$e"
done

echo
echo "== capsule doctor"
if "$capsule" doctor; then
  echo
  # the manifest's credential route reads GITHUB_TOKEN on the host side; the
  # tool gets the proxy and the session CA, never the token
  export GITHUB_TOKEN=${GITHUB_TOKEN:-demo-not-a-real-token}
  # the manifest grants ~/src/project and ~/.npmrc: a home of the demo's own
  # holds them (a grant of a missing path is an error)
  demo_home=$(mktemp -d)
  mkdir -p "$demo_home/src/project" && : >"$demo_home/.npmrc"
  chmod -R a+rX "$demo_home"
  echo "== capsule run --config examples/repo-build -- /bin/sh -c '...'   (HOME=$demo_home)"
  HOME=$demo_home "$capsule" run --config examples/repo-build -- /bin/sh -c \
    'echo "inside: uid $(id -u), hostname $(hostname)"; ls /; env | grep -E "^(HTTPS_PROXY|SSL_CERT_FILE)="
     echo "variables mentioning a token inside: $(env | grep -ci token)"'
  rm -rf "$demo_home"
fi

# the gateway: one call through policy, validation, the sandbox and the audit
# log, with a state directory of this demo's own
if "$capsule" doctor >/dev/null 2>&1; then
  state=$(mktemp -d)
  trap 'rm -rf "$state" "$state.err"' EXIT
  echo
  echo "== capsule list --caps examples/covenant"
  "$capsule" list --caps examples/covenant --state "$state"
  echo
  echo "== capsule call --caps examples/covenant wordcount dispatch '{\"text\": \"one two three\"}'"
  "$capsule" call --caps examples/covenant --state "$state" wordcount dispatch '{"text": "one two three"}' || true
  "$capsule" policy set wordcount dispatch allow --caps examples/covenant --state "$state"
  echo "== (after capsule policy set wordcount dispatch allow)"
  "$capsule" call --caps examples/covenant --state "$state" wordcount dispatch '{"text": "one two three"}' || true
  # the agent's capabilities.required: Covenant's capability token for it
  echo "== capsule token issue local tool.wordcount"
  "$capsule" token issue local tool.wordcount --state "$state" | tail -n +2
  "$capsule" call --caps examples/covenant --state "$state" wordcount dispatch '{"text": "one two three"}'
  if [ -x examples/selu-text/capability ]; then
    echo
    echo "== a Selu gRPC capability, kept warm between calls (examples/selu-text, in C)"
    "$capsule" policy set text-tools word_count allow --caps examples --state "$state"
    for text in "one two three" "warm now"; do
      echo "== capsule call --caps examples text-tools word_count '{\"text\": \"$text\"}'"
      # the capability's own log lines are noise here; a failure shows them all
      if ! "$capsule" call --caps examples --state "$state" text-tools word_count "{\"text\": \"$text\"}" 2>"$state.err"; then
        cat "$state.err" >&2
        exit 1
      fi
    done
    pkill -f -- "--state $state" || true # the instance's keeper; it would stop when idle
  fi
  echo
  echo "== capsule audit; capsule audit verify"
  "$capsule" audit --state "$state"
  "$capsule" audit verify --state "$state"
fi
