/* Forks from a process with threads, under GCC's AddressSanitizer
 * (core/fork_gate.h).
 *
 * `capsule serve` forks its calls (and clones their sandboxes) from its
 * main thread while libmicrohttpd's threads answer HTTP requests. glibc's
 * malloc takes its locks around fork(), so a child always finds them free;
 * the allocator of GCC 12's libasan does not (LLVM added that only later),
 * and a child forked while another thread was inside malloc waits forever
 * on the lock that thread held (seen as `capsule serve` calls hanging in
 * the ASan build under load). In a build with ASan, every allocation goes
 * through a read side of one lock here, and a fork takes its write side:
 * the fork happens between allocations, never inside one. Two more places
 * take libasan's locks outside any allocation: a new thread's start (a
 * fork waits until every thread created has started: until then its
 * allocations pass the gate, so it cannot wait on the fork), and a
 * thread's end, where libasan hands the thread's cached
 * chunks back: a thread about to end says so under the read side, and a
 * fork waits until every thread that said so is gone.
 *
 * The read side is never held while glibc takes a lock of its own: a
 * thread holding such a lock and allocating (pthread_join frees the
 * joined thread's stack and TLS under the stack cache's lock) waits on
 * the read side while a fork waits for the write side, and a thread
 * holding the read side while it waited for that lock closed the circle
 * (pthread_create did: every thread of `capsule serve` stopped, found by
 * tests/unit/test_fork_gate.c). So a thread being created is counted as
 * starting under the read side, then created outside it (a fork waits for
 * it to start, which is after its creator's last allocation), and a join
 * takes the read side before glibc's locks, without blocking inside it.
 * The plain build compiles none of this: cap_fork_prepare and friends are
 * empty there. */
#include "core/fork_gate.h"

#if CAP_FORK_GATE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* libasan's own entry points, under the names it exports */
void *__interceptor_malloc(size_t n);
void *__interceptor_calloc(size_t n, size_t size);
void *__interceptor_realloc(void *p, size_t n);
void *__interceptor_reallocarray(void *p, size_t n, size_t size);
void __interceptor_free(void *p);
int __interceptor_posix_memalign(void **out, size_t align, size_t n);
void *__interceptor_aligned_alloc(size_t align, size_t n);
void *__interceptor_memalign(size_t align, size_t n);
void *__interceptor_valloc(size_t n);
char *__interceptor_strdup(const char *s);
char *__interceptor_strndup(const char *s, size_t n);
int __interceptor_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                                 void *arg);
int __interceptor_pthread_join(pthread_t t, void **ret);

static pthread_rwlock_t gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static __thread __attribute__((
    tls_model("initial-exec"))) bool gated; /* the main thread, and threads once started */
static __thread __attribute__((
    tls_model("initial-exec"))) unsigned depth; /* this thread is inside an allocation */
static __thread
    __attribute__((tls_model("initial-exec"))) bool forking; /* this thread holds the write side */
static __thread __attribute__((tls_model(
    "initial-exec"))) bool ended; /* this thread is ending, and said so: a fork waits for its end */
static __thread __attribute__((tls_model("initial-exec"))) bool
    creating; /* inside pthread_create: a fork waits for its thread's start */

static bool ready; /* set by the constructor: before it (the loader, libasan's start) no TLS */

/* glibc's own, found by name (libasan has none of these): at start, or
 * at the first call made before it */
static void *glibc(void **slot, const char *name)
{
  void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!f) {
    f = dlsym(RTLD_NEXT, name);
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

static void *real_tryjoin, *real_detach;

static void enter(void)
{
  if (!__atomic_load_n(&ready, __ATOMIC_RELAXED))
    return;
  if (depth++ == 0 && gated && !forking && !ended && !creating)
    pthread_rwlock_rdlock(&gate);
}

static void leave(void)
{
  if (!__atomic_load_n(&ready, __ATOMIC_RELAXED))
    return;
  if (--depth == 0 && gated && !forking && !ended && !creating)
    pthread_rwlock_unlock(&gate);
}

/* ---- threads that end: their tids, until they are gone ---- */

#define ENDING_MAX 512
static pthread_mutex_t ending_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t ending[ENDING_MAX];
static pthread_key_t end_key;

static bool thread_alive(pid_t tid) { return syscall(SYS_tgkill, getpid(), tid, 0) == 0; }

/* Forgets the threads already gone */
static void prune_ended(void)
{
  pthread_mutex_lock(&ending_mu);
  size_t k = 0;
  for (size_t i = 0; i < ENDING_MAX && ending[i]; i++)
    if (thread_alive(ending[i]))
      ending[k++] = ending[i];
  memset(ending + k, 0, (ENDING_MAX - k) * sizeof *ending);
  pthread_mutex_unlock(&ending_mu);
}

/* A thread's destructor: it runs before libasan's own, which defers itself
 * to the last round of destructors */
static void thread_ends(void *unused)
{
  (void)unused;
  pid_t tid = (pid_t)syscall(SYS_gettid);
  for (;;) {
    enter();
    pthread_mutex_lock(&ending_mu);
    size_t i = 0;
    while (i < ENDING_MAX && ending[i] && ending[i] != tid)
      i++;
    if (i < ENDING_MAX)
      ending[i] = tid;
    pthread_mutex_unlock(&ending_mu);
    leave();
    if (i < ENDING_MAX) {
      ended = true; /* what it frees from here on runs beside a fork's wait, not inside a fork */
      return;
    }
    prune_ended(); /* full: the threads gone since the last fork make room */
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
}

static unsigned gave_up; /* waits below that ran out their bound (tests/unit/test_fork_gate.c) */

/* With the write side held: wait until every thread that said it ends is
 * gone (bounded: a tid seen alive for a second is given up) */
static void wait_ended(void)
{
  pthread_mutex_lock(&ending_mu);
  for (size_t i = 0; i < ENDING_MAX && ending[i]; i++) {
    for (int n = 0; n < 10000 && thread_alive(ending[i]); n++)
      nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    if (thread_alive(ending[i]))
      __atomic_add_fetch(&gave_up, 1, __ATOMIC_RELAXED);
  }
  memset(ending, 0, sizeof ending);
  pthread_mutex_unlock(&ending_mu);
}

static unsigned starting; /* threads created that have not started yet */

/* With the write side held: wait until every thread created has started
 * (bounded, as above) */
static void wait_started(void)
{
  for (int n = 0; n < 50000 && __atomic_load_n(&starting, __ATOMIC_ACQUIRE); n++)
    nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
  if (__atomic_load_n(&starting, __ATOMIC_ACQUIRE))
    __atomic_add_fetch(&gave_up, 1, __ATOMIC_RELAXED);
}

unsigned cap_fork_gate_gave_up(void) { return __atomic_load_n(&gave_up, __ATOMIC_RELAXED); }

struct start {
  void *(*fn)(void *);
  void *arg;
};

/* Started: gated first, then no longer counted, and only then the first
 * allocation (its free). That free waits on the read side: counted until
 * after it, a thread started while a fork held the write side waited for
 * the fork, and the fork for it (wait_started's whole bound, and again in
 * every child that kept the count: serve's dry runs took three bounds) */
static void *thread_start(void *p)
{
  struct start s = *(struct start *)p;
  gated = true;
  __atomic_sub_fetch(&starting, 1, __ATOMIC_RELEASE);
  free(p);
  pthread_setspecific(end_key, (void *)1);
  return s.fn(s.arg);
}

void cap_fork_prepare(void)
{
  if (!ready || forking ||
      depth) /* a fork from inside an allocation: none here, but never wait on ourselves */
    return;
  pthread_rwlock_wrlock(&gate);
  forking = true;
  wait_started();
  wait_ended();
}

void cap_fork_parent(void)
{
  if (!forking)
    return;
  forking = false;
  pthread_rwlock_unlock(&gate);
}

void cap_fork_child(void)
{
  /* the only thread left: none of the parent's is starting or ending here
   * (a count kept from the parent made each fork of this child wait for a
   * thread that is not in it), and a lock another thread held is free */
  __atomic_store_n(&starting, 0, __ATOMIC_RELEASE);
  memset(ending, 0, sizeof ending);
  static const pthread_mutex_t fresh_mu = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&ending_mu, &fresh_mu, sizeof ending_mu);
  if (!forking)
    return;
  forking = false;
  /* the lock starts anew (its writer's tid was the parent's) */
  static const pthread_rwlock_t fresh = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
  memcpy(&gate, &fresh, sizeof gate);
}

__attribute__((constructor)) static void gate_at_fork(void)
{
  gated = true;
  glibc(&real_detach, "pthread_detach");
  glibc(&real_tryjoin, "pthread_tryjoin_np");
  pthread_key_create(&end_key, thread_ends);
  pthread_atfork(cap_fork_prepare, cap_fork_parent, cap_fork_child);
  __atomic_store_n(&ready, true, __ATOMIC_RELAXED);
}

#define GATED(call)                                                                                \
  do {                                                                                             \
    enter();                                                                                       \
    __typeof__(call) r_ = call;                                                                    \
    leave();                                                                                       \
    return r_;                                                                                     \
  } while (0)

void *malloc(size_t n) { GATED(__interceptor_malloc(n)); }
void *calloc(size_t n, size_t size) { GATED(__interceptor_calloc(n, size)); }
void *realloc(void *p, size_t n) { GATED(__interceptor_realloc(p, n)); }
void *reallocarray(void *p, size_t n, size_t size)
{
  GATED(__interceptor_reallocarray(p, n, size));
}
int posix_memalign(void **out, size_t align, size_t n)
{
  GATED(__interceptor_posix_memalign(out, align, n));
}
void *aligned_alloc(size_t align, size_t n) { GATED(__interceptor_aligned_alloc(align, n)); }
void *memalign(size_t align, size_t n) { GATED(__interceptor_memalign(align, n)); }
void *valloc(size_t n) { GATED(__interceptor_valloc(n)); }
char *strdup(const char *s) { GATED(__interceptor_strdup(s)); }
char *strndup(const char *s, size_t n) { GATED(__interceptor_strndup(s, n)); }
/* Counted as starting until it runs its function: libasan's part of its
 * start (its registry) is done by then. Counted under the read side (a
 * fork that has the write side sees the count), then created outside it:
 * glibc's part takes the stack cache's lock, which a join holds while it
 * frees (pthread_join below). Its allocations meanwhile pass the gate: a
 * fork waits for the thread's start, after the last of them. */
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
  if (!__atomic_load_n(&ready, __ATOMIC_RELAXED))
    return __interceptor_pthread_create(t, a, fn, arg);
  struct start *s = malloc(sizeof *s);
  if (!s)
    return EAGAIN;
  *s = (struct start){.fn = fn, .arg = arg};
  enter();
  __atomic_add_fetch(&starting, 1, __ATOMIC_ACQ_REL);
  leave();
  bool was = creating;
  creating = true;
  int r = __interceptor_pthread_create(t, a, thread_start, s);
  if (r != 0)
    __atomic_sub_fetch(&starting, 1, __ATOMIC_ACQ_REL);
  creating = was;
  if (r != 0)
    free(s);
  return r;
}

static int tryjoin(pthread_t t, void **ret)
{
  int (*f)(pthread_t, void **) =
      (int (*)(pthread_t, void **))glibc(&real_tryjoin, "pthread_tryjoin_np");
  enter();
  int r = f ? f(t, ret) : ENOSYS;
  leave();
  return r;
}

/* glibc frees a joined thread's stack and TLS with the stack cache's lock
 * held (every join: plain, timed, tried): the read side is taken first,
 * around a join that does not wait (a fork must not wait for a thread's
 * whole run), tried again each millisecond until the thread is gone or
 * the deadline (on clock) passed */
static int join_until(pthread_t t, void **ret, clockid_t clock, const struct timespec *deadline)
{
  if (pthread_equal(t, pthread_self()))
    return EDEADLK;
  for (;;) {
    int r = tryjoin(t, ret);
    if (r != EBUSY)
      return r;
    struct timespec now;
    if (deadline && clock_gettime(clock, &now) == 0 &&
        (now.tv_sec > deadline->tv_sec ||
         (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec)))
      return ETIMEDOUT;
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
}

int pthread_join(pthread_t t, void **ret)
{
  if (!__atomic_load_n(&ready, __ATOMIC_RELAXED) || depth || creating)
    return __interceptor_pthread_join(t, ret);
  return join_until(t, ret, CLOCK_REALTIME, NULL);
}

int pthread_tryjoin_np(pthread_t t, void **ret) { return tryjoin(t, ret); }

int pthread_timedjoin_np(pthread_t t, void **ret, const struct timespec *abstime)
{
  return join_until(t, ret, CLOCK_REALTIME, abstime);
}

int pthread_clockjoin_np(pthread_t t, void **ret, clockid_t clock, const struct timespec *abstime)
{
  return join_until(t, ret, clock, abstime);
}

/* A thread already ended is freed by its detach, as by a join */
int pthread_detach(pthread_t t)
{
  int (*f)(pthread_t) = (int (*)(pthread_t))glibc(&real_detach, "pthread_detach");
  enter();
  int r = f ? f(t) : ENOSYS;
  leave();
  return r;
}

void free(void *p)
{
  enter();
  __interceptor_free(p);
  leave();
}
#endif
