#!/usr/bin/env bash
# Builds an OCI image layout with umoci (no registry, no daemon): the given
# program at /PROGRAM's basename plus the shared libraries ldd names, with
# Entrypoint set. Usage: mkimage.sh LAYOUT TAG PROGRAM [ENTRYPOINT...]
# (ENTRYPOINT defaults to /NAME). Env ROOTFS_EXTRA=DIR adds DIR's files.
set -euo pipefail
layout=$1 tag=$2 prog=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umoci init --layout "$layout" 2>/dev/null || true
umoci new --image "$layout:$tag"
umoci unpack --rootless --image "$layout:$tag" "$work/bundle" >/dev/null
root=$work/bundle/rootfs
name=$(basename "$prog")
cp "$prog" "$root/$name"
for lib in $(ldd "$prog" | awk '/=> \//{print $3} /^\t\//{print $1}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
mkdir -p "$root/tmp" "$root/etc"
echo "capsule-test-image" > "$root/etc/image-name"
if [ -n "${ROOTFS_EXTRA:-}" ]; then cp -a "$ROOTFS_EXTRA/." "$root/"; fi
umoci repack --image "$layout:$tag" "$work/bundle" >/dev/null
if [ $# -eq 0 ]; then set -- "/$name"; fi
args=()
for a in "$@"; do args+=(--config.entrypoint "$a"); done
umoci config --image "$layout:$tag" "${args[@]}" --config.env "IMAGE_VAR=from-image" \
  --config.workingdir /etc
