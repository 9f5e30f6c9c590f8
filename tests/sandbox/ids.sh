#!/usr/bin/env bash
# Whose ids the tool has. As root: every capability its own stable range of
# host ids from the state (id_ranges), seen from the host in /proc/PID/status,
# out of reach of a host process running as nobody (65534), clear of
# /etc/subuid; the same for `capsule call`; a read-write grant of a
# root-owned directory is writable and what the tool creates there is
# root's (an idmapped mount), without setuid/setgid bits; --dry-run says
# who the tool runs as. Unprivileged: the caller's own uid, as before.
# Usage: ids.sh CAPSULE HOSTILE (CAPSULE_TEST_HOOKS=1: a test build)
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-ids.XXXXXX)
chmod 755 "$work"
pass=0 fail=0
cpids=()
trap 'for p in "${cpids[@]}"; do kill "$p" 2>/dev/null; done; umount "$work/mq" 2>/dev/null; rm -rf "$work"' EXIT
export CAPSULE_STATE_KEY=
# a test build keeps its ranges in a registry of its own, never the host's,
# and then every state it uses must be its own too (a shared one, root's
# default, would be handed a range the host's registry gives another)
reg_dir=/var/lib/capsule
if [ "${CAPSULE_TEST_HOOKS:-0}" = 1 ]; then
  reg_dir=$work/registry
  export CAPSULE_TEST_ID_REGISTRY_DIR=$reg_dir XDG_STATE_HOME=$work/xdg-default
fi

ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() {
  fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"
  printf '%s\n' "${3:-}" | head -5 | sed 's/^/         /'
}
expect() { # WHO NAME CONDITION-STATUS [DETAIL]
  if [ "$3" = 0 ]; then ok "$1" "$2"; else bad "$1" "$2" "${4:-}"; fi
}

n=0
# start WHO ARGS...: runs `sleep 600.N` under capsule run ARGS in the
# background; sets tool (the sleep's host pid) and cpid (capsule's).
start() {
  local who=$1; shift
  n=$((n + 1))
  local mark="600.$n$$"
  (cd "$work" && exec_as_user "$who" "$capsule" run "$@" -- sleep "$mark" </dev/null >/dev/null 2>&1) &
  cpid=$!
  cpids+=("$cpid")
  tool=
  for _ in $(seq 1 600); do # waits for the start, up to a minute: no timing asserted
    tool=$(pgrep -xf "sleep $mark" | head -1)
    [ -n "$tool" ] && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
}
stop() { kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null; }
host_uid() { awk '/^Uid:/ {print $2}' "/proc/$1/status"; }
host_gid() { awk '/^Gid:/ {print $2}' "/proc/$1/status"; }

in_subuid() { # UID: inside a range of /etc/subuid or /etc/subgid?
  local f
  for f in /etc/subuid /etc/subgid; do
    [ -r "$f" ] || continue
    awk -F: -v u="$1" 'NF == 3 && u >= $2 && u < $2 + $3 {found = 1} END {exit !found}' "$f" && return 0
  done
  return 1
}

root_ranges() {
  echo "as root: per-capability host ids"
  local st=$work/state
  mkdir -p "$work/alpha" "$work/beta"
  echo '{"version": "0.1.0"}' >"$work/alpha/p.json"
  echo '{"version": "0.1.0"}' >"$work/beta/p.json"
  start root --state "$st" --config "$work/alpha/p.json"
  if [ -z "$tool" ]; then bad root "the tool did not start"; stop; return; fi
  local a1 ag; a1=$(host_uid "$tool"); ag=$(host_gid "$tool")
  # a host process running as nobody cannot reach it
  setpriv --reuid=65534 --regid=65534 --clear-groups -- kill -0 "$tool" 2>/dev/null
  expect root "nobody cannot signal the tool (uid $a1)" $(($? == 0))
  stop
  [ "$a1" != 65534 ] && [ "$a1" -ge $((0x70000000)) ] && [ "$a1" -lt $((0x7ffe0000)) ]
  expect root "the tool's host uid is its capability's ($a1), not 65534" $?
  [ "$ag" = "$a1" ]
  expect root "its gid is the range's too ($ag)" $?
  ! in_subuid "$a1"
  expect root "not in /etc/subuid or /etc/subgid" $?
  start root --state "$st" --config "$work/beta/p.json"
  local b1; b1=$(host_uid "$tool"); stop
  [ -n "$b1" ] && [ "$b1" != "$a1" ] && [ "$b1" != 65534 ]
  expect root "another capability, other host ids ($b1 vs $a1)" $?
  start root --state "$st" --config "$work/alpha/p.json"
  local a2; a2=$(host_uid "$tool"); stop
  [ "$a2" = "$a1" ]
  expect root "the same capability, the same host ids across runs ($a2)" $?
  start root --state "$st"
  local r1; r1=$(host_uid "$tool"); stop
  [ -n "$r1" ] && [ "$r1" != "$a1" ] && [ "$r1" != "$b1" ] && [ "$r1" != 65534 ]
  expect root "capsule run without a manifest: the range \"run\" ($r1)" $?
  # a capability's key is its id and its package's path (hashed): never
  # the ad-hoc key "run"
  local rows; rows=$(sqlite3 "$st/state.db" "SELECT substr(capability, 1, length(capability) - 32) || '=' || (base + 65534) FROM id_ranges WHERE capability != 'run' ORDER BY 1" | tr '\n' ' ')
  [ "$rows" = "alpha/=$a1 beta/=$b1 " ] &&
    [ "$(sqlite3 "$st/state.db" "SELECT base + 65534 FROM id_ranges WHERE capability = 'run'")" = "$r1" ]
  expect root "recorded in the state's id_ranges (keys ID/HASH and run)" $? "$rows"
  # a capability whose id is "run", and a second package in a folder
  # named alpha: each a range of its own
  mkdir -p "$work/run" "$work/other/alpha"
  echo '{"version": "0.1.0"}' >"$work/run/p.json"
  echo '{"version": "0.1.0"}' >"$work/other/alpha/p.json"
  start root --state "$st" --config "$work/run/p.json"
  local c1; c1=$(host_uid "$tool"); stop
  [ -n "$c1" ] && [ "$c1" != "$r1" ] && [ "$c1" != "$a1" ]
  expect root "a capability named run is not given the ad-hoc runs' ids ($c1 vs $r1)" $?
  start root --state "$st" --config "$work/other/alpha/p.json"
  local o1; o1=$(host_uid "$tool"); stop
  [ -n "$o1" ] && [ "$o1" != "$a1" ] && [ "$o1" != "$c1" ]
  expect root "another package in a folder of the same name: other ids ($o1 vs $a1)" $?
  # an edited row naming a range whose ids end at the host's root: refused
  cp -a "$st" "$work/edited"
  sqlite3 "$work/edited/state.db" "UPDATE id_ranges SET base = 0 WHERE capability = 'run'"
  local out; out=$("$capsule" run --state "$work/edited" -- id -u 2>&1)
  [ $? -ne 0 ] && [[ "$out" == *"not one capsule hands out"* ]]
  expect root "an edited id_ranges row (base 0) is refused" $? "$out"
  if [ "${CAPSULE_TEST_HOOKS:-0}" = 1 ]; then
    # a subordinate-id entry over the first 16 ranges: the allocation skips it
    printf 'someone:%d:%d\n' $((0x70000000)) $((16 * 65536)) >"$work/subuid"
    CAPSULE_TEST_SUBUID=$work/subuid "$capsule" run --state "$work/state2" -- true
    local base; base=$(sqlite3 "$work/state2/state.db" "SELECT base FROM id_ranges WHERE capability = 'run'")
    [ -n "$base" ] && [ "$base" -ge $((0x70000000 + 16 * 65536)) ]
    expect root "a range overlapping /etc/subuid is skipped ($base)" $?
  fi
}

root_gateway() {
  echo "as root: capsule call"
  local caps=$work/caps st=$work/state a
  for a in who-a who-b; do
    mkdir -p "$caps/agents/$a"
    printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$a" "$a" >"$caps/agents/$a/agent.toml"
    # /proc/self/uid_map read inside: "INSIDE HOST 1"
    printf '#!/bin/sh\nIFS= read -r line\nset -- $(cat /proc/self/uid_map)\nprintf "{\\"host\\":%%s}\\n" "$2"\n' >"$caps/agents/$a/run.sh"
    chmod 755 "$caps/agents/$a/run.sh"
    "$capsule" policy set "$a" dispatch allow --caps "$caps" --state "$st" >/dev/null
  done
  local ga gb ga2
  ga=$("$capsule" call --caps "$caps" --state "$st" who-a dispatch '{"text": "x"}' 2>&1)
  gb=$("$capsule" call --caps "$caps" --state "$st" who-b dispatch '{"text": "x"}' 2>&1)
  ga2=$("$capsule" call --caps "$caps" --state "$st" who-a dispatch '{"text": "x"}' 2>&1)
  local want; want=$(sqlite3 "$st/state.db" "SELECT base + 65534 FROM id_ranges WHERE capability LIKE 'who-a/%'")
  [[ "$ga" == *"\"host\":$want"* ]] && [ "$want" != 65534 ]
  expect root "a call runs under its capability's host ids ($ga)" $? "$ga"
  [ "$ga" = "$ga2" ] && [ "$ga" != "$gb" ] && [[ "$gb" == *'"host":'* ]]
  expect root "the same across calls, another capability's differ" $? "$ga / $gb / $ga2"
}

root_grants() {
  echo "as root: read-write grants"
  local d=$work/rw
  mkdir -p "$d" && chmod 755 "$d" && echo old >"$d/existing"
  local out
  out=$(cd "$work" && "$capsule" run --state "$work/state" --allow-rw "$d" -- sh -c "touch $d/x && mkdir $d/sub && echo new >>$d/existing" 2>&1)
  expect root "a root-owned 0755 directory granted read-write is writable" $? "$out"
  [ "$(stat -c %u:%g "$d/x" 2>/dev/null)" = 0:0 ] && [ "$(stat -c %u:%g "$d/sub" 2>/dev/null)" = 0:0 ]
  expect root "what the tool creates there is the caller's (root's)" $? "$(ls -ln "$d")"
  [ "$(cat "$d/existing")" = "old
new" ] && [ "$(stat -c %u "$d/existing")" = 0 ]
  expect root "an existing root file is written and stays root's" $?
  [ "$(stat -c %u:%a "$d")" = 0:755 ]
  expect root "the directory keeps its owner and mode" $?
  # the tool's files are root's: no setuid or setgid bit may be set on one
  out=$(cd "$work" && "$capsule" run --allow-rw "$d" -- sh -c "cp /bin/true $d/t; chmod 4755 $d/t" 2>&1)
  [ $? != 0 ] && [ -e "$d/t" ] && [ ! -u "$d/t" ]
  expect root "chmod u+s on a file it made is refused" $? "$out"
  out=$(cd "$work" && "$capsule" run --allow-rw "$d" -- chmod 2755 "$d/t" 2>&1)
  [ $? != 0 ] && [ ! -g "$d/t" ]
  expect root "chmod g+s is refused" $? "$out"
  if [ -x /usr/bin/python3 ]; then
    out=$(cd "$work" && "$capsule" run --allow-rw "$d" -- /usr/bin/python3 -c "
import os, errno, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def raw(nr, *args):
    if libc.syscall(nr, *args) < 0:
        raise OSError(ctypes.get_errno(), 'syscall %d' % nr)
for call in (lambda: os.open('$d/c', os.O_CREAT | os.O_WRONLY, 0o4755),
             lambda: os.mknod('$d/m', 0o104755),
             lambda: raw(452, -100, b'$d/t', 0o4755, 0)):  # fchmodat2
    try:
        call(); print('made')
    except OSError as e:
        print('refused' if e.errno == errno.EPERM else e)
try:  # openat2: its mode is in memory no filter reads
    raw(437, -100, b'$d/o2', ctypes.create_string_buffer(24), 24)
except OSError as e:
    print('openat2 ENOSYS' if e.errno == errno.ENOSYS else e)
" 2>&1)
    [ "$out" = "refused
refused
refused
openat2 ENOSYS" ] && [ ! -e "$d/c" ] && [ ! -e "$d/m" ] && [ ! -u "$d/t" ]
    expect root "setuid modes refused at creation and by fchmodat2; openat2 is ENOSYS" $? "$out"
  fi
  # `/` itself is never idmapped: the tool would be root on every host file
  mkdir -p "$work/xdg-root"
  out=$(cd "$work" && XDG_STATE_HOME=$work/xdg-root "$capsule" run --state "$work/state" --allow-rw / -- touch "$d/by-root-grant" 2>&1)
  [ $? != 0 ] && [ ! -e "$d/by-root-grant" ]
  expect root "a read-write grant of / is not idmapped" $? "$out"
  # a sticky directory anyone may write (like /tmp) is not idmapped: the
  # tool's links there stay its own, so protected_symlinks still applies
  mkdir -m 1777 "$work/sticky"
  out=$(cd "$work" && "$capsule" run --state "$work/state" --allow-rw "$work/sticky" -- sh -c "ln -s /etc/passwd $work/sticky/l && touch $work/sticky/f" 2>&1)
  local u; u=$(stat -c %u "$work/sticky/l" 2>/dev/null)
  [ -n "$u" ] && [ "$u" != 0 ] && [ "$(stat -c %u "$work/sticky/f")" = "$u" ]
  expect root "a sticky world-writable grant is not idmapped (links stay the tool's, uid $u)" $? "$out"
  out=$(cd "$work" && "$capsule" run --state "$work/state" --dry-run --allow-rw "$d" -- true 2>&1)
  echo "$out" | grep -qE "runs as: +host uid [0-9]+ and gid [0-9]+ \(ids [0-9]+-[0-9]+ of capability run" &&
    echo "$out" | grep -qF "$d: writable by the tool"
  expect root "--dry-run says who the tool runs as and that the grant is writable" $? "$out"
}

# a filesystem without idmapped mounts (mqueue): the grant stays as it
# was, and both the run and --dry-run say it is not writable
root_no_idmap() {
  mkdir -p "$work/mq"
  if ! mount -t mqueue none "$work/mq" 2>/dev/null; then
    echo "note: cannot mount an mqueue filesystem; the no-idmap fallback is not tested"; return
  fi
  chmod 755 "$work/mq"
  local out
  out=$(cd "$work" && "$capsule" run --allow-rw "$work/mq" -- true 2>&1)
  [ $? = 0 ] && echo "$out" | grep -qF "read-write grant $work/mq is NOT WRITABLE by the tool"
  expect root "no idmapped mount: the run warns that the grant is not writable" $? "$out"
  out=$(cd "$work" && "$capsule" run --dry-run --allow-rw "$work/mq" -- true 2>&1)
  echo "$out" | grep -qE "$work/mq +NOT WRITABLE by the tool, uid [0-9]+ .*no idmapped mount here"
  expect root "no idmapped mount: --dry-run says NOT WRITABLE" $? "$out"
  out=$(cd "$work/mq" && "$capsule" doctor 2>&1)
  echo "$out" | grep -qE "idmapped grants +NO" && (cd "$work" && "$capsule" doctor 2>&1) | grep -qE "idmapped grants +yes"
  expect root "capsule doctor says where read-write grants are idmapped" $? "$out"
  umount "$work/mq"
}

# capsule as root of a user namespace mapping only ids 0-65535 (a
# container): the range is not there, so the tool runs as 65534, and the
# run says so instead of failing
root_container() {
  local fifo=$work/go
  mkfifo "$fifo"
  (cd "$work" && exec unshare -U -m -- sh -c "read x <$fifo; exec \"\$0\" run --state $work/ct-state -- cat /proc/self/uid_map" "$capsule" >"$work/ct.out" 2>&1) &
  local p=$! mine; mine=$(readlink /proc/self/ns/user)
  for _ in $(seq 1 600); do # until unshare has made its namespace
    [ "$(readlink "/proc/$p/ns/user" 2>/dev/null)" != "$mine" ] && break
    sleep 0.1
  done
  echo "0 0 65536" >"/proc/$p/uid_map" && echo "0 0 65536" >"/proc/$p/gid_map"
  echo go >"$fifo"
  wait "$p"
  local status=$? out; out=$(cat "$work/ct.out")
  [ "$status" = 0 ] && echo "$out" | grep -qE '^ *65534 +65534 +1$' &&
    echo "$out" | grep -qF "is not mapped in capsule's user namespace: it runs as uid 65534"
  expect root "in a user namespace without the range: uid 65534, and a warning" $? "$out"
}

root_registry() {
  echo "as root: the host's id-range registry"
  local reg=$reg_dir/id-ranges st=$work/reg-state
  mkdir -p "$work/gamma"
  echo '{"version": "0.1.0"}' >"$work/gamma/p.json"
  start root --state "$st" --config "$work/gamma/p.json"
  local g1; g1=$(host_uid "$tool"); stop
  local base; base=$(sqlite3 "$st/state.db" "SELECT base FROM id_ranges WHERE capability LIKE 'gamma/%'")
  # "BASE KEY@MOUNT-NS:DEV:INO STATE-DIR", KEY "ID/HASH"
  grep -qxE "$base gamma/[0-9a-f]{32}@[0-9]+:[0-9]+:[0-9]+ $(realpath "$st")" "$reg"
  expect root "the registry names the state's range ($base)" $? "$(cat "$reg" 2>&1 | tail -3)"
  # moved: its line no longer names it; its next use records it again
  mv "$st" "$st-moved"
  start root --state "$st-moved" --config "$work/gamma/p.json"
  local g2; g2=$(host_uid "$tool"); stop
  [ -n "$g1" ] && [ "$g2" = "$g1" ] && grep -qxE "$base gamma/[0-9a-f]{32}@[0-9]+:[0-9]+:[0-9]+ $(realpath "$st-moved")" "$reg"
  expect root "a moved state keeps its ids and is recorded again under its path" $? \
    "before $g1, after $g2; $(grep gamma "$reg")"
  # a change is written beside and renamed: nothing left behind, 0600
  [ ! -e "$reg.new" ] && [ "$(stat -c %a "$reg")" = 600 ] && [ "$(stat -c %a "$reg.lock")" = 600 ]
  expect root "the registry is rewritten by rename (no leftover), 0600, lock file beside it" $?
  head -1 "$reg" | grep -qx '0 capsule-id-ranges-format-2 /'
  expect root "its first line names its format (a line earlier capsules keep)" $? "$(head -2 "$reg")"
  command -v unshare >/dev/null && root_registry_dead_ns
  [ "${CAPSULE_TEST_HOOKS:-0}" = 1 ] && root_registry_format
}

# a capsule in a private mount namespace (a service's PrivateTmp=) adds a
# line of its namespace; once no process is in it, the line is dropped
# where a live line records the same directory and range, and kept where
# none does (a directory only that namespace saw)
root_registry_dead_ns() {
  local real; real=$(realpath "$st-moved")
  unshare -m --propagation private "$capsule" run --state "$st-moved" --config "$work/gamma/p.json" -- true
  local n1; n1=$(grep -cF " $real" "$reg")
  mkdir -p "$work/hidden"
  unshare -m --propagation private sh -c "mount -t tmpfs none '$work/hidden' && '$capsule' run --state '$work/hidden/st' -- true"
  local n2; n2=$(grep -cF " $work/hidden/st" "$reg")
  # the next write of the registry (a new range here; a root run that
  # finds its own line does not write)
  "$capsule" run --state "$work/another-state" -- true
  local n3 n4; n3=$(grep -cF " $real" "$reg"); n4=$(grep -cF " $work/hidden/st" "$reg")
  [ "$n1" = 2 ] && [ "$n3" = 1 ] && [ "$n2" = 1 ] && [ "$n4" = 1 ]
  expect root "a dead namespace's line: dropped beside a live one, kept alone ($n1->$n3, $n2->$n4)" $? "$(grep -F "$work/" "$reg")"
}

# a registry this capsule cannot read in full (a later format, or a line
# it does not know) is never rewritten: a new range is refused, and a
# range already recorded still runs (a crafted registry of the test's)
root_registry_format() {
  local reg=$reg_dir/id-ranges keep=$work/registry-kept before out status
  cp -p "$reg" "$keep"
  local known; known=$(grep -m1 gamma "$reg")
  printf '0 capsule-id-ranges-format-3 /\n%s\n1879900000 later-key {"future": 1} /x\n' "$known" >"$reg"
  before=$(md5sum <"$reg")
  out=$("$capsule" run --state "$work/fmt-state" -- true 2>&1); status=$?
  [ "$status" != 0 ] && [[ "$out" == *"is in format 3, written by a newer capsule"* ]] && [ "$(md5sum <"$reg")" = "$before" ]
  expect root "a registry of a later format: a new range refused, the file unchanged" $? "$out"
  start root --state "$st-moved" --config "$work/gamma/p.json"
  [ -n "$tool" ] && [ "$(host_uid "$tool")" = "$g1" ]; local ran=$?; stop
  [ "$ran" = 0 ] && [ "$(md5sum <"$reg")" = "$before" ]
  expect root "a range it records still runs, and the file is left as it was" $?
  printf '%s\nSOMETHING NEW\n' "$known" >"$reg"
  before=$(md5sum <"$reg")
  out=$("$capsule" run --state "$work/fmt-state" -- true 2>&1); status=$?
  [ "$status" != 0 ] && [[ "$out" == *"line 2 of the host's id-range registry"* ]] && [ "$(md5sum <"$reg")" = "$before" ]
  expect root "a line it cannot read: a new range refused, the line not dropped" $? "$out"
  cp -p "$keep" "$reg"
}

nobody_ids() {
  echo "as nobody: the caller's ids"
  local d=$work/nobody-rw
  mkdir -p "$d" "$work/xdg-nobody" && chown 65534:65534 "$d" "$work/xdg-nobody"
  local out
  out=$(cd "$work" && as_user nobody env XDG_STATE_HOME="$work/xdg-nobody" "$capsule" run --allow-rw "$d" -- sh -c "touch $d/x; cat /proc/self/uid_map" 2>&1)
  [ "$(stat -c %u "$d/x" 2>/dev/null)" = 65534 ] && echo "$out" | grep -qE '^ *65534 +65534 +1$'
  expect nobody "the tool keeps the caller's uid" $? "$out"
}

if [ "$(id -u)" = 0 ]; then
  root_ranges
  root_gateway
  root_grants
  root_no_idmap
  root_registry
  command -v unshare >/dev/null && root_container
fi
[[ " ${users[*]} " == *" nobody "* ]] && nobody_ids
echo "ids suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
