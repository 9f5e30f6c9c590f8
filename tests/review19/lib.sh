# Shared by the nineteenth review's scripts: sandbox_reads PID, the first
# descendant of PID (a keeper) in a root of its own (its sandbox) that can
# read $secret/file, as "PID: what it reads", in $seen ("" when none).
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
