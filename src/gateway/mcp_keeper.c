/* Warm third-party MCP servers (gateway/selu.h, gw_mcp_keeper_connect):
 * for the calls of MCP front doors (capsule serve, capsule mcp), a keeper
 * process per server name (gw_instance_key: the capability, what it runs,
 * its credentials, the user) runs the server in the capability's sandbox,
 * initializes it once, and serves one call's exchange at a time on a unix
 * socket in the run directory (RUN/KEY.mcp.sock, 0600), so the server
 * keeps its state between calls and one call's messages (a sampling
 * request, a log line) are that call's alone. Bounds: one server per
 * name, at most KEEPER_MAX keepers per run directory (past them a call
 * starts a server of its own), calls taken in turn (the others wait in
 * the socket's backlog, within their own deadlines), the keeper and its
 * sandbox gone after KEEPER_IDLE_MS without a call. A server that exits (a crash) ends its
 * keeper: the call in flight fails, and the next call starts a new one.
 *
 * Between the call and the server the keeper rewrites ids: the call's
 * requests get server ids of the keeper's (ids must not repeat on one
 * server), answers go back under the call's; the server's own requests
 * and notifications, and the call's answers to them, pass unchanged. A
 * call that ends with a request in flight (its process stopped: a
 * cancellation) gets notifications/cancelled sent to the server for it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/proctitle.h"
#include "gateway/instance.h"
#include "gateway/selu.h"
#include "runtime/mcp_client.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox.h"

#ifndef __NR_close_range
#define __NR_close_range 436
#endif

#define KEEPER_IDLE_MS (5 * 60 * 1000)
#define KEEPER_INIT_MS 60000
#define KEEPER_MAX_LINE (GW_DEFAULT_OUTPUT_CAP + 65536)
#define KEEPER_MAX_PENDING 16 /* one call's requests in flight */
#define KEEPER_READY "ready"
#define KEEPER_RECHECK_MS 2000      /* without inotify: how often the package's digest is checked */
#define KEEPER_STATUS_SETTLE_MS 100 /* a call's end shown in the status file this much later */
#define KEEPER_MAX 32 /* warm MCP servers per run directory; past them calls start their own */

static uint64_t now_ms(void) { return cap_now_ms(CLOCK_MONOTONIC); }

/* ---- lines ---- */

struct lines {
  int fd;
  struct cap_buf buf;
  bool eof;
};

/* A full line out of l->buf (allocated), else NULL */
static char *take_line(struct lines *l)
{
  char *nl = l->buf.len ? memchr(l->buf.data, '\n', l->buf.len) : NULL;
  if (!nl) {
    if (l->buf.len > KEEPER_MAX_LINE) /* a line this long is nobody's message: dropped */
      l->buf.len = 0;
    return NULL;
  }
  size_t k = (size_t)(nl - l->buf.data);
  char *line = cap_xstrndup(l->buf.data, k);
  memmove(l->buf.data, nl + 1, l->buf.len - k - 1);
  l->buf.len -= k + 1;
  return line;
}

static void fill(struct lines *l)
{
  char buf[65536];
  ssize_t n = read(l->fd, buf, sizeof buf);
  if (n > 0)
    cap_buf_append(&l->buf, buf, (size_t)n);
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    l->eof = true;
}

static bool put_line(int fd, const char *text, size_t len)
{
  struct cap_buf b = {0};
  cap_buf_append(&b, text, len);
  cap_buf_putc(&b, '\n');
  size_t off = 0;
  while (off < b.len) {
    ssize_t n = send(fd, b.data + off, b.len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK)
      n = write(fd, b.data + off, b.len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    off += (size_t)n;
  }
  bool ok = off == b.len;
  cap_buf_free(&b);
  return ok;
}

/* id_json (an id as JSON text: an integer or a string) written as a value */
static void write_id(struct cap_jw *w, const char *id_json)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, id_json, strlen(id_json), "id", 4, &d) == 0)
    cap_jw_node(w, doc->root);
  else
    cap_jw_null(w);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

/* msg as JSON text with its "id" (or params.requestId) replaced by id_json */
static char *with_id(const struct cap_node *msg, const char *key, const char *id_json)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < msg->u.obj.len; i++) {
    const struct cap_member *m = &msg->u.obj.items[i];
    cap_jw_key(&w, m->key);
    if (strcmp(m->key, "params") == 0 && strcmp(key, "requestId") == 0 &&
        m->value->kind == CAP_NODE_OBJECT) {
      cap_jw_begin_object(&w);
      for (size_t k = 0; k < m->value->u.obj.len; k++) {
        const struct cap_member *p = &m->value->u.obj.items[k];
        cap_jw_key(&w, p->key);
        if (strcmp(p->key, "requestId") == 0)
          write_id(&w, id_json);
        else
          cap_jw_node(&w, p->value);
      }
      cap_jw_end_object(&w);
    } else if (strcmp(m->key, key) == 0)
      write_id(&w, id_json);
    else
      cap_jw_node(&w, m->value);
  }
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

static char *node_text(const struct cap_node *n)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, n);
  return cap_buf_steal(&b);
}

/* ---- the keeper ---- */

struct pending {
  char *theirs; /* the call's id (JSON text) */
  int64_t ours; /* the server's */
};

struct keeper {
  const struct cap_spec *spec;
  int in_w, connector, listener, status_fd;
  int child[3]; /* the sandbox's ends: closed once it runs */
  struct lines out;
  int64_t next_id;
  struct pending pending[KEEPER_MAX_PENDING];
  pthread_t thread;
  bool started;
  char status_path[4096];       /* RUN/KEY.mcp.status: what `capsule ps` lists */
  struct gw_instance_info info; /* its content */
  const char *path;             /* the socket's */
  int lock_fd;                  /* held while this keeper takes calls */
  int ino;                      /* inotify on the package's tree, or -1 */
  struct gw_package_id pkg;     /* with it: the package dir's identity then */
  unsigned char digest[32];     /* without inotify: the package's at the start */
  bool retired;                 /* the package changed: a new keeper took the name */
  bool shown_busy;              /* the status file says a call is in */
  uint64_t idle_since;          /* when the last call ended (CLOCK_REALTIME ms) */
};

/* Keeps the status file current (gateway/instance.h): `capsule ps` lists
 * the keeper, `capsule stop` ends it (SIGTERM: it speaks no stop request) */
static void keeper_status(struct keeper *k, enum gw_instance_state state, bool busy)
{
  if (k->retired)
    return;
  k->info.state = state;
  k->info.leases = busy;
  k->info.idle_since_ms = busy ? 0 : k->idle_since ? k->idle_since : cap_now_ms(CLOCK_REALTIME);
  k->shown_busy = busy;
  gw_instance_status_write(k->status_path, &k->info);
}

static void verdict(struct keeper *k, const char *what)
{
  if (k->status_fd < 0)
    return;
  if (write(k->status_fd, what, strlen(what)) < 0) {
    /* the starter is gone: nothing to tell */
  }
  close(k->status_fd);
  k->status_fd = -1;
}

/* initialize and notifications/initialized: true when the server answered */
static bool initialize(struct keeper *k)
{
  _cleanup_free_ char *init = cap_xasprintf(
      "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
      "\"%s\",\"capabilities\":{\"sampling\":{},\"elicitation\":{},\"roots\":{}},\"clientInfo\":{"
      "\"name\":\"capsule\",\"version\":\"%s\"}}}",
      (long long)k->next_id, MCP_CLIENT_PROTOCOL, CAPSULE_VERSION);
  int64_t id = k->next_id++;
  if (!put_line(k->in_w, init, strlen(init)))
    return false;
  uint64_t deadline = now_ms() + KEEPER_INIT_MS;
  for (;;) {
    _cleanup_free_ char *line = take_line(&k->out);
    if (!line) {
      uint64_t t = now_ms();
      struct pollfd p = {.fd = k->out.fd, .events = POLLIN};
      if (k->out.eof || t >= deadline || poll(&p, 1, (int)(deadline - t)) <= 0)
        return false;
      fill(&k->out);
      continue;
    }
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags d = {0};
    bool answered = cap_json_parse(doc, line, strlen(line), "server", 64, &d) == 0 &&
                    cap_node_get(doc->root, "result") && cap_node_get(doc->root, "id") &&
                    cap_node_get(doc->root, "id")->kind == CAP_NODE_INT &&
                    cap_node_get(doc->root, "id")->u.num.i == id;
    cap_diags_free(&d);
    cap_doc_free(doc);
    if (answered) {
      static const char done[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
      return put_line(k->in_w, done, sizeof done - 1);
    }
  }
}

/* A line from the call: its requests renumbered, the rest as is */
static void from_call(struct keeper *k, const char *line)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *m = cap_json_parse(doc, line, strlen(line), "call", 64, &d) == 0 &&
                                     doc->root->kind == CAP_NODE_OBJECT
                                 ? doc->root
                                 : NULL;
  cap_diags_free(&d);
  const struct cap_node *id = m ? cap_node_get(m, "id") : NULL;
  const struct cap_node *method = m ? cap_node_get(m, "method") : NULL;
  if (m && method && id) { /* a request: the server's id for it */
    struct pending *slot = NULL;
    for (size_t i = 0; i < KEEPER_MAX_PENDING && !slot; i++)
      if (!k->pending[i].theirs)
        slot = &k->pending[i];
    if (slot) {
      slot->theirs = node_text(id);
      slot->ours = k->next_id++;
      char ours[24];
      snprintf(ours, sizeof ours, "%lld", (long long)slot->ours);
      _cleanup_free_ char *text = with_id(m, "id", ours);
      put_line(k->in_w, text, strlen(text));
    }
  } else if (m && method && method->kind == CAP_NODE_STRING &&
             strcmp(method->u.str.ptr, "notifications/cancelled") == 0) {
    _cleanup_free_ char *rid = node_text(cap_node_get(cap_node_get(m, "params"), "requestId"));
    for (size_t i = 0; i < KEEPER_MAX_PENDING; i++)
      if (k->pending[i].theirs && strcmp(k->pending[i].theirs, rid) == 0) {
        char ours[24];
        snprintf(ours, sizeof ours, "%lld", (long long)k->pending[i].ours);
        _cleanup_free_ char *text = with_id(m, "requestId", ours);
        put_line(k->in_w, text, strlen(text));
      }
  } else if (m) { /* a notification, or an answer to the server's request */
    put_line(k->in_w, line, strlen(line));
  }
  cap_doc_free(doc);
}

/* A line from the server: answers to the call's requests under its ids */
static void from_server(struct keeper *k, int conn, const char *line)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *m = cap_json_parse(doc, line, strlen(line), "server", 64, &d) == 0 &&
                                     doc->root->kind == CAP_NODE_OBJECT
                                 ? doc->root
                                 : NULL;
  cap_diags_free(&d);
  const struct cap_node *id = m ? cap_node_get(m, "id") : NULL;
  if (m && !cap_node_get(m, "method") && id && id->kind == CAP_NODE_INT) {
    for (size_t i = 0; i < KEEPER_MAX_PENDING; i++) {
      struct pending *p = &k->pending[i];
      if (!p->theirs || p->ours != id->u.num.i)
        continue;
      _cleanup_free_ char *text = conn >= 0 ? with_id(m, "id", p->theirs) : NULL;
      if (text)
        put_line(conn, text, strlen(text));
      free(p->theirs);
      *p = (struct pending){0};
    }
  } else if (m && conn >= 0) { /* the server's notification or request: this call's */
    put_line(conn, line, strlen(line));
  }
  cap_doc_free(doc);
}

/* The call has gone: what it left in flight is cancelled */
static void call_ended(struct keeper *k)
{
  for (size_t i = 0; i < KEEPER_MAX_PENDING; i++) {
    struct pending *p = &k->pending[i];
    if (!p->theirs)
      continue;
    _cleanup_free_ char *text = cap_xasprintf(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
        "%lld,\"reason\":\"the call ended\"}}",
        (long long)p->ours);
    put_line(k->in_w, text, strlen(text));
    free(p->theirs);
    *p = (struct pending){0};
  }
}

/* One call's exchange; false when the server is gone */
static bool serve_call(struct keeper *k, int conn)
{
  static const char taken[] = "{\"keeper\":\"taken\"}"; /* the call may not be retried now */
  if (!put_line(conn, taken, sizeof taken - 1))
    return true;
  struct lines in = {.fd = conn};
  while (!k->out.eof && !in.eof) {
    char *line;
    while ((line = take_line(&k->out))) {
      from_server(k, conn, line);
      free(line);
    }
    while ((line = take_line(&in))) {
      from_call(k, line);
      free(line);
    }
    struct pollfd p[2] = {{.fd = k->out.fd, .events = POLLIN}, {.fd = conn, .events = POLLIN}};
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    if (p[0].revents)
      fill(&k->out);
    if (p[1].revents)
      fill(&in);
  }
  call_ended(k);
  cap_buf_free(&in.buf);
  return !k->out.eof;
}

/* Whether the package changed since the keeper started: its path naming
 * another directory or an inotify event on its tree, or (without inotify)
 * its digest recomputed. */
static bool package_changed(struct keeper *k, bool ino_ready)
{
  if (k->ino >= 0) {
    if (gw_package_moved(k->spec->package_dir, &k->pkg))
      return true;
    if (!ino_ready)
      return false;
    char buf[4096];
    return read(k->ino, buf, sizeof buf) > 0 || errno != EAGAIN;
  }
  unsigned char now[32];
  struct cap_error err = {0};
  bool changed = gw_spec_digest(k->spec, now, &err) < 0 || memcmp(now, k->digest, 32) != 0;
  cap_error_clear(&err);
  return changed;
}

/* The package changed: new calls go to a new keeper (the socket's name
 * and the lock are given up at once), and so do the calls already waiting
 * in the backlog: the listener closed, each ends before this keeper took
 * it, which its caller takes as "start a new one" (gw_call's second
 * attempt). A change found only when a call came (the package's path
 * naming another directory, a digest) must not be served by the old
 * code, and a call may have come just after an edit whose event is read
 * with it. */
static void retire(struct keeper *k, const char *path)
{
  struct stat a, b;
  if (fstat(k->listener, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino) {
    unlink(path);
    unlink(k->status_path);
  }
  k->retired = true; /* the status file is the next keeper's now */
  close(k->lock_fd);
  k->lock_fd = -1;
  close(k->listener);
  k->listener = -1;
}

/* Calls, one at a time, until idle, the server's exit, or a change */
static void serve_calls(struct keeper *k)
{
  uint64_t idle_until = now_ms() + KEEPER_IDLE_MS;
  for (;;) {
    uint64_t t = now_ms();
    if (t >= idle_until)
      return; /* idle: the server is stopped */
    int wait = (int)(idle_until - t);
    if (k->ino < 0 && wait > KEEPER_RECHECK_MS)
      wait = KEEPER_RECHECK_MS;
    if (k->shown_busy) /* shown idle once no call came for a moment */
      wait = wait < KEEPER_STATUS_SETTLE_MS ? wait : KEEPER_STATUS_SETTLE_MS;
    struct pollfd p[3] = {{.fd = k->listener, .events = POLLIN},
                          {.fd = k->out.fd, .events = POLLIN},
                          {.fd = k->ino, .events = POLLIN}};
    int r = poll(p, 3, wait);
    if (r < 0 && errno != EINTR)
      return;
    if (package_changed(k, k->ino >= 0 && p[2].revents))
      return retire(k, k->path);
    if (p[1].revents) { /* between calls: nobody's, dropped */
      fill(&k->out);
      char *line;
      while ((line = take_line(&k->out))) {
        from_server(k, -1, line);
        free(line);
      }
      if (k->out.eof)
        return; /* the server exited */
    }
    if (k->shown_busy && (r == 0 || !p[0].revents))
      keeper_status(k, GW_INSTANCE_SERVING, false);
    if (r <= 0 || !p[0].revents)
      continue;
    int conn = accept4(k->listener, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0)
      continue;
    if (!k->shown_busy) /* a burst of calls: one status write at its start, one after */
      keeper_status(k, GW_INSTANCE_SERVING, true);
    bool alive = serve_call(k, conn);
    close(conn);
    k->idle_since = cap_now_ms(CLOCK_REALTIME);
    if (!alive)
      return;
    idle_until = now_ms() + KEEPER_IDLE_MS;
  }
}

static void *keeper_thread(void *arg)
{
  struct keeper *k = arg;
  if (!initialize(k)) {
    verdict(k, "the MCP server did not answer initialize (its stderr is in the capability's log)");
  } else {
    keeper_status(k, GW_INSTANCE_SERVING, false);
    verdict(k, KEEPER_READY);
    serve_calls(k);
  }
  keeper_status(k, GW_INSTANCE_STOPPING, false);
  close(k->connector); /* stops the sandbox */
  k->connector = -1;
  return NULL;
}

static void on_started(void *ctx, struct sandbox_running *running)
{
  (void)running;
  struct keeper *k = ctx;
  for (int i = 0; i < 3; i++) {
    close(k->child[i]);
    k->child[i] = -1;
  }
  k->started = pthread_create(&k->thread, NULL, keeper_thread, k) == 0;
  if (!k->started) {
    verdict(k, "cannot start the keeper's thread");
    close(k->connector);
    k->connector = -1;
  }
}

static int listen_at(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  unlink(path); /* a dead keeper's: the lock says none runs */
  mode_t old = umask(0177);
  int r = fd >= 0 ? bind(fd, (struct sockaddr *)&a, sizeof a) : -1;
  umask(old);
  if (r < 0 || listen(fd, 64) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

/* The keeper keeps nothing of the caller's but the verdict's pipe (as 3)
 * and the lock (as 4), moved out of the way first (either may be 3 or 4
 * already); stdio is /dev/null, whose descriptor it returns (-1: none). */
static int keeper_fds(int status, int lock)
{
  int high_status = fcntl(status, F_DUPFD_CLOEXEC, 100),
      high_lock = fcntl(lock, F_DUPFD_CLOEXEC, 100);
  if (high_status < 0 || high_lock < 0 || dup2(high_status, 3) < 0 || dup2(high_lock, 4) < 0)
    _exit(1);
  syscall(__NR_close_range, 5U, ~0U, 0U);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int i = 0; i < 3 && null >= 0; i++)
    dup2(null, i);
  return null;
}

static _Noreturn void keeper_main(const struct gw_call *call, const struct cap_spec *spec,
                                  char *const *env, size_t n_env, const char *path, int status,
                                  int lock)
{
  int null = keeper_fds(status, lock);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  cap_proctitle_set("capsule-mcp", "capsule mcp-keeper %s", spec->id); /* never a call's args */
  struct keeper k = {
      .spec = spec, .status_fd = 3, .lock_fd = 4, .connector = -1, .next_id = 1, .path = path};
  k.ino = gw_package_watch(spec->package_dir, &k.pkg);
  struct cap_error derr = {0};
  if (k.ino < 0 && gw_spec_digest(spec, k.digest, &derr) < 0)
    cap_error_clear(&derr); /* an unreadable package: the first recheck retires the keeper */
  size_t plen = strlen(path) - strlen(".sock"); /* RUN/KEY.mcp */
  snprintf(k.status_path, sizeof k.status_path, "%.*s.status", (int)plen, path);
  k.info = (struct gw_instance_info){
      .pid = getpid(), .max_leases = 1, .started_ms = cap_now_ms(CLOCK_REALTIME)};
  snprintf(k.info.capability, sizeof k.info.capability, "%s", spec->id);
  snprintf(k.info.protocol, sizeof k.info.protocol, "mcp");
  keeper_status(&k, GW_INSTANCE_STARTING, false);
  k.listener = listen_at(path);
  int in[2], out[2], conn[2];
  _cleanup_free_ char *log_path = gw_tool_log_prepare(call->log_dir, spec);
  int log_fd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
  if (k.listener < 0 || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, conn) < 0) {
    verdict(&k, "cannot set up the warm server's socket and pipes");
    _exit(1);
  }
  k.in_w = in[1];
  k.out = (struct lines){.fd = out[0]};
  k.connector = conn[0];
  k.child[0] = in[0];
  k.child[1] = out[1];
  k.child[2] = conn[1];
  struct cap_strv args = {0};
  for (size_t i = 0; i < spec->runtime.command.len; i++) {
    _cleanup_free_ char *a = sandbox_expand_path(spec->runtime.command.v[i]);
    cap_strv_push(&args, a);
  }
  _cleanup_free_ char **argv = cap_xcalloc(args.len + 1, sizeof *argv);
  memcpy(argv, args.v, args.len * sizeof *argv);
  struct cap_spec run_spec = *spec; /* shallow: no wall clock for a server kept warm */
  run_spec.limits.wall_ms = 0;
  struct sandbox_options opt = {
      .argv = argv,
      .workdir = spec->package_dir,
      .extra_env = env,
      .n_extra_env = n_env,
      .redirect_stdio = true,
      .stdio = {in[0], out[1], log_fd >= 0 ? log_fd : null},
      .has_connector = true,
      .connector_fd = conn[1],
      .hidden = call->hidden,
      .n_hidden = call->n_hidden,
      .id_base = call->id_base,
      .log_max_bytes = gw_tool_log_bound(spec),
      .on_started = on_started,
      .on_started_ctx = &k,
  };
  struct sandbox_result res = {0};
  struct cap_error err = {0};
  int r = sandbox_run(&run_spec, &opt, &res, &err);
  if (r < 0)
    verdict(&k, err.message ? err.message : "cannot start the sandbox");
  if (k.started)
    pthread_join(k.thread, NULL);
  struct stat a, b;
  if (fstat(k.listener, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino) {
    unlink(path); /* still ours, and so is the status */
    unlink(k.status_path);
  }
  _exit(0);
}

static int connect_to(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

/* Forks the keeper (detached: it outlives this call) and waits for its
 * verdict; 0 once its server is initialized. */
static int start_keeper(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                        size_t n_env, const char *path, int lock, struct cap_error *err)
{
  int status[2];
  if (pipe2(status, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "cannot create a pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(status[0]);
    close(status[1]);
    return cap_error_errno(err, errno, "cannot fork the warm server's keeper");
  }
  if (pid == 0) {
    close(status[0]);
    setsid();
    pid_t keeper = fork();
    if (keeper != 0)
      _exit(keeper < 0);
    keeper_main(call, spec, env, n_env, path, status[1], lock);
  }
  close(status[1]);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  char msg[512];
  size_t got = 0;
  uint64_t deadline = now_ms() + KEEPER_INIT_MS + 5000;
  for (;;) {
    uint64_t t = now_ms();
    struct pollfd p = {.fd = status[0], .events = POLLIN};
    if (t >= deadline || poll(&p, 1, (int)(deadline - t)) <= 0)
      break;
    ssize_t n = read(status[0], msg + got, sizeof msg - 1 - got);
    if (n <= 0)
      break;
    got += (size_t)n;
    if (got >= sizeof msg - 1)
      break;
  }
  close(status[0]);
  msg[got] = '\0';
  if (strcmp(msg, KEEPER_READY) != 0)
    return cap_error_set(err, ECONNREFUSED, "%s's warm server did not start: %s", spec->id,
                         got ? msg : "its keeper exited");
  return 0;
}

/* How many keepers live in run_dir: those holding their lock */
static size_t live_keepers(const char *run_dir)
{
  _cleanup_close_ int dir = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int copy = dir >= 0 ? fcntl(dir, F_DUPFD_CLOEXEC, 0) : -1;
  DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 9 || strcmp(e->d_name + len - 9, ".mcp.lock") != 0)
      continue;
    int fd = openat(dir, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
      n++;
    if (fd >= 0)
      close(fd);
  }
  if (d)
    closedir(d);
  else if (copy >= 0)
    close(copy);
  return n;
}

int gw_mcp_keeper_connect(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                          size_t n_env, struct cap_error *err)
{
  char key[33];
  if (!call->run_dir)
    return cap_error_set(err, EINVAL, "no run directory for warm servers");
  int r = gw_instance_key(call, spec, NULL, false, env, n_env, key, err); /* the keeper watches */
  if (r < 0)
    return r;
  _cleanup_free_ char *path = cap_xasprintf("%s/%s.mcp.sock", call->run_dir, key);
  if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return cap_error_set(err, ENAMETOOLONG, "the run directory's path is too long for a socket");
  int fd = connect_to(path);
  if (fd >= 0)
    return fd;
  _cleanup_free_ char *lock_path = cap_xasprintf("%s/%s.mcp.lock", call->run_dir, key);
  _cleanup_close_ int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0)
    return cap_error_errno(err, errno, "cannot open %s", lock_path);
  /* a keeper holds the lock for its whole life: taken, none runs */
  if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
    for (int i = 0; i < 500 && fd < 0; i++) { /* one is starting: its socket comes */
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
      fd = connect_to(path);
    }
    return fd >= 0 ? fd
                   : cap_error_set(err, ETIMEDOUT, "%s's warm server is not reachable", spec->id);
  }
  const char *max_env = getenv("CAPSULE_MCP_MAX_WARM"); /* the operator's bound, else ours */
  long max = max_env && *max_env ? strtol(max_env, NULL, 10) : KEEPER_MAX;
  if (max < 0 || max > 4096)
    max = KEEPER_MAX;
  if (live_keepers(call->run_dir) > (size_t)max) /* ours counts: its lock is held */
    return cap_error_set(err, EBUSY, "%ld warm MCP servers run already", max);
  r = start_keeper(call, spec, env, n_env, path, lock, err);
  if (r < 0)
    return r;
  fd = connect_to(path);
  return fd >= 0 ? fd : cap_error_errno(err, -fd, "cannot reach %s's warm server", spec->id);
}
