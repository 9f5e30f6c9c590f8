#!/bin/bash
# Finding (filesystem.deny inside a granted directory, src/sandbox/
# mount_plan.c plan_mask, landlock.c add_around_denies): a deny entry whose
# path does not exist when the run starts is dropped ("a deny path that
# does not exist masks nothing"): no mask, and since there is no mask
# either, Landlock gives the whole grant its rights. A tool granted $HOME
# read-write with ~/.ssh denied (nono's deny_credentials: ~/.ssh, ~/.aws,
# ~/.kube, ~/.docker, ~/.gnupg, ~/.netrc ... most homes lack several) can
# create the denied path and write into it: ~/.ssh/authorized_keys (a
# login for whoever holds the key), ~/.aws/config credential_process or
# ~/.kube/config exec plugins (commands the user's CLI runs later, outside
# any sandbox). Deny should hold for what the path will hold, not only for
# what it holds now. As root (the tool's writes through the idmapped home
# are root's) and as uid 65534.
# Exits 1 while the tool plants the file, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
probe=$(mktemp -d) # its own state: the default one may belong to another capsule
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-deny.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
whos=(self)
[ "$(id -u)" = 0 ] && whos=(root nobody)
vulnerable=0
for who in "${whos[@]}"; do
  H=$W/$who/home
  mkdir -p "$H/proj/sub" "$W/$who/xdg"
  ln -s "$H/proj/kube" "$H/.kube" # a dangling link: the deny is what it points to
  cat >"$W/$who/m.json" <<J
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$H", "access": "readwrite"}],
                "deny": [{"path": "$H/.ssh"}, {"path": "$H/.aws/config"}, {"path": "$H/.netrc"},
                         {"path": "$H/.kube"}]}}
J
  run=()
  [ "$who" = nobody ] && { chown -R 65534:65534 "$W/$who"; run=(setpriv --reuid=65534 --regid=65534 --clear-groups); }
  out=$(cd "$H/proj" && "${run[@]}" env HOME="$H" XDG_STATE_HOME="$W/$who/xdg" XDG_CONFIG_HOME="$W/$who/xdg" \
    timeout 60 "$capsule" run --config "$W/$who/m.json" -- /bin/sh -c "
      mkdir -p $H/.ssh $H/.aws
      echo 'ssh-ed25519 AAAA attacker' >$H/.ssh/authorized_keys
      printf '[default]\ncredential_process = /bin/sh -c id\n' >$H/.aws/config
      echo 'machine example.com login x password y' >$H/.netrc
      mkdir -p $H/proj/kube && echo 'users: [{user: {exec: {command: id}}}]' >$H/.kube/config
      echo work >$H/proj/sub/still-writable
      echo planted" 2>&1 </dev/null)
  [ -s "$H/proj/sub/still-writable" ] || { echo "the rest of the grant is not writable any more: $out"; exit 2; }
  echo "$who: $out"
  for f in .ssh/authorized_keys .aws/config .netrc .kube/config; do
    if [ -s "$H/$f" ]; then
      echo "VULNERABLE ($who): the tool created the denied ~/$f"; vulnerable=1
    fi
  done
  # the control: the deny holds once the path exists
  out=$(cd "$H/proj" && "${run[@]}" env HOME="$H" XDG_STATE_HOME="$W/$who/xdg" XDG_CONFIG_HOME="$W/$who/xdg" \
    timeout 60 "$capsule" run --config "$W/$who/m.json" -- /bin/sh -c "echo more >>$H/.ssh/authorized_keys" 2>&1 </dev/null)
  grep -q more "$H/.ssh/authorized_keys" 2>/dev/null && { echo "VULNERABLE ($who): an existing denied path written"; vulnerable=1; }
done
[ "$vulnerable" = 0 ] && { echo blocked; exit 0; }
exit 1
