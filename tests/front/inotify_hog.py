"""Uses up this user's inotify limits, for tests/front/serve_inotify_limit.sh.

inotify_hog.py instances: opens inotify instances until the kernel
refuses one, prints "held N" (the user's fs.inotify.max_user_instances
reached) or "fd-limit N" (this process's own descriptor limit came first:
nothing proven).

inotify_hog.py watches FREE DIR: adds watches (on files it makes in DIR,
the same ones in each of most of the user's instances, a few instances
left to others) until the kernel refuses one (ENOSPC: the user's
fs.inotify.max_user_watches), then removes FREE of them; prints "held N
free FREE", or "not-reached ..." when that could not be done.

Either holds what it has until stdin closes or it is killed.
"""
import ctypes
import errno
import os
import resource
import sys

IN_CLOEXEC, IN_ATTRIB = 0o2000000, 0x4
libc = ctypes.CDLL(None, use_errno=True)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def knob(name):
    with open("/proc/sys/fs/inotify/" + name) as f:
        return int(f.read())


def instances():
    fds, e = [], 0
    while True:
        fd = libc.inotify_init1(IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            break
        fds.append(fd)
    own_limit = e != errno.EMFILE or len(fds) + 16 >= hard
    return "%s %d (%s)" % ("fd-limit" if own_limit else "held", len(fds), errno.errorcode.get(e, e)), fds


def watches(free, d):
    k = knob("max_user_instances") - 8  # left: serve's, the keepers'
    n = knob("max_user_watches") // max(k, 1) + 2
    if k < 1 or n > 50000:
        return "not-reached (limits too large to fill: %d instances, %d files each)" % (k, n), []
    paths = []
    for i in range(n):
        p = os.path.join(d, str(i))
        open(p, "w").close()
        paths.append(p.encode())
    held, fds, e = [], [], 0
    for _ in range(k):
        fd = libc.inotify_init1(IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            break
        fds.append(fd)
        for p in paths:
            wd = libc.inotify_add_watch(fd, p, IN_ATTRIB)
            if wd < 0:
                e = ctypes.get_errno()
                break
            held.append((fd, wd))
        if e:
            break
    if e != errno.ENOSPC:
        return "not-reached (%s after %d watches)" % (errno.errorcode.get(e, e), len(held)), fds
    for fd, wd in held[len(held) - free:]:
        libc.inotify_rm_watch(fd, wd)
    return "held %d free %d" % (len(held) - free, free), fds


said, fds = instances() if sys.argv[1] == "instances" else watches(int(sys.argv[2]), sys.argv[3])
print(said, flush=True)
sys.stdin.read()
