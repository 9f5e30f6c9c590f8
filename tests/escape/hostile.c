/* A hostile tool: each subcommand tries one way out of the sandbox.
 * Exit 0 and "BLOCKED: ..." when the attempt fails as it must, exit 1 and
 * "ESCAPED: ..." when it succeeds. tests/escape/run.sh drives it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <termios.h>
#include <unistd.h>

#include "kernel_probes.h"

static int blocked(const char *what)
{
  printf("BLOCKED: %s (%s)\n", what, strerror(errno));
  fflush(stdout);
  return 0;
}

static int escaped(const char *what)
{
  printf("ESCAPED: %s\n", what);
  return 1;
}

/* the attempt must fail with exactly this errno: the filter's answer, not
 * a bad argument the kernel would have refused anyway */
static int expect_errno(long rc, int want, const char *what)
{
  if (rc >= 0)
    return escaped(what);
  if (errno != want) {
    printf("ESCAPED: %s failed with %s, not the filter's %s\n", what, strerror(errno),
           strerror(want));
    return 1;
  }
  return blocked(what);
}

/* the attempt "succeeded" when rc >= 0 */
#define EXPECT_FAIL(call, what) ((call) >= 0 ? escaped(what) : blocked(what))

static int try_read(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return blocked(path);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? escaped(path) : blocked(path);
}

static struct sockaddr_in loopback(uint16_t port)
{
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  return a;
}

/* A connected socket to 127.0.0.1:port with a 10 s read timeout, or -1. */
static int loopback_connect(uint16_t port)
{
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = loopback(port);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0)
    return -1;
  struct timeval tv = {.tv_sec = 10};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}

/* A listening socket on 127.0.0.1:port, or -1. */
static int loopback_listen(uint16_t port)
{
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = loopback(port);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 8) < 0)
    return -1;
  return s;
}

static int tcp_connect(const char *port)
{
  return EXPECT_FAIL(loopback_connect((uint16_t)atoi(port)), "connect to the host's port");
}

static int abstract_connect(const char *name)
{
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t n = strlen(name);
  memcpy(a.sun_path + 1, name, n);
  return EXPECT_FAIL(connect(s, (struct sockaddr *)&a, (socklen_t)(sizeof(sa_family_t) + 1 + n)),
                     "connect to the host's abstract socket");
}

/* host side helpers: listen and wait to be killed */
static int listen_tcp(const char *port)
{
  if (loopback_listen((uint16_t)atoi(port)) < 0)
    return 2;
  for (;;)
    pause();
}

static int listen_abstract(const char *name)
{
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t n = strlen(name);
  memcpy(a.sun_path + 1, name, n);
  if (bind(s, (struct sockaddr *)&a, (socklen_t)(sizeof(sa_family_t) + 1 + n)) < 0 ||
      listen(s, 8) < 0)
    return 2;
  for (;;)
    pause();
}

static int see_host_process(const char *marker)
{
  DIR *d = opendir("/proc");
  if (!d)
    return blocked("no /proc");
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[300], buf[4096] = "";
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
      continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i++)
      if (!buf[i])
        buf[i] = ' ';
    if (n > 0 && strstr(buf, marker) && !strstr(buf, "see-process")) {
      closedir(d);
      return escaped("a host process is visible in /proc");
    }
  }
  closedir(d);
  errno = ESRCH;
  return blocked("host processes are invisible");
}

static int fork_bomb(void)
{
  int n = 0;
  for (; n < 100000; n++) {
    pid_t p = fork();
    if (p < 0)
      break;
    if (p == 0) {
      pause();
      _exit(0);
    }
  }
  printf("forked %d before failing\n", n);
  /* the children die with the sandbox's pid 1 when this process exits */
  return n < 100000 ? blocked("fork bomb stopped") : escaped("fork bomb ran unchecked");
}

static int memory_bomb(void)
{
  size_t total = 0;
  for (int i = 0; i < 64; i++) { /* up to 1 GiB, touched */
    char *p = malloc(16u << 20);
    if (!p)
      return blocked("allocation refused");
    memset(p, 1, 16u << 20);
    total += 16u << 20;
  }
  printf("allocated %zu MiB\n", total >> 20);
  return escaped("memory bomb ran unchecked");
}

static int nosuid_and_nnp(const char *path)
{
  struct statvfs sv;
  if (statvfs(path, &sv) < 0)
    return blocked("setuid binary absent");
  if (!(sv.f_flag & ST_NOSUID))
    return escaped("setuid bits are honoured on this mount");
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
    return escaped("no_new_privs is not set");
  errno = EPERM;
  return blocked("nosuid mount and no_new_privs");
}

static int socket_probe(int argc, char **argv); /* at the end of the file */

int main(int argc, char **argv)
{
  if (argc < 2)
    return 2;
  const char *cmd = argv[1], *arg = argc > 2 ? argv[2] : "";
  if (!strcmp(cmd, "read"))
    return try_read(arg);
  if (!strcmp(cmd, "write")) {
    int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    return fd >= 0 && write(fd, "pwned", 5) == 5 ? escaped(arg) : blocked(arg);
  }
  if (!strcmp(cmd, "symlink")) { /* symlink LINK TARGET, then read through it */
    if (symlink(argv[3], arg) < 0)
      return blocked("cannot create the link");
    return try_read(arg);
  }
  if (!strcmp(cmd, "hardlink"))
    return EXPECT_FAIL(link(argv[3], arg), "hard link to the canary");
  if (!strcmp(cmd, "mount"))
    return EXPECT_FAIL(mount("tmpfs", "/tmp", "tmpfs", 0, NULL), "mount");
  if (!strcmp(cmd, "bind-mount"))
    return EXPECT_FAIL(mount(arg, "/tmp", NULL, MS_BIND, NULL), "bind mount");
  if (!strcmp(cmd, "unshare"))
    return expect_errno(unshare(CLONE_NEWUSER | CLONE_NEWNS), EPERM, "unshare");
  if (!strcmp(cmd, "setns")) {
    int fd = open("/proc/1/ns/mnt", O_RDONLY);
    return EXPECT_FAIL(fd < 0 ? -1 : setns(fd, 0), "setns");
  }
  if (!strcmp(cmd, "chroot"))
    return EXPECT_FAIL(chroot("/tmp"), "chroot");
  if (!strcmp(cmd, "ptrace"))
    return EXPECT_FAIL(syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, atoi(arg), 0, 0), "ptrace");
  if (!strcmp(cmd, "kill"))
    return EXPECT_FAIL(kill(atoi(arg), SIGKILL), "kill a host process");
  if (!strcmp(cmd, "see-process"))
    return see_host_process(arg);
  if (!strcmp(cmd, "tcp"))
    return tcp_connect(arg);
  if (!strcmp(cmd, "abstract"))
    return abstract_connect(arg);
  if (!strcmp(cmd, "udp")) { /* udp IPV4 PORT: a datagram out (a DNS query would be one) */
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
    if (s < 0)
      return blocked("udp socket");
    if (inet_pton(AF_INET, arg, &a.sin_addr) != 1)
      return 2;
    if (sendto(s, "dns?", 4, 0, (struct sockaddr *)&a, sizeof a) < 0)
      return blocked("udp datagram out of the sandbox");
    return escaped("a udp datagram left the sandbox");
  }
  if (!strcmp(cmd, "netlink"))
    return expect_errno(socket(AF_NETLINK, SOCK_RAW, 4 /* NETLINK_SOCK_DIAG */), EAFNOSUPPORT,
                        "netlink socket"); /* NETLINK_ROUTE alone is offered (getifaddrs) */
  if (!strcmp(cmd, "packet"))
    return EXPECT_FAIL(socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)), "packet socket");
  if (!strcmp(cmd, "raw"))
    return EXPECT_FAIL(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), "raw socket");
  if (!strcmp(cmd, "tiocsti")) {
    char c = 'x';
    return expect_errno(ioctl(0, TIOCSTI, &c), EPERM, "TIOCSTI");
  }
  if (!strcmp(cmd, "keyctl"))
    return expect_errno(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0), EPERM, "keyctl");
  if (!strcmp(cmd, "bpf"))
    return expect_errno(syscall(SYS_bpf, 0, NULL, 0), EPERM, "bpf");
  if (!strcmp(cmd, "io_uring"))
    return expect_errno(syscall(425 /* io_uring_setup */, 8, calloc(1, 120)), EPERM, "io_uring");
  if (!strcmp(cmd, "perf"))
    return expect_errno(syscall(SYS_perf_event_open, calloc(1, 128), 0, -1, -1, 0), EPERM,
                        "perf_event_open");
  if (!strcmp(cmd, "semget")) /* System V semaphores (ipc_mode shared_memory_only) */
    return expect_errno(syscall(SYS_semget, 0 /* IPC_PRIVATE */, 1, 0600), EPERM, "semget");
  if (!strcmp(cmd, "fork-bomb"))
    return fork_bomb();
  if (!strcmp(cmd, "memory-bomb"))
    return memory_bomb();
  if (!strcmp(cmd, "spin"))
    for (;;)
      ;
  if (!strcmp(cmd, "sleep"))
    return sleep(60) == 0 ? escaped("slept past the wall clock") : 0;
  if (!strcmp(cmd, "setuid"))
    return nosuid_and_nnp(arg);
  if (!strcmp(cmd, "mknod"))
    return EXPECT_FAIL(mknod("/tmp/sda", S_IFBLK | 0600, makedev(8, 0)), "mknod a block device");
  if (!strcmp(cmd, "fd")) { /* an fd capsule's caller left open */
    char buf[16];
    return read(atoi(arg), buf, sizeof buf) > 0 ? escaped("read an inherited fd")
                                                : blocked("inherited fd");
  }
  if (!strcmp(cmd, "environ")) { /* environ MARKER: the caller's environment */
    static const char *const files[] = {"/proc/1/environ", "/proc/self/environ"};
    for (int i = 0; i < 2; i++) {
      char buf[65536];
      int fd = open(files[i], O_RDONLY);
      ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
      for (ssize_t k = 0; k < n; k++)
        if (!buf[k])
          buf[k] = ' ';
      if (n > 0) {
        buf[n] = '\0';
        if (strstr(buf, arg))
          return escaped(files[i]);
      }
      if (fd >= 0)
        close(fd);
    }
    errno = EACCES;
    return blocked("the caller's environment");
  }
  if (!strcmp(cmd, "exec")) { /* exec PROGRAM: does it run? */
    pid_t p = fork();
    if (p == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execl(arg, arg, "--version", (char *)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(p, &status, 0);
    errno = EACCES;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? escaped(arg) : blocked(arg);
  }
  if (!strcmp(cmd, "copy-exec")) { /* copy PROGRAM into /tmp and run the copy */
    char cmdline[300];
    snprintf(cmdline, sizeof cmdline, "cp %s /tmp/copy && /tmp/copy --version >/dev/null 2>&1",
             arg);
    errno = EACCES;
    return system(cmdline) == 0 ? escaped("a copy of a blocked command ran")
                                : blocked("copy of a blocked command");
  }
  if (!strcmp(cmd, "echo-tcp")) { /* a host upstream: echo one line per connection */
    int l = loopback_listen((uint16_t)atoi(arg));
    if (l < 0)
      return 2;
    for (;;) {
      int c = accept(l, NULL, NULL);
      char buf[256];
      ssize_t n = read(c, buf, sizeof buf);
      if (n > 0 && write(c, buf, (size_t)n) < 0) {
      }
      close(c);
    }
  }
  if (!strcmp(cmd, "via-proxy")) { /* via-proxy HOST:PORT: CONNECT, then echo */
    int s = loopback_connect(3128);
    if (s < 0)
      return blocked("no proxy");
    char req[300], buf[512];
    int n = snprintf(req, sizeof req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", arg, arg);
    if (write(s, req, (size_t)n) < 0)
      return 2;
    ssize_t got = read(s, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    printf("proxy said: %.*s\n", (int)strcspn(buf, "\r"), buf);
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0) {
      char *body = strstr(buf, "\r\n\r\n");
      printf("%s", body ? body + 4 : "");
      errno = EACCES;
      return blocked("the proxy refused");
    }
    if (write(s, "ping\n", 5) < 0)
      return 2;
    got = read(s, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    if (strncmp(buf, "ping", 4) != 0) { /* a TLS-intercepting proxy answers with TLS */
      errno = EACCES;
      return blocked("the tunnel did not carry plain bytes to the host");
    }
    printf("TUNNEL: %s", buf);
    return 1; /* reached the host through the proxy */
  }
  if (!strcmp(cmd, "http-via-proxy")) { /* http-via-proxy METHOD URL [HOST-HEADER] */
    int s = loopback_connect(3128);
    if (s < 0)
      return blocked("no proxy");
    char req[600], buf[2048];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 4\r\n\r\nbody",
                     arg, argv[3], argc > 4 ? argv[4] : "ignored.example");
    if (write(s, req, (size_t)n) < 0)
      return 2;
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(s, buf + got, sizeof buf - 1 - got)) > 0)
      got += (size_t)r;
    buf[got] = '\0';
    printf("%s\n", buf);
    if (strncmp(buf, "HTTP/1.1 403", 12) == 0 || strncmp(buf, "HTTP/1.1 400", 12) == 0) {
      errno = EACCES;
      return blocked("the proxy refused");
    }
    return 1; /* the request reached the upstream */
  }
  if (!strcmp(cmd, "listen-tcp"))
    return listen_tcp(arg);
  if (!strcmp(cmd, "listen-abstract"))
    return listen_abstract(arg);
  /* socket families and unix sockets (seccomp.c, supervise.c) */
  if (!strncmp(cmd, "family", 6) || !strncmp(cmd, "unix-", 5) || !strcmp(cmd, "getifaddrs") ||
      !strcmp(cmd, "tcp-self"))
    return socket_probe(argc, argv);
  int k = inet_probe(argc, argv); /* inet_probes.c */
  if (k >= 0)
    return k;
  k = kernel_probe(argc, argv); /* kernel_probes.c */
  return k >= 0 ? k : 2;
}

/* ---- socket families and unix sockets ---- */

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* family NAME: a socket of a family the sandbox must not offer; the
 * filter's EAFNOSUPPORT, not the kernel's own refusal of a bad argument */
static int family_probe(const char *name)
{
  static const struct {
    const char *name;
    long family;
    int type;
    long protocol;
    bool pair;
  } probes[] = {
      {"vsock", AF_VSOCK, SOCK_STREAM, 0, false},
      {"vsock-dgram", AF_VSOCK, SOCK_DGRAM, 0, false},
      /* the kernel reads the family as an int: the upper half of the
       * register must not slip a refused family past the filter */
      {"vsock-high-bits", (long)(0x100000000ull | AF_VSOCK), SOCK_STREAM, 0, false},
      {"packet", AF_PACKET, SOCK_DGRAM, 0, false},
      {"netlink-audit", AF_NETLINK, SOCK_RAW, NETLINK_AUDIT, false},
      {"netlink-uevent", AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT, false},
      {"netlink-diag", AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG, false},
      {"netlink-high-bits", AF_NETLINK, SOCK_RAW, (long)(0x100000000ull | NETLINK_AUDIT), false},
      {"bluetooth", AF_BLUETOOTH, SOCK_STREAM, 0, false},
      {"alg", AF_ALG, SOCK_SEQPACKET, 0, false},
      {"xdp", AF_XDP, SOCK_RAW, 0, false},
      {"tipc", AF_TIPC, SOCK_RDM, 0, false},
      {"can", AF_CAN, SOCK_RAW, 1, false},
      {"rds", AF_RDS, SOCK_SEQPACKET, 0, false},
      {"key", AF_KEY, SOCK_RAW, 2, false},
      {"unspec", AF_UNSPEC, SOCK_STREAM, 0, false},
      {"socketpair-vsock", AF_VSOCK, SOCK_STREAM, 0, true},
      {"socketpair-tipc", AF_TIPC, SOCK_SEQPACKET, 0, true},
  };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    if (strcmp(probes[i].name, name))
      continue;
    long rc;
    int sv[2];
    if (probes[i].pair)
      rc = syscall(SYS_socketpair, probes[i].family, probes[i].type, probes[i].protocol, sv);
    else
      rc = syscall(SYS_socket, probes[i].family, probes[i].type, probes[i].protocol);
    return expect_errno(rc, EAFNOSUPPORT, name);
  }
  return 2;
}

/* getifaddrs (NETLINK_ROUTE) keeps working: the one netlink protocol left */
static int getifaddrs_probe(void)
{
  struct ifaddrs *ifa = NULL;
  if (getifaddrs(&ifa) < 0) {
    printf("BROKEN: getifaddrs: %s\n", strerror(errno));
    return 1;
  }
  int n = 0;
  for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
    n++;
  freeifaddrs(ifa);
  printf("WORKS: getifaddrs (%d entries)\n", n);
  return 0;
}

static socklen_t unix_address(struct sockaddr_un *a, const char *path)
{
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  snprintf(a->sun_path, sizeof a->sun_path, "%s", path);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(a->sun_path) + 1);
}

/* unix-listen PATH: a host service on a pathname socket anyone may connect
 * to (0777); greets each connection, answers each datagram */
static int unix_listen(const char *path, int type)
{
  struct sockaddr_un a;
  socklen_t len = unix_address(&a, path);
  unlink(path);
  int s = socket(AF_UNIX, type, 0);
  if (s < 0 || bind(s, (struct sockaddr *)&a, len) < 0 || chmod(path, 0777) < 0)
    return 2;
  if (type == SOCK_DGRAM)
    for (;;)
      pause();
  if (listen(s, 64) < 0)
    return 2;
  for (;;) { /* the greeting names the peer's uid, as SO_PEERCRED gives it */
    int c = accept(s, NULL, NULL);
    struct ucred cred = {.uid = (uid_t)-1};
    socklen_t cl = sizeof cred;
    getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
    char hello[64];
    int n = snprintf(hello, sizeof hello, "hello uid=%d\n", (int)cred.uid);
    if (c >= 0 && write(c, hello, (size_t)n) < 0) {
    }
    close(c);
  }
}

/* A connection to the pathname socket at path, greeted: >= 0 when the
 * service was reached. */
static int unix_reach(const char *path, int type)
{
  struct sockaddr_un a;
  socklen_t len = unix_address(&a, path);
  int s = socket(AF_UNIX, type, 0);
  if (s < 0)
    return -1;
  if (connect(s, (struct sockaddr *)&a, len) < 0) {
    int e = errno;
    close(s);
    errno = e;
    return -1;
  }
  return s;
}

/* unix-connect PATH: the host's service behind a pathname socket */
static int unix_connect_probe(const char *path)
{
  int s = unix_reach(path, SOCK_STREAM);
  if (s < 0)
    return blocked("connect to the host's unix socket");
  char buf[16] = "";
  if (read(s, buf, sizeof buf - 1) > 0)
    printf("the service said: %s", buf);
  return escaped("connected to the host's unix socket");
}

/* unix-connect-ok PATH UID: a granted socket, reached; the service sees
 * the tool's uid as its peer (UID), never capsule's */
static int unix_connect_ok(const char *path, const char *uid)
{
  int s = unix_reach(path, SOCK_STREAM);
  char buf[64] = "", want[64];
  if (s < 0 || read(s, buf, sizeof buf - 1) <= 0) {
    printf("BROKEN: %s: %s\n", path, strerror(errno));
    return 1;
  }
  snprintf(want, sizeof want, "hello uid=%s\n", uid);
  if (strcmp(buf, want)) {
    printf("BROKEN: the service saw another peer: %s", buf);
    return 1;
  }
  printf("WORKS: the granted socket said %s", buf);
  return 0;
}

/* unix-dgram PATH [raw]: a datagram to the host's socket, with sendto's
 * address (AF_UNIX SOCK_RAW is a datagram socket too) */
static int unix_dgram_probe(const char *path, const char *how)
{
  struct sockaddr_un a;
  socklen_t len = unix_address(&a, path);
  int s = socket(AF_UNIX, strcmp(how, "raw") ? SOCK_DGRAM : SOCK_RAW, 0);
  int sv[2];
  if (s < 0 && socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0)
    s = sv[0]; /* a socketpair's end can name another destination too */
  if (s < 0)
    return blocked("no unix datagram socket");
  return EXPECT_FAIL(sendto(s, "x", 1, 0, (struct sockaddr *)&a, len),
                     "a datagram to the host's unix socket");
}

/* unix-relative DIR NAME: the same socket by a path relative to the
 * working directory */
static int unix_relative_probe(const char *dir, const char *name)
{
  if (chdir(dir) < 0)
    return blocked("cannot enter the directory");
  int s = unix_reach(name, SOCK_STREAM);
  return s < 0 ? blocked("relative connect") : escaped("connected by a relative path");
}

/* unix-symlink LINK PATH: a link in a writable place to the host's socket */
static int unix_symlink_probe(const char *link, const char *path)
{
  unlink(link);
  if (symlink(path, link) < 0)
    return blocked("cannot create the link");
  int s = unix_reach(link, SOCK_STREAM);
  return s < 0 ? blocked("connect through a symlink") : escaped("connected through a symlink");
}

/* unix-self: a socket the tool makes in its /tmp works */
static int unix_self_probe(void)
{
  struct sockaddr_un a;
  socklen_t len = unix_address(&a, "/tmp/self.sock");
  unlink(a.sun_path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&a, len) < 0 || listen(l, 4) < 0) {
    printf("BROKEN: cannot listen in /tmp: %s\n", strerror(errno));
    return 1;
  }
  int s = unix_reach("/tmp/self.sock", SOCK_STREAM);
  int c = s < 0 ? -1 : accept(l, NULL, NULL);
  int sv[2];
  bool pair = socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0;
  if (c < 0 || !pair) {
    printf("BROKEN: the tool's own unix socket: %s\n", strerror(errno));
    return 1;
  }
  printf("WORKS: the tool's own unix socket and a socketpair\n");
  return 0;
}

struct race {
  struct sockaddr_un *addr;
  const char *decoy, *target;
  volatile int stop;
};

static void *flip_address(void *p)
{
  struct race *r = p;
  while (!r->stop) {
    snprintf(r->addr->sun_path, sizeof r->addr->sun_path, "%s", r->target);
    snprintf(r->addr->sun_path, sizeof r->addr->sun_path, "%s", r->decoy);
  }
  return NULL;
}

/* unix-race DECOY PATH: another thread rewrites the address between the
 * check and the use, while this one connects again and again */
static int unix_race_probe(const char *decoy, const char *path)
{
  static struct sockaddr_un a;
  unix_address(&a, decoy);
  struct race r = {.addr = &a, .decoy = decoy, .target = path};
  pthread_t t;
  if (pthread_create(&t, NULL, flip_address, &r) != 0)
    return 2;
  int escapes = 0;
  for (int i = 0; i < 2000 && !escapes; i++) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
      char buf[8] = "";
      escapes += read(s, buf, sizeof buf) > 0; /* only the host's service greets */
    }
    close(s);
  }
  r.stop = 1;
  pthread_join(t, NULL);
  errno = EACCES;
  return escapes ? escaped("won the race to the host's socket") : blocked("raced connects");
}

static int socket_probe(int argc, char **argv)
{
  const char *cmd = argv[1], *arg = argc > 2 ? argv[2] : "", *arg2 = argc > 3 ? argv[3] : "";
  if (!strcmp(cmd, "family"))
    return family_probe(arg);
  if (!strcmp(cmd, "getifaddrs"))
    return getifaddrs_probe();
  if (!strcmp(cmd, "unix-listen"))
    return unix_listen(arg, SOCK_STREAM);
  if (!strcmp(cmd, "unix-listen-dgram"))
    return unix_listen(arg, SOCK_DGRAM);
  if (!strcmp(cmd, "unix-connect"))
    return unix_connect_probe(arg);
  if (!strcmp(cmd, "unix-connect-ok"))
    return unix_connect_ok(arg, arg2);
  if (!strcmp(cmd, "unix-dgram"))
    return unix_dgram_probe(arg, arg2);
  if (!strcmp(cmd, "unix-relative"))
    return unix_relative_probe(arg, arg2);
  if (!strcmp(cmd, "unix-symlink"))
    return unix_symlink_probe(arg, arg2);
  if (!strcmp(cmd, "unix-self"))
    return unix_self_probe();
  if (!strcmp(cmd, "unix-race"))
    return unix_race_probe(arg, arg2);
  if (!strcmp(cmd, "tcp-self")) { /* tcp-self PORT: bind may be granted, connect is not */
    int l = loopback_listen((uint16_t)atoi(arg));
    if (l < 0)
      return blocked("cannot listen (not granted)");
    return EXPECT_FAIL(loopback_connect((uint16_t)atoi(arg)), "connect to a port not granted");
  }
  return 2;
}
