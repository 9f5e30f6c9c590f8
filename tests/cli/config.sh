#!/usr/bin/env bash
# The config file for defaults (docs/cli.md): $XDG_CONFIG_HOME/capsule/config,
# else ~/.config/capsule/config, `key = value` lines for caps and state;
# a flag wins over CAPSULE_* variables, which win over the file; bad lines
# and unknown keys are reported with file:line. Usage: config.sh CAPSULE
set -u
capsule=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "  ok   $1"; }
bad() { fail=$((fail + 1)); echo "  FAIL $1"; }
unset CAPSULE_CAPS CAPSULE_STATE XDG_CONFIG_HOME
export HOME=$work/home CAPSULE_STATE_KEY=
mkdir -p "$HOME/.config/capsule" "$work/xdg/capsule" "$work/caps"
cp -r "$root/examples/weather" "$work/caps/"
cd "$work" || exit 1 # no ./capabilities here: caps must come from the config

# ids CAPSULE-ARGS...: the capability ids `capsule list --json` shows
ids() { "$capsule" list --json "$@" 2>/dev/null | python3 -c 'import json,sys; print(" ".join(r["id"] for r in json.load(sys.stdin)))' 2>/dev/null; }

cat >"$HOME/.config/capsule/config" <<EOF2
# defaults for capsule
caps = $work/caps
state = "~/st-home"
EOF2
if [ -n "$(ids)" ] && [ "$(ids)" = "$(ids --caps "$work/caps")" ]; then ok config-caps
else bad "config-caps ($(ids))"; fi
# which state a verb uses: each candidate holds a status file of its own
# name, kept by a live pid (this shell, its start time as the keeper
# records it: /proc/PID/stat field 22), that `capsule ps` lists
start=$(sed 's/.*) //' "/proc/$$/stat" | cut -d' ' -f20)
for d in st-home st-env st-flag st-xdg st-bad; do
  dir=$work/$d; [ "$d" = st-home ] && dir=$HOME/st-home
  mkdir -p "$dir" && mkdir -m 700 "$dir/run" && printf 'capability=%s\npid=%s\npid_start=%s\n' "$d" $$ "$start" >"$dir/run/k.status"
done
used() { "$capsule" ps --json "$@" 2>/dev/null | python3 -c 'import json,sys; print(" ".join(r["capability"] for r in json.load(sys.stdin)))'; }
if [ "$(used)" = st-home ]; then ok config-state-tilde; else bad "config-state-tilde ($(used))"; fi
if [ "$(CAPSULE_STATE=$work/st-env used)" = st-env ]; then ok env-wins-over-config; else bad env-wins-over-config; fi
if [ "$(CAPSULE_STATE=$work/st-env used --state "$work/st-flag")" = st-flag ]; then ok flag-wins-over-env
else bad flag-wins-over-env; fi
if [ "$(CAPSULE_STATE= used)" = st-home ]; then ok empty-env-is-unset; else bad empty-env-is-unset; fi
if [ -z "$(CAPSULE_CAPS=$work/nothing ids)" ]; then ok env-caps-wins-over-config; else bad env-caps-wins-over-config; fi
# run reads the state default too (bare-name credential sources)
out=$("$capsule" run --dry-run -- /bin/true 2>&1)
if [ "$?" = 0 ]; then ok run-with-config; else bad run-with-config; echo "$out" | head -3; fi

# XDG_CONFIG_HOME is preferred to ~/.config
printf 'state = %s\n' "$work/st-xdg" >"$work/xdg/capsule/config"
if [ "$(XDG_CONFIG_HOME=$work/xdg used)" = st-xdg ]; then ok xdg-config-home; else bad xdg-config-home; fi

# bad lines: reported with file:line, the rest still applies
printf 'state = %s\nnonsense\nsatte = x\n' "$work/st-bad" >"$work/xdg/capsule/config"
err=$(XDG_CONFIG_HOME=$work/xdg "$capsule" ps 2>&1 >/dev/null)
if grep -qF "$work/xdg/capsule/config:2: not \`key = value\`" <<<"$err" &&
  grep -qF "config:3: unknown key 'satte'" <<<"$err" && [ "$(XDG_CONFIG_HOME=$work/xdg used)" = st-bad ]; then ok config-bad-lines
else bad config-bad-lines; echo "$err" | head -4; fi

# a config file others could change, or a FIFO, is ignored with a warning
chmod 664 "$work/xdg/capsule/config"
err=$(XDG_CONFIG_HOME=$work/xdg "$capsule" ps 2>&1 >/dev/null)
if grep -qF "config is writable by group or others; ignored" <<<"$err" &&
  [ -z "$(XDG_CONFIG_HOME=$work/xdg used)" ]; then ok config-shared-ignored
else bad config-shared-ignored; echo "$err" | head -4; fi
rm -f "$work/xdg/capsule/config" && mkfifo -m 600 "$work/xdg/capsule/config"
err=$(XDG_CONFIG_HOME=$work/xdg timeout 10 "$capsule" ps 2>&1 >/dev/null)
if [ $? -ne 124 ] && grep -qF "is not a regular file; ignored" <<<"$err"; then ok config-fifo-ignored
else bad config-fifo-ignored; echo "$err" | head -4; fi
rm -f "$work/xdg/capsule/config"
# no sandbox sees the config directory, even with $HOME read-write
out=$("$capsule" run --allow-rw "$HOME" -- /bin/sh -c 'echo "caps = /tmp" >"$HOME/.config/capsule/config"' 2>&1)
if [ $? -ne 0 ] && grep -qF "caps = $work/caps" "$HOME/.config/capsule/config"; then ok config-masked-in-sandbox
else bad config-masked-in-sandbox; echo "$out" | head -3; fi

# without a config file nothing changes: ./capabilities and the default state
rm -f "$HOME/.config/capsule/config"
if [ -z "$(ids)" ] && [ -z "$(used)" ]; then ok no-config; else bad no-config; fi
echo "config tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
