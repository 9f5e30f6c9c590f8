#!/bin/bash
# Finding (nono profiles as input, src/manifest/nono_profile_extends.c,
# `capsule run --profile NAME`): a profile name is looked up first in
# $XDG_CONFIG_HOME/nono/profiles (else ~/.config/nono/profiles), then among
# nono's built-ins, and nothing keeps a sandboxed tool from writing that
# directory (capsule masks its own config directory, ~/.config/capsule,
# for exactly this reason: tests/review3, tests/review4). A tool run with
# a write grant over ~/.config (here the built-in python-dev profile run
# from $HOME: its workdir is read-write) plants python-dev.json there; the
# user's next `capsule run --profile python-dev`, from any directory,
# loads the tool's profile instead of the built-in one: $HOME (or /)
# read-write, whatever network it wants (nono's required deny groups
# still apply). As root and as uid 65534.
# Exits 1 while the planted profile widens the next run, 0 blocked, 77
# cannot run.
capsule=$(realpath "${1:-build/capsule}")
probe=$(mktemp -d) # its own state: the default one may belong to another capsule
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-prof.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
whos=(self)
[ "$(id -u)" = 0 ] && whos=(root nobody)
vulnerable=0
for who in "${whos[@]}"; do
  H=$W/$who/home
  # a nono user has the directory already (else the deny entries of nono's
  # required groups under ~/.config leave it READ_DIR only, and it cannot
  # be created)
  mkdir -p "$H/proj" "$W/$who/state" "$H/.config/nono/profiles" "$H/docs"
  run=()
  [ "$who" = nobody ] && { chown -R 65534:65534 "$W/$who"; run=(setpriv --reuid=65534 --regid=65534 --clear-groups); }
  as() { (cd "$1" && shift && "${run[@]}" env -u XDG_CONFIG_HOME HOME="$H" XDG_STATE_HOME="$W/$who/state" "$@" </dev/null 2>&1); }
  # 1. the tool, under the built-in profile, run from $HOME
  out=$(as "$H" timeout 60 "$capsule" run --profile python-dev -- /bin/sh -c "
    mkdir -p $H/.config/nono/profiles &&
    echo '{\"filesystem\": {\"allow\": [\"\$HOME\"]}, \"network\": {\"block\": false}, \"workdir\": {\"access\": \"readwrite\"}}' \
      >$H/.config/nono/profiles/python-dev.json && echo planted")
  echo "$who, first run: $out"
  # 2. the user's next run of the same profile, from a project directory
  out=$(as "$H/proj" timeout 60 "$capsule" run --profile python-dev -- /bin/sh -c "echo outside >$H/docs/outside-the-project && echo wrote")
  echo "$who, second run: $out"
  if [ -s "$H/docs/outside-the-project" ]; then
    echo "VULNERABLE ($who): the planted profile gave the next --profile python-dev run \$HOME read-write"
    vulnerable=1
  fi
done
# the same through `extends`: a base is looked up beside the profile
# first (nono's order), so a tool that can write the project directory
# holding the user's profile plants the built-in base it extends
for who in "${whos[@]}"; do
  H=$W/$who/home P=$H/proj2
  mkdir -p "$P" "$H/docs2"
  echo '{"extends": "python-dev"}' >"$P/mine.json"
  run=()
  [ "$who" = nobody ] && { chown -R 65534:65534 "$W/$who"; run=(setpriv --reuid=65534 --regid=65534 --clear-groups); }
  out=$(as "$P" timeout 60 "$capsule" run --profile "$P/mine.json" -- /bin/sh -c "
    echo '{\"filesystem\": {\"allow\": [\"\$HOME\"]}, \"workdir\": {\"access\": \"readwrite\"}}' >$P/python-dev.json && echo planted")
  echo "$who, extends, first run: $out"
  out=$(as "$P" timeout 60 "$capsule" run --profile "$P/mine.json" -- /bin/sh -c "echo outside >$H/docs2/outside && echo wrote")
  echo "$who, extends, second run: $out"
  if [ -s "$H/docs2/outside" ]; then
    echo "VULNERABLE ($who): a python-dev.json planted beside the profile replaced the built-in base"
    vulnerable=1
  fi
  [ -s "$P/python-dev.json" ] || echo "note ($who): the plant itself failed"
done
[ "$vulnerable" = 0 ] && { echo blocked; exit 0; }
exit 1
