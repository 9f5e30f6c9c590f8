/* The tool's socket taken into capsule (supervise_internal.h's
 * supervise_take_socket): pidfd_getfd through a pidfd of the asking thread,
 * the pidfds of the tool's threads that connect kept (SUPERVISE_PIDFDS_KEPT),
 * so that a connect from a thread seen before costs no pidfd_open and
 * close (about 10 us here). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/supervise_internal.h"

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#define PIDFD_THREAD_ O_EXCL /* 6.9: a pidfd for a thread, not only a leader */

/* The tool's thread group leader, for kernels whose pidfds name leaders only. */
static pid_t thread_group_of(pid_t tid)
{
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/%d/status", tid);
  FILE *f = fopen(path, "re");
  pid_t tgid = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Tgid: %d", &tgid) == 1)
      break;
  if (f)
    fclose(f);
  return tgid;
}

/* fd of thread tid through its kept pidfd (under pidfd_lock): the
 * socket, -EBADF (the thread has no such fd), or -ESRCH when no pidfd is
 * kept for tid or its thread is gone (then it is dropped). A kept
 * PIDFD_THREAD pidfd whose thread lives names the one thread that has
 * that tid now: the asker, if it still waits (the caller checks). */
static int kept_getfd(struct supervise *sup, pid_t tid, int fd)
{
  int r = -ESRCH;
  pthread_mutex_lock(&sup->pidfd_lock);
  for (size_t i = 0; i < sup->n_pidfds; i++) {
    if (sup->pidfds[i].tid != tid)
      continue;
    int sock = (int)syscall(__NR_pidfd_getfd, sup->pidfds[i].fd, fd, 0);
    if (sock >= 0 || errno != ESRCH) {
      r = sock >= 0 ? sock : -EBADF;
      break;
    }
    close(sup->pidfds[i].fd); /* that thread is gone: another may get its tid */
    sup->pidfds[i] = sup->pidfds[--sup->n_pidfds];
    break;
  }
  pthread_mutex_unlock(&sup->pidfd_lock);
  return r;
}

/* Keeps pidfd (a PIDFD_THREAD one for tid), or closes it. */
static void keep_pidfd(struct supervise *sup, pid_t tid, int pidfd)
{
  pthread_mutex_lock(&sup->pidfd_lock);
  for (size_t i = 0; i < sup->n_pidfds; i++)
    if (sup->pidfds[i].tid == tid) { /* another pool thread kept one meanwhile */
      pthread_mutex_unlock(&sup->pidfd_lock);
      close(pidfd);
      return;
    }
  size_t slot;
  if (sup->n_pidfds < SUPERVISE_PIDFDS_KEPT) {
    slot = sup->n_pidfds++;
  } else { /* full: the oldest kept goes */
    slot = sup->next_pidfd++ % SUPERVISE_PIDFDS_KEPT;
    close(sup->pidfds[slot].fd);
  }
  sup->pidfds[slot].tid = tid;
  sup->pidfds[slot].fd = pidfd;
  pthread_mutex_unlock(&sup->pidfd_lock);
}

int supervise_take_socket(struct supervise *sup, pid_t pid, uint64_t id, int fd)
{
  /* a kept pidfd is the thread's own (a tid reused after its exit finds
   * it dead: -ESRCH); whether the asker still waits, and so whether the
   * socket came from its table while it asked, is checked once the
   * address is read too (prepare_connect) */
  int sock = kept_getfd(sup, pid, fd);
  if (sock != -ESRCH)
    return sock;
  int pidfd = (int)syscall(__NR_pidfd_open, pid, PIDFD_THREAD_);
  bool thread = pidfd >= 0;
  if (pidfd < 0 && errno == EINVAL) /* before 6.9: the leader's, never kept */
    pidfd = (int)syscall(__NR_pidfd_open, thread_group_of(pid), 0);
  if (pidfd < 0 || !supervise_still_waiting(sup, id)) { /* the pid named the task that asked */
    if (pidfd >= 0)
      close(pidfd);
    return -ESRCH;
  }
  sock = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
  if (thread && sock >= 0)
    keep_pidfd(sup, pid, pidfd);
  else
    close(pidfd);
  return sock < 0 ? -EBADF : sock;
}
