#!/usr/bin/env bash
# Review 12 finding (serve's MCP fast path, since 71c3417; wider with
# s10-mcpcpu's group commit, where the batch's leader runs each call's
# at_end before the call's own thread wakes): a call's at_end (serve_fast.c
# fast_end -> mcp_fast_end_hold) lets go of the registry generation the
# call runs on; when the registry was reloaded meanwhile that is its last
# hold and the generation is freed (serve_gen_unref: gw_registry_free),
# and the call's thread then still reads it in gateway/call.c's
# call_steps: c.tool->terminal_on_success, free_secrets'
# c->spec->n_secrets (a use after free; with the freed bytes perturbed,
# free_secrets frees whatever lies past its array). Here: a 3 s call of
# examples/mcp-c's wait on the fast path (then 6 at once), serve reloaded
# (SIGHUP) while they run, serve's heap perturbed on free (MALLOC_PERTURB_; an ASan build
# reports the read). Exits 1 while serve dies or the call goes
# unanswered, 0 when both hold. As root.
# Usage: fast_reload_uaf.sh CAPSULE
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" review12-uaf
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
mcpc_user root
"$capsule" call "${C[@]}" mcp-c echo '{"text":"x"}' >/dev/null 2>&1 # its tools discovered
for t in echo wait; do "$capsule" policy set "${C[@]}" mcp-c $t allow >/dev/null || { echo "FAIL: policy set"; exit 1; }; done
token=$("$capsule" access issue t --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9A-Za-z_-]*' | head -1)
[ -n "$token" ] || { echo "SKIP: cannot issue a token"; exit 77; }
export MALLOC_PERTURB_=85
started=
for _ in 1 2 3; do # another random port when the one tried is taken
  mcpc_serve "$work/serve.log" --rate 1000000 && { started=1; break; }
  kill -9 "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
done
[ -n "$started" ] || { echo "SKIP: serve did not start"; exit 77; }
unset MALLOC_PERTURB_
call() { post "$url" "$token" "$sid" "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"mcp-c__$2\",\"arguments\":$3}}"; }
call 1 wait '{"ms":0}' >/dev/null # the warm server started
# rounds 1-3: one call; 4-5: 6 at once (their records in one batch: the
# leader runs the others' at_end before their threads wake)
for round in 1 2 3 4 5; do
  loaded=$(grep -c 'registry loaded' "$work/serve.log")
  cpids=()
  for k in $(seq 1 $([ $round -le 3 ] && echo 1 || echo 6)); do
    call "$round$k" wait '{"ms":3000}' >"$work/ans-$round-$k" 2>&1 &
    cpids+=($!)
  done
  sleep 1
  kill -HUP "$serve_pid" 2>/dev/null
  for _ in $(seq 1 300); do
    [ "$(grep -c 'registry loaded' "$work/serve.log")" -gt "$loaded" ] && break
    sleep 0.1
  done
  wait "${cpids[@]}"
  n=0
  for f in "$work/ans-$round-"*; do grep -q '"text":"waited"' "$f" && n=$((n + 1)); done
  if [ "$n" = ${#cpids[@]} ]; then
    ok "round $round: the $n call(s) running across a reload answered"
  else
    bad "round $round: $n of ${#cpids[@]} calls running across a reload answered: $(head -c 200 "$work/ans-$round-1")"
  fi
  if kill -0 "$serve_pid" 2>/dev/null && ! grep -q 'ERROR: AddressSanitizer\|runtime error:' "$work/serve.log"; then
    ok "round $round: serve still runs, no sanitizer report"
  else
    bad "round $round: serve died, or a sanitizer reported"
    grep -v '^{' "$work/serve.log" | grep -A14 -m1 'ERROR: AddressSanitizer\|runtime error' | sed 's/^/    /'
    grep -v '^{' "$work/serve.log" | grep -m1 -B2 -A8 '^freed by thread' | sed 's/^/    /'
    break
  fi
done
echo "fast_reload_uaf: $pass passed, $fail failed"
[ "$fail" = 0 ]
