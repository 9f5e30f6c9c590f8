/* A hostile review of gateway/state_inflight.c: a process whose threads
 * begin and end calls (each takes the in-flight markers' name-list mutex,
 * own_lock, twice) forks meanwhile, as serve forks a call's child while
 * its warm calls run on threads; the child records a call of its own
 * (gw_inflight_begin_at, as a call's child does with its state). A plain
 * mutex held by a thread at the fork stays held in the child for good:
 * its call never began. Each child has 20 s (SIGALRM); none may be killed
 * by it. Exit 1 while the attack works, 0 when every child ended. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "gateway/state.h"

#define FORKS 1500
#define THREADS 2

static char dir[] = "/tmp/capsule-inflight-fork-XXXXXX";
static int statefd = -1;
static volatile int stop;

static const struct gw_audit_record rec = {
    .user = "u", .capability = "c", .tool = "t", .decision = "allow", .outcome = "ok"};

static bool one_call(void)
{
  struct gw_inflight m;
  struct cap_error err = {0};
  if (gw_inflight_begin_at(statefd, dir, &rec, &m, &err) < 0) {
    fprintf(stderr, "begin: %s\n", err.message);
    cap_error_clear(&err);
    return false;
  }
  gw_inflight_end(&m);
  return true;
}

static void *calls(void *arg)
{
  (void)arg;
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
    one_call();
  return NULL;
}

int main(void)
{
  if (!mkdtemp(dir))
    return perror("mkdtemp"), 2;
  statefd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (statefd < 0 || !one_call())
    return 2;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, calls, NULL);
  int stuck = 0, failed = 0;
  for (int i = 0; i < FORKS && !stuck; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(20);
      _exit(one_call() ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      stuck++;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed++;
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", dir);
  if (stuck)
    printf("FAIL: a child forked while a thread held a marker mutex never began its call\n");
  if (failed)
    printf("FAIL: %d children could not record a call\n", failed);
  if (!stuck && !failed)
    printf("ok: %d children, each forked mid-call of another thread, began their calls\n", FORKS);
  return stuck || failed;
}
