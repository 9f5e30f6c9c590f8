/* A mutex that a forked child finds unlocked: for locks that guard no
 * memory a child goes on using (they order a process's threads around
 * files or SQLite), so a fork taken while another thread held one does
 * not leave the child waiting on it for good. Each is listed on its first
 * lock; one pthread_atfork child handler re-initialises them all. */
#ifndef CAP_CORE_FORK_MUTEX_H
#define CAP_CORE_FORK_MUTEX_H

#include <pthread.h>
#include <stdbool.h>

struct cap_fork_mutex {
  pthread_mutex_t mu;
  bool listed;
  struct cap_fork_mutex *next;
};

#define CAP_FORK_MUTEX_INIT                                                                        \
  {                                                                                                \
    .mu = PTHREAD_MUTEX_INITIALIZER                                                                \
  }

void cap_fork_mutex_lock(struct cap_fork_mutex *m);
static inline void cap_fork_mutex_unlock(struct cap_fork_mutex *m) { pthread_mutex_unlock(&m->mu); }

#endif
