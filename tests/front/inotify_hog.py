"""Holds this user's inotify instances, for tests/front/serve_inotify_limit.sh.

inotify_hog.py: opens inotify instances until the kernel refuses one,
prints "held N" (the user's fs.inotify.max_user_instances reached) or
"fd-limit N" (this process's own descriptor limit came first: nothing
proven), then holds them until stdin closes or it is killed.
"""
import ctypes
import errno
import resource
import sys

libc = ctypes.CDLL(None, use_errno=True)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = []
while True:
    fd = libc.inotify_init1(0o2000000)  # IN_CLOEXEC
    if fd < 0:
        e = ctypes.get_errno()
        break
    fds.append(fd)
own_limit = e != errno.EMFILE or len(fds) + 16 >= hard
print("%s %d (%s)" % ("fd-limit" if own_limit else "held", len(fds), errno.errorcode.get(e, e)),
      flush=True)
sys.stdin.read()
