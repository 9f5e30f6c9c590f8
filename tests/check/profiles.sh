#!/usr/bin/env bash
# nono profiles compiled to the resolved manifest, checked against what
# nono's own tests and documentation say `nono profile show NAME --format
# manifest` gives (cases cited in tests/check/nono-profile/SOURCES):
# built-in profiles by name (groups' deny paths and blocked commands, the
# network profile, ipc_mode, undo), legacy keys equal to their canonical
# form, bypass_protection, extends (rightmost wins, block sticks, lists
# grow), the working directory, and `run --profile` against `--config` of
# the same manifest. Usage: profiles.sh CAPSULE
set -u
capsule=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
cases=$here/nono-profile
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the JSON"; exit 77; }
work=$(mktemp -d)
out=$work/out # resolved manifests: not beside the profiles, where siblings are looked up
trap 'rm -rf "$work"' EXIT
export HOME=$work/home XDG_CONFIG_HOME=$work/config
mkdir -p "$HOME/.docker" "$HOME/.ssh" "$XDG_CONFIG_HOME" "$out"
pass=0 fail=0

# expect NAME PYTHON-EXPRESSION-ON-d JSON-FILE
expect() {
  if python3 - "$3" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
grants = {g["path"]: g["access"] for g in d["filesystem"]["grants"]}
deny = [x["path"] for x in d["filesystem"]["deny"]]
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)
PY
  then
    pass=$((pass + 1)); echo "  ok   $1"
  else
    fail=$((fail + 1)); echo "  FAIL $1: $2"
  fi
}

# show FILE-OR-NAME OUT: the resolved manifest of a profile file or name
show() {
  if [[ "$1" == */* ]]; then
    (cd "$work" && "$capsule" show "$1") >"$2" 2>"$2.err"
  else
    (cd "$work" && "$capsule" show --profile "$1") >"$2" 2>"$2.err"
  fi || { echo "  FAIL capsule could not resolve $1: $(head -3 "$2.err")"; fail=$((fail + 1)); }
}

echo "built-in profiles by name:"
show node-dev "$out/node-dev.json"
# manifest_roundtrip.rs: manifest_includes_group_deny_paths,
# manifest_includes_group_blocked_commands
expect "node-dev: deny_credentials' paths (.ssh, .gnupg)" \
  'any(p.endswith("/.ssh") for p in deny) and any(p.endswith("/.gnupg") for p in deny)' \
  "$out/node-dev.json"
expect "node-dev: the dangerous commands are blocked" \
  '"rm" in d["process"]["blocked_commands"] and "shutdown" in d["process"]["blocked_commands"]' \
  "$out/node-dev.json"
expect "node-dev: the developer network profile's hosts, through the proxy" \
  'd["network"]["mode"] == "proxy" and "registry.npmjs.org" in d["network"]["allow_domains"] and "api.github.com" in d["network"]["allow_domains"]' \
  "$out/node-dev.json"
expect "node-dev: the working directory read-write" "grants.get('$work') == 'readwrite'" "$out/node-dev.json"
show python-dev "$out/python-dev.json"
expect "python-dev: ipc_mode full" 'd["process"]["ipc_mode"] == "full"' "$out/python-dev.json"
show openclaw "$out/openclaw.json"
expect "openclaw: undo's excludes become rollback's, supervised" \
  'd["rollback"]["exclude_patterns"] == ["node_modules", ".next"] and d["process"]["declared_exec_strategy"] == "supervised" and d["rollback"]["enabled"] is False' \
  "$out/openclaw.json"
expect "openclaw: workdir read, network unrestricted" \
  "grants.get('$work') == 'read' and d['network']['mode'] == 'unrestricted'" "$out/openclaw.json"
show default "$out/default.json"
expect "default: no working directory grant, monitor" \
  "'$work' not in grants and d['process']['declared_exec_strategy'] == 'monitor'" "$out/default.json"
mkdir -p "$work/elevation"
printf '{"extends": "default", "security": {"capability_elevation": true}}\n' >"$work/elevation/elevation.json"
show "$work/elevation/elevation.json" "$out/elevation.json"
expect "capability_elevation: supervised (nono's gate of expansion), extends' values kept" \
  "d['process']['declared_exec_strategy'] == 'supervised' and '$HOME/.bash_history' in deny" "$out/elevation.json"

echo "documentation examples and fixtures:"
show "$cases/docs-ci-build/ci-build.json" "$out/ci.json"
expect "CI build: network blocked (no DNS), credentials denied, workdir read-write" \
  "d['network']['mode'] == 'blocked' and not d['network']['dns'] and '$HOME/.ssh' in deny and grants.get('$work') == 'readwrite'" \
  "$out/ci.json"
expect "CI build: the default groups are implicit (shell history denied)" \
  "'$HOME/.bash_history' in deny and 'rm' in d['process']['blocked_commands']" "$out/ci.json"
show "$cases/legacy-fixtures/legacy_all_keys.json" "$out/legacy.json"
show "$cases/legacy-fixtures/canonical_equivalent_of_all_keys.json" "$out/canonical.json"
# deprecated_schema.rs: legacy_all_keys_shows_byte_equal_canonical_equivalent
python3 - "$out/legacy.json" "$out/canonical.json" <<'PY' && { pass=$((pass + 1)); echo "  ok   legacy keys resolve as their canonical equivalent"; } || { fail=$((fail + 1)); echo "  FAIL legacy keys differ from the canonical fixture"; }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    d["capability"].pop("source")
sys.exit(0 if a == b else 1)
PY
expect "legacy: excluded dangerous_commands, pip allowed, docker blocked, /d denied" \
  '"pip" in d["process"]["allowed_commands"] and "rm" not in d["process"]["blocked_commands"] and "docker" in d["process"]["blocked_commands"] and "/d" in deny ' \
  "$out/legacy.json"
show "$cases/legacy-fixtures/legacy_collision_security_and_groups.json" "$out/collision.json"
# deprecated_schema.rs: collision_legacy_and_canonical_groups_merge_with_warnings;
# allowed commands override the blocklist (nono's CapabilitySet::allow_command)
expect "collision: npm and pip both allowed, so not blocked" \
  'd["process"]["allowed_commands"] == ["npm", "pip"] and "npm" not in d["process"]["blocked_commands"]' \
  "$out/collision.json"

echo "bypass_protection and extends:"
cat >"$work/docker-agent.json" <<'JSON'
{
  "extends": "default",
  "meta": {"name": "docker-agent", "description": "Agent that needs Docker access"},
  "workdir": {"access": "readwrite"},
  "filesystem": {"allow": ["$HOME/.docker"], "bypass_protection": ["$HOME/.docker"]}
}
JSON
show "$work/docker-agent.json" "$out/docker.json"
# profile-authoring.mdx "Override a Deny Rule"; manifest_override_deny_removes_deny_from_export
expect "docker-agent: ~/.docker granted and no longer denied, ~/.ssh still denied" \
  "grants.get('$HOME/.docker') == 'readwrite' and '$HOME/.docker' not in deny and '$HOME/.ssh' in deny" \
  "$out/docker.json"
show "$cases/extends-diamond/top.json" "$out/diamond.json"
expect "extends [a, b]: the rightmost base wins a single value, lists grow, the child's workdir" \
  "d['process']['signal_mode'] == 'allow_same_sandbox' and grants.get('/etc') == 'read' and grants.get('$work') == 'read'" \
  "$out/diamond.json"
mkdir -p "$XDG_CONFIG_HOME/nono/profiles"
printf '{"meta": {"name": "locked"}, "network": {"block": true}}\n' >"$XDG_CONFIG_HOME/nono/profiles/locked.json"
printf '{"extends": "locked", "network": {"block": false, "allow_domain": ["example.com"]}}\n' >"$work/unlock.json"
show "$work/unlock.json" "$out/unlock-out.json"
expect "network.block sticks once a base (from the user's profile directory) sets it" \
  'd["network"]["mode"] == "blocked"' "$out/unlock-out.json"
printf '{"meta": {"name": "cleared"}, "extends": "node-dev", "network": {"network_profile": null}}\n' >"$work/cleared.json"
show "$work/cleared.json" "$out/cleared-out.json"
expect "network_profile: null clears the inherited one" \
  'd["network"]["mode"] == "unrestricted" and d["network"]["allow_domains"] == []' "$out/cleared-out.json"

echo "the resolved manifest runs as the profile does:"
printf '{"meta": {"name": "t"}, "workdir": {"access": "read"}, "network": {"block": true}}\n' >"$work/t.json"
a=$(cd "$work" && "$capsule" run --profile "$work/t.json" --dry-run --json 2>/dev/null)
(cd "$work" && "$capsule" show "$work/t.json") >"$out/t-resolved.json" 2>/dev/null
b=$(cd "$work" && "$capsule" run --config "$out/t-resolved.json" --dry-run --json 2>/dev/null)
strip() { python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("capability"); print(json.dumps(d, sort_keys=True))'; }
if [ -n "$a" ] && [ "$(echo "$a" | strip)" = "$(echo "$b" | strip)" ]; then
  pass=$((pass + 1)); echo "  ok   run --profile P equals run --config (show P)"
else
  fail=$((fail + 1)); echo "  FAIL run --profile and --config of its resolved manifest differ"
fi
out=$("$capsule" run --profile no-such-profile -- /bin/true 2>&1)
status=$?
if [ "$status" = 1 ] && echo "$out" | grep -q "not one of nono's built-in profiles (default, "; then
  pass=$((pass + 1)); echo "  ok   an unknown profile name is refused, naming the built-ins"
else
  fail=$((fail + 1)); echo "  FAIL unknown profile (exit $status): $out"
fi
out=$("$capsule" run --profile default --config "$out/t-resolved.json" -- /bin/true 2>&1)
[ $? = 2 ] && { pass=$((pass + 1)); echo "  ok   --profile with --config is a usage error"; } ||
  { fail=$((fail + 1)); echo "  FAIL --profile with --config: $out"; }

echo "nono profiles: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
