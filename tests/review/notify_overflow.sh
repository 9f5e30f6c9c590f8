#!/bin/bash
# Finding (memory safety, root): the seccomp-notify supervisor copies a
# tool's AF_UNIX connect address into a 109-byte stack buffer with the
# tool's length (src/sandbox/supervise.c connect_unix_path: n = len -
# offsetof(sun_path), len checked only against sizeof(sockaddr_storage) =
# 128 in perform_connect), so connect(fd, addr, 128) writes 17 tool-chosen
# bytes and a NUL past `path` on the stack of capsule's thread (root when
# capsule runs as root). Shown with the ASan build, which stops capsule;
# the release build corrupts its stack silently.
# Usage: notify_overflow.sh [ASAN_CAPSULE]; exits non-zero when the
# overflow happens.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
asan=${1:-$root/build-asan/src/cli/capsule}
if [ ! -x "$asan" ]; then
  (cd "$root" && { [ -f build-asan/build.ninja ] ||
     meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug >/dev/null; } &&
   ninja -C build-asan src/cli/capsule >/dev/null) || { echo "SKIP: cannot build the ASan capsule"; exit 77; }
fi
tmp=$(mktemp -d /var/tmp/capsule-review-no.XXXXXX); trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cc -O1 -o "$tmp/probe" "$here/notify_overflow.c" || exit 2
out=$(ASAN_OPTIONS=detect_leaks=0 "$asan" run --allow-read "$tmp/probe" -- "$tmp/probe" 2>&1)
echo "$out" | head -8
if grep -q "stack-buffer-overflow" <<<"$out"; then
  echo "VULNERABLE: the tool's connect() overflowed a stack buffer in capsule's supervisor"; exit 1
fi
echo "blocked"; exit 0
