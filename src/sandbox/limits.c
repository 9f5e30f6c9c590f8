#include "sandbox/limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/procstat.h"
#include "core/text.h"

#define CGROOT "/sys/fs/cgroup"
#define CPU_PERIOD_US 100000
#define TICK_MS 200

enum { V1_MEMORY, V1_PIDS, V1_CPU, V1_CPUACCT };
static const char *const v1_controllers[] = {"memory", "pids", "cpu", "cpuacct"};

static int write_text(const char *dir, const char *file, const char *text)
{
  char path[800];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  return cap_write_text(path, text);
}

static int read_text(const char *dir, const char *file, char *buf, size_t size)
{
  char path[800];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = read(fd, buf, size - 1);
  if (n < 0)
    return -errno;
  buf[n] = '\0';
  return 0;
}

static void note_unenforced(struct sandbox_limits *lim, const char *what)
{
  size_t len = strlen(lim->unenforced);
  snprintf(lim->unenforced + len, sizeof lim->unenforced - len, "%s%s", len ? ", " : "", what);
}

/* cgroup v2: a child of our own cgroup, if we may create one there and the
 * memory and pids controllers reach it. */
static bool try_cgroup2(struct sandbox_limits *lim, const struct cap_spec *spec)
{
  char buf[512];
  if (read_text(CGROOT, "cgroup.controllers", buf, sizeof buf) < 0)
    return false;
  char self[600] = "";
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f)
    return false;
  char line[600];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "0::", 3) == 0)
      snprintf(self, sizeof self, "%s", line + 3);
  fclose(f);
  self[strcspn(self, "\n")] = '\0';
  char parent[640];
  snprintf(parent, sizeof parent, CGROOT "%s", strcmp(self, "/") == 0 ? "" : self);
  if (read_text(parent, "cgroup.subtree_control", buf, sizeof buf) < 0 || !strstr(buf, "memory") ||
      !strstr(buf, "pids"))
    return false;
  snprintf(lim->v2, sizeof lim->v2, "%s/capsule-%d", parent, (int)getpid());
  if (mkdir(lim->v2, 0755) < 0) {
    lim->v2[0] = '\0';
    return false;
  }
  char num[64];
  if (spec->limits.memory_bytes) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)spec->limits.memory_bytes);
    lim->memory_enforced = write_text(lim->v2, "memory.max", num) == 0;
    write_text(lim->v2, "memory.swap.max", "0");
    write_text(lim->v2, "memory.oom.group", "1");
  }
  if (spec->limits.pids) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)spec->limits.pids);
    lim->pids_enforced = write_text(lim->v2, "pids.max", num) == 0;
  }
  if (spec->limits.cpu_fraction > 0) {
    snprintf(num, sizeof num, "%lld %d", (long long)(spec->limits.cpu_fraction * CPU_PERIOD_US),
             CPU_PERIOD_US);
    lim->cpu_enforced = write_text(lim->v2, "cpu.max", num) == 0;
  }
  lim->kind = LIMITS_CGROUP2;
  return true;
}

/* Our own cgroup in a v1 hierarchy ("/" when none is listed), from
 * /proc/self/cgroup lines "N:controller[,other]:/path". */
static void own_v1_path(const char *controller, char *out, size_t size)
{
  snprintf(out, size, "/");
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f)
    return;
  char line[700];
  size_t n = strlen(controller);
  while (fgets(line, sizeof line, f)) {
    char *list = strchr(line, ':');
    char *path = list ? strchr(list + 1, ':') : NULL;
    if (!path)
      continue;
    *path++ = '\0';
    for (char *c = list + 1; c && *c;) {
      if (strncmp(c, controller, n) == 0 && (c[n] == ',' || c[n] == '\0')) {
        path[strcspn(path, "\n")] = '\0';
        snprintf(out, size, "%s", path);
      }
      c = strchr(c, ',');
      if (c)
        c++;
    }
  }
  fclose(f);
}

/* cgroup v1: one directory per controller we can write, nested below the
 * cgroup we run in (never escaping the limits the host put on us).
 *
 * How the sandbox gets in: moving a process (a pid written to
 * cgroup.procs or tasks) takes the kernel's global cgroup_threadgroup_rwsem
 * for writing, and the first writer after a quiet spell waits for an RCU
 * grace period (rcu_sync_enter): 5-15 ms on a loaded 2-vCPU VM, more than
 * all the rest of a spawn. A thread moving itself ("0" written to tasks)
 * skips that lock. So the `tasks` files are opened here, by us, with our
 * rights (the kernel checks them at open, and the opener's or writer's
 * root uid at write), and the command, single-threaded and not yet
 * running anything of the tool, writes "0" to each (limits_join). */
static bool try_cgroup1(struct sandbox_limits *lim, const struct cap_spec *spec, bool count_cpu)
{
  /* only the hierarchies a limit of this spec needs: making a v1 group
   * (and removing it) costs more than the rest of a spawn's set-up */
  const bool wanted[4] = {
      [V1_MEMORY] = spec->limits.memory_bytes != 0,
      [V1_PIDS] = spec->limits.pids != 0,
      [V1_CPU] = spec->limits.cpu_fraction > 0,
      /* the /proc sum misses processes reaped by no one */
      [V1_CPUACCT] = spec->limits.cpu_ms_per_task != 0 || count_cpu,
  };
  bool any = false;
  for (int c = 0; c < 4; c++) {
    if (!wanted[c])
      continue;
    char own[400], root[480];
    own_v1_path(v1_controllers[c], own, sizeof own);
    snprintf(root, sizeof root, CGROOT "/%s%s", v1_controllers[c], strcmp(own, "/") ? own : "");
    struct stat st;
    if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
      continue;
    snprintf(lim->v1[c], sizeof lim->v1[c], "%s/capsule-%d", root, (int)getpid());
    /* one of this name is a leftover of a capsule that had our pid and was
     * killed before it cleaned up: removed when empty, else not ours (and
     * never taken by an unprivileged run, whose mkdir sees EEXIST first) */
    if (mkdir(lim->v1[c], 0755) < 0 &&
        (errno != EEXIST || rmdir(lim->v1[c]) < 0 || mkdir(lim->v1[c], 0755) < 0)) {
      lim->v1[c][0] = '\0';
      continue;
    }
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/tasks", lim->v1[c]);
    lim->v1_tasks[c] = open(tasks, O_WRONLY | O_CLOEXEC);
    any = true;
  }
  if (!any)
    return false;
  char num[64];
  if (spec->limits.memory_bytes && lim->v1[V1_MEMORY][0]) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)spec->limits.memory_bytes);
    lim->memory_enforced = write_text(lim->v1[V1_MEMORY], "memory.limit_in_bytes", num) == 0;
    /* no swap beyond the limit where the kernel accounts it */
    write_text(lim->v1[V1_MEMORY], "memory.memsw.limit_in_bytes", num);
  }
  if (spec->limits.pids && lim->v1[V1_PIDS][0]) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)spec->limits.pids);
    lim->pids_enforced = write_text(lim->v1[V1_PIDS], "pids.max", num) == 0;
  }
  if (spec->limits.cpu_fraction > 0 && lim->v1[V1_CPU][0]) {
    snprintf(num, sizeof num, "%lld", (long long)(spec->limits.cpu_fraction * CPU_PERIOD_US));
    lim->cpu_enforced = write_text(lim->v1[V1_CPU], "cpu.cfs_quota_us", num) == 0;
  }
  lim->kind = LIMITS_CGROUP1;
  return true;
}

int limits_prepare(struct sandbox_limits *lim, const struct cap_spec *spec, bool count_cpu,
                   struct cap_error *err)
{
  memset(lim, 0, sizeof *lim);
  lim->cpu_base_ms = -1;
  for (int c = 0; c < 4; c++)
    lim->v1_tasks[c] = -1;
  if (!try_cgroup2(lim, spec))
    try_cgroup1(lim, spec, count_cpu);
  /* the fallbacks the command sets on itself (limits_apply_rlimits) */
  if (spec->limits.memory_bytes && !lim->memory_enforced)
    note_unenforced(lim, "memory (RLIMIT_DATA per process instead)");
  /* RLIMIT_NPROC counts per user per user namespace (Linux 5.14+): inside
   * the sandbox's own namespace it bounds the sandbox alone */
  if (spec->limits.pids && !lim->pids_enforced) {
    lim->pids_by_rlimit = true;
    lim->pids_enforced = true;
  }
  if (spec->limits.cpu_fraction > 0 && !lim->cpu_enforced)
    note_unenforced(lim, "cpu fraction (no writable cgroup)");
  if (lim->unenforced[0] && spec->sandbox.required) {
    int r = cap_error_set(err, ENOTSUP,
                          "the manifest requires a sandbox, and this host cannot enforce: %s; "
                          "run as root or under a delegated cgroup v2 (systemd-run --user "
                          "--scope -p Delegate=yes), or see `capsule doctor`",
                          lim->unenforced);
    limits_release(lim);
    return r;
  }
  /* enforced, but not as a cgroup would: said, not refused */
  if (spec->limits.cpu_ms_per_task && !lim->v2[0] && !lim->v1[V1_CPUACCT][0])
    note_unenforced(lim, "cpu budget only as summed from /proc every 200 ms (a process "
                         "reaped by no one between two looks is missed) and RLIMIT_CPU "
                         "per process");
  return 0;
}

int limits_attach(struct sandbox_limits *lim, pid_t pid, struct cap_error *err)
{
  lim->pid = pid; /* where the CPU count starts without a cgroup */
  char num[32];
  snprintf(num, sizeof num, "%d", (int)pid);
  if (lim->kind == LIMITS_CGROUP2) {
    int r = write_text(lim->v2, "cgroup.procs", num);
    if (r < 0)
      return cap_error_errno(err, -r, "cannot move the sandbox into %s", lim->v2);
    lim->holds_init = true;
  } else if (lim->kind == LIMITS_CGROUP1) {
    for (int c = 0; c < 4; c++) {
      if (lim->v1_tasks[c] >= 0) { /* the sandbox joins this one itself */
        close(lim->v1_tasks[c]);
        lim->v1_tasks[c] = -1;
        continue;
      }
      if (!lim->v1[c][0])
        continue;
      int r = write_text(lim->v1[c], "cgroup.procs", num);
      if (r < 0)
        return cap_error_errno(err, -r, "cannot move the sandbox into %s", lim->v1[c]);
      lim->holds_init = true;
    }
  }
  return 0;
}

int limits_join(struct sandbox_limits *lim)
{
  for (int c = 0; c < 4; c++) {
    if (lim->v1_tasks[c] < 0)
      continue;
    ssize_t n = write(lim->v1_tasks[c], "0", 1);
    close(lim->v1_tasks[c]);
    lim->v1_tasks[c] = -1;
    if (n != 1)
      return n < 0 ? -errno : -EIO;
  }
  return 0;
}

void limits_apply_rlimits(const struct sandbox_limits *lim, const struct cap_spec *spec)
{
  /* per-process backstops; the cgroup, where there is one, is the real limit */
  if (spec->limits.cpu_ms_per_task) {
    rlim_t s = (rlim_t)((spec->limits.cpu_ms_per_task + 999) / 1000) + 1;
    struct rlimit rl = {.rlim_cur = s, .rlim_max = s + 1};
    setrlimit(RLIMIT_CPU, &rl);
  }
  if (lim->pids_by_rlimit) {
    struct rlimit rl = {.rlim_cur = spec->limits.pids, .rlim_max = spec->limits.pids};
    setrlimit(RLIMIT_NPROC, &rl);
  }
  if (spec->limits.memory_bytes && !lim->memory_enforced) {
    struct rlimit rl = {.rlim_cur = spec->limits.memory_bytes,
                        .rlim_max = spec->limits.memory_bytes};
    setrlimit(RLIMIT_DATA, &rl);
  }
  if (spec->limits.disk_bytes) {
    struct rlimit rl = {.rlim_cur = spec->limits.disk_bytes, .rlim_max = spec->limits.disk_bytes};
    setrlimit(RLIMIT_FSIZE, &rl);
  }
}

/* One process as /proc/PID/stat tells it: its parent and its CPU ticks
 * with those of the children it has reaped (cutime/cstime). */
struct proc_cpu {
  pid_t pid, ppid;
  uint64_t ticks;
};

static bool read_proc_cpu(int proc_fd, const char *name, struct proc_cpu *out)
{
  char path[300], buf[1024];
  snprintf(path, sizeof path, "%s/stat", name);
  const char *after = cap_proc_stat(proc_fd, path, buf, sizeof buf);
  unsigned long long ut, st, cut, cst;
  int ppid;
  if (!after || sscanf(after, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
                       &ppid, &ut, &st, &cut, &cst) != 5)
    return false;
  *out = (struct proc_cpu){.pid = atoi(name), .ppid = ppid, .ticks = ut + st + cut + cst};
  return true;
}

static int by_pid(const void *a, const void *b)
{
  pid_t x = ((const struct proc_cpu *)a)->pid, y = ((const struct proc_cpu *)b)->pid;
  return (x > y) - (x < y);
}

/* The ticks of root and its descendants among all[0..n) (sorted here):
 * each process's parent chain is walked once, its answer (below root or
 * not) kept for every process on the way, so a deep tree costs n log n. */
static uint64_t sum_tree(struct proc_cpu *all, size_t n, pid_t root)
{
  qsort(all, n, sizeof *all, by_pid);
  _cleanup_free_ unsigned char *state = cap_xcalloc(n + 1, 1); /* 0 unknown, 1 below root, 2 not */
  _cleanup_free_ size_t *path = cap_xcalloc(n + 1, sizeof *path);
  uint64_t ticks = 0;
  for (size_t i = 0; i < n; i++) {
    size_t depth = 0, j = i;
    unsigned char answer = 2;
    while (depth <= n) { /* a chain longer than n is a loop (pids reused mid-scan) */
      if (state[j]) {
        answer = state[j];
        break;
      }
      path[depth++] = j;
      if (all[j].pid == root) {
        answer = 1;
        break;
      }
      struct proc_cpu key = {.pid = all[j].ppid};
      struct proc_cpu *parent = all[j].ppid > 0 ? bsearch(&key, all, n, sizeof *all, by_pid) : NULL;
      if (!parent)
        break;
      j = (size_t)(parent - all);
    }
    for (size_t k = 0; k < depth; k++)
      state[path[k]] = answer;
    if (answer == 1)
      ticks += all[i].ticks;
  }
  return ticks;
}

/* Without a cgroup: the CPU of pid 1 of the sandbox (host pid `root`) and
 * of every process below it, found by parent links in /proc (every
 * process of the sandbox's pid namespace descends from its pid 1, which
 * adopts orphans). A process that ended counts in its reaper's cutime, so
 * the sum only grows, except for processes reaped by nobody (a parent that
 * ignores SIGCHLD) that ran and ended between two looks. */
int64_t limits_tree_cpu_ms(pid_t root)
{
  _cleanup_close_ int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = proc_fd >= 0 ? opendir("/proc") : NULL;
  if (!d)
    return -1;
  struct proc_cpu *all = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      all = cap_xrealloc(all, cap * sizeof *all);
    }
    if (read_proc_cpu(proc_fd, e->d_name, &all[n]))
      n++;
  }
  closedir(d);
  uint64_t ticks = sum_tree(all, n, root);
  free(all);
  long hz = sysconf(_SC_CLK_TCK);
  return (int64_t)(ticks * 1000 / (uint64_t)(hz > 0 ? hz : 100));
}

/* CPU time the sandbox's own processes have used, in ms: its cgroup's
 * count, else the sum over its processes (tree_cpu_ms); -1 before it runs. */
static int64_t inside_cpu_ms(struct sandbox_limits *lim)
{
  char buf[1024];
  if (lim->kind == LIMITS_CGROUP2 && read_text(lim->v2, "cpu.stat", buf, sizeof buf) == 0) {
    const char *u = strstr(buf, "usage_usec ");
    return u ? (int64_t)(strtoull(u + 11, NULL, 10) / 1000) : -1;
  }
  if (lim->kind == LIMITS_CGROUP1 && lim->v1[V1_CPUACCT][0] &&
      read_text(lim->v1[V1_CPUACCT], "cpuacct.usage", buf, sizeof buf) == 0)
    return (int64_t)(strtoull(buf, NULL, 10) / 1000000);
  return lim->pid > 0 ? limits_tree_cpu_ms(lim->pid) : -1;
}

/* The sandbox's CPU, and what capsule spent for it outside (the egress
 * proxy's work on its connections): a tool must not get CPU past its
 * budget by making capsule do the work. */
int64_t limits_cpu_ms(struct sandbox_limits *lim)
{
  int64_t used = inside_cpu_ms(lim);
  if (used >= 0 && lim->outside_cpu_ms)
    used += lim->outside_cpu_ms(lim->outside_cpu_arg);
  return used;
}

bool limits_cpu_overshoot(struct sandbox_limits *lim, const struct cap_spec *spec,
                          uint64_t elapsed_ms)
{
  if (!spec->limits.cpu_ms_per_task || elapsed_ms == 0)
    return false;
  int64_t used = limits_cpu_ms(lim);
  if (used < 0)
    return false;
  if (lim->cpu_base_ms < 0 || lim->cpu_base_ms > used)
    lim->cpu_base_ms = used; /* the setup before the first look is not a rate */
  if ((double)used > (double)spec->limits.cpu_ms_per_task)
    return true;
  if (elapsed_ms < TICK_MS) /* too early for a rate worth projecting */
    return false;
  /* the rate since supervision began, carried one tick ahead */
  double rate = (double)(used - lim->cpu_base_ms) / (double)elapsed_ms;
  double projected = (double)used + rate * TICK_MS;
  return projected > (double)spec->limits.cpu_ms_per_task;
}

const char *limits_verdict(struct sandbox_limits *lim, int term_signal)
{
  char buf[1024];
  if (term_signal == SIGXCPU)
    return "cpu budget";
  if (term_signal != SIGKILL)
    return NULL;
  if (lim->kind == LIMITS_CGROUP2 && read_text(lim->v2, "memory.events", buf, sizeof buf) == 0) {
    const char *k = strstr(buf, "oom_kill ");
    if (k && strtoull(k + 9, NULL, 10) > 0)
      return "memory limit";
  }
  if (lim->kind == LIMITS_CGROUP1 && lim->v1[V1_MEMORY][0] &&
      read_text(lim->v1[V1_MEMORY], "memory.oom_control", buf, sizeof buf) == 0) {
    const char *k = strstr(buf, "oom_kill ");
    if (k && strtoull(k + 9, NULL, 10) > 0)
      return "memory limit";
  }
  return NULL;
}

void limits_release(struct sandbox_limits *lim)
{
  for (int c = 0; c < 4; c++) {
    if (lim->v1_tasks[c] >= 0)
      close(lim->v1_tasks[c]);
    lim->v1_tasks[c] = -1;
  }
  if (lim->kind == LIMITS_CGROUP2 && lim->v2[0]) {
    write_text(lim->v2, "cgroup.kill", "1");
    for (int i = 0; i < 50 && rmdir(lim->v2) < 0 && errno == EBUSY; i++)
      usleep(10000);
  }
  for (int c = 0; c < 4; c++) {
    if (!lim->v1[c][0])
      continue;
    for (int i = 0; i < 50 && rmdir(lim->v1[c]) < 0 && errno == EBUSY; i++)
      usleep(10000);
  }
  lim->kind = LIMITS_NONE;
}
