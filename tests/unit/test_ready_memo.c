/* Unit tests for gateway/ready_memo.c: a capability's readiness (a dry
 * run in its sandbox) is remembered for the memo's time, checked again
 * after it, and asked by many threads at once without a dry run each. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "gateway/ready_memo.h"
#include "gateway/registry.h"
#include "unit.h"

static char dir[] = "/tmp/capsule-ready-memo-XXXXXX";
static struct gw_registry reg;

static void write_file(const char *path, const char *text, mode_t mode)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  if (fd >= 0)
    close(fd);
  chmod(path, mode);
}

/* One Covenant agent whose entry is run.sh */
static bool setup(void)
{
  if (!mkdtemp(dir))
    return false;
  chmod(dir, 0755);
  char *agents = cap_xasprintf("%s/agents", dir), *agent = cap_xasprintf("%s/agents/a", dir);
  mkdir(agents, 0755);
  mkdir(agent, 0755);
  char *toml = cap_xasprintf("%s/agent.toml", agent), *run = cap_xasprintf("%s/run.sh", agent);
  write_file(toml,
             "[agent]\nid = \"a\"\nname = \"a\"\nversion = \"0.1.0\"\nruntime = \"rust-bin\"\n"
             "entry = \"run.sh\"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\n"
             "network = \"off\"\n[sandbox]\nrequired = false\nbackend = \"trusted-local\"\n"
             "filesystem = \"read-only-package\"\n",
             0644);
  write_file(run, "#!/bin/sh\necho '{}'\n", 0755);
  struct cap_diags diags = {0};
  int r = gw_registry_load(dir, &reg, &diags);
  cap_diags_free(&diags);
  free(agents), free(agent), free(toml), free(run);
  return r == 0 && reg.n == 1;
}

static enum gw_outcome get(struct gw_ready_memo *m, char **message)
{
  struct cap_error why = {0};
  enum gw_outcome o = gw_ready_memo_get(m, 0, reg.caps[0], NULL, NULL, 0, &why);
  if (message)
    *message = why.message ? cap_xstrdup(why.message) : NULL;
  cap_error_clear(&why);
  return o;
}

static void *asker(void *arg) { return (void *)(intptr_t)(get(arg, NULL) == GW_OUTCOME_OK); }

static void test_memo(void)
{
  if (!setup()) {
    printf("SKIP: cannot write a capability under /tmp\n");
    return;
  }
  if (get(NULL, NULL) != GW_OUTCOME_OK) {
    printf("SKIP: this host cannot run a dry run sandbox\n");
    return;
  }
  struct gw_ready_memo *kept = gw_ready_memo_new(reg.n, 3600 * 1000);
  struct gw_ready_memo *fresh = gw_ready_memo_new(reg.n, 0);
  CHECK(get(kept, NULL) == GW_OUTCOME_OK);
  CHECK(get(fresh, NULL) == GW_OUTCOME_OK);

  /* the entry is gone: the kept answer stands, a fresh check sees it */
  char *run = cap_xasprintf("%s/agents/a/run.sh", dir);
  CHECK(unlink(run) == 0);
  pthread_t t[8];
  for (size_t i = 0; i < 8; i++)
    CHECK(pthread_create(&t[i], NULL, asker, kept) == 0);
  for (size_t i = 0; i < 8; i++) {
    void *ok = NULL;
    pthread_join(t[i], &ok);
    CHECK(ok == (void *)1);
  }
  char *message = NULL;
  CHECK(get(fresh, &message) != GW_OUTCOME_OK);
  CHECK(message && strstr(message, "run.sh"));
  free(message);
  message = NULL;
  /* a not-ready answer is kept too, with its reason */
  write_file(run, "#!/bin/sh\necho '{}'\n", 0755);
  struct gw_ready_memo *bad = gw_ready_memo_new(reg.n, 3600 * 1000);
  CHECK(unlink(run) == 0);
  CHECK(get(bad, NULL) != GW_OUTCOME_OK);
  write_file(run, "#!/bin/sh\necho '{}'\n", 0755);
  CHECK(get(bad, &message) != GW_OUTCOME_OK);
  CHECK(message && strstr(message, "run.sh"));
  free(message);
  CHECK(get(fresh, NULL) == GW_OUTCOME_OK);
  /* outside the registry: checked each time */
  struct cap_error why = {0};
  CHECK(gw_ready_memo_get(kept, 1, reg.caps[0], NULL, NULL, 0, &why) == GW_OUTCOME_OK);
  cap_error_clear(&why);

  gw_ready_memo_free(kept);
  gw_ready_memo_free(fresh);
  gw_ready_memo_free(bad);
  gw_ready_memo_free(NULL);
  unlink(run);
  free(run);
  char *cmd = cap_xasprintf("rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  free(cmd);
  gw_registry_free(&reg);
}

UNIT_MAIN(test_memo)
