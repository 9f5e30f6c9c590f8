# Shared by the nineteenth review's scripts: sandbox_reads PID, the first
# descendant of PID (a keeper) in a root of its own (its sandbox) that can
# read $secret/file, as "PID: what it reads", in $seen ("" when none);
# deaf_started (after review17 lib.sh's selu_granted): the capability's
# server made one that ignores SIGTERM, started by a call, its instance's
# name in $key and its keeper's pid in $old.
sandbox_reads() {
  local kids=$1 next k c
  seen=
  while [ -n "$kids" ]; do
    next=
    for k in $kids; do
      for c in $(cat /proc/$k/task/*/children 2>/dev/null); do
        next="$next $c"
        [ -z "$seen" ] && [ -r "/proc/$c/root$secret/file" ] && [ "$(stat -Lc %i /proc/$c/root)" != "$(stat -Lc %i /)" ] &&
          seen="$c: $(cat "/proc/$c/root$secret/file")"
      done
    done
    kids=$next
  done
}
deaf_started() {
  sed -i 's|command: \["./capability"\]|command: ["sh", "start.sh"]|' "$caps/selu-text/manifest.yaml"
  printf "trap '' TERM; ./capability; :\n" >"$caps/selu-text/start.sh"
  chmod -R a+rX "$caps"
  a=$(wc_call --timeout 60)
  grep -q '"words"' <<<"$a" || { echo "FAIL: first call: $a"; exit 1; }
  key=$(statuses)
  old=$(sed -n 's/^pid=//p' "$state/run/$key.status")
  echo "keeper 1: pid $old, RUN/$key"
}
