#!/usr/bin/env python3
"""Compares two unpacked image roots (tests/image/run.sh): treecmp.py
UMOCI_ROOT CAPSULE_ROOT [DEVICE-PATH...] exits 0 when every path has the same type, mode (set-id bits aside),
size, content, symlink target, modification time (directories' and
files'; the root's own aside, and a directory no entry made, which both
stamp with the time of the unpack) and hard-link group in both, else
prints the differences and exits 1."""
import hashlib, os, stat, sys, time

NOW = time.time()


def walk(root):
    out, inodes = {}, {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            made_now = stat.S_ISDIR(kind) and NOW - st.st_mtime < 900
            info = [kind, st.st_mode & 0o1777, "now" if made_now else int(st.st_mtime)]
            if stat.S_ISREG(kind):
                with open(p, "rb") as f:
                    info += [st.st_size, hashlib.sha256(f.read()).hexdigest()]
                inodes.setdefault(st.st_ino, []).append(rel)
            elif stat.S_ISLNK(kind):
                info.append(os.readlink(p))
            out[rel] = info
    for group in inodes.values():
        for rel in group:
            out[rel].append(tuple(sorted(group)))
    return out


a, b = walk(sys.argv[1]), walk(sys.argv[2])
# device nodes: umoci --rootless leaves an empty file, capsule nothing
devices = set(sys.argv[3:])
for k in devices:
    if k in a and a[k][0] == stat.S_IFREG and a[k][3] == 0 and k not in b:
        del a[k]
diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
for k in diff[:10]:
    print(f"  {k}: umoci {a.get(k)} capsule {b.get(k)}")
sys.exit(1 if diff else 0)
