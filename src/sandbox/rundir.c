/* The run directory and the leftovers of killed capsules (rundir.h). A
 * capsule killed with SIGKILL cannot clean up; its sandbox dies with it
 * (PR_SET_PDEATHSIG, and pid 1 watching the supervisor's pipe), but its run
 * directory and cgroups stay. The lock file decides who may remove them:
 * flock is released by the kernel when the last holder of the open file
 * is gone, so a free lock means no capsule and no sandbox process is left. */
#include "sandbox/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"

#define RUNDIR_PREFIX ".capsule-"
#define RUNDIR_LOCK "lock"
#define CGROUP_ROOT "/sys/fs/cgroup/"
/* a run directory without its lock file is one being created, unless old */
#define LOCKLESS_GRACE_S 60

/* A cgroup path from a lock file is only acted on when it is one capsule
 * makes: below the cgroup root, named capsule-*, no "..". */
static bool is_capsule_cgroup(const char *path)
{
  const char *base = strrchr(path, '/');
  return strncmp(path, CGROUP_ROOT, strlen(CGROUP_ROOT)) == 0 && !strstr(path, "/..") && base &&
         strncmp(base + 1, "capsule-", 8) == 0;
}

/* Kills what is left in a dead sandbox's cgroup and removes it. */
static void remove_cgroup(const char *path)
{
  if (!is_capsule_cgroup(path))
    return;
  _cleanup_free_ char *kill_file = cap_xasprintf("%s/cgroup.kill", path);
  _cleanup_close_ int kfd = open(kill_file, O_WRONLY | O_CLOEXEC);
  if (kfd >= 0 && write(kfd, "1", 1) < 0) {
    /* v1 has no cgroup.kill: the processes are killed one by one below */
  }
  _cleanup_free_ char *procs = cap_xasprintf("%s/cgroup.procs", path);
  _cleanup_fclose_ FILE *f = fopen(procs, "re");
  int pid;
  while (f && fscanf(f, "%d", &pid) == 1)
    if (pid > 1)
      kill(pid, SIGKILL);
  for (int i = 0; i < 50 && rmdir(path) < 0 && errno == EBUSY; i++)
    usleep(10000);
}

/* One run directory: removed with the cgroups its lock file names when the
 * lock is free (or, without a lock file, when it is old and empty: a
 * directory being created has no lock file for an instant). */
static void clean_one(int dfd, const char *name)
{
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != geteuid())
    return;
  _cleanup_close_ int rfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rfd < 0)
    return;
  _cleanup_close_ int lfd = openat(rfd, RUNDIR_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (lfd < 0) {
    if (errno == ENOENT && time(NULL) - st.st_mtime > LOCKLESS_GRACE_S) {
      unlinkat(rfd, RUNDIR_LOCK ".new", 0); /* its owner died before the rename */
      unlinkat(dfd, name, AT_REMOVEDIR);
    }
    return;
  }
  struct stat ls;
  if (fstat(lfd, &ls) < 0 || !S_ISREG(ls.st_mode) || ls.st_uid != geteuid() ||
      flock(lfd, LOCK_EX | LOCK_NB) < 0)
    return; /* its capsule (or a process of its sandbox) still lives */
  char text[4096];
  ssize_t n = pread(lfd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save))
    remove_cgroup(line);
  unlinkat(rfd, RUNDIR_LOCK, 0);
  unlinkat(dfd, name, AT_REMOVEDIR);
}

void rundir_clean_leftovers(const char *tmpdir)
{
  _cleanup_close_ int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return;
  int scan = dup(dfd);
  DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
  if (!d) {
    if (scan >= 0)
      close(scan);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, RUNDIR_PREFIX, strlen(RUNDIR_PREFIX)) == 0)
      clean_one(dfd, e->d_name);
  closedir(d);
}

int rundir_create(struct rundir *rd, const char *tmpdir, struct cap_error *err)
{
  rd->lock_fd = -1;
  rd->path = cap_xasprintf("%s/" RUNDIR_PREFIX "XXXXXX", tmpdir);
  if (!mkdtemp(rd->path)) {
    int r = cap_error_errno(err, errno, "cannot create the sandbox's base directory %s", rd->path);
    free(rd->path);
    rd->path = NULL;
    return r;
  }
  /* locked under another name, then renamed: a lock file another start can
   * see is always held already (it would take an unheld one for a dead
   * capsule's) */
  _cleanup_free_ char *lock = cap_xasprintf("%s/" RUNDIR_LOCK, rd->path);
  _cleanup_free_ char *fresh = cap_xasprintf("%s/" RUNDIR_LOCK ".new", rd->path);
  rd->lock_fd = open(fresh, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (rd->lock_fd < 0 || flock(rd->lock_fd, LOCK_EX) < 0 || rename(fresh, lock) < 0) {
    unlink(fresh);
    int r = cap_error_errno(err, errno, "cannot lock the sandbox's run directory %s", rd->path);
    rundir_remove(rd);
    return r;
  }
  return 0;
}

void rundir_record_cgroups(struct rundir *rd, const struct sandbox_limits *lim)
{
  struct cap_buf text = {0};
  if (lim->kind == LIMITS_CGROUP2 && lim->v2[0])
    cap_buf_printf(&text, "%s\n", lim->v2);
  for (size_t c = 0; lim->kind == LIMITS_CGROUP1 && c < ARRAY_SIZE(lim->v1); c++)
    if (lim->v1[c][0])
      cap_buf_printf(&text, "%s\n", lim->v1[c]);
  if (text.len && pwrite(rd->lock_fd, text.data, text.len, 0) < 0) {
    /* unrecorded cgroups outlive a killed capsule; nothing else breaks */
  }
  cap_buf_free(&text);
}

void rundir_remove(struct rundir *rd)
{
  if (rd->path) {
    _cleanup_free_ char *lock = cap_xasprintf("%s/" RUNDIR_LOCK, rd->path);
    unlink(lock);
    rmdir(rd->path);
    free(rd->path);
    rd->path = NULL;
  }
  if (rd->lock_fd >= 0)
    close(rd->lock_fd);
  rd->lock_fd = -1;
}
