#!/bin/bash
# Finding: `capsule run --dry-run` (what the operator reads to decide)
# prints the manifest's grant paths raw (src/cli/run_dry.c), and the
# manifest loader accepts control characters in paths. A hostile
# capability's manifest names a path through a symlink its tool planted in
# a writable directory in an earlier run, the symlink's name being
# "ESC[2K CR grant: read \u2215usr\u2215share\u2215doc ESC[8m": on a terminal the line
# reads as a harmless read grant, while the grant is read-write on the
# symlink's target (here a stand-in for ~/.ssh). Exits non-zero when the
# dry run prints an ESC byte from the manifest.
capsule=$(realpath "${1:-build/capsule}")
d=$(mktemp -d /var/tmp/capsule-review-dry.XXXXXX); trap 'rm -rf "$d"' EXIT
chmod 755 "$d"; mkdir -m 700 "$d/dot-ssh"
# no '/' in a file name: U+2215 (DIVISION SLASH) looks like one
name=$(printf '\033[2K\rgrant:        read       \u2215usr\u2215share\u2215doc\033[8m')
ln -s "$d" "$d/$name"   # planted by the tool in a directory it could write
printf '{"version": "0.1.0", "filesystem": {"grants": [{"path": "%s/\\u001b[2K\\rgrant:        read       \\u2215usr\\u2215share\\u2215doc\\u001b[8m/dot-ssh", "access": "readwrite"}]}}\n' "$d" >"$d/m.json"
out=$("$capsule" run --dry-run --config "$d/m.json" -- /bin/true 2>&1)
printf '%s\n' "$out" | grep -a '^grant:' | cat -v
if printf '%s' "$out" | grep -q $'\033'; then
  echo "VULNERABLE: the dry run printed the manifest's escape sequences (the read-write grant is disguised)"; exit 1
fi
echo blocked; exit 0
