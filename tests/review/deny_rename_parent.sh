#!/bin/bash
# Finding: --deny (and the manifest's deny list) masks a path, and a tool
# with write access to the masked path's parent directory can rename that
# parent (only the mount point itself is busy). Within the run the mask
# moves with it; in the next run with the same grants the deny path no
# longer exists ("masks nothing") and the file is read at its new path.
# Root and uid 65534. Exits non-zero when the denied file is read.
capsule=$(realpath "${1:-build/capsule}")
rc=0
for who in root nobody; do
  d=$(mktemp -d /var/tmp/capsule-review-deny.XXXXXX)
  mkdir "$d/sub"; echo "denied-content-$$" >"$d/sub/secret.txt"
  chmod 777 "$d" "$d/sub"; chmod 644 "$d/sub/secret.txt"
  pre=(); [ $who = nobody ] && pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  run=("${pre[@]}" "$capsule" run --allow-rw "$d" --deny "$d/sub/secret.txt" --)
  first=$("${run[@]}" /bin/sh -c "cat $d/sub/secret.txt; mv $d/sub $d/moved && echo renamed" 2>&1)
  second=$("${run[@]}" /bin/sh -c "cat $d/moved/secret.txt" 2>&1)
  echo "$who: run 1: $(echo $first) / run 2: $second"
  grep -q "denied-content-$$" <<<"$second" && { echo "VULNERABLE ($who): denied file read after renaming its parent"; rc=1; }
  rm -rf "$d"
done
exit $rc
