#!/usr/bin/env bash
# Review 14 (the operator's grants, src/gateway/grants.c, against warm
# servers: gateway/mcp_keeper.c, selu.c's gw_instance_key): `capsule
# revoke` did not reach a warm server already started with the grant.
# - A third-party MCP server behind `serve --mcp-http`, granted
#   `--read DIR`: its calls read DIR/file; after `capsule revoke CAP
#   --read DIR` every next call was still answered by the server started
#   with the grant, which went on reading the file: a process remembers
#   its keepers' names by what a call may change (mcp_keeper.c's
#   name_inputs), and the grants were not part of it.
# - The same server given `--host H` (a capability without network gets
#   proxy mode): after `revoke --host H` it still ran with its egress
#   proxy: the network a grant adds was part of no warm server's name
#   (gw_instance_key digests the manifest, the package and the path
#   grants), so no process, fresh or not, started a new one.
# - A warm Selu instance (examples/selu-text through `capsule call`)
#   given `--host H`: after `revoke --host H` the next call leased the
#   same instance, started with H allowed (one instance in `capsule ps`).
# Now what a sandbox may reach (path grants, denies, network mode, hosts,
# ports: gw_spec_rights_digest) is part of every warm server's name and of
# the names a process remembers: after a revoke the next call starts a
# server without the grant. Exits 1 while a revoked grant is served, 0
# when not, 77 when it cannot run here. As root.
# Usage: grant_revoke_warm.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review14-revoke
secret=$work/secret
mkdir -p "$secret" && echo s3cret >"$secret/file" && chmod -R a+rX "$secret"

# --- a warm MCP server behind serve ---
probe_cap p
"$capsule" grant "${C[@]}" p --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
serve_http
read_secret() { call p cat '{"path":"'"$secret/file"'"}'; }
for i in 1 2; do # the first starts the keeper, the second finds it warm
  a=$(read_secret)
  grep -q 'READ:s3cret' <<<"$a" || { tail -n 5 "$work/serve.log" "$work/answers"; skip "the granted server cannot read $secret ($a)"; }
done
# the keepers (capsule ps) of a capability, as pids
keepers() { "$capsule" ps --state "$state" --json 2>/dev/null | tr -d ' \n' | tr '{' '\n' | grep "\"capability\":\"$1\"" | grep -o '"pid":"[0-9]*"' | grep -o '[0-9][0-9]*' | sort; }
old_keeper=$(keepers p)
[ -n "$old_keeper" ] || { echo "FAIL: no keeper of p listed while its server is warm: $("$capsule" ps --state "$state" --json 2>&1)"; exit 1; }
"$capsule" revoke "${C[@]}" p --read "$secret" >"$work/revoke.out" || { echo "FAIL: revoke --read"; exit 1; }
# the server started with the grant ends with the revoke, not at its idle timeout
if [ -n "$(keepers p)" ] || kill -0 $old_keeper 2>/dev/null; then
  echo "FAIL: after revoke --read, the warm server started with the grant still runs (keeper $old_keeper)"
  fail=1
elif ! grep -q "^stopped p (keeper pid $old_keeper)" "$work/revoke.out"; then
  echo "FAIL: revoke did not say it stopped the warm server: $(cat "$work/revoke.out")"
  fail=1
else
  echo "ok: revoke --read stops the warm server started with the grant"
fi
for i in 1 2; do
  a=$(read_secret)
  if grep -q 'READ:' <<<"$a"; then
    echo "FAIL: after revoke --read, call $i was answered by the warm server still reading $secret"
    fail=1
  elif ! grep -q 'REFUSED:' <<<"$a"; then
    echo "FAIL: after revoke --read, call $i: no answer ($a)"
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "ok: revoke --read reaches serve's warm MCP server"

a=$(call p net '{}')
grep -q 'PROXY:none' <<<"$a" || { echo "FAIL: the blocked server has a proxy before any host grant ($a)"; exit 1; }
"$capsule" grant "${C[@]}" p --host example.com >/dev/null || { echo "FAIL: grant --host"; exit 1; }
a=$(call p net '{}')
grep -q 'PROXY:http' <<<"$a" || {
  echo "FAIL: after grant --host, the warm server was not started anew with its proxy ($a)"
  fail=1
}
"$capsule" revoke "${C[@]}" p --host example.com >/dev/null || { echo "FAIL: revoke --host"; exit 1; }
a=$(call p net '{}')
if grep -q 'PROXY:none' <<<"$a"; then
  echo "ok: revoke --host reaches serve's warm MCP server"
else
  echo "FAIL: after revoke --host, the call was answered by the server started with the host ($a)"
  fail=1
fi
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null

# --- a warm Selu instance through capsule call ---
if [ -x "$root/examples/selu-text/capability" ]; then
  mkdir -p "$caps/selu-text"
  cp -r "$root/examples/selu-text/." "$caps/selu-text/"
  sed -i 's/max_memory_mb: 64/max_memory_mb: 1024/' "$caps/selu-text/manifest.yaml"
  chmod -R a+rX "$caps"
  instances() { "$capsule" ps --state "$state" --json 2>/dev/null | grep -o '"capability": *"text-tools"' | wc -l; }
  wc_call() { "$capsule" call "${C[@]}" text-tools word_count '{"text":"a b"}' 2>&1; }
  "$capsule" grant "${C[@]}" text-tools --host example.com >/dev/null || { echo "FAIL: grant --host"; exit 1; }
  a=$(wc_call)
  if grep -q '"words"' <<<"$a" && [ "$(instances)" = 1 ]; then
    old_keeper=$(keepers text-tools)
    "$capsule" revoke "${C[@]}" text-tools --host example.com >/dev/null
    n0=$(instances)
    a=$(wc_call)
    n=$(instances)
    if ! grep -q '"words"' <<<"$a"; then
      echo "FAIL: after revoke --host, the Selu call failed: $a"
      fail=1
    elif [ "$n0" != 0 ]; then
      echo "FAIL: after revoke --host, the Selu instance started with the host still runs ($n0 instances)"
      fail=1
    elif [ "$(keepers text-tools)" = "$old_keeper" ]; then
      echo "FAIL: after revoke --host, the Selu call leased the instance started with the host"
      fail=1
    else
      echo "ok: revoke --host stops the Selu instance started with it; the next call starts a new one"
    fi
    "$capsule" stop --state "$state" text-tools >/dev/null 2>&1
  else
    echo "note: the Selu part skipped (no warm instance here: $(head -c 200 <<<"$a"))"
  fi
else
  echo "note: the Selu part skipped (examples/selu-text is not built)"
fi
[ "$fail" = 0 ] && echo "PASS: a revoked grant is never served by a warm server started with it"
exit "$fail"
