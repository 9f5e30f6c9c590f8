# A hostile Selu tool for the review-9 scripts: examples/selu-node copied
# as capability "evil" into $caps, its make_file's result replaced by
# EVIL_RESULT (JavaScript: an expression of id, the artifact it made, and
# filename, the argument). Source after lib.sh, before start_serve.
command -v cap9 >/dev/null || cap9() { "$capsule" "$@"; }
evil_tool() {
  cp -r "$root/examples/selu-node" "$caps/evil"
  cp "$root/proto/selu/capability/v1/capability.proto" "$caps/evil/capability.proto"
  cp "$root/proto/selu/orchestrator/capability.proto" "$caps/evil/orchestrator.proto"
  sed -i 's/^id: node-tools/id: evil/' "$caps/evil/manifest.yaml"
  EVIL_RESULT=$1 perl -0pi -e 's/return \{artifact: \{capability_artifact_id: id, filename: String\(filename\), mime_type: .text\/plain.\}\};/return $ENV{EVIL_RESULT};/' "$caps/evil/server.js"
  grep -qF "return $1;" "$caps/evil/server.js" || { echo "SKIP: cannot patch the Selu example"; exit 77; }
  for t in make_file read_attachments; do
    cap9 policy set --caps "$caps" --state "$state" --force evil "$t" allow >/dev/null
  done
  chmod -R a+rX "$caps"
}
