/* exec_strategy "supervised": capability expansion, as nono's supervisor
 * does it on Linux (its crates/nono-cli/src/exec_strategy/supervisor_linux.rs
 * and docs/cli/features/supervisor.mdx read; this is capsule's own code).
 * Every open of the command (open, openat, openat2, creat) reaches capsule
 * as a seccomp user notification; what happens to it:
 *   1. The path is read once out of the tool's memory and made absolute
 *      (its working directory, or the directory fd, read from /proc).
 *   2. When it exists in the sandbox's view (looked up inside the
 *      sandbox's root, /proc/PID/root, with RESOLVE_IN_ROOT), or the open
 *      is anything expansion does not serve (/proc, /sys, /dev, the
 *      system directories /etc, /usr, /lib*, /bin, /sbin, O_EXCL
 *      creation, O_TMPFILE, openat2 with resolve flags, a directory, a
 *      device), the kernel continues the tool's own open
 *      (SECCOMP_USER_NOTIF_FLAG_CONTINUE): continuing is safe here because
 *      the tool's open then meets the mount tree and Landlock as it would
 *      have anyway; whatever the tool rewrites in its memory meanwhile
 *      buys it nothing it could not open itself.
 *   3. Otherwise, when the host holds a regular file at that path, it is
 *      an expansion request: opened O_PATH by capsule (with the caller's
 *      rights), named by the real path of that handle, refused unasked
 *      under a deny entry or capsule's state, answered from this run's
 *      memory of earlier decisions about the same file, refused unasked
 *      past the prompts' rate (a token bucket: 10 a second, a burst of 5,
 *      nono's figures) or with 5 questions waiting already, else put to
 *      the operator (expand_ask, in a thread of its own, one question at
 *      a time). On approval the handle is
 *      reopened with the tool's flags and the descriptor injected as the
 *      open's result (SECCOMP_IOCTL_NOTIF_ADDFD, SECCOMP_ADDFD_FLAG_SEND).
 *      Every decision goes to expand_record (the audit).
 * Without Landlock no expansion is made (each is refused unasked): an
 * injected descriptor could be reopened through /proc/self/fd with more
 * access than approved, and only Landlock holds the file's path then. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "sandbox/mount_plan.h"
#include "sandbox/supervise_internal.h"

#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif

#define RATE_PER_S 10.0
#define RATE_BURST 5.0
#define MAX_QUESTIONS 5 /* waiting their turn: the bucket bounds the rate, this the depth */
#define CONTINUE_OPEN 1 /* classify: let the kernel continue the tool's open */

static const char *const verdict_names[] = {
    [SANDBOX_EXPAND_APPROVED] = "approved",         [SANDBOX_EXPAND_DENIED] = "denied",
    [SANDBOX_EXPAND_TIMED_OUT] = "timed-out",       [SANDBOX_EXPAND_UNASKED] = "unasked",
    [SANDBOX_EXPAND_RATE_LIMITED] = "rate-limited", [SANDBOX_EXPAND_PROTECTED] = "protected",
};

const char *sandbox_expand_verdict_name(enum sandbox_expand_verdict v)
{
  return (size_t)v < ARRAY_SIZE(verdict_names) ? verdict_names[v] : "denied";
}

bool supervise_is_open(int nr)
{
#ifdef __NR_open
  if (nr == __NR_open || nr == __NR_creat)
    return true;
#endif
  return nr == __NR_openat || nr == __NR_openat2;
}

static void push_protected(struct supervise *sup, const char *path)
{
  if (!path || !*path)
    return;
  _cleanup_free_ char *expanded = sandbox_expand_path(path);
  char *real = realpath(expanded, NULL);
  sup->protected = cap_xrealloc(sup->protected, (sup->n_protected + 1) * sizeof *sup->protected);
  /* one that does not exist yet is held by its name */
  sup->protected[sup->n_protected++] = real ? real : cap_xstrdup(expanded);
}

int supervise_open_prepare(struct supervise *sup, const struct cap_spec *spec,
                           const struct sandbox_options *opt)
{
  sup->ask = opt->expand_ask;
  sup->record = opt->expand_record;
  sup->ctx = opt->expand_ctx;
  pthread_mutex_init(&sup->ask_lock, NULL);
  pthread_mutex_init(&sup->memory_lock, NULL);
  sup->tokens = RATE_BURST;
  sup->refilled_ms = cap_now_ms(CLOCK_MONOTONIC);
  for (size_t i = 0; i < spec->deny.len; i++)
    push_protected(sup, spec->deny.v[i]);
  for (size_t i = 0; i < opt->n_hidden; i++)
    push_protected(sup, opt->hidden[i]);
  return 0;
}

void supervise_open_free(struct supervise *sup)
{
  for (size_t i = 0; i < sup->n_protected; i++)
    free(sup->protected[i]);
  free(sup->protected);
  free(sup->memory);
  if (sup->traps & SUPERVISE_TRAP_OPEN) {
    pthread_mutex_destroy(&sup->ask_lock);
    pthread_mutex_destroy(&sup->memory_lock);
  }
}

/* ---- reading the request ---- */

struct open_call {
  int dirfd;
  uint64_t path_addr;
  int flags;
  bool constrained; /* openat2 with resolve flags: the tool's own rules */
};

static int read_tool(pid_t pid, uint64_t addr, void *out, size_t len)
{
  struct iovec local = {.iov_base = out, .iov_len = len};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  return n == (ssize_t)len ? 0 : -EFAULT;
}

/* A NUL-terminated string of the tool's, read a page at a time (the next
 * page may not be mapped). */
static int read_tool_string(pid_t pid, uint64_t addr, char *out, size_t size)
{
  size_t got = 0;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  while (got + 1 < size) {
    uint64_t at = addr + got;
    size_t chunk = page - (size_t)(at % page);
    if (chunk > size - 1 - got)
      chunk = size - 1 - got;
    if (read_tool(pid, at, out + got, chunk) < 0)
      return -EFAULT;
    if (memchr(out + got, '\0', chunk))
      return 0;
    got += chunk;
  }
  return -ENAMETOOLONG;
}

static bool open_call_of(const struct seccomp_notif *req, struct open_call *c)
{
  const __u64 *a = req->data.args;
  *c = (struct open_call){.dirfd = AT_FDCWD};
#ifdef __NR_open
  if (req->data.nr == __NR_open || req->data.nr == __NR_creat) {
    c->path_addr = a[0];
    c->flags = req->data.nr == __NR_creat ? O_CREAT | O_WRONLY | O_TRUNC : (int)a[1];
    return true;
  }
#endif
  c->dirfd = (int)(uint32_t)a[0];
  c->path_addr = a[1];
  if (req->data.nr == __NR_openat) {
    c->flags = (int)a[2];
    return true;
  }
  struct open_how how = {0};
  if (a[3] < sizeof how || read_tool((pid_t)req->pid, a[2], &how, sizeof how) < 0)
    return false;
  c->flags = (int)how.flags;
  c->constrained = how.resolve != 0;
  return true;
}

/* The path made absolute as the tool sees it: its working directory or
 * the directory fd, read from /proc (a path in the sandbox's mount tree). */
static int absolute_path(pid_t pid, const struct open_call *c, const char *path, char *out,
                         size_t size)
{
  if (path[0] == '/')
    return snprintf(out, size, "%s", path) < (int)size ? 0 : -ENAMETOOLONG;
  char link[64], base[4096];
  if (c->dirfd == AT_FDCWD)
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)pid);
  else
    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, c->dirfd);
  ssize_t n = readlink(link, base, sizeof base - 1);
  if (n <= 0 || base[0] != '/')
    return -ENOENT;
  base[n] = '\0';
  return snprintf(out, size, "%s%s%s", base, n > 1 ? "/" : "", path) < (int)size ? 0
                                                                                 : -ENAMETOOLONG;
}

static bool under(const char *path, const char *dir)
{
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return true;
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Kernel interfaces and devices are never expanded (/proc/self there
 * would be capsule's), nor the system directories: programs probe them
 * at every start (locale aliases, NSS, configuration), and a question per
 * probe would bury the ones that matter; the sandbox's view of them is
 * the grants' (the system set), and a wider one is granted, not asked. */
static bool kernel_place(const char *path)
{
  static const char *const places[] = {"/proc", "/sys",   "/dev",   "/etc", "/usr",
                                       "/lib",  "/lib32", "/lib64", "/bin", "/sbin"};
  for (size_t i = 0; i < ARRAY_SIZE(places); i++)
    if (under(path, places[i]))
      return true;
  return false;
}

/* Whether the path exists in the sandbox's view (or is anything but
 * missing there): then the tool's own open decides. */
static bool in_view(pid_t pid, const char *path, bool nofollow)
{
  char root[64];
  snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
  _cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return true;
  struct open_how how = {.flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
                         .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(__NR_openat2, rootfd, path, &how, sizeof how);
  if (fd >= 0)
    close(fd);
  return fd >= 0 || (errno != ENOENT && errno != ENOTDIR);
}

static bool kernel_fs(int fd)
{
  static const long types[] = {PROC_SUPER_MAGIC,    SYSFS_MAGIC,   CGROUP_SUPER_MAGIC,
                               CGROUP2_SUPER_MAGIC, DEBUGFS_MAGIC, SECURITYFS_MAGIC,
                               TRACEFS_MAGIC,       BPF_FS_MAGIC};
  struct statfs sf;
  if (fstatfs(fd, &sf) < 0)
    return true;
  for (size_t i = 0; i < ARRAY_SIZE(types); i++)
    if ((long)sf.f_type == types[i])
      return true;
  return false;
}

/* One expansion request, from classification to its answer. */
struct expansion {
  struct supervise *sup;
  uint64_t id;
  int pid;
  int handle; /* O_PATH, capsule's own */
  int flags;  /* the tool's */
  struct stat st;
  unsigned want; /* SUPERVISE_READ | SUPERVISE_WRITE */
  char comm[32];
  char asked[4096];
  char path[4096];
};

static unsigned access_bits(int flags)
{
  if (flags & O_PATH)
    return SUPERVISE_READ;
  switch (flags & O_ACCMODE) {
  case O_RDONLY: return flags & O_TRUNC ? SUPERVISE_READ | SUPERVISE_WRITE : SUPERVISE_READ;
  case O_WRONLY: return SUPERVISE_WRITE;
  default: return SUPERVISE_READ | SUPERVISE_WRITE;
  }
}

static enum cap_access access_of(unsigned bits)
{
  return bits == SUPERVISE_READ    ? CAP_ACCESS_READ
         : bits == SUPERVISE_WRITE ? CAP_ACCESS_WRITE
                                   : CAP_ACCESS_READWRITE;
}

/* Steps 1 to 3 above: CONTINUE_OPEN, 0 with e filled (an expansion), or
 * -errno to answer. */
static int classify(const struct seccomp_notif *req, struct expansion *e)
{
  struct open_call c;
  char path[4096];
  pid_t pid = (pid_t)req->pid;
  if (!open_call_of(req, &c) || read_tool_string(pid, c.path_addr, path, sizeof path) < 0)
    return CONTINUE_OPEN; /* the kernel reads it again and answers as it does */
  if (c.constrained || (c.flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL) ||
      (c.flags & O_TMPFILE) == O_TMPFILE || (c.flags & O_DIRECTORY) || !path[0])
    return CONTINUE_OPEN;
  bool nofollow = (c.flags & O_NOFOLLOW) != 0;
  if (absolute_path(pid, &c, path, e->asked, sizeof e->asked) < 0 || kernel_place(e->asked) ||
      in_view(pid, e->asked, nofollow))
    return CONTINUE_OPEN;
  e->handle = open(e->asked, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
  if (e->handle < 0 || fstat(e->handle, &e->st) < 0 || !S_ISREG(e->st.st_mode) ||
      kernel_fs(e->handle))
    return CONTINUE_OPEN; /* missing on the host too, or not a file: as the tool's own */
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", e->handle);
  ssize_t n = readlink(link, e->path, sizeof e->path - 1);
  if (n <= 0)
    return -EACCES;
  e->path[n] = '\0';
  e->flags = c.flags;
  e->want = access_bits(c.flags);
  e->pid = (int)pid;
  snprintf(link, sizeof link, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(link, "re");
  if (!f || !fgets(e->comm, sizeof e->comm, f))
    e->comm[0] = '\0';
  e->comm[strcspn(e->comm, "\n")] = '\0';
  if (f)
    fclose(f);
  return 0;
}

/* ---- deciding ---- */

/* Whether a directory on the way to path (a real path) holds a state key
 * and database: capsule state, whoever made it, at whatever depth (the
 * mount plan masks those it finds below a grant, but knows no names; a
 * masked file is missing from the sandbox's view and would be asked). */
static bool inside_state(const char *path)
{
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *slash = strrchr(dir, '/'); slash; slash = strrchr(dir, '/')) {
    *slash = '\0';
    _cleanup_close_ int fd = open(dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat key, db;
    if (fd >= 0 && fstatat(fd, "key", &key, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(key.st_mode) &&
        fstatat(fd, "state.db", &db, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(db.st_mode))
      return true;
  }
  return false;
}

static bool is_protected(const struct supervise *sup, const char *path)
{
  for (size_t i = 0; i < sup->n_protected; i++)
    if (under(path, sup->protected[i]))
      return true;
  return inside_state(path);
}

/* What this run decided before about e's file: APPROVED, DENIED, or -1. */
static int remembered(const struct supervise *sup, const struct expansion *e)
{
  for (size_t i = 0; i < sup->n_memory; i++) {
    const struct expand_memory *m = &sup->memory[i];
    if (m->dev != e->st.st_dev || m->ino != e->st.st_ino)
      continue;
    if (m->denied & e->want)
      return SANDBOX_EXPAND_DENIED;
    if ((m->allowed & e->want) == e->want)
      return SANDBOX_EXPAND_APPROVED;
  }
  return -1;
}

static void remember(struct supervise *sup, const struct expansion *e, bool allowed)
{
  struct expand_memory *m = NULL;
  for (size_t i = 0; i < sup->n_memory && !m; i++)
    if (sup->memory[i].dev == e->st.st_dev && sup->memory[i].ino == e->st.st_ino)
      m = &sup->memory[i];
  if (!m) {
    if (sup->n_memory == sup->cap_memory) {
      sup->cap_memory = sup->cap_memory ? 2 * sup->cap_memory : 16;
      sup->memory = cap_xrealloc(sup->memory, sup->cap_memory * sizeof *sup->memory);
    }
    m = &sup->memory[sup->n_memory++];
    *m = (struct expand_memory){.dev = e->st.st_dev, .ino = e->st.st_ino};
  }
  *(allowed ? &m->allowed : &m->denied) |= e->want;
}

/* From any thread of the pool: under memory_lock. A token and a place in
 * the queue of questions (given back by question_done). */
static bool take_token(struct supervise *sup)
{
  pthread_mutex_lock(&sup->memory_lock);
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  sup->tokens += (double)(now - sup->refilled_ms) * RATE_PER_S / 1000.0;
  if (sup->tokens > RATE_BURST)
    sup->tokens = RATE_BURST;
  sup->refilled_ms = now;
  bool ok = sup->tokens >= 1.0 && sup->questions < MAX_QUESTIONS;
  if (ok) {
    sup->tokens -= 1.0;
    sup->questions++;
  }
  pthread_mutex_unlock(&sup->memory_lock);
  return ok;
}

static void question_done(struct supervise *sup)
{
  pthread_mutex_lock(&sup->memory_lock);
  sup->questions--;
  pthread_mutex_unlock(&sup->memory_lock);
}

static void record(const struct expansion *e, enum sandbox_expand_verdict v)
{
  const struct supervise *sup = e->sup;
  if (!sup->record)
    return;
  struct sandbox_expansion req = {.pid = e->pid,
                                  .comm = e->comm,
                                  .path = e->path,
                                  .asked = e->asked,
                                  .access = access_of(e->want)};
  sup->record(sup->ctx, &req, v);
}

/* The approved file reopened with the tool's flags and injected as the
 * result of its open. */
static void grant(const struct expansion *e)
{
  const struct supervise *sup = e->sup;
  int keep = O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_DIRECT | O_NOATIME | O_PATH |
             O_LARGEFILE | O_TRUNC | O_NOCTTY;
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", e->handle);
  _cleanup_close_ int fd = open(link, (e->flags & keep) | O_CLOEXEC);
  if (fd < 0) {
    supervise_answer(sup, e->id, -errno);
    return;
  }
  struct seccomp_notif_addfd add = {.id = e->id,
                                    .flags = SECCOMP_ADDFD_FLAG_SEND,
                                    .srcfd = (uint32_t)fd,
                                    .newfd_flags = (uint32_t)(e->flags & O_CLOEXEC)};
  if (ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) >= 0 || errno != EINVAL)
    return;      /* sent; or the task is gone (ENOENT) */
  add.flags = 0; /* before 5.14: add, then answer with the number */
  int n = ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
  supervise_answer(sup, e->id, n < 0 ? -errno : n);
}

static void finish(struct expansion *e)
{
  if (e->handle >= 0)
    close(e->handle);
  free(e);
}

/* Step 3's question, in a thread of its own: one at a time. */
static void *ask_worker(void *p)
{
  struct expansion *e = p;
  struct supervise *sup = e->sup;
  pthread_mutex_lock(&sup->ask_lock);
  pthread_mutex_lock(&sup->memory_lock);
  int known = remembered(sup, e); /* decided while this one waited */
  pthread_mutex_unlock(&sup->memory_lock);
  enum sandbox_expand_verdict v = SANDBOX_EXPAND_UNASKED;
  if (known >= 0) {
    v = (enum sandbox_expand_verdict)known;
  } else if (supervise_still_waiting(sup, e->id)) {
    struct sandbox_expansion req = {.pid = e->pid,
                                    .comm = e->comm,
                                    .path = e->path,
                                    .asked = e->asked,
                                    .access = access_of(e->want)};
    v = sup->ask ? sup->ask(sup->ctx, &req) : SANDBOX_EXPAND_UNASKED;
    pthread_mutex_lock(&sup->memory_lock);
    remember(sup, e, v == SANDBOX_EXPAND_APPROVED);
    pthread_mutex_unlock(&sup->memory_lock);
    record(e, v);
  }
  pthread_mutex_unlock(&sup->ask_lock);
  question_done(sup);
  if (v == SANDBOX_EXPAND_APPROVED && supervise_still_waiting(sup, e->id))
    grant(e);
  else
    supervise_answer(sup, e->id, -EACCES);
  finish(e);
  supervise_worker_done(sup);
  return NULL;
}

void supervise_open_handle(struct supervise *sup, const struct seccomp_notif *req)
{
  struct expansion *e = cap_xcalloc(1, sizeof *e);
  e->sup = sup;
  e->id = req->id;
  e->handle = -1;
  int r = classify(req, e);
  /* the path read was the asking task's only while it still waits */
  if (r == CONTINUE_OPEN || (r == 0 && !supervise_still_waiting(sup, req->id))) {
    struct seccomp_notif_resp resp = {.id = req->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
    ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    finish(e);
    return;
  }
  if (r < 0) {
    supervise_answer(sup, req->id, r);
    finish(e);
    return;
  }
  pthread_mutex_lock(&sup->memory_lock);
  int known = remembered(sup, e);
  pthread_mutex_unlock(&sup->memory_lock);
  enum sandbox_expand_verdict v = SANDBOX_EXPAND_UNASKED;
  bool ask = false;
  if (!sup->landlock)
    record(e, v);
  else if (is_protected(sup, e->path))
    record(e, v = SANDBOX_EXPAND_PROTECTED);
  else if (known >= 0)
    v = (enum sandbox_expand_verdict)known;
  else if (!take_token(sup))
    record(e, v = SANDBOX_EXPAND_RATE_LIMITED);
  else
    ask = true;
  if (ask && supervise_spawn(sup, ask_worker, e))
    return;
  if (ask)
    question_done(sup);
  if (v == SANDBOX_EXPAND_APPROVED)
    grant(e);
  else
    supervise_answer(sup, req->id, ask ? -EAGAIN : -EACCES);
  finish(e);
}
