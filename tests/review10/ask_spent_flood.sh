#!/usr/bin/env bash
# The 2026-07-28 form's policy `ask` (src/front/mcp_ask.c): a requestState
# answered is remembered until it expires (10 minutes) so a replayed
# answer is refused, in one table of 4,096 shared by every user; with it
# full, an answer is not taken and its client is asked again. alice, a
# token holder with an `ask` tool of her own, answers (declines) 4,200
# questions (about a minute at the default --rate of 200 a second): bob's
# human then accepts his call and is asked again, every time, for the
# next 10 minutes. Exits 1 when bob's accepted call does not run, 0 when
# it does, 77 when it cannot run here.
# Usage: ask_spent_flood.sh CAPSULE
set -u
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
. "$(dirname "$0")/lib.sh" "$1"
agent asker 5000 'printf "{\"got\":%s}\n" "$line"' ask
ta=$(token alice) || exit 77
tb=$(token bob) || exit 77
serve10
r=$(node "$root/tests/review10/ask_spent_flood.mjs" "http://127.0.0.1:$port/mcp" "$ta" "$tb" 4200)
echo "bob's accepted call after alice's flood: $r"
case $r in
bob-ran) echo blocked; exit 0 ;;
no-state) echo "SKIP: bob was not asked (no input_required)"; exit 77 ;;
*) exit 1 ;;
esac
