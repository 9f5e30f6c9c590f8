#!/usr/bin/env bash
# The image store and Selu images (docs/images.md), with images built here
# (no registry, no daemon): an OCI layout made with umoci holding a Selu
# server and the libraries it needs, the same as an OCI archive and as a
# `docker save` archive; hostile layers (a digest mismatch, a corrupt
# layer, ../ paths, escaping symlinks, a whiteout outside, an entrypoint
# that does not exist); calls through the image with Selu's runner
# conventions probed from inside. As root and as uid 65534.
# Usage: run.sh CAPSULE SELU_SERVER
set -u
source "$(dirname "$0")/../lib/gateway.sh"
here=$(cd "$(dirname "$0")" && pwd)
server=$(realpath "$2")
for tool in umoci skopeo python3 cc; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh test)"; exit 77; }
done
work=$(mktemp -d /var/tmp/capsule-image.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work" /tmp/capsule-escape-$$ /tmp/capsule-target-$$ /tmp/capsule-victim-$$' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
ref=ghcr.io/capsule-tests/fault:1

# the image: the probe as entrypoint, then the server
mkdir -p "$work/extra"
cc -static -O1 -o "$work/extra/probe" "$here/probe.c" || { echo "SKIP: no static libc to build the probe"; exit 77; }
cp "$server" "$work/server"
"$here/mkimage.sh" "$work/layout" t1 "$work/server" /probe /server --mode normal >/dev/null 2>&1 &&
  ROOTFS_EXTRA=$work/extra "$here/mkimage.sh" "$work/layout" t1 "$work/server" /probe /server --mode normal >/dev/null ||
  { echo "FAIL: cannot build the test image with umoci"; exit 1; }
tar -C "$work/layout" -cf "$work/oci.tar" .
skopeo copy -q --insecure-policy oci:"$work/layout":t1 docker-archive:"$work/docker.tar":example.org/saved/fault:2 ||
  { echo "FAIL: cannot write the docker-save archive"; exit 1; }
chmod -R a+rX "$work"

manifest() { # manifest DIR ID IMAGE [EXTRA-YAML]
  mkdir -p "$1"
  cat >"$1/manifest.yaml" <<YAML
id: $2
image: $3
credentials:
  - {name: API_TOKEN, scope: system, required: false}
tools:
  - {name: env, description: An environment variable., recommended_policy: allow, input_schema: {type: object}}
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
x-capsule: {idle_timeout_ms: 2000}
${4:-}
YAML
}

# store_state STORE: what the store holds (refs, rootfs, blobs), for "nothing half-written"
store_state() { (cd "$1" 2>/dev/null && find refs rootfs blobs -mindepth 1 -maxdepth 2 | sort | md5sum; ls tmp 2>/dev/null | wc -l); }

suite() { # suite WHO: everything, as root or as uid 65534 (run prefix in $as)
  local who=$1 state=$work/$1/state caps=$work/$1/caps
  mkdir -p "$work/$who" && [ "$who" = root ] || chown 65534:65534 "$work/$who"
  local S=(--state "$state")
  echo "[$who] import"
  c import-layout 0 "^$ref sha256:[0-9a-f]{64}$" image import "${S[@]}" "$work/layout" --tag $ref
  c import-oci-archive 0 "^docker.io/tests/oci:1 sha256:" image import "${S[@]}" "$work/oci.tar" --tag tests/oci:1
  c import-docker-archive-own-tag 0 "^example.org/saved/fault:2 sha256:" image import "${S[@]}" "$work/docker.tar"
  c ls 0 "docker.io/tests/oci:1 +sha256:[0-9a-f]{12} " image ls "${S[@]}"
  c ls-json 0 '"ref": "example.org/saved/fault:2"' image ls "${S[@]}" --json
  c inspect 0 '^ +"/probe",$' image inspect "${S[@]}" $ref
  local n_roots; n_roots=$(ls "$state/images/rootfs" | wc -l)
  # the layout and its archive are the same image: one rootfs
  [ "$n_roots" = 2 ] && ok "rootfs-shared-by-digest" || bad "rootfs-shared-by-digest ($n_roots roots)"

  echo "[$who] run"
  manifest "$caps/a" img-a $ref
  manifest "$caps/b" img-b tests/oci:1
  manifest "$caps/missing" img-missing ghcr.io/capsule-tests/absent:9
  local G=(--caps "$caps" "${S[@]}")
  c list-ready 0 "img-a +\(selu, grpc\) +ready" list "${G[@]}"
  c list-missing-not-ready 0 "img-missing .*not ready: .*not in capsule's image store.*capsule image pull ghcr.io/capsule-tests/absent:9" list "${G[@]}"
  c call-missing-exit-3 3 "capsule image pull ghcr.io/capsule-tests/absent:9.*capsule image import PATH --tag" call "${G[@]}" img-missing ok '{}'
  c call-image 0 '"ok"' call "${G[@]}" img-a ok '{}'
  c call-image-env 0 'from-image' call "${G[@]}" img-a env '{"name": "IMAGE_VAR"}'
  printf 'tok-%s\n' "$$" | "${as[@]}" "$capsule" cred set img-a API_TOKEN --scope system "${S[@]}" >/dev/null 2>&1
  c credential-injected 0 "tok-$$" call "${G[@]}" img-a env '{"name": "API_TOKEN"}'
  c second-capability-same-image 0 '"ok"' call "${G[@]}" img-b ok '{}'
  local log=$state/logs/img-a.log
  probe() { grep -q "^probe $1 $2\$" "$log" && ok "$3" || { bad "$3 (want $1 $2)"; grep "^probe $1 " "$log" | tail -1 | sed 's/^/         /'; }; }
  probe ids 1000:1000 "runs-as-1000"
  probe cwd /etc "image-workingdir"
  probe capability_id img-a "selu-capability-id"
  probe nofile 256 "nofile-256"
  probe no_new_privs 1 "no-new-privs"
  probe write_root "Read-only file system" "root-read-only"
  probe write_etc "Read-only file system" "image-dirs-read-only"
  probe write_tmp ok "tmp-writable"
  probe exec_tmp "Permission denied" "tmp-noexec"
  probe host_home absent "host-home-not-visible"
  probe host_usr absent "host-usr-not-visible"
  probe image_file capsule-test-image "image-files-visible"
  probe capeff 0000000000000000 "capabilities-dropped"
  "${as[@]}" "$capsule" stop "${S[@]}" img-a >/dev/null 2>&1
  "${as[@]}" "$capsule" stop "${S[@]}" img-b >/dev/null 2>&1

  echo "[$who] bad input"
  local before; before=$(store_state "$state/images")
  cp -a "$work/layout" "$work/$who/mismatch"
  local layer; layer=$(python3 -c 'import json,sys;i=json.load(open(sys.argv[1]+"/index.json"));m=json.load(open(sys.argv[1]+"/blobs/sha256/"+i["manifests"][0]["digest"][7:]));print(m["layers"][-1]["digest"][7:])' "$work/$who/mismatch")
  printf 'X' | dd of="$work/$who/mismatch/blobs/sha256/$layer" bs=1 seek=100 conv=notrunc status=none
  c digest-mismatch-refused 1 "layer [0-9]+ sha256:$layer does not match its digest: its content hashes to sha256:" image import "${S[@]}" "$work/$who/mismatch" --tag bad/mismatch:1
  cp -a "$work/layout" "$work/$who/corrupt"
  CORRUPT=1 python3 "$here/addlayer.py" "$work/$who/corrupt" t1 '[{"name": "x", "data": "x"}]'
  c corrupt-layer-refused 1 "cannot unpack the image's layers: umoci: .*gzip" image import "${S[@]}" "$work/$who/corrupt" --tag bad/corrupt:1
  c not-a-layout 1 "is a directory but not an OCI image layout" image import "${S[@]}" "$work/extra" --tag bad/x:1
  printf 'not a tar archive' >"$work/$who/junk.tar"
  c not-an-archive 1 "is neither an OCI archive .* nor a .docker save. archive" image import "${S[@]}" "$work/$who/junk.tar" --tag bad/x:1
  c bad-reference 1 "is not an image reference" image import "${S[@]}" "$work/layout" --tag 'Bad Ref'
  c pull-unreachable 1 "image pull: .*skopeo cannot read 127.0.0.1:1/none:1" image pull "${S[@]}" 127.0.0.1:1/none:1
  [ "$(store_state "$state/images")" = "$before" ] && ok "nothing-half-written" || bad "nothing-half-written"

  echo "[$who] hostile layers"
  mkdir -p /tmp/capsule-target-$$ /tmp/capsule-victim-$$ && touch /tmp/capsule-victim-$$/keep && chmod 777 /tmp/capsule-target-$$ /tmp/capsule-victim-$$
  cp -a "$work/layout" "$work/$who/hostile"
  python3 "$here/addlayer.py" "$work/$who/hostile" t1 "[
    {\"name\": \"../../../../../../../../../../tmp/capsule-escape-$$\", \"data\": \"dotdot\"},
    {\"name\": \"evil\", \"type\": \"symlink\", \"target\": \"/tmp/capsule-target-$$\"},
    {\"name\": \"evil/pwned\", \"data\": \"through an absolute symlink\"},
    {\"name\": \"rel\", \"type\": \"symlink\", \"target\": \"../../../../../../../../tmp/capsule-target-$$\"},
    {\"name\": \"rel/pwned2\", \"data\": \"through a relative symlink\"},
    {\"name\": \"../../../../../../../../tmp/capsule-victim-$$/.wh.keep\"}]"
  "${as[@]}" "$capsule" image import "${S[@]}" "$work/$who/hostile" --tag bad/hostile:1 >"$work/$who/hostile.out" 2>&1
  [ ! -e /tmp/capsule-escape-$$ ] && ok "dotdot-path-contained" || bad "dotdot-path-contained"
  [ ! -e /tmp/capsule-target-$$/pwned ] && ok "absolute-symlink-contained" || bad "absolute-symlink-contained"
  [ ! -e /tmp/capsule-target-$$/pwned2 ] && ok "relative-symlink-contained" || bad "relative-symlink-contained"
  [ -e /tmp/capsule-victim-$$/keep ] && ok "whiteout-outside-contained" || bad "whiteout-outside-contained"
  # whiteouts, opaque directories, hard links and device nodes inside
  cp -a "$work/layout" "$work/$who/layers"
  python3 "$here/addlayer.py" "$work/$who/layers" t1 '[{"name": "d", "type": "dir"}, {"name": "d/a", "data": "a"},
    {"name": "gone", "data": "g"}]'
  python3 "$here/addlayer.py" "$work/$who/layers" t1 '[{"name": "d", "type": "dir"}, {"name": "d/.wh..wh..opq"},
    {"name": "d/c", "data": "c"}, {"name": ".wh.gone"}, {"name": "hl", "type": "hardlink", "target": "etc/image-name"},
    {"name": "dev0", "type": "chardev"}]'
  c import-layered 0 "^docker.io/tests/layers:1 " image import "${S[@]}" "$work/$who/layers" --tag tests/layers:1
  local root; root=$("${as[@]}" "$capsule" image inspect "${S[@]}" tests/layers:1 | sed -n 's/.*"rootfs": "\(.*\)".*/\1/p')
  [ -f "$root/d/c" ] && [ ! -e "$root/d/a" ] && ok "opaque-directory" || bad "opaque-directory"
  [ ! -e "$root/gone" ] && ok "whiteout" || bad "whiteout"
  [ "$(stat -c %i "$root/hl")" = "$(stat -c %i "$root/etc/image-name")" ] && ok "hard-link" || bad "hard-link"
  [ ! -c "$root/dev0" ] && ok "device-node-not-created" || bad "device-node-not-created"
  cp -a "$work/layout" "$work/$who/noentry"
  ENTRYPOINT=/nonexistent python3 "$here/addlayer.py" "$work/$who/noentry" t1 '[{"name": "y", "data": "y"}]'
  c noentry-import-warns 0 "warning: .*entrypoint /nonexistent is not an executable file in the image" image import "${S[@]}" "$work/$who/noentry" --tag tests/noentry:1
  manifest "$caps/noentry" img-noentry tests/noentry:1
  c noentry-not-ready 0 "img-noentry .*not ready: .*entrypoint /nonexistent is not an executable file" list "${G[@]}"
  c noentry-call-fails 1 "entrypoint /nonexistent is not an executable file" call "${G[@]}" img-noentry ok '{}'

  echo "[$who] rm"
  c rm 0 "removed" image rm "${S[@]}" example.org/saved/fault:2
  c rm-unknown 1 "is not in the store" image rm "${S[@]}" example.org/saved/fault:2
  for r in $ref tests/oci:1 tests/layers:1 tests/noentry:1 bad/hostile:1; do "${as[@]}" "$capsule" image rm "${S[@]}" $r >/dev/null 2>&1; done
  [ -z "$(find "$state/images/rootfs" "$state/images/blobs/sha256" -mindepth 1)" ] && ok "rm-collects-garbage" || { bad "rm-collects-garbage"; "${as[@]}" "$capsule" image ls "${S[@]}"; }
}

# c NAME STATUS REGEX ARGS...: t as the suite's user
c() { local name=$1 want=$2 regex=$3; shift 3
  out=$("${as[@]}" "$capsule" "$@" 2>&1 </dev/null); local st=$?
  if [ "$st" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $st, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi; }

as=(env HOME="$work/root")
suite root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody")
  suite nobody
fi
finish image
