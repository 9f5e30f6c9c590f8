/* Where a call's pipeline runs (front/mcp_internal.h, enum run_where):
 * a child process per call, which opens its own state and runs gw_call
 * (the transport's process stays free, progress is sent while it runs,
 * SIGTERM stops it); or, in serve, a thread of serve's own process on its
 * state connection, for a call a warm MCP server answers (RUN_WARM) or
 * whose run step alone runs in a child (RUN_APART, gw_run_apart). Both
 * run the one body, run_pipeline, and report the same way: the call's
 * socket carries a third-party MCP server's messages for the client
 * (mcp_relay.c) while it runs, then the report, one JSON line:
 * {"outcome": N, "error": "...", "result": "JSON", "mcp_result": "JSON",
 * "mcp_error": "JSON"} (the last two: the server's own answer). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/io.h"
#include "core/text.h"
#include "core/clock.h"
#include "front/mcp_internal.h"
#include "gateway/instance.h"

static uint64_t now_ms(void) { return cap_now_ms(CLOCK_MONOTONIC); }

/* The report on fd, or (fd -1) into *out */
static void report(int fd, struct cap_buf *out, enum gw_outcome o, const struct cap_error *err,
                   const char *json, bool terminal, const struct gw_mcp_relay *relay)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "outcome");
  cap_jw_int(&w, o);
  cap_jw_key(&w, "error");
  cap_jw_string_or_null(&w, o == GW_OUTCOME_OK ? NULL : err->message ? err->message : "failed");
  cap_jw_key(&w, "result");
  cap_jw_string_or_null(&w, json);
  cap_jw_key(&w, "terminal_on_success");
  cap_jw_bool(&w, terminal);
  cap_jw_key(&w, "mcp_result");
  cap_jw_string_or_null(&w, relay->raw_result);
  cap_jw_key(&w, "mcp_error");
  cap_jw_string_or_null(&w, relay->raw_error);
  cap_jw_end_object(&w);
  if (fd < 0) {
    *out = b;
    return;
  }
  cap_buf_putc(&b, '\n');
  size_t off = 0;
  if (relay->watching) { /* the watcher's connection rides with the report's first bytes */
    ssize_t n = cap_send_fd(fd, b.data, b.len, relay->watch_fd);
    off = n > 0 ? (size_t)n : 0;
  }
  while (off < b.len) {
    ssize_t n = write(fd, b.data + off, b.len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    off += (size_t)n;
  }
  cap_buf_free(&b);
}

/* What a call's pipeline reads of its session and its run: a child reads
 * its copy of the session; a thread (the warm path) gets copies of what
 * the session may change while it runs, and the registry held. */
struct mcp_job {
  const struct mcp_config *cfg;
  const struct gw_registry *reg;
  const struct mcp_session *s; /* gather only: in a child */
  char *client_caps, *log_level;
  struct mcp_run *r; /* lives until the run is joined (the thread sets its run_pid) */
  enum gw_answer answer;
  enum run_where where;
  int fd;        /* the report's, and the relay's; -1: the report into out */
  int cancel_fd; /* with fd -1: readable, the call is cancelled; -1: none */
  struct cap_buf *out;
  struct fields *fields; /* with fd -1: the report's fields handed over, when they can be */
  void *held;            /* the registry's hold (mcp_config.reg_hold) */
  bool state_held; /* the state lock held on entry (serve's fast path): the pipeline lets it go */
  void (*at_end)(void *ctx); /* under the state lock, once the call is recorded */
  void *at_end_ctx;
};

/* A thread's report as its fields (serve's fast path): what it would
 * write, then parse again, handed over as it is; the strings its own. */
struct fields {
  bool set;
  struct mcp_report rep;
  char *result, *mcp_result, *mcp_error, *error;
};

/* Whether each string reads back from the report as it is: valid UTF-8
 * (a byte that is not would be written as U+FFFD; then the report is
 * written and parsed as before) */
static bool as_written(const char *const *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] && !cap_utf8_valid(s[i], strlen(s[i]), NULL))
      return false;
  return true;
}

static bool hand_fields(struct fields *f, enum gw_outcome o, const struct cap_error *err,
                        struct gw_result *res, struct gw_mcp_relay *relay)
{
  const char *error = o == GW_OUTCOME_OK ? NULL : err->message ? err->message : "failed";
  if (!f || !as_written((const char *[]){error, res->json, relay->raw_result, relay->raw_error}, 4))
    return false;
  *f = (struct fields){.set = true,
                       .result = res->json,
                       .mcp_result = relay->raw_result,
                       .mcp_error = relay->raw_error,
                       .error = error ? cap_xstrdup(error) : NULL};
  res->json = relay->raw_result = relay->raw_error = NULL;
  f->rep = (struct mcp_report){.has_outcome = true,
                               .outcome = o,
                               .error = f->error,
                               .result = f->result,
                               .mcp_result = f->mcp_result,
                               .mcp_error = f->mcp_error,
                               .terminal_on_success = res->terminal_on_success};
  return true;
}

/* The pipeline on st (NULL: err says why there is none), its report on fd:
 * the one body of a call, in a child or in a thread. */
static void run_pipeline(const struct mcp_job *j, struct gw_state *st, struct cap_error *err)
{
  struct mcp_run *r = j->r;
  enum gw_outcome o = GW_OUTCOME_FAILED;
  struct gw_result res = {0};
  struct gw_mcp_relay relay = {.fd = j->fd,
                               .client_caps = j->client_caps,
                               .progress_token = r->token_json,
                               .log_level = j->log_level,
                               .want_watch = r->want_watch,
                               .cancellable = j->cancel_fd >= 0,
                               .cancel_fd = j->cancel_fd};
  /* the lock the caller holds goes on to gw_call, which lets it go; a
   * pipeline without one (no state, a gather) has it let go first */
  bool held = j->state_held && st && !r->gather && j->where == RUN_WARM;
  const struct gw_state_lock *lock = j->cfg->base.state_lock;
  if (j->state_held && !held) {
    if (j->at_end)
      j->at_end(j->at_end_ctx);
    lock->release(lock->ctx);
  }
  if (st) {
    struct gw_call call = j->cfg->base;
    call.capability = r->cap;
    call.tool = r->tool;
    call.args = r->args;
    call.args_len = strlen(r->args);
    call.may_prompt = false;
    call.answer = j->answer;
    call.mcp_method = r->method;
    if (r->deadline_ms)
      call.deadline_ms = r->deadline_ms;
    call.relay = r->relayed ? &relay : NULL;
    call.warm_only = j->where != RUN_CHILD; /* no sandbox started in a thread */
    call.run_apart = j->where == RUN_APART;
    call.run_pid = &r->run_pid; /* read by the session's thread */
    if (j->where == RUN_CHILD)  /* a child's state is its own (and its copy of the lock is held) */
      call.state_lock = NULL;
    call.state_held = held; /* RUN_WARM: gw_call below, always */
    call.at_end = held ? j->at_end : NULL;
    call.at_end_ctx = j->at_end_ctx;
    if (r->gather) { /* every MCP-server capability's list, merged */
      mcp_gather_run(j->s, st, &call, r->method, &relay);
      o = GW_OUTCOME_OK;
    } else {
      o = GW_OUTCOME_NOT_WARM;
      if (j->where == RUN_APART && j->cfg->selu_warm) /* a warm Selu instance, no fork; */
        o = j->cfg->selu_warm(j->cfg->selu_warm_ctx, j->reg, &call, /* cancelled: fd's EOF */
                              r->relayed ? -1 : j->fd, &res, err);
      if (o == GW_OUTCOME_NOT_WARM)
        o = gw_call(&call, j->reg, st, &res, err);
    }
  }
  if (relay.watching || j->fd >= 0 || !hand_fields(j->fields, o, err, &res, &relay))
    report(j->fd, j->out, o, err, res.json, res.terminal_on_success, &relay);
  if (relay.watching)
    close(relay.watch_fd); /* the session has its own copy */
  free(res.json);
  free(relay.raw_result);
  free(relay.raw_error);
}

/* In the child: its own state connection (SQLite's must not cross a
 * fork), stdin and stdout away from the transport, then the pipeline. */
static _Noreturn void child(const struct mcp_job *j, pid_t parent)
{
  /* the session gone, its calls stop (their sandboxes die with them) */
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
    _exit(1);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0)
    dup2(null, STDIN_FILENO);
  dup2(STDERR_FILENO, STDOUT_FILENO); /* nothing may reach the protocol's stream */
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none; /* a server may block signals it reads through a signalfd */
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  struct cap_error err = {0};
  struct gw_state *st = NULL;
  if (!j->cfg->state_dir)
    cap_error_set(&err, EINVAL, "no state directory to run calls with");
  else if (gw_state_open(j->cfg->state_dir, &st, &err) < 0)
    st = NULL;
  run_pipeline(j, st, &err);
  _exit(0);
}

static void *call_thread(void *arg)
{
  struct mcp_job *j = arg;
  struct cap_error err = {0};
  run_pipeline(j, j->cfg->st, &err);
  cap_error_clear(&err);
  close(j->fd); /* the session reads the end of the report */
  j->fd = -1;
  return NULL;
}

void mcp_job_free(struct mcp_job *j)
{
  if (!j)
    return;
  if (j->held)
    j->cfg->reg_release(j->cfg->reg_ctx, j->held);
  if (j->fd >= 0)
    close(j->fd);
  free(j->client_caps);
  free(j->log_level);
  free(j);
}

/* Whether a keeper serves spec's server now: its status file says so.
 * A "yes" is kept for LIVE_KEPT_MS (a burst of calls reads the run
 * directory once): a keeper that ended meanwhile is started anew by the
 * call that finds it gone, as when it ends between this check and the
 * call. */
#define LIVE_KEPT_MS 1000
static struct {
  pthread_mutex_t mu;
  struct {
    char *run_dir, *id;
    uint64_t until;
  } seen[16];
} live = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool live_seen(const char *run_dir, const char *id, bool record)
{
  uint64_t now = now_ms();
  bool found = false;
  pthread_mutex_lock(&live.mu);
  size_t slot = 0;
  for (size_t i = 0; i < ARRAY_SIZE(live.seen) && !found; i++) {
    if (live.seen[i].id && strcmp(live.seen[i].id, id) == 0 &&
        strcmp(live.seen[i].run_dir, run_dir) == 0) {
      found = live.seen[i].until > now;
      slot = i;
      if (record)
        live.seen[i].until = now + LIVE_KEPT_MS;
      record = false;
    } else if (live.seen[i].until < live.seen[slot].until)
      slot = i; /* the oldest, replaced if this one is new */
  }
  if (record) {
    free(live.seen[slot].run_dir);
    free(live.seen[slot].id);
    live.seen[slot].run_dir = cap_xstrdup(run_dir);
    live.seen[slot].id = cap_xstrdup(id);
    live.seen[slot].until = now + LIVE_KEPT_MS;
  }
  pthread_mutex_unlock(&live.mu);
  return found;
}

static bool mcp_keeper_live(const struct mcp_config *cfg, const struct cap_spec *spec)
{
  if (live_seen(cfg->base.run_dir, spec->id, false))
    return true;
  struct gw_instance_info *list = NULL;
  size_t n = 0;
  struct cap_error err = {0};
  bool warm = false;
  if (gw_instance_list(cfg->base.run_dir, &list, &n, &err) == 0)
    for (size_t i = 0; i < n && !warm; i++)
      warm = strcmp(list[i].protocol, "mcp") == 0 && strcmp(list[i].capability, spec->id) == 0 &&
             list[i].state == GW_INSTANCE_SERVING;
  cap_error_clear(&err);
  free(list);
  if (warm)
    live_seen(cfg->base.run_dir, spec->id, true);
  return warm;
}

/* Where a run's pipeline runs: in a child process of its own (which opens
 * its own state), or, in serve (a state shared under a lock), in a thread
 * of this process on that state: for a third-party MCP server whose
 * keeper is alive (the first call, or one after the keeper idled out,
 * runs in a child, which starts it), the warm server answering in the
 * thread; for a Covenant agent, a Selu server or a Talos function without
 * OAuth whose tool is known, the run step alone in a child process
 * (gw_run_apart). Talos functions with OAuth (their run renews tokens in
 * the state) and Hermes runs (approvals) keep a child of their own. */
static enum run_where where_to_run(const struct mcp_session *s, const struct mcp_run *r)
{
  const struct mcp_config *cfg = s->cfg;
  if (!cfg->base.state_lock || !cfg->st || !cfg->reg_hold || !cfg->base.run_dir || r->gather ||
      getenv("CAPSULE_MCP_COLD"))
    return RUN_CHILD;
  const struct cap_spec *spec = gw_registry_find(cfg->reg, r->cap);
  if (!spec)
    return RUN_CHILD;
  if (spec->runtime.kind == CAP_RUNTIME_MCP)
    return r->relayed && !cfg->no_warm_relay && mcp_keeper_live(cfg, spec) ? RUN_WARM : RUN_CHILD;
  if (gw_runs_apart(spec))
    return r->tool_known && !r->method ? RUN_APART : RUN_CHILD;
  return RUN_CHILD;
}

/* The warm path: the pipeline in a thread on the session's state; false
 * (j as it was) when no thread can be had. */
static bool start_thread(struct mcp_session *s, struct mcp_run *r, struct mcp_job *j,
                         enum run_where where)
{
  j->where = where;
  j->held = s->cfg->reg_hold(s->cfg->reg_ctx);
  const char *caps = r->client_caps ? r->client_caps : s->client_caps;
  j->client_caps = caps ? cap_xstrdup(caps) : NULL;
  j->log_level = s->log_level ? cap_xstrdup(s->log_level) : NULL;
  if (pthread_create(&r->thread, NULL, call_thread, j) == 0) {
    r->threaded = true;
    r->job = j;
    return true;
  }
  s->cfg->reg_release(s->cfg->reg_ctx, j->held);
  free(j->client_caps);
  free(j->log_level);
  j->where = RUN_CHILD;
  j->held = NULL;
  j->client_caps = r->client_caps ? r->client_caps : s->client_caps;
  j->log_level = s->log_level;
  return false;
}

void mcp_run_start(struct mcp_session *s, struct mcp_run *r, enum gw_answer answer)
{
  int p[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0) {
    mcp_send_tool_error(s, r->id_json, "cannot start the call: no pipe");
    return mcp_run_drop(s, r);
  }
  struct mcp_job *j = cap_xcalloc(1, sizeof *j);
  *j = (struct mcp_job){.cfg = s->cfg,
                        .reg = s->cfg->reg,
                        .s = s,
                        /* borrowed, unless threaded; a 2026 request's its own */
                        .client_caps = r->client_caps ? r->client_caps : s->client_caps,
                        .log_level = s->log_level,
                        .r = r,
                        .answer = answer,
                        .fd = p[1],
                        .cancel_fd = -1};
  enum run_where where = where_to_run(s, r);
  bool threaded = where != RUN_CHILD && start_thread(s, r, j, where);
  pid_t pid = 0;
  if (!threaded) {
    pid_t parent = getpid();
    pid = fork();
    if (pid == 0) {
      close(p[0]);
      child(j, parent);
    }
    free(j); /* the child had its copy; it borrows the session's strings */
  }
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    mcp_send_tool_error(s, r->id_json, "cannot start the call: fork failed");
    return mcp_run_drop(s, r);
  }
  if (!threaded)
    close(p[1]);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  r->pid = pid;
  r->fd = p[0];
  r->started_ms = now_ms();
  r->next_progress_ms = r->started_ms + MCP_PROGRESS_EVERY_MS;
}

/* A cancelled run apart: SIGTERM to its run step's child once there is
 * one (the pipeline in the thread then audits what the run became),
 * SIGKILL MCP_KILL_GRACE_MS later. A pid read here is the child's or a zombie's:
 * the thread clears it before it reaps the child. */
void mcp_run_signal_apart(struct mcp_run *r, uint64_t now)
{
  if (!r->cancel_told && r->fd >= 0) /* a call in serve's warm Selu process: its EOF */
    shutdown(r->fd, SHUT_WR);
  r->cancel_told = true;
  pid_t pid = __atomic_load_n(&r->run_pid, __ATOMIC_ACQUIRE);
  if (!pid)
    return;
  if (!r->term_sent) {
    kill(pid, SIGTERM);
    r->term_sent = true;
    r->kill_at_ms = now + MCP_KILL_GRACE_MS;
  } else if (r->kill_at_ms && now >= r->kill_at_ms) {
    kill(pid, SIGKILL);
    r->kill_at_ms = 0;
  }
}
/* The threads' runs end: a warm one's server told as by a cancellation
 * and its relay closed both ways (which ends the exchange, and any write
 * of the thread's); a run apart's child stopped (signal_apart); each
 * joined without the state lock, which they need to audit. */
void mcp_runs_stop_threads(struct mcp_session *s)
{
  bool any = false;
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    if (!r || !r->threaded)
      continue;
    if (!r->cancelled && r->relayed)
      mcp_relay_cancel(r);
    if (r->relayed)
      shutdown(r->fd, SHUT_RDWR);
    r->cancelled = true;
    any = true;
  }
  const struct gw_state_lock *lock = s->cfg->base.state_lock;
  if (!any || !lock)
    return;
  lock->release(lock->ctx);
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    while (r && r->threaded) {
      if (!r->relayed)
        mcp_run_signal_apart(r, now_ms());
      struct timespec t;
      clock_gettime(CLOCK_REALTIME, &t);
      t.tv_nsec += 100 * 1000000L;
      if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
      }
      if (pthread_timedjoin_np(r->thread, NULL, &t) == 0)
        r->threaded = false;
    }
  }
  lock->acquire(lock->ctx);
}

/* ---- serve's fast path (mcp.h) ---- */

struct mcp_fast {
  struct mcp_config cfg; /* a copy: the session may end while the call runs */
  char *user;
  struct mcp_run *r; /* its id, capability, tool, arguments */
  void *held;        /* the registry's hold */
};

/* A tools/call's params as the fast path takes them: a name, arguments
 * (an object, or none), no progress token, not the 2026-07-28 form */
static const struct cap_node *fast_params(const struct cap_node *m, const char **name)
{
  const struct cap_node *v = cap_node_get(m, "jsonrpc"), *method = cap_node_get(m, "method"),
                        *id = cap_node_get(m, "id"), *params = cap_node_get(m, "params");
  if (!v || v->kind != CAP_NODE_STRING || strcmp(v->u.str.ptr, "2.0") != 0 || !method ||
      method->kind != CAP_NODE_STRING || strcmp(method->u.str.ptr, "tools/call") != 0 || !id ||
      (id->kind != CAP_NODE_STRING && id->kind != CAP_NODE_INT) || !params ||
      params->kind != CAP_NODE_OBJECT)
    return NULL;
  const struct cap_node *n = cap_node_get(params, "name"),
                        *args = cap_node_get(params, "arguments"),
                        *meta = cap_node_get(params, "_meta");
  if (!n || n->kind != CAP_NODE_STRING || (args && args->kind != CAP_NODE_OBJECT) ||
      cap_node_get(meta, "progressToken") || cap_node_get(meta, MCP_META_VERSION))
    return NULL;
  *name = n->u.str.ptr;
  return params;
}

static char *node_json(const struct cap_node *n)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, n);
  return cap_buf_steal(&b);
}

/* Whether the session's own path would run this call as the fast path
 * does: a warm MCP server's tool, nothing the client could be asked or
 * told while it runs (no sampling, elicitation, roots, log level). */
static const struct mcp_tool *fast_tool(struct mcp_session *s, const char *name)
{
  const struct mcp_config *cfg = s->cfg;
  if (!s->initialized || s->client_elicits || s->client_samples || s->client_elicits_any ||
      s->client_roots || s->log_level || !cfg->base.state_lock || !cfg->st || !cfg->reg_hold ||
      !cfg->base.run_dir || getenv("CAPSULE_MCP_COLD"))
    return NULL;
  mcp_table_build(s);
  const struct mcp_tool *m = mcp_table_find(&s->table, name);
  return m && m->spec->runtime.kind == CAP_RUNTIME_MCP && mcp_keeper_live(cfg, m->spec) ? m : NULL;
}

struct mcp_fast_msg {
  char *name, *id_json, *args;
};

struct mcp_fast_msg *mcp_fast_parse(const char *msg, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const char *name = NULL;
  const struct cap_node *params =
      cap_json_parse(doc, msg, len, "message", 64, &d) == 0 && doc->root->kind == CAP_NODE_OBJECT
          ? fast_params(doc->root, &name)
          : NULL;
  cap_diags_free(&d);
  struct mcp_fast_msg *m = NULL;
  if (params) {
    m = cap_xcalloc(1, sizeof *m);
    m->name = cap_xstrdup(name);
    m->id_json = node_json(cap_node_get(doc->root, "id"));
    const struct cap_node *args = cap_node_get(params, "arguments");
    m->args = args ? node_json(args) : cap_xstrdup("{}");
  }
  cap_doc_free(doc);
  return m;
}

void mcp_fast_msg_free(struct mcp_fast_msg *m)
{
  if (!m)
    return;
  free(m->name);
  free(m->id_json);
  free(m->args);
  free(m);
}

struct mcp_fast *mcp_fast_take(struct mcp_session *s, struct mcp_fast_msg *msg)
{
  const struct mcp_tool *m = msg ? fast_tool(s, msg->name) : NULL;
  if (!m)
    return NULL;
  struct mcp_fast *f = cap_xcalloc(1, sizeof *f);
  f->cfg = *s->cfg;
  f->user = s->cfg->base.user ? cap_xstrdup(s->cfg->base.user) : NULL;
  f->cfg.base.user = f->user;
  f->held = s->cfg->reg_hold(s->cfg->reg_ctx);
  struct mcp_run *r = cap_xcalloc(1, sizeof *r);
  *r = (struct mcp_run){.id_json = steal_pointer(&msg->id_json),
                        .cap = cap_xstrdup(m->spec->id),
                        .tool = cap_xstrdup(m->tool->name),
                        .relayed = true,
                        .tool_known = true,
                        .fd = -1,
                        .watch_fd = -1,
                        .args = steal_pointer(&msg->args)};
  f->r = r;
  return f;
}

static void fast_capture(void *ctx, const char *for_id, bool final, const char *json, size_t len)
{
  (void)for_id;
  char **answer = ctx;
  if (final && json && !*answer)
    *answer = cap_xstrndup(json, len);
}

void mcp_fast_run(struct mcp_fast *f, int cancel_fd, const bool *quiet, void (*at_end)(void *),
                  void *ctx, char **answer)
{
  *answer = NULL;
  struct cap_buf out = {0};
  struct fields fields = {0};
  struct mcp_job j = {.cfg = &f->cfg,
                      .reg = f->cfg.reg,
                      .r = f->r,
                      .answer = GW_ANSWER_NONE,
                      .where = RUN_WARM,
                      .fd = -1,
                      .cancel_fd = cancel_fd,
                      .out = &out,
                      .state_held = true, /* the caller's, from take */
                      .at_end = at_end,
                      .at_end_ctx = ctx};
  struct cap_error err = {0};
  j.fields = f->r->cli ? NULL : &fields; /* capsule/call answers with the report itself */
  run_pipeline(&j, f->cfg.st, &err);
  cap_error_clear(&err);
  struct pollfd p = {.fd = cancel_fd, .events = POLLIN};
  /* a cancelled request gets no answer */
  f->r->cancelled = !*quiet && poll(&p, 1, 0) > 0;
  /* the session's own answer, from the report, as its path makes it */
  struct mcp_session answering = {.io = {.send = fast_capture, .ctx = answer}};
  if (fields.set) { /* its fields as they are: the same answer, not written and parsed */
    mcp_run_finish_fields(&answering, f->r, 0, &fields.rep); /* frees the run */
    free(fields.result);
    free(fields.mcp_result);
    free(fields.mcp_error);
    free(fields.error);
  } else {
    f->r->report = cap_buf_steal(&out);
    mcp_run_finish(&answering, f->r, 0); /* frees the run */
  }
  cap_buf_free(&out);
  f->r = NULL;
}

void mcp_fast_end_hold(struct mcp_fast *f)
{
  if (f->held)
    f->cfg.reg_release(f->cfg.reg_ctx, f->held);
  f->held = NULL;
}

void mcp_fast_free(struct mcp_fast *f)
{
  if (!f)
    return;
  if (f->held)
    f->cfg.reg_release(f->cfg.reg_ctx, f->held);
  if (f->r) {
    struct mcp_session none = {0};
    mcp_run_drop(&none, f->r);
  }
  free(f->user);
  free(f);
}

const char *mcp_fast_id(const struct mcp_fast *f) { return f->r ? f->r->id_json : ""; }
