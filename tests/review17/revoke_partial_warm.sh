#!/usr/bin/env bash
# Review 17 (src/cli/grant.c, revoke's stop of warm servers): `capsule
# revoke CAP --read A --read B` removes A (committed on its own), then
# fails on B (no such grant): the command exited before the warm servers
# were stopped, so the MCP server started with A went on running with it
# until its idle timeout (5 min), though A was revoked. Now a revoke that
# removed any grant stops the capability's warm servers, whatever failed
# after. Exits 1 while the server started with the revoked grant runs on,
# 0 when it is stopped, 77 when it cannot run here. As root.
# Usage: revoke_partial_warm.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review17-revoke-partial
secret=$work/secret
mkdir -p "$secret" && echo s3cret >"$secret/file" && chmod -R a+rX "$secret"
probe_cap p
"$capsule" grant "${C[@]}" p --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
serve_http
read_secret() { call p cat '{"path":"'"$secret/file"'"}'; }
a=$(read_secret)
grep -q 'READ:s3cret' <<<"$a" || { tail -n 5 "$work/serve.log" "$work/answers"; skip "the granted server cannot read $secret ($a)"; }
keepers() { "$capsule" ps --state "$state" --json 2>/dev/null | tr -d ' \n' | tr '{' '\n' | grep "\"capability\":\"$1\"" | grep -o '"pid":"[0-9]*"' | grep -o '[0-9][0-9]*' | sort; }
old_keeper=$(keepers p)
[ -n "$old_keeper" ] || { echo "FAIL: no keeper of p listed while its server is warm"; exit 1; }
# the second grant does not exist: the command fails after the first is revoked
"$capsule" revoke "${C[@]}" p --read "$secret" --read "$work/never-granted" >"$work/revoke.out" 2>"$work/revoke.err" &&
  { echo "FAIL: revoke of a grant that does not exist succeeded"; exit 1; }
"$capsule" grant list "${C[@]}" p 2>/dev/null | grep -qF "$secret" &&
  { echo "FAIL: the first grant was not revoked: $(cat "$work/revoke.err")"; exit 1; }
if [ -n "$(keepers p)" ] || kill -0 $old_keeper 2>/dev/null; then
  echo "FAIL: --read $secret was revoked (the command failed on the next grant) and the warm server started with it still runs (keeper $old_keeper)"
  fail=1
else
  echo "ok: a revoke that failed part-way stops the warm server started with what it did revoke"
fi
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
exit "$fail"
