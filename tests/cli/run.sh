#!/usr/bin/env bash
# The command line as a new user types it (docs/cli.md): options anywhere
# before `--` and CAPSULE_CAPS/CAPSULE_STATE as defaults; run's
# --allow-host/--allow-port/--net proxy against a loopback HTTP server; the
# caller's directory as the working directory; help and messages; --dry-run;
# missing grants; --deny; make install. As root and unprivileged where the
# sandbox is involved. Usage: run.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d /var/tmp/capsule-cli.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
unset CAPSULE_CAPS CAPSULE_STATE

# ok, bad and check: lib/sandbox.sh's
# lines WHO NAME WANT-LINES CAPSULE-ARGS...: stderr has exactly that many lines
lines() {
  local who=$1 name=$2 want=$3; shift 3
  local n
  n=$(cd "$work" && as_user "$who" "$capsule" "$@" 2>&1 >/dev/null </dev/null | wc -l)
  if [ "$n" = "$want" ]; then ok "$who" "$name"; else bad "$who" "$name ($n lines, want $want)"; fi
}

# ---- 1. options anywhere before --, environment defaults ----
state=$work/state
mkdir -m 700 "$state"
caps=$work/caps
mkdir -p "$caps" && cp -r "$root/examples/weather" "$caps/weather" && chmod -R a+rX "$caps"
check root policy-state-after-sub 0 '^policy set: weather.current allow \(operator default\)$' policy set --state "$state" --caps "$caps" weather current allow
check root policy-state-before-sub 0 'weather +current +allow' policy --state "$state" list
check root state-before-verb 0 'weather +current +allow' --state "$state" policy list
check root audit-state-before-verify 0 'audit log verified' audit --state "$state" verify
check root audit-state-before-verb 0 'audit log verified' --state="$state" audit verify
CAPSULE_STATE=$state check root env-state 0 'weather +current +allow' policy list
CAPSULE_STATE=$work/nowhere check root flag-beats-env 0 'weather +current +allow' policy list --state "$state"
CAPSULE_CAPS=$caps check root env-caps 0 '^weather ' list --state "$state"
check root caps-before-verb 0 "^weather " --caps "$caps" list --state "$state"
check root json-before-verb 0 '"id": "weather"' --json --caps "$caps" list --state "$state"
check root unknown-before-verb 2 "unknown option '--bogus'" --bogus list
lines root unknown-option-one-line 1 run --bogus -- true
check root unknown-option-named 2 "^capsule run: unknown option '--bogus'" run --bogus -- true
check root missing-value-named 2 "^capsule run: --memory needs a value" run --memory
check root flag-value-refused 2 "^capsule check: --quiet takes no value" check --quiet=yes x
check root unknown-short-named 2 "^capsule run: unknown option '-x'" run -x -- true

# ---- 3. run's outcomes: typed, one exit-code list ----
mkdir -p "$work/noexec" && printf '#!/bin/sh\necho ran\n' >"$work/noexec/tool.sh"
chmod 755 "$work/noexec" && chmod 644 "$work/noexec/tool.sh"
for who in "${users[@]}"; do
  check "$who" exit-status-passed 7 '^$' run -- sh -c 'exit 7'
  check "$who" not-found-bare 127 '^capsule: cannot run no-such-command-here: no such command' run -- no-such-command-here
  check "$who" not-found-path 127 '^capsule: cannot run /no/such/tool' run -- /no/such/tool
  # there on the host, but exec fails inside: the sandbox reports it typed
  check "$who" not-executable-inside 127 "^capsule: cannot run $work/noexec/tool.sh: Permission denied" run --allow-read "$work/noexec" -- "$work/noexec/tool.sh"
  check "$who" killed-names-limit 125 '^capsule: killed: wall clock exceeded \(limits: wall clock 1000 ms\)' run --timeout 1 -- sleep 30
done
check root timeout-zero-named 2 "^capsule run: --timeout takes a positive integer, not '0'" run --timeout 0 -- true
check root pids-zero-named 2 "^capsule run: --pids takes a positive integer, not '0'" run --pids=0 -- true

# ---- 2. --allow-host, --allow-port, --net proxy: a loopback HTTP server ----
node -e 'require("http").createServer((q, r) => r.end("served " + q.url + "\n"))
  .listen(0, "127.0.0.1", function () { console.log(this.address().port) })' >"$work/port1" & pids+=($!)
node -e 'require("http").createServer((q, r) => r.end("other " + q.url + "\n"))
  .listen(0, "127.0.0.1", function () { console.log(this.address().port) })' >"$work/port2" & pids+=($!)
for _ in $(seq 50); do [ -s "$work/port1" ] && [ -s "$work/port2" ] && break; sleep 0.1; done
http=$(cat "$work/port1") other=$(cat "$work/port2")
C="curl -sS --max-time 20 --noproxy ''" # through the proxy from the environment
P=--proxy-allow-private                 # the upstreams are on loopback
H=(--allow-read "$(dirname "$hostile")")
for who in "${users[@]}"; do
  check "$who" allow-host-any-port 0 "^served /a$" run --allow-host 127.0.0.1 $P -- sh -c "$C http://127.0.0.1:$http/a"
  check "$who" allow-host-any-port-2 0 "^other /b$" run --allow-host 127.0.0.1 $P -- sh -c "$C http://127.0.0.1:$other/b"
  check "$who" allow-host-port 0 "^served /c$" run --allow-host "127.0.0.1:$http" $P -- sh -c "$C http://127.0.0.1:$http/c"
  check "$who" allow-host-other-port-denied 0 "^403$" run --allow-host "127.0.0.1:$http" $P -- sh -c "$C -o /dev/null -w '%{http_code}\n' http://127.0.0.1:$other/d"
  check "$who" allow-host-other-host-denied 0 "not in the capability's network allowlist" run --allow-host localhost $P -- sh -c "$C http://127.0.0.1:$http/e"
  check "$who" net-proxy-alone-denied 0 "not in the capability's network allowlist" run --net proxy $P -- sh -c "$C http://127.0.0.1:$http/f"
  check "$who" allow-host-no-bypass 0 "BLOCKED" run --allow-host 127.0.0.1 $P "${H[@]}" -- "$hostile" tcp "$http"
  check "$who" allow-port-forwarded 0 "^served /g$" run --allow-port "$http" -- sh -c "curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:$http/g"
  check "$who" allow-port-other-refused 0 "^refused$" run --allow-port "$http" -- sh -c "curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:$other/ 2>/dev/null || echo refused"
  check "$who" blocked-by-default 0 "^refused$" run -- sh -c "curl -sS --max-time 20 http://127.0.0.1:$http/ 2>/dev/null || echo refused"
done
check root allow-host-vs-net-blocked 2 "drop --net blocked" run --net blocked --allow-host example.com -- true
check root allow-host-bad-name 2 "'a b' is not HOST\[:PORT\]" run --allow-host 'a b' -- true
check root allow-host-bad-port 2 "the port must be 1..65535" run --allow-host example.com:99999 -- true
check root allow-port-bad 2 "--allow-port takes a TCP port 1..65535, not '0'" run --allow-port 0 -- true
check root net-bad 2 "--net takes blocked, proxy or unrestricted" run --net open -- true
check root allow-host-dry-run 0 '"\.example\.org"' run --allow-host '*.example.org' --allow-host api.example.com:443 --dry-run --json

# ---- 4. the caller's directory: README's own example, relative --workdir ----
proj=$work/proj
mkdir -p "$proj/sub/deeper" "$work/elsewhere"
printf 'all:\n\tpwd >built\n' >"$proj/Makefile"
chmod -R a+rwX "$proj"
for who in "${users[@]}"; do
  rm -f "$proj/built"
  dir=$proj check "$who" readme-make-in-callers-dir 0 "" run --allow-rw . --memory 256M --timeout 30 -- make
  if [ "$(cat "$proj/built" 2>/dev/null)" = "$proj" ]; then ok "$who" readme-make-built-there
  else bad "$who" "readme-make-built-there ($(cat "$proj/built" 2>&1))"; fi
  dir=$proj check "$who" workdir-relative-is-callers 0 "^$proj/sub\$" run --allow-read . --workdir sub -- pwd
  dir=$proj/sub/deeper check "$who" cwd-below-grant 0 "^$proj/sub/deeper\$" run --allow-read "$proj" -- pwd
  dir=$proj check "$who" cwd-not-granted-tmp 0 "^/tmp\$" run --allow-read "$work/elsewhere" -- pwd
done

# ---- 5. help: each verb its own text, exit 0, the same both ways ----
for v in check show validate run doctor list call policy cred approve deny audit; do
  a=$("$capsule" "$v" --help 2>&1); sa=$?
  b=$("$capsule" help "$v" 2>&1); sb=$?
  if [ "$sa" = 0 ] && [ "$sb" = 0 ] && [ "$a" = "$b" ] && echo "$a" | head -1 | grep -q "^usage: capsule $v"; then
    ok root "help-$v"
  else bad root "help-$v (exits $sa/$sb, first line: $(echo "$a" | head -1))"; fi
done
check root help-after-sub-verb 0 "^usage: capsule policy set" policy set --help
check root help-unknown-verb 2 "no help for 'nope'" help nope
check root help-global 0 "^usage: capsule \[--help\]" help

# ---- 6. --dry-run: the summary first, the manifest only with --json ----
cat >"$work/routes.json" <<JSON
{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["api.example.com"]},
 "credentials": [{"name": "gh", "upstream": "https://api.github.com", "source": "env://GH_TOKEN"}]}
JSON
dry() { # dry NAME REGEX ARGS...: --dry-run's stdout (text) matches REGEX, multi-line
  local name=$1 regex=$2; shift 2
  local out
  out=$(cd "$proj" && "$capsule" run --dry-run "$@" 2>/dev/null)
  if printf '%s\n' "$out" | grep -qE -- "$regex"; then ok root "$name"
  else bad root "$name"; printf '%s\n' "$out" | head -12 | sed 's/^/         /'; fi
}
dry dry-first-line '^# capsule run --dry-run' --allow-rw . -- make
if [ "$(cd "$proj" && "$capsule" run --dry-run --allow-rw . -- make 2>/dev/null | head -1)" = "# capsule run --dry-run: (command line)" ]; then
  ok root dry-summary-first; else bad root dry-summary-first; fi
dry dry-runs-as-root "^runs as: +host uid ([0-9]+ and gid [0-9]+ \(ids [0-9]+-[0-9]+ of capability run|and gid base \+ 65534 of 65,536 ids of capability run)" -- true
dry dry-workdir "^working dir: +$proj\$" --allow-rw . -- make
dry dry-private-tmp "^private /tmp: +yes" -- true
dry dry-grant "^grant: +readwrite +$proj" --allow-rw . -- make
# as root a read-write grant is an idmapped mount: root's 0755 directory is
# the tool's; another user's is not
dry dry-grant-writable "^grant: +readwrite +$work/elsewhere: writable by the tool \(an idmapped mount" --allow-rw "$work/elsewhere" -- true
mkdir -p "$work/others" && chown 12345:12345 "$work/others" && chmod 755 "$work/others"
dry dry-grant-not-writable "^grant: +readwrite +$work/others +NOT WRITABLE by the tool, uid [0-9]+ \(owner uid 12345, mode 755\)" --allow-rw "$work/others" -- true
dry dry-allowed-domain "^allow host: +api.example.com \(any port\)" --config "$work/routes.json" -- true
dry dry-credential-route "^credential: +gh: read from [^ ]+, sent to https://api.github.com" --config "$work/routes.json" -- true
dry dry-limits "^limits: +memory 256 MiB, pids 4096, wall clock 30 s" --memory 256M --timeout 30 -- true
dry dry-enforcement "^# how each right is enforced on this host" -- true
if ! (cd "$proj" && "$capsule" run --dry-run -- true 2>/dev/null | grep -q '"\$schema"'); then ok root dry-no-json-by-default
else bad root dry-no-json-by-default; fi
if (cd "$proj" && "$capsule" run --dry-run --json -- true 2>/dev/null | node -e 'JSON.parse(require("fs").readFileSync(0))') &&
   (cd "$proj" && "$capsule" run --dry-run --json -- true 2>&1 >/dev/null | grep -q '^runs as:'); then
  ok root dry-json-manifest-on-stdout
else bad root dry-json-manifest-on-stdout; fi
check root json-needs-dry-run 2 "^capsule run: --json goes with --dry-run" run --json -- true
if [ -n "${users[1]:-}" ]; then
  check nobody dry-runs-as-caller 0 "^runs as: +uid 65534 \(nobody\), gid 65534 \(the caller's own\), no capabilities\$" run --dry-run -- true
fi

# ---- 7. one rule for grants of missing paths; --deny ----
cat >"$work/missing-grant.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$work/no-such-dir", "access": "read"}]}}
JSON
check root missing-flag-grant 1 "^capsule run: --allow-read $work/no-such-dir: No such file or directory on this host; create it first, or drop the grant\$" run --allow-read "$work/no-such-dir" -- true
check root missing-manifest-grant 1 "^capsule run: $work/missing-grant.json: grant $work/no-such-dir: No such file or directory on this host; create it first, or remove it from the manifest's grants\$" run --config "$work/missing-grant.json" -- true
check root missing-manifest-grant-dry-run 1 "grant $work/no-such-dir: No such file" run --config "$work/missing-grant.json" --dry-run
mkdir -p "$proj/private"
echo "top secret" >"$proj/private/key" && echo "also secret" >"$proj/token" && echo "public" >"$proj/readme"
chmod -R a+rX "$proj"
for who in "${users[@]}"; do
  check "$who" deny-dir-hidden 0 "^hidden\$" run --allow-read "$proj" --deny "$proj/private" -- sh -c "cat $proj/private/key 2>/dev/null || echo hidden"
  check "$who" deny-file-hidden 0 "^empty\$" run --allow-read "$proj" --deny "$proj/token" -- sh -c "[ -s $proj/token ] && cat $proj/token || echo empty"
  dir=$proj check "$who" deny-relative-is-callers 0 "^hidden\$" run --allow-read . --deny private -- sh -c "cat $proj/private/key 2>/dev/null || echo hidden"
  check "$who" deny-leaves-the-rest 0 "^public\$" run --allow-read "$proj" --deny "$proj/private" -- cat "$proj/readme"
  dir=$proj check "$who" cwd-denied-not-used 0 "^/tmp\$" run --allow-read "$proj" --deny "$proj" -- pwd
done
check root deny-in-dry-run 0 "^deny: +$proj/private\$" run --dry-run --allow-read "$proj" --deny "$proj/private"

# ---- 8. bash completion, make install, colour on a terminal only ----
# shellcheck source=../../completions/capsule.bash
. "$root/completions/capsule.bash"
complete_words() { # complete_words WORDS...: what _capsule offers for the last word
  COMP_WORDS=("$@") COMP_CWORD=$(($# - 1)) COMPREPLY=()
  _capsule
  echo "${COMPREPLY[*]}"
}
comp() { # comp NAME WANT WORDS...
  local name=$1 want=$2; shift 2
  local got
  got=$(complete_words "$@")
  if [ "$got" = "$want" ]; then ok root "$name"; else bad root "$name (got '$got', want '$want')"; fi
}
comp complete-verb "policy" capsule po
comp complete-sub-verb-after-options "set" capsule policy --state /tmp s
comp complete-net-value "proxy" capsule run --net p
comp complete-run-option "--allow-host" capsule run --allow-h
comp complete-help-verb "run" capsule help ru
comp complete-audit-sub "verify" capsule audit --json v
# every option a verb's help names, completion offers
for v in check show validate run list call policy cred audit config grant revoke triggers events; do
  missing=""
  for o in $("$capsule" "$v" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
    case " $(complete_words capsule "$v" --) " in *" $o "*) ;; *) missing+=" $o" ;; esac
  done
  if [ -z "$missing" ]; then ok root "complete-covers-$v-help"; else bad root "complete-covers-$v-help (missing:$missing)"; fi
done

builddir=$(cd "$(dirname "$capsule")/../.." && pwd)
if make -s -C "$root" install BUILD="$builddir" PREFIX=/opt/capsule DESTDIR="$work/pkg" >"$work/install.log" 2>&1 &&
   [ "$("$work/pkg/opt/capsule/bin/capsule" --version)" = "$("$capsule" --version)" ] &&
   [ -f "$work/pkg/opt/capsule/share/bash-completion/completions/capsule" ] &&
   [ -f "$work/pkg/opt/capsule/share/doc/capsule/cli.md" ]; then ok root make-install-prefix-destdir
else bad root make-install-prefix-destdir; tail -5 "$work/install.log" | sed 's/^/         /'; fi

esc=$(printf '\033')
if "$capsule" doctor 2>&1 | grep -q "$esc"; then bad root colour-not-in-pipe; else ok root colour-not-in-pipe; fi
if command -v script >/dev/null; then
  if TERM=xterm script -qec "$capsule doctor" /dev/null 2>&1 | grep -q "$esc\[32myes"; then ok root colour-on-terminal
  else bad root colour-on-terminal; fi
  if NO_COLOR=1 TERM=xterm script -qec "$capsule doctor" /dev/null 2>&1 | grep -q "$esc"; then bad root colour-no-color
  else ok root colour-no-color; fi
fi

# ---- listings: --json on every listing verb, text escaped ----
# A tool name, user, credential name and argument holding ESC, a newline
# and U+202E: every text listing shows them escaped on one line, every
# --json listing is one valid JSON array of objects with the documented keys.
L=$work/listings
mkdir -m 700 "$L"
h="ev${esc}[31mil"$'\n'"x$(printf '\342\200\256')y"
shown='ev\x1b[31mil\nx\u{202e}y'
"$capsule" policy set --force --state "$L" weather "$h" block >/dev/null 2>&1
"$capsule" policy set --force --state "$L" weather current ask --user "$h" >/dev/null 2>&1
echo s1 | "$capsule" cred set --state "$L" weather "$h" --scope system >/dev/null 2>&1
echo s2 | "$capsule" cred set --state "$L" weather api_key --scope user --user "$h" >/dev/null 2>&1
"$capsule" call --caps "$caps" --state "$L" --user "$h" weather current "{\"city\": \"$h\"}" >/dev/null 2>&1
"$capsule" call --caps "$caps" --state "$L" weather "$h" '{}' >/dev/null 2>&1
# listing VERB... : the text form escaped (no raw ESC or U+202E, the
# hostile text shown as $shown), and --json valid with exactly KEYS
listing() {
  local name=$1 keys=$2; shift 2
  local text json
  text=$("$capsule" "$@" --caps "$caps" --state "$L" 2>&1)
  if grep -qF "$shown" <<<"$text" && ! grep -q "$esc\|$(printf '\342\200\256')" <<<"$text"; then ok root "$name-text-escaped"
  else bad root "$name-text-escaped"; printf '%s\n' "$text" | head -4 | cat -A | sed 's/^/         /'; fi
  json=$("$capsule" "$@" --json --caps "$caps" --state "$L" 2>&1)
  if python3 -c '
import json, sys
rows = json.load(sys.stdin)
want = set(sys.argv[1].split(","))
assert isinstance(rows, list) and rows, "an array of objects"
assert all(set(r) == want for r in rows), [sorted(r) for r in rows]
assert any(sys.argv[2] in str(v) for r in rows for v in r.values()), "the hostile text, exact"
' "$keys" "$h" <<<"$json"; then ok root "$name-json"
  else bad root "$name-json"; printf '%s\n' "$json" | head -6 | sed 's/^/         /'; fi
}
listing policy-list capability,tool,policy,user policy list
listing cred-list capability,name,scope,user,updated cred list
listing approvals id,capability,tool,user,asked_by,created,expires,arguments approvals
listing audit seq,time,user,capability,tool,args_sha256,decision,duration_ms,outcome,result_sha256,prev,hash audit
if "$capsule" list --json --caps "$caps" --state "$L" | python3 -c '
import json, sys
rows = json.load(sys.stdin)
assert {"id", "format", "runtime", "source", "readiness", "tools", "grants"} == set(rows[0])
assert all(set(t) == {"name", "policy", "policy_source"} for t in rows[0]["tools"])'; then ok root list-json
else bad root list-json; fi
err=$("$capsule" call --caps "$caps" --state "$L" weather "$h" '{}' 2>&1 >/dev/null)
if grep -qF "$shown" <<<"$err" && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ]; then ok root call-error-escaped
else bad root call-error-escaped; printf '%s\n' "$err" | cat -A | head -3 | sed 's/^/         /'; fi

echo "cli tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
