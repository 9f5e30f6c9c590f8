/* Unit tests for core/fork_gate.c, the ASan build's fork gate (GCC's
 * AddressSanitizer only; elsewhere there is no gate and this skips): forks
 * taken while other threads start and end, one after another, and a fork
 * in each child, never run out a wait's bound. A new thread once left the
 * gate's count of starting threads only after its first free, which waits
 * for a fork holding the gate: such a fork waited its whole bound (seconds),
 * and each child kept the count and waited again at its own fork (serve's
 * dry runs under a flood took three bounds each).
 *
 * And forks beside threads created and joined in batches: a creation held
 * the gate's read side while glibc's pthread_create waited for the stack
 * cache's lock, which a join held while its free waited behind the fork
 * for the read side, and the fork for the creation: every thread stopped
 * for good, within tens of forks (serve, under a flood of connections,
 * each a thread). A watchdog fails the test when the forks stop. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fork_gate.h"
#include "unit.h"

int unit_failures, unit_checks;

#if CAP_FORK_GATE
static bool stop;

static void *short_lived(void *arg)
{
  free(malloc(64)); /* an allocation of its own, through the gate */
  return arg;
}

/* Threads started and joined, one after another, until stop */
static void *spawner(void *arg)
{
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_lived, NULL) == 0)
      pthread_join(t, NULL);
  }
  return arg;
}

/* The child: what it kept of the parent's count, then a fork of its own
 * (as the readiness dry run's process clones the sandbox): exits 1 when
 * that fork ran out a bound */
static _Noreturn void child(void)
{
  unsigned kept = cap_fork_gate_gave_up();
  pid_t g = fork();
  if (g == 0)
    _exit(0);
  while (g > 0 && waitpid(g, NULL, 0) < 0)
    ;
  _exit(g > 0 && cap_fork_gate_gave_up() == kept ? 0 : 1);
}

/* forks times, beside n threads running spawner_fn until stop: fork, the
 * child runs child_fn; how many children exited 0 */
static int forks_beside(void *(*spawner_fn)(void *), int n, int forks, void (*child_fn)(void))
{
  pthread_t s[4];
  __atomic_store_n(&stop, false, __ATOMIC_RELEASE);
  for (int i = 0; i < n; i++)
    CHECK(pthread_create(&s[i], NULL, spawner_fn, NULL) == 0);
  int ok = 0;
  for (int i = 0; i < forks; i++) {
    pid_t pid = fork();
    if (pid == 0)
      child_fn();
    int status = -1;
    while (pid > 0 && waitpid(pid, &status, 0) < 0)
      ;
    ok += pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  __atomic_store_n(&stop, true, __ATOMIC_RELEASE);
  for (int i = 0; i < n; i++)
    pthread_join(s[i], NULL);
  return ok;
}

static void test_forks_beside_new_threads(void)
{
  int forks = 8, children_ok = forks_beside(spawner, 2, forks, child);
  if (cap_fork_gate_gave_up())
    fprintf(stderr, "the parent's forks ran out %u bounds\n", cap_fork_gate_gave_up());
  CHECK(cap_fork_gate_gave_up() == 0);
  if (children_ok != forks)
    fprintf(stderr, "%d of %d children's own forks ran out a bound (or failed)\n",
            forks - children_ok, forks);
  CHECK(children_ok == forks);
}

static void *batch_worker(void *arg)
{
  for (int i = 0; i < 20; i++)
    free(malloc(64 + 37 * (size_t)i));
  return arg;
}

/* Batches of four threads created, then joined, until stop: half by a
 * plain join, half by a timed one (serve's session threads), whose free
 * holds the same lock */
static void *batch_spawner(void *arg)
{
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    pthread_t t[4];
    int n = 0;
    while (n < 4 && pthread_create(&t[n], NULL, batch_worker, NULL) == 0)
      n++;
    struct timespec far;
    clock_gettime(CLOCK_REALTIME, &far);
    far.tv_sec += 600;
    for (int i = 0; n > 0; i++)
      if (i % 2)
        pthread_join(t[--n], NULL);
      else
        pthread_timedjoin_np(t[--n], NULL, &far);
  }
  return arg;
}

static _Noreturn void allocating_child(void)
{
  for (int j = 0; j < 20; j++)
    free(malloc(16 + 61 * (size_t)j));
  _exit(0);
}

static void stalled(int sig)
{
  (void)sig;
  static const char msg[] = "forks beside batches of threads stopped: the gate is deadlocked\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  _exit(1);
}

static void test_forks_beside_joins(void)
{
  signal(SIGALRM, stalled);
  alarm(120);
  int forks = 150, children_ok = forks_beside(batch_spawner, 3, forks, allocating_child);
  alarm(0);
  CHECK(children_ok == forks);
}

static void *sleeper(void *arg)
{
  nanosleep(&(struct timespec){.tv_nsec = 300 * 1000000}, NULL);
  return arg;
}

/* The gate's joins keep glibc's answers: a deadline passed, a join of
 * oneself, a thread that ended */
static void test_join_answers(void)
{
  pthread_t t;
  CHECK(pthread_create(&t, NULL, sleeper, (void *)7) == 0);
  struct timespec soon;
  clock_gettime(CLOCK_MONOTONIC, &soon);
  soon.tv_nsec += 10 * 1000000;
  if (soon.tv_nsec >= 1000000000) {
    soon.tv_sec++;
    soon.tv_nsec -= 1000000000;
  }
  void *ret = NULL;
  CHECK(pthread_clockjoin_np(t, &ret, CLOCK_MONOTONIC, &soon) == ETIMEDOUT);
  CHECK(pthread_tryjoin_np(t, &ret) == EBUSY);
  CHECK(pthread_join(pthread_self(), NULL) == EDEADLK);
  CHECK(pthread_join(t, &ret) == 0 && ret == (void *)7);
}
#endif

int main(void)
{
#if CAP_FORK_GATE
  test_forks_beside_new_threads();
  test_forks_beside_joins();
  test_join_answers();
  printf("%d checks, %d failed\n", unit_checks, unit_failures);
  return unit_failures ? 1 : 0;
#else
  printf("SKIP: no fork gate in this build (GCC's AddressSanitizer only)\n");
  return 77;
#endif
}
