#!/usr/bin/env bash
# The sixteenth review's C probes (tests/unit/), run from the build that
# holds CAPSULE: the spool's recovery against files no keeper wrote
# (test_egress_spool_hostile), a fork while the checkpoint thread is in
# SQLite (test_db_checkpoint_fork), a long reader while it checkpoints
# (test_db_checkpoint_reader). Exits 0 when all pass, 1 when one fails,
# 77 when the unit tests are not built beside CAPSULE.
# Usage: unit_probes.sh CAPSULE
set -u
d=$(dirname "$(realpath "$1")")
while [ "$d" != / ] && [ ! -d "$d/tests/unit" ]; do d=$(dirname "$d"); done
unit=$d/tests/unit
fail=0
for t in test_egress_spool_hostile test_db_checkpoint_fork test_db_checkpoint_reader; do
  [ -x "$unit/$t" ] || { echo "SKIP: $unit/$t is not built"; exit 77; }
  out=$(cd /tmp && timeout 300 "$unit/$t" 2>&1) || { echo "$out" | tail -5; echo "FAIL: $t"; fail=1; }
done
[ "$fail" = 0 ] && echo "held: the spool's recovery, a fork beside the checkpointer, a long reader"
exit "$fail"
