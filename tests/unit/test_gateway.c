/* Unit tests for the gateway's pieces that need no sandbox: the digest of what a capability runs
 * (gw_spec_digest), the approvals' life cycle (gateway/approval.h), the state's kept reads
 * (gateway/state_cache.c) and the audit's group commit (gateway/state_group.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/volumes.h"
#include "gateway/access.h"
#include "gateway/approval.h"
#include "gateway/call.h"
#include "gateway/plugin_state.h"
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "gateway/state.h"
#include "unit.h"

static void write_file(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  if (fd >= 0)
    close(fd);
}

static void digest_of(const struct cap_spec *spec, unsigned char out[32])
{
  struct cap_error err = {0};
  CHECK(gw_spec_digest(spec, out, &err) == 0);
  cap_error_clear(&err);
}

static void test_spec_digest(void)
{
  char dir[] = "/tmp/capsule-unit-digest.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[512];
  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_SELU);
  spec->id = strdup("t");
  spec->package_dir = strdup(dir);
  snprintf(path, sizeof path, "%s/manifest.yaml", dir);
  spec->source_path = strdup(path);
  write_file(path, "id: t\n");
  snprintf(path, sizeof path, "%s/server.js", dir);
  write_file(path, "one\n");
  unsigned char a[32], b[32];
  digest_of(spec, a);
  digest_of(spec, b);
  CHECK(memcmp(a, b, 32) == 0); /* nothing changed */
  write_file(path, "two\n");    /* same size, and a time stamp of its own */
  struct timespec when[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
  CHECK(utimensat(AT_FDCWD, path, when, 0) == 0);
  digest_of(spec, b);
  CHECK(memcmp(a, b, 32) != 0);
  memcpy(a, b, 32);
  snprintf(path, sizeof path, "%s/lib", dir);
  CHECK(mkdir(path, 0755) == 0);
  digest_of(spec, b);
  CHECK(memcmp(a, b, 32) != 0); /* a new directory */
  memcpy(a, b, 32);
  snprintf(path, sizeof path, "%s/lib/link", dir);
  CHECK(symlink("target-1", path) == 0);
  digest_of(spec, b);
  CHECK(memcmp(a, b, 32) != 0);
  memcpy(a, b, 32);
  cap_spec_add_grant(spec, "/srv/data", CAP_ACCESS_READ, CAP_FS_DIRECTORY, CAP_ORIGIN_MANIFEST);
  digest_of(spec, b);
  CHECK(memcmp(a, b, 32) != 0); /* a grant */
  unlink(path);
  snprintf(path, sizeof path, "%s/lib", dir);
  rmdir(path);
  snprintf(path, sizeof path, "%s/server.js", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/manifest.yaml", dir);
  unlink(path);
  struct cap_error err = {0};
  CHECK(gw_spec_digest(spec, a, &err) < 0 && err.message); /* no manifest */
  cap_error_clear(&err);
  rmdir(dir);
  cap_spec_free(spec);
}

static void test_approval_life(void)
{
  char dir[] = "/tmp/capsule-unit-state.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  CHECK(gw_state_open(dir, &st, &err) == 0);
  if (!st) {
    cap_error_clear(&err);
    return;
  }
  struct gw_approval_call call = {
      .capability = "c", .tool = "t", .user = "u", .args = "{}", .args_hash = "h", .binding = "b1"};
  char id[9], id2[9], lapsed_id[9];
  enum gw_approval_status status, lapsed, was;
  CHECK(gw_approval_create(st, &call, id, &err) == 0 && gw_approval_id_valid(id));
  CHECK(gw_approval_create(st, &call, id2, &err) == 0 && strcmp(id, id2) != 0);
  CHECK(gw_approval_take(st, &call, &status, id, &lapsed, lapsed_id, &err) == 0);
  CHECK(status == GW_APPROVAL_PENDING && strcmp(id, id2) == 0); /* the newest */
  struct gw_approval a = {0};
  CHECK(gw_approval_resolve(st, id, true, &was, &a, &err) == 0 && was == GW_APPROVAL_PENDING);
  CHECK(a.status == GW_APPROVAL_APPROVED && strcmp(a.capability, "c") == 0);
  gw_approval_clear(&a);
  CHECK(gw_approval_resolve(st, id, false, &was, &a, &err) == 0 && was == GW_APPROVAL_APPROVED);
  gw_approval_clear(&a);
  call.binding = "b2"; /* the tool changed */
  CHECK(gw_approval_take(st, &call, &status, id, &lapsed, lapsed_id, &err) == 0);
  CHECK(status == GW_APPROVAL_NONE && lapsed == GW_APPROVAL_VOID && strcmp(lapsed_id, id2) == 0);
  CHECK(gw_approval_create(st, &call, id, &err) == 0);
  CHECK(gw_approval_resolve(st, id, true, &was, &a, &err) == 0);
  gw_approval_clear(&a);
  CHECK(gw_approval_take(st, &call, &status, id2, &lapsed, lapsed_id, &err) == 0);
  CHECK(status == GW_APPROVAL_APPROVED && strcmp(id, id2) == 0);
  CHECK(gw_approval_take(st, &call, &status, id2, &lapsed, lapsed_id, &err) == 0);
  CHECK(status == GW_APPROVAL_PENDING || status == GW_APPROVAL_NONE); /* spent: only older ones */
  CHECK(gw_approval_create(st, &call, id, &err) == 0);
  CHECK(gw_approval_void_for(st, "c", "t", &err) == 0);
  CHECK(gw_approval_resolve(st, id, true, &was, &a, &err) == 0 && was == GW_APPROVAL_VOID);
  gw_approval_clear(&a);
  CHECK(gw_approval_resolve(st, "00000000", true, &was, &a, &err) == 0 && was == GW_APPROVAL_NONE);
  CHECK(!gw_approval_id_valid("1") && !gw_approval_id_valid("0123456G") &&
        !gw_approval_id_valid("012345678"));
  cap_error_clear(&err);
  gw_state_close(st);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* Workspace and cache names (gateway/volumes.h): any user or session is
 * one path component that reads back as itself; names the encoder never
 * makes are refused; a workspace is bound at /workspace and needs a
 * session. */
static void test_volume_names(void)
{
  static const char *const samples[] = {"alice",     "",         ".",           "..",  "a/b",
                                        "../../etc", "s-42_x.y", "caf\xc3\xa9", "%41", "-"};
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    char *enc = gw_volume_encode(samples[i]);
    CHECK(enc[0] && !strchr(enc, '/') && strcmp(enc, ".") != 0 && strcmp(enc, "..") != 0);
    char *dec = gw_volume_decode(enc);
    CHECK_STR(dec, samples[i]);
    free(dec);
    free(enc);
  }
  char *e = gw_volume_encode("a/b c");
  CHECK_STR(e, "a%2Fb%20c");
  free(e);
  CHECK(gw_volume_decode("a/b") == NULL && gw_volume_decode("%2") == NULL &&
        gw_volume_decode("%00") == NULL && gw_volume_decode(".hidden") == NULL);

  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_SELU);
  spec->id = cap_xstrdup("env");
  cap_spec_add_grant(spec, CAP_SESSION_WORKSPACE, CAP_ACCESS_READWRITE, CAP_FS_DIRECTORY,
                     CAP_ORIGIN_WORKSPACE)
      ->at = cap_xstrdup("/workspace");
  cap_spec_add_grant(spec, "/usr", CAP_ACCESS_READ, CAP_FS_DIRECTORY, CAP_ORIGIN_SYSTEM);
  char dir[] = "/tmp/capsule-unit-volumes.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  struct cap_fs_grant *g = NULL;
  size_t n = 0;
  struct cap_strv dirs = {0};
  struct cap_error err = {0};
  CHECK(gw_volumes_bind(spec, dir, "bob", NULL, &g, &n, &dirs, NULL, &err) == -EINVAL);
  CHECK(err.message && strstr(err.message, "--session"));
  cap_error_clear(&err);
  /* a bound an unprivileged caller holds as a check only: said (a
   * warning); as root it would be a loop-mounted quota (not made here) */
  spec->limits.workspace_bytes = geteuid() != 0 ? 1 << 20 : 0;
  bool unbounded = false;
  CHECK(gw_volumes_bind(spec, dir, "bob", "s/1", &g, &n, &dirs, &unbounded, &err) == 0 && n == 2);
  CHECK(unbounded == (geteuid() != 0));
  spec->limits.workspace_bytes = 0;
  char *want = cap_xasprintf("%s/workspaces/bob/s%%2F1", dir);
  CHECK_STR(g[0].path, want);
  CHECK_STR(g[0].at, "/workspace");
  CHECK(g[0].volume && !g[1].volume && dirs.len == 1);
  struct stat sb;
  CHECK(stat(want, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700);
  gw_volumes_free(g, n);
  CHECK(gw_volumes_bind(spec, NULL, NULL, NULL, &g, &n, NULL, NULL, &err) == 0 && n == 1);
  CHECK_STR(g[0].path, "/usr"); /* a dry run: no volume */
  gw_volumes_free(g, n);
  struct gw_volume_info *v = NULL;
  size_t nv = 0;
  CHECK(gw_volume_list(dir, &v, &nv, &err) == 0 && nv == 1);
  if (nv == 1) {
    CHECK_STR(v[0].user, "bob");
    CHECK_STR(v[0].name, "s/1");
  }
  gw_volume_list_free(v, nv);
  CHECK(gw_volume_remove(dir, GW_VOLUME_WORKSPACE, "bob", "s/1", &err) == 0);
  CHECK(stat(want, &sb) < 0 && errno == ENOENT);
  CHECK(gw_volume_remove(dir, GW_VOLUME_WORKSPACE, "bob", "s/1", &err) == -ENOENT);
  cap_error_clear(&err);
  free(want);
  cap_strv_free(&dirs);
  cap_spec_free(spec);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* gw_tools_cached_hold: one compiled version shared while the file stays,
 * a new one when a new file is renamed in, none without a file */
static void test_tools_cache(void)
{
  char dir[] = "/tmp/capsule-unit-tools.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_SELU);
  spec->id = cap_xstrdup("dyn");
  spec->runtime.kind = CAP_RUNTIME_GRPC;
  void *h1 = NULL, *h2 = NULL, *h3 = NULL;
  CHECK(gw_tools_cached_hold(dir, spec, &h1) == NULL && h1 == NULL);
  gw_tools_cache_store(dir, spec,
                       "[{\"name\":\"a\",\"input_schema\":{\"type\":\"object\"},"
                       "\"recommended_policy\":\"allow\"}]");
  const struct gw_tools *t1 = gw_tools_cached_hold(dir, spec, &h1);
  const struct gw_tools *t2 = gw_tools_cached_hold(dir, spec, &h2);
  CHECK(t1 && t1 == t2 && t1->n == 1 && gw_tools_find(t1, "a") &&
        gw_tools_find(t1, "a")->policy == CAP_POLICY_ALLOW);
  spec->runtime.kind = CAP_RUNTIME_MCP; /* an MCP server's: no policy of its own */
  const struct gw_tools *m = gw_tools_cached_hold(dir, spec, &h3);
  CHECK(m && m != t1 && gw_tools_find(m, "a")->policy == CAP_POLICY_BLOCK);
  gw_tools_unhold(h3);
  spec->runtime.kind = CAP_RUNTIME_GRPC;
  gw_tools_cache_store(dir, spec, "[{\"name\":\"b\",\"input_schema\":{\"type\":\"object\"}}]");
  const struct gw_tools *t3 = gw_tools_cached_hold(dir, spec, &h3);
  CHECK(t3 && t3 != t1 && t3->n == 1 && gw_tools_find(t3, "b") && !gw_tools_find(t3, "a"));
  CHECK(gw_tools_find(t1, "a")); /* the old version, still held, intact */
  gw_tools_unhold(h1);
  gw_tools_unhold(h2);
  gw_tools_unhold(h3);
  char path[512];
  snprintf(path, sizeof path, "%s/dyn.tools.json", dir);
  write_file(path, "not json");
  CHECK(gw_tools_cached_hold(dir, spec, &h1) == NULL && h1 == NULL);
  CHECK(unlink(path) == 0 && rmdir(dir) == 0);
  cap_spec_free(spec);
}

static struct gw_state *open_state(const char *dir)
{
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  CHECK(gw_state_open(dir, &st, &err) == 0);
  cap_error_clear(&err);
  return st;
}

/* The policy st reads for c.t (operator's), 'n' when none. */
static char policy_of(struct gw_state *st)
{
  enum cap_policy p = CAP_POLICY_BLOCK;
  bool found = false;
  struct cap_error err = {0};
  CHECK(gw_policy_get(st, "c", "t", "", &p, &found, &err) == 0);
  cap_error_clear(&err);
  return !found ? 'n' : p == CAP_POLICY_ALLOW ? 'a' : p == CAP_POLICY_ASK ? 'q' : 'b';
}

static void count_grant(void *arg, const char *cap, enum gw_grant_kind kind, const char *value,
                        const char *created)
{
  ++*(int *)arg;
}

static int grants_of(struct gw_state *st)
{
  int n = 0;
  struct cap_error err = {0};
  CHECK(gw_grant_list(st, "c", count_grant, &n, &err) == 0);
  cap_error_clear(&err);
  return n;
}

/* Reads kept within a call: another connection's change seen by the next
 * call, this connection's own at once; the audit's appends keep them. */
static void test_state_cache(void)
{
  char dir[] = "/tmp/capsule-unit-cache.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *a = open_state(dir), *b = a ? open_state(dir) : NULL;
  struct cap_error err = {0};
  if (!a || !b)
    goto out;
  gw_state_cache_begin(a);
  CHECK(policy_of(a) == 'n' && grants_of(a) == 0);
  CHECK(gw_policy_set(b, "c", "t", "", CAP_POLICY_ALLOW, &err) == 0);
  CHECK(gw_grant_add(b, "c", GW_GRANT_HOST, "example.org", &err) == 0);
  CHECK(policy_of(a) == 'n' && grants_of(a) == 0); /* kept: the call began before */
  gw_state_cache_end(a);
  gw_state_cache_begin(a); /* the next call sees them */
  CHECK(policy_of(a) == 'a' && grants_of(a) == 1);
  CHECK(gw_policy_set(a, "c", "t", "", CAP_POLICY_BLOCK, &err) == 0); /* its own: at once */
  CHECK(policy_of(a) == 'b');
  CHECK(gw_grant_add(a, "c", GW_GRANT_READ, "/srv", &err) == 0);
  CHECK(grants_of(a) == 2 && policy_of(a) == 'b'); /* both kept again */
  struct gw_audit_record r = {
      .user = "u", .capability = "c", .tool = "t", .decision = "allow", .outcome = "ok"};
  CHECK(gw_audit_append(a, &r, &err) == 0);
  CHECK(gw_policy_set(b, "c", "t", "", CAP_POLICY_ASK, &err) == 0);
  CHECK(policy_of(a) == 'b'); /* the audit's own rows did not drop what was kept */
  gw_state_cache_end(a);
  CHECK(policy_of(a) == 'q'); /* outside a call: read each time */
  gw_state_cache_begin(a);
  CHECK(policy_of(a) == 'q');
  gw_state_cache_end(a);
out:
  cap_error_clear(&err);
  gw_state_close(a);
  gw_state_close(b);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* error-checking: a lock by its holder says so (EDEADLK) */
static pthread_mutex_t group_mu = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static void group_acquire(void *ctx) { pthread_mutex_lock(ctx); }
static void group_release(void *ctx) { pthread_mutex_unlock(ctx); }
static const struct gw_state_lock group_lock = {group_acquire, group_release, &group_mu};
enum { GROUP_THREADS = 8, GROUP_EACH = 25 };

struct appender {
  struct gw_state *st;
  bool held; /* the lock taken before the append (as after a call's checks), or not (after a run) */
  int failed;
  int thens, unlocked_thens; /* its thens run, and those run without the lock held */
  int64_t seqs[GROUP_EACH];
};

/* A record's then: under the lock, once the record is in */
struct then_ctx {
  struct appender *ap;
  const struct gw_audit_record *r;
};
static void append_then(void *arg)
{
  struct then_ctx *t = arg;
  t->ap->thens++;
  if (pthread_mutex_trylock(&group_mu) == 0) {
    t->ap->unlocked_thens++;
    pthread_mutex_unlock(&group_mu);
  }
  if (t->r->seq < 1)
    t->ap->unlocked_thens++; /* before its record */
}

static void *append_some(void *arg)
{
  struct appender *ap = arg;
  for (int i = 0; i < GROUP_EACH; i++) {
    struct gw_audit_record r = {
        .user = "u", .capability = "c", .tool = "t", .decision = "allow", .outcome = "ok"};
    struct cap_error err = {0};
    struct then_ctx then = {ap, &r};
    pthread_mutex_lock(&group_mu);
    gw_state_cache_begin(ap->st); /* as gw_call: the others in flight are counted */
    if (!ap->held)
      pthread_mutex_unlock(&group_mu);
    ap->failed += gw_audit_append_shared(ap->st, &group_lock, ap->held, &r, append_then, &then,
                                         NULL, &err) != 0;
    gw_state_cache_end(ap->st);             /* the lock not held on return */
    if (pthread_mutex_lock(&group_mu) != 0) /* EDEADLK: still this thread's */
      ap->failed++;
    else
      pthread_mutex_unlock(&group_mu);
    ap->seqs[i] = r.seq; /* set once committed */
    cap_error_clear(&err);
  }
  return NULL;
}

/* Threads appending at once through the group commit: each record its
 * own seq, the chain, head and mark verify. */
static void test_audit_group(void)
{
  char dir[] = "/tmp/capsule-unit-group.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *st = open_state(dir);
  if (!st)
    return;
  struct appender ap[GROUP_THREADS];
  pthread_t t[GROUP_THREADS];
  for (int i = 0; i < GROUP_THREADS; i++) {
    ap[i] = (struct appender){.st = st, .held = i % 2 == 0};
    CHECK(pthread_create(&t[i], NULL, append_some, &ap[i]) == 0);
  }
  static bool seen[GROUP_THREADS * GROUP_EACH + 1];
  bool distinct = true;
  for (int i = 0; i < GROUP_THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(ap[i].failed == 0);
    CHECK(ap[i].thens == GROUP_EACH && ap[i].unlocked_thens == 0);
    for (int j = 0; j < GROUP_EACH; j++) {
      int64_t q = ap[i].seqs[j];
      distinct = distinct && q >= 1 && q <= GROUP_THREADS * GROUP_EACH && !seen[q];
      if (q >= 1 && q <= GROUP_THREADS * GROUP_EACH)
        seen[q] = true;
    }
  }
  CHECK(distinct);
  size_t n = 0;
  struct cap_error err = {0};
  CHECK(gw_audit_verify(st, &n, &err) == 0 && n == GROUP_THREADS * GROUP_EACH);
  if (err.message)
    fprintf(stderr, "audit verify: %s\n", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* Tokens kept by one handle and checked without its lock
 * (gw_access_check_kept) while another thread checks them under it: a
 * token is kept only once read, and a revoke (by another handle, as
 * `capsule access revoke` is) stops it on the next check. */
struct checker {
  struct gw_state *st;
  const char *token;
  int wrong;
};

static void *check_kept_some(void *arg)
{
  struct checker *k = arg;
  for (int i = 0; i < 200; i++) {
    char *user = NULL;
    bool op = true;
    int r = gw_access_check_kept(k->st, k->token, &user, &op);
    if ((r == 0 && (!user || strcmp(user, "alice") != 0 || op)) || (r != 0 && r != -ENOENT))
      k->wrong++;
    free(user);
  }
  return NULL;
}

static void test_access_kept(void)
{
  char dir[] = "/tmp/capsule-unit-access.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *st = open_state(dir), *other = st ? open_state(dir) : NULL;
  if (!st || !other)
    return;
  struct cap_error err = {0};
  char token[GW_ACCESS_TOKEN_LEN + 1];
  CHECK(gw_access_issue(other, "a", "alice", false, token, &err) == 0);
  char *user = NULL;
  bool op = true;
  CHECK(gw_access_check_kept(st, token, &user, &op) == -ENOENT && !user); /* not read yet */
  CHECK(gw_access_check(st, token, &user, &op, &err) == 0 && user && !op);
  free(user);
  user = NULL;
  CHECK(gw_access_check_kept(st, token, &user, &op) == 0 && user && strcmp(user, "alice") == 0);
  free(user);
  user = NULL;
  struct checker ck[2] = {{.st = st, .token = token}, {.st = st, .token = token}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&t[i], NULL, check_kept_some, &ck[i]) == 0);
  for (int i = 0; i < 50; i++) { /* under "the handle's lock": this thread alone reads st's db */
    CHECK(gw_access_check(st, token, &user, &op, &err) == 0);
    free(user);
    user = NULL;
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    CHECK(ck[i].wrong == 0);
  }
  bool found = false;
  CHECK(gw_access_revoke(other, "a", &found, &err) == 0 && found);
  CHECK(gw_access_check_kept(st, token, &user, &op) == -ENOENT && !user);
  CHECK(gw_access_check(st, token, &user, &op, &err) == -EACCES && !user);
  cap_error_clear(&err);
  gw_state_close(other);
  gw_state_close(st);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* The high-water mark moved in place over a longer mark (one written
 * otherwise, with bytes after its line) is cut to its own line, and the
 * log still verifies against it. */
static void test_hwm_longer(void)
{
  char dir[] = "/tmp/capsule-unit-hwm.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *st = open_state(dir);
  if (!st)
    return;
  struct cap_error err = {0};
  CHECK(gw_audit_change(st, "test", "u", "c", "t", "first", &err) == 0);
  char path[600];
  snprintf(path, sizeof path, "%s/audit-hwm", dir);
  /* past what a read of the mark takes in, then within it */
  static const size_t pads[] = {300, 10};
  for (size_t i = 0; i < ARRAY_SIZE(pads); i++) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    CHECK(fd >= 0);
    if (fd >= 0) {
      char pad[300];
      memset(pad, ' ', sizeof pad);
      CHECK(write(fd, pad, pads[i]) == (ssize_t)pads[i]);
      close(fd);
    }
    CHECK(gw_audit_change(st, "test", "u", "c", "t", "next", &err) == 0);
    struct stat sb;
    char line[256] = "", want[40];
    FILE *f = fopen(path, "re");
    CHECK(f && fgets(line, sizeof line, f));
    if (f)
      fclose(f);
    snprintf(want, sizeof want, "capsule-audit-hwm-v1 %zu ", i + 2);
    CHECK(stat(path, &sb) == 0 && sb.st_size == (off_t)strlen(line) &&
          strncmp(line, want, strlen(want)) == 0);
  }
  size_t n = 0;
  CHECK(gw_audit_verify(st, &n, &err) == 0 && n == 1 + ARRAY_SIZE(pads));
  if (err.message)
    fprintf(stderr, "audit verify: %s\n", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* One record appended on st (CHECKed). */
static void append_one(struct gw_state *st, const char *what)
{
  struct cap_error err = {0};
  CHECK(gw_audit_change(st, "test", "u", "c", "t", what, &err) == 0);
  if (err.message)
    fprintf(stderr, "audit append: %s\n", err.message);
  cap_error_clear(&err);
}

/* The chain's last record kept by a handle between its appends
 * (state_audit.c) is read again once another connection appended (another
 * handle of this process, another process) or this one wrote anything
 * else: appends of all of them interleaved, the chain verifies, with every
 * record in it once. */
static void test_audit_last_kept(void)
{
  char dir[] = "/tmp/capsule-unit-last.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *a = open_state(dir), *b = a ? open_state(dir) : NULL;
  struct cap_error err = {0};
  size_t want = 0, n = 0;
  if (!a || !b)
    goto out;
  static const char order[] = "aabaabbbaxaxxa";
  for (const char *o = order; *o; o++, want++) {
    if (*o != 'x') {
      append_one(*o == 'a' ? a : b, "next");
      continue;
    }
    pid_t pid = fork(); /* another process, with a handle of its own */
    if (pid == 0) {
      struct gw_state *c = NULL;
      struct cap_error cerr = {0};
      int r = gw_state_open(dir, &c, &cerr) == 0 &&
                      gw_audit_change(c, "test", "u", "c", "t", "child", &cerr) == 0
                  ? 0
                  : 1;
      gw_state_close(c);
      _exit(r);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
  }
  /* this handle's own write of another row, then its append */
  CHECK(gw_policy_set(a, "c", "t", "", CAP_POLICY_ALLOW, &err) == 0);
  append_one(a, "after a write");
  want++;
  CHECK(gw_audit_verify(a, &n, &err) == 0 && n == want);
  if (err.message || n != want)
    fprintf(stderr, "audit verify: %s (%zu records, %zu wanted)\n",
            err.message ? err.message : "ok", n, want);
  n = 0;
  CHECK(gw_audit_verify(b, &n, &err) == 0 && n == want);
out:
  cap_error_clear(&err);
  gw_state_close(a);
  gw_state_close(b);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

UNIT_MAIN(test_spec_digest, test_approval_life, test_volume_names, test_tools_cache,
          test_state_cache, test_audit_group, test_access_kept, test_hwm_longer,
          test_audit_last_kept)
