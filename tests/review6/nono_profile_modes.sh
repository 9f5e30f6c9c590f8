#!/bin/bash
# Follow-up to nono_profile_plant.sh (src/manifest/nono_profile_extends.c):
# a user profile that is not a built-in's name is still read from
# $XDG_CONFIG_HOME/nono/profiles, so whoever can change that file chooses
# the rights of the next `capsule run --profile NAME` (or of a profile
# that extends NAME). A file, or its profiles or nono directory, writable
# by group or others, or owned by another user, must be refused (like a
# hook script in nono, or capsule's own state); the same file with owner-
# only modes is used. As root and as uid 65534.
# Exits 1 while a profile others can write is used, 0 refused, 77 cannot
# run.
capsule=$(realpath "${1:-build/capsule}")
probe=$(mktemp -d)
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-modes.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
whos=(self)
[ "$(id -u)" = 0 ] && whos=(root nobody)
vulnerable=0 broken=0
for who in "${whos[@]}"; do
  C=$W/$who/config P=$C/nono/profiles
  mkdir -p "$P" "$W/$who/state" "$W/$who/proj"
  printf '{"meta": {"name": "mine"}, "network": {"block": true}}\n' >"$P/mine.json"
  chmod 755 "$C/nono" "$P"; chmod 644 "$P/mine.json"
  run=()
  [ "$who" = nobody ] && { chown -R 65534:65534 "$W/$who"; run=(setpriv --reuid=65534 --regid=65534 --clear-groups); }
  use() { # prints the resolved network mode of --profile mine, or the error
    (cd "$W/$who/proj" && "${run[@]}" env XDG_CONFIG_HOME="$C" XDG_STATE_HOME="$W/$who/state" \
      "$capsule" run --profile mine --dry-run -- /bin/true </dev/null 2>&1)
  }
  extends() { # a profile of the caller's extending mine
    printf '{"extends": "mine"}\n' >"$W/$who/proj/child.json"
    [ "$who" = nobody ] && chown 65534:65534 "$W/$who/proj/child.json"
    (cd "$W/$who/proj" && "${run[@]}" env XDG_CONFIG_HOME="$C" XDG_STATE_HOME="$W/$who/state" \
      "$capsule" run --profile ./child.json --dry-run -- /bin/true </dev/null 2>&1)
  }
  out=$(use)
  if grep -q "^# capsule run --dry-run: $P/mine.json" <<<"$out"; then
    echo "$who: owner-only profile is used"
  else
    echo "BROKEN ($who): an owner-only user profile was refused: $out"; broken=1
  fi
  chmod 755 "$C"
  for bad in "file 666" "file 664" "dir 777" "dir 775" "nono 777" "config 1777"; do
    set -- $bad
    case $1 in
    file) t=$P/mine.json ;;
    dir) t=$P ;;
    nono) t=$C/nono ;;
    config) t=$C ;;
    esac
    old=$(stat -c %a "$t")
    chmod "$2" "$t"
    for how in use extends; do
      out=$($how)
      if grep -q "refused as the user profile mine" <<<"$out"; then
        echo "$who: $how, $1 mode $2: refused"
      else
        echo "VULNERABLE ($who): $how, $1 mode $2 is used: $(head -3 <<<"$out")"; vulnerable=1
      fi
    done
    chmod "$old" "$t"
  done
  if [ "$who" = root ]; then # a file of another user's, in root's directory
    chown 65534 "$P/mine.json"
    out=$(use)
    if grep -q "refused as the user profile mine" <<<"$out"; then
      echo "root: a profile file of uid 65534's: refused"
    else
      echo "VULNERABLE (root): a profile file uid 65534 owns is used"; vulnerable=1
    fi
    chown 0 "$P/mine.json"
  fi
done
[ "$vulnerable" = 0 ] && [ "$broken" = 0 ] && { echo blocked; exit 0; }
exit 1
