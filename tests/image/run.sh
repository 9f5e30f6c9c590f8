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
root=$(cd "$here/../.." && pwd)
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
  # skopeo's temporary copy of an archive stays inside the import's staging directory
  if [ "$who" = root ] && command -v strace >/dev/null; then
    strace -f -qq -e trace=mkdir,mkdirat -o "$work/skopeo.trace" "$capsule" image import "${S[@]}" "$work/oci.tar" --tag tests/oci:2 >/dev/null 2>&1
    # every directory made (= 0) by capsule or skopeo is under the state
    if grep -q 'skopeo-tmp' "$work/skopeo.trace" && ! grep -E 'mkdir(at)?\(.*"/.* = 0$' "$work/skopeo.trace" | grep -v "\"$state/" | grep -q .; then ok "skopeo-temp-in-staging"
    else bad "skopeo-temp-in-staging"; grep -E 'mkdir(at)?\(.*"/.* = 0$' "$work/skopeo.trace" | grep -v "\"$state/" | head -3 | sed 's/^/         /'; fi
    "$capsule" image rm "${S[@]}" tests/oci:2 >/dev/null 2>&1
  fi
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
  c image-default-path 0 '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' call "${G[@]}" img-a env '{"name": "PATH"}'
  printf 'tok-%s\n' "$$" | "${as[@]}" "$capsule" cred set img-a API_TOKEN --scope system "${S[@]}" >/dev/null 2>&1
  c credential-injected 0 "tok-$$" call "${G[@]}" img-a env '{"name": "API_TOKEN"}'
  c second-capability-same-image 0 '"ok"' call "${G[@]}" img-b ok '{}'
  # proxy-only network: the image's server sees capsule's proxy and nothing else
  manifest "$caps/net" img-net $ref 'network: {mode: allowlist, hosts: ["api.example.com:443"]}'
  c image-proxy-env 0 '"http://127.0.0.1:[0-9]+"' call "${G[@]}" img-net env '{"name": "HTTPS_PROXY"}'
  "${as[@]}" "$capsule" stop "${S[@]}" img-net >/dev/null 2>&1
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
  c corrupt-layer-refused 1 "layer [0-9]+ is corrupt: it is not a valid gzip stream" image import "${S[@]}" "$work/$who/corrupt" --tag bad/corrupt:1
  c not-a-layout 1 "is a directory but not an OCI image layout" image import "${S[@]}" "$work/extra" --tag bad/x:1
  printf 'not a tar archive' >"$work/$who/junk.tar"
  c not-an-archive 1 "is neither an OCI archive .* nor a .docker save. archive" image import "${S[@]}" "$work/$who/junk.tar" --tag bad/x:1
  c bad-reference 1 "is not an image reference" image import "${S[@]}" "$work/layout" --tag 'Bad Ref'
  c pull-unreachable 1 "image pull: .*skopeo cannot read 127.0.0.1:1/none:1" image pull "${S[@]}" 127.0.0.1:1/none:1
  [ "$(store_state "$state/images")" = "$before" ] && ok "nothing-half-written" || bad "nothing-half-written"
  # a killed import's leftovers (its lock free) go with the next import
  "${as[@]}" mkdir -p "$state/images/tmp/import.killed/oci" && "${as[@]}" touch "$state/images/tmp/import.killed.lock"
  c import-after-killed-one 0 "^docker.io/tests/oci:1 " image import "${S[@]}" "$work/oci.tar" --tag tests/oci:1
  [ -z "$(ls "$state/images/tmp")" ] && ok "killed-import-leftovers-removed" || bad "killed-import-leftovers-removed ($(ls "$state/images/tmp"))"

  echo "[$who] hostile layers"
  mkdir -p /tmp/capsule-target-$$ /tmp/capsule-victim-$$ && touch /tmp/capsule-victim-$$/keep && chmod 777 /tmp/capsule-target-$$ /tmp/capsule-victim-$$
  # hostile layer LAYOUT-NAME TAG ENTRIES: an image with one more layer
  hostile() { cp -a "$work/layout" "$work/$who/$1" && python3 "$here/addlayer.py" "$work/$who/$1" t1 "$2"; }
  before=$(store_state "$state/images")
  hostile dotdot "[{\"name\": \"../../../../../../../../../../tmp/capsule-escape-$$\", \"data\": \"dotdot\"}]"
  c dotdot-path-refused 1 "layer [0-9]+: the entry \"../../../../../../../../../../tmp/capsule-escape-$$\" climbs out of the image's root" image import "${S[@]}" "$work/$who/dotdot" --tag bad/dotdot:1
  hostile pax "[{\"name\": \"$(printf 'd/%.0s' $(seq 60))../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../tmp/capsule-escape-$$\", \"data\": \"long\"}]"
  c long-pax-path-refused 1 "climbs out of the image's root" image import "${S[@]}" "$work/$who/pax" --tag bad/pax:1
  hostile whiteout "[{\"name\": \"../../../../../../../../tmp/capsule-victim-$$/.wh.keep\"}]"
  c whiteout-outside-refused 1 "the entry .*/.wh.keep\" climbs out" image import "${S[@]}" "$work/$who/whiteout" --tag bad/whiteout:1
  hostile whiteout-parent '[{"name": "etc/.wh..."}]'
  c whiteout-of-parent-refused 1 "the whiteout \"etc/.wh...\" climbs out" image import "${S[@]}" "$work/$who/whiteout-parent" --tag bad/whiteout2:1
  hostile hardlink '[{"name": "pw", "type": "hardlink", "target": "../../../../../../etc/passwd"}]'
  c hardlink-outside-refused 1 "the hard link's target \"../../../../../../etc/passwd\" climbs out" image import "${S[@]}" "$work/$who/hardlink" --tag bad/hardlink:1
  [ "$(store_state "$state/images")" = "$before" ] && ok "hostile-nothing-stored" || bad "hostile-nothing-stored"
  [ ! -e /tmp/capsule-escape-$$ ] && ok "dotdot-path-contained" || bad "dotdot-path-contained"
  [ -e /tmp/capsule-victim-$$/keep ] && ok "whiteout-outside-contained" || bad "whiteout-outside-contained"
  # links that point out are kept as links; nothing is written through them
  hostile symlinks "[
    {\"name\": \"evil\", \"type\": \"symlink\", \"target\": \"/tmp/capsule-target-$$\"},
    {\"name\": \"evil/pwned\", \"data\": \"through an absolute symlink\"},
    {\"name\": \"rel\", \"type\": \"symlink\", \"target\": \"../../../../../../../../tmp/capsule-target-$$\"},
    {\"name\": \"rel/pwned2\", \"data\": \"through a relative symlink\"}]"
  c escaping-symlinks-import 0 "^docker.io/bad/hostile:1 " image import "${S[@]}" "$work/$who/symlinks" --tag bad/hostile:1
  [ ! -e /tmp/capsule-target-$$/pwned ] && ok "absolute-symlink-contained" || bad "absolute-symlink-contained"
  [ ! -e /tmp/capsule-target-$$/pwned2 ] && ok "relative-symlink-contained" || bad "relative-symlink-contained"
  # whiteouts, opaque directories, hard links and device nodes inside
  cp -a "$work/layout" "$work/$who/layers"
  python3 "$here/addlayer.py" "$work/$who/layers" t1 '[{"name": "d", "type": "dir"}, {"name": "d/a", "data": "a"},
    {"name": "gone", "data": "g"}]'
  python3 "$here/addlayer.py" "$work/$who/layers" t1 '[{"name": "d", "type": "dir"}, {"name": "d/.wh..wh..opq"},
    {"name": "d/c", "data": "c"}, {"name": ".wh.gone"}, {"name": "hl", "type": "hardlink", "target": "etc/image-name"},
    {"name": "dev0", "type": "chardev"}]'
  c import-layered 0 "^docker.io/tests/layers:1 " image import "${S[@]}" "$work/$who/layers" --tag tests/layers:1
  local lroot; lroot=$("${as[@]}" "$capsule" image inspect "${S[@]}" tests/layers:1 | sed -n 's/.*"rootfs": "\(.*\)".*/\1/p')
  [ -f "$lroot/d/c" ] && [ ! -e "$lroot/d/a" ] && ok "opaque-directory" || bad "opaque-directory"
  [ ! -e "$lroot/gone" ] && ok "whiteout" || bad "whiteout"
  [ "$(stat -c %i "$lroot/hl")" = "$(stat -c %i "$lroot/etc/image-name")" ] && ok "hard-link" || bad "hard-link"
  [ ! -c "$lroot/dev0" ] && ok "device-node-not-created" || bad "device-node-not-created"
  # the applier's own cases: an opaque marker after an entry of its own
  # layer, a read-only directory written into by the next layer, a
  # directory replaced by a file, a file by a symlink, a FIFO; modes and
  # setuid dropped
  cp -a "$work/layout" "$work/$who/apply"
  python3 "$here/addlayer.py" "$work/$who/apply" t1 '[{"name": "o", "type": "dir"}, {"name": "o/low", "data": "l"},
    {"name": "ro", "type": "dir", "mode": 365}, {"name": "ro/a", "data": "a"}, {"name": "dx", "type": "dir"},
    {"name": "dx/in", "data": "i"}, {"name": "fs", "data": "f"}, {"name": "suid", "data": "s", "mode": 3565}]'
  python3 "$here/addlayer.py" "$work/$who/apply" t1 '[{"name": "o/mine", "data": "m"}, {"name": "o/.wh..wh..opq"},
    {"name": "ro/b", "data": "b"}, {"name": "dx", "data": "now a file"}, {"name": "fs", "type": "symlink", "target": "/etc/image-name"},
    {"name": "deep/er/f", "data": "p"}]'
  c import-applier-cases 0 "^docker.io/tests/apply:1 " image import "${S[@]}" "$work/$who/apply" --tag tests/apply:1
  local aroot; aroot=$("${as[@]}" "$capsule" image inspect "${S[@]}" tests/apply:1 | sed -n 's/.*"rootfs": "\(.*\)".*/\1/p')
  [ -f "$aroot/o/mine" ] && [ ! -e "$aroot/o/low" ] && ok "opaque-keeps-own-layer" || bad "opaque-keeps-own-layer"
  [ -f "$aroot/ro/a" ] && [ -f "$aroot/ro/b" ] && [ "$(stat -c %a "$aroot/ro")" = 555 ] && ok "read-only-dir-written-later" || bad "read-only-dir-written-later"
  [ "$(cat "$aroot/dx" 2>/dev/null)" = "now a file" ] && ok "dir-replaced-by-file" || bad "dir-replaced-by-file"
  [ "$(readlink "$aroot/fs")" = /etc/image-name ] && ok "file-replaced-by-symlink" || bad "file-replaced-by-symlink"
  [ "$(stat -c %a "$aroot/suid")" = 755 ] && ok "setuid-dropped" || bad "setuid-dropped ($(stat -c %a "$aroot/suid"))"
  # as correct as umoci: the same layers unpacked by `umoci unpack --rootless`
  # give the same tree (types, modes without set-id bits, sizes, contents,
  # link targets, hard-link groups, modification times), but for the device
  # node, which umoci leaves as an empty file and capsule skips
  if [ "$who" = root ]; then
    local same=1 l
    for l in layers apply; do
      rm -rf "$work/umoci-$l"
      umoci unpack --rootless --image "$work/$who/$l:t1" "$work/umoci-$l" >"$work/umoci-$l.log" 2>&1 || { same=0; echo "  umoci unpack of $l failed:"; tail -n 3 "$work/umoci-$l.log"; continue; }
      local mine; mine=$("$capsule" image inspect "${S[@]}" tests/$l:1 | sed -n 's/.*"rootfs": "\(.*\)".*/\1/p')
      python3 "$here/treecmp.py" "$work/umoci-$l/rootfs" "$mine" dev0 || same=0
    done
    [ $same = 1 ] && ok "same-tree-as-umoci" || bad "same-tree-as-umoci"
  fi
  [ -f "$aroot/deep/er/f" ] && [ "$(stat -c %a "$aroot/deep")" = 755 ] && ok "missing-parents-made" || bad "missing-parents-made"
  # zstd layers (application/vnd.oci.image.layer.v1.tar+zstd), made here with the zstd program
  if command -v zstd >/dev/null; then
    cp -a "$work/layout" "$work/$who/zstd"
    COMPRESS=zstd python3 "$here/addlayer.py" "$work/$who/zstd" t1 '[{"name": "z", "type": "dir"}, {"name": "z/data", "data": "zstd layer"}, {"name": ".wh.bin"}]'
    c import-zstd 0 "^docker.io/tests/zstd:1 " image import "${S[@]}" "$work/$who/zstd" --tag tests/zstd:1
    local zroot; zroot=$("${as[@]}" "$capsule" image inspect "${S[@]}" tests/zstd:1 | sed -n 's/.*"rootfs": "\(.*\)".*/\1/p')
    [ "$(cat "$zroot/z/data" 2>/dev/null)" = "zstd layer" ] && [ ! -e "$zroot/bin" ] && ok "zstd-unpacked" || bad "zstd-unpacked"
    cp -a "$work/$who/zstd" "$work/$who/zstd-bad"
    local zl; zl=$(python3 -c 'import json,sys;i=json.load(open(sys.argv[1]+"/index.json"));m=json.load(open(sys.argv[1]+"/blobs/sha256/"+i["manifests"][0]["digest"][7:]));print(m["layers"][-1]["digest"][7:])' "$work/$who/zstd-bad")
    printf 'X' | dd of="$work/$who/zstd-bad/blobs/sha256/$zl" bs=1 seek=20 conv=notrunc status=none
    c zstd-digest-mismatch 1 "layer [0-9]+ sha256:$zl does not match its digest" image import "${S[@]}" "$work/$who/zstd-bad" --tag bad/zstd:1
    cp -a "$work/layout" "$work/$who/zstd-corrupt"
    CORRUPT=1 COMPRESS=zstd python3 "$here/addlayer.py" "$work/$who/zstd-corrupt" t1 '[{"name": "x", "data": "x"}]'
    c zstd-corrupt-refused 1 "layer [0-9]+ is corrupt: it is not a valid zstd stream" image import "${S[@]}" "$work/$who/zstd-corrupt" --tag bad/zstdc:1
    cp -a "$work/layout" "$work/$who/zstd-dotdot"
    COMPRESS=zstd python3 "$here/addlayer.py" "$work/$who/zstd-dotdot" t1 "[{\"name\": \"../../../../tmp/capsule-escape-$$\", \"data\": \"z\"}]"
    c zstd-dotdot-refused 1 "climbs out of the image's root" image import "${S[@]}" "$work/$who/zstd-dotdot" --tag bad/zstdd:1
  else
    echo "  note: no zstd program; the zstd cases are skipped (scripts/deps.sh test installs it)"
  fi
  cp -a "$work/layout" "$work/$who/noentry"
  ENTRYPOINT=/nonexistent python3 "$here/addlayer.py" "$work/$who/noentry" t1 '[{"name": "y", "data": "y"}]'
  c noentry-import-warns 0 "warning: .*entrypoint /nonexistent is not an executable file in the image" image import "${S[@]}" "$work/$who/noentry" --tag tests/noentry:1
  manifest "$caps/noentry" img-noentry tests/noentry:1
  c noentry-not-ready 0 "img-noentry .*not ready: .*entrypoint /nonexistent is not an executable file" list "${G[@]}"
  c noentry-call-fails 1 "entrypoint /nonexistent is not an executable file" call "${G[@]}" img-noentry ok '{}'

  node_image "$state" "$caps"
  [ "$who" = root ] && export_oci "$state" "$caps"

  echo "[$who] rm"
  c rm 0 "removed" image rm "${S[@]}" example.org/saved/fault:2
  c rm-unknown 1 "is not in the store" image rm "${S[@]}" example.org/saved/fault:2
  for r in $ref tests/oci:1 tests/layers:1 tests/apply:1 tests/zstd:1 tests/noentry:1 bad/hostile:1; do "${as[@]}" "$capsule" image rm "${S[@]}" $r >/dev/null 2>&1; done
  [ -z "$(find "$state/images/rootfs" "$state/images/blobs/sha256" -mindepth 1)" ] && ok "rm-collects-garbage" || { bad "rm-collects-garbage"; "${as[@]}" "$capsule" image ls "${S[@]}"; }
}

# node_image STATE CAPS: the Node example (examples/selu-node, tools
# discovered at run time) from an image holding node, its libraries, the
# server and its node_modules
node_image() {
  local state=$1 caps=$2 G=(--caps "$2" --state "$1")
  echo "[$who] a Node server's image"
  local node_dir=$root/examples/selu-node
  if [ ! -d "$node_dir/node_modules/@grpc/grpc-js" ] || ! command -v node >/dev/null; then
    echo "  SKIP node-image: node, or npm ci in examples/selu-node (scripts/deps.sh test does)"; return
  fi
  if [ ! -d "$work/node-layout" ]; then
    mkdir -p "$work/node-extra/app"
    cp -r "$node_dir/server.js" "$node_dir/package.json" "$node_dir/node_modules" "$work/node-extra/app/"
    cp "$root/proto/selu/capability/v1/capability.proto" "$work/node-extra/app/"
    cp "$root/proto/selu/orchestrator/capability.proto" "$work/node-extra/app/orchestrator.proto"
    ROOTFS_EXTRA=$work/node-extra PROGRAM_AT=/usr/bin/node WORKDIR=/app \
      "$here/mkimage.sh" "$work/node-layout" n1 "$(command -v node)" node /app/server.js >/dev/null
    chmod -R a+rX "$work/node-layout"
  fi
  c import-node-image 0 "^docker.io/tests/node:1 " image import --state "$state" "$work/node-layout" --tag tests/node:1
  mkdir -p "$caps/node"
  sed -e '/^x-capsule:/,$d' -e 's|^image: .*|image: tests/node:1|' "$node_dir/manifest.yaml" >"$caps/node/manifest.yaml"
  c node-image-dynamic-call 0 '^\{"greeting":"Hello, Ada"\}$' call "${G[@]}" node-tools greet '{"name": "Ada"}'
  "${as[@]}" "$capsule" stop --state "$state" node-tools >/dev/null 2>&1
  "${as[@]}" "$capsule" image rm --state "$state" tests/node:1 >/dev/null 2>&1
}

# export_oci STATE CAPS: bundles that runc runs (as root: runc's own
# rootless mode needs a cgroup manager this host lacks)
export_oci() {
  local state=$1 caps=$2 G=(--caps "$2" --state "$1")
  echo "[root] export oci"
  if ! command -v runc >/dev/null; then echo "  SKIP export-oci: runc is not installed (scripts/deps.sh test)"; return; fi
  c export-image 0 "$work/bundle-a" export oci "${G[@]}" img-a "$work/bundle-a"
  c export-netns 0 "$work/bundle-n" export oci "${G[@]}" --netns /run/netns/capsule-test img-a "$work/bundle-n"
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); n=[x for x in c["linux"]["namespaces"] if x["type"]=="network"]; sys.exit(0 if n and n[0].get("path")=="/run/netns/capsule-test" else 1)' "$work/bundle-n/config.json" &&
    ok "export-netns-path" || bad "export-netns-path"
  c export-netns-relative-refused 1 "is not an absolute path" export oci "${G[@]}" --netns netns img-a "$work/bundle-r"
  c export-exists-refused 1 "exists; give a new directory" export oci "${G[@]}" img-a "$work/bundle-a"
  c export-missing-image-exit-3 3 "capsule image pull" export oci "${G[@]}" img-missing "$work/bundle-m"
  [ ! -e "$work/bundle-m" ] && ok "export-failure-leaves-nothing" || bad "export-failure-leaves-nothing"
  # the probe alone (not the server, which would serve forever)
  python3 - "$work/bundle-a/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["process"]["args"][0] == "/probe", c["process"]["args"]
c["process"]["args"] = ["/probe"]
json.dump(c, open(sys.argv[1], "w"))
PY
  local id=capsule-image-test-$$
  (cd "$work/bundle-a" && timeout 60 runc run "$id") >"$work/runc.out" 2>&1
  runc delete -f "$id" >/dev/null 2>&1
  local log=$work/runc.out
  rprobe() { grep -q "^probe $1 $2\$" "$log" && ok "runc-$3" || { bad "runc-$3 (want $1 $2)"; grep "probe $1 \|runc\|error" "$log" | head -3 | sed 's/^/         /'; }; }
  rprobe ids 1000:1000 "runs-as-1000"
  rprobe cwd /etc "image-workingdir"
  rprobe image_var from-image "image-env"
  rprobe nofile 256 "nofile-256"
  rprobe no_new_privs 1 "no-new-privs"
  rprobe write_root "Read-only file system" "root-read-only"
  rprobe exec_tmp "Permission denied" "tmp-noexec"
  rprobe host_home absent "host-home-not-visible"
  rprobe capeff 0000000000000000 "capabilities-dropped"
  grep -q '"SCMP_ACT_ERRNO"' "$work/bundle-a/config.json" && grep -q '"names": \["mount"' "$work/bundle-a/config.json" &&
    ok "bundle-carries-seccomp" || bad "bundle-carries-seccomp"
  # x-capsule.command: the host's system directories, read-only
  mkdir -p "$caps/cmd"
  cat >"$caps/cmd/manifest.yaml" <<'YAML'
id: cmd
image: example/cmd:1
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
x-capsule: {command: ["/bin/sh", "-c", "echo uid=$(id -u); touch /usr/x 2>&1; unshare -U true 2>&1; python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print(\"sctp\", l.socket(2, 1, 132), ctypes.get_errno())' 2>&1; echo end"]}
YAML
  c export-command 0 "$work/bundle-cmd" export oci "${G[@]}" cmd "$work/bundle-cmd"
  (cd "$work/bundle-cmd" && timeout 60 runc run "$id") >"$work/runc-cmd.out" 2>&1
  runc delete -f "$id" >/dev/null 2>&1
  grep -q "^uid=65534$" "$work/runc-cmd.out" && ok "runc-command-as-65534" || { bad "runc-command-as-65534"; head -3 "$work/runc-cmd.out"; }
  grep -q "Read-only file system" "$work/runc-cmd.out" && ok "runc-system-dirs-read-only" || bad "runc-system-dirs-read-only"
  grep -q "unshare.*Operation not permitted" "$work/runc-cmd.out" && ok "runc-seccomp-denies-unshare" || { bad "runc-seccomp-denies-unshare"; cat "$work/runc-cmd.out" | head -5; }
  # the inet rules too (seccomp_gen.c inet_refusals): an SCTP socket is EPERM, no module load
  if [ -x /usr/bin/python3 ]; then
    grep -q "^sctp -1 1$" "$work/runc-cmd.out" && ok "runc-seccomp-denies-sctp" || { bad "runc-seccomp-denies-sctp"; grep sctp "$work/runc-cmd.out" | head -3; }
  fi
  grep -q "^end$" "$work/runc-cmd.out" && ok "runc-command-ran" || bad "runc-command-ran"
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
