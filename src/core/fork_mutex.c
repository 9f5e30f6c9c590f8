/* Mutexes a forked child finds unlocked (core/fork_mutex.h). */
#include "core/fork_mutex.h"

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cap_fork_mutex *list;
static pthread_once_t list_once = PTHREAD_ONCE_INIT;

/* The child's list is the whole truth: a fork between a mutex's linking
 * and its listed flag's store leaves it on the list unflagged, and its
 * first lock in the child would link it a second time (m->next = m: a
 * cycle the next fork's handler would walk for good) */
static void at_fork_child(void)
{
  pthread_mutex_init(&list_mu, NULL);
  for (struct cap_fork_mutex *m = list; m; m = m->next) {
    pthread_mutex_init(&m->mu, NULL);
    __atomic_store_n(&m->listed, true, __ATOMIC_RELAXED); /* one thread here */
  }
}

static void at_fork_register(void) { pthread_atfork(NULL, NULL, at_fork_child); }

void cap_fork_mutex_lock(struct cap_fork_mutex *m)
{
  /* listed before its first lock: a fork that finds it locked finds it
   * on the list (a fork in between leaves it unlisted and unlocked in the
   * child, which lists it on its own first lock) */
  if (!__atomic_load_n(&m->listed, __ATOMIC_ACQUIRE)) {
    pthread_once(&list_once, at_fork_register);
    pthread_mutex_lock(&list_mu);
    if (!m->listed) {
      m->next = list;
      list = m;
      __atomic_store_n(&m->listed, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&list_mu);
  }
  pthread_mutex_lock(&m->mu);
}
