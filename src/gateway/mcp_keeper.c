/* Warm third-party MCP servers (gateway/selu.h, gw_mcp_keeper_connect):
 * for the calls of MCP front doors (capsule serve, capsule mcp), a keeper
 * process per server name (gw_instance_key: the capability, what it runs,
 * its credentials, the user) runs the server in the capability's sandbox,
 * initializes it once, and serves calls on a unix socket in the run
 * directory (RUN/KEY.mcp.sock, 0600), several at once, a connection each
 * (mcp_keeper_route.c: ids renumbered, answers and progress to the call
 * that asked, the egress proxy's decisions to the oldest call; a front
 * door keeps a connection for its next call, mcp_keeper_pool.c), so the
 * server keeps its state between calls and answers them as they come, as
 * it would a client's pipelined requests. A front door may also hold a
 * watcher's connection: what the server says of its resources and lists
 * between calls reaches it. Bounds: one server per name, at most
 * KEEPER_MAX keepers per run directory (past them a call starts a server
 * of its own), KEEPER_MAX_CONNS connections at once (the others wait in
 * the socket's backlog, within their own deadlines), the keeper and its
 * sandbox gone after KEEPER_IDLE_MS without a call or a watcher (kept
 * connections do not keep it: they see its end). A server
 * that exits (a crash) ends its keeper: the calls in flight fail, and the
 * next call starts a new one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
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
#include "core/io.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/proctitle.h"
#include "gateway/instance.h"
#include "gateway/mcp_keeper_int.h"
#include "gateway/selu.h"
#include "runtime/mcp_client.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox.h"

#ifndef __NR_close_range
#define __NR_close_range 436
#endif

#define KEEPER_IDLE_MS (5 * 60 * 1000)
#define KEEPER_INIT_MS 60000
#define KEEPER_READY "ready"
#define KEEPER_REVOKED "revoked: "  /* the verdict's prefix when a revoke came while it started */
#define KEEPER_RECHECK_MS 2000      /* without inotify: how often the package's digest is checked */
#define KEEPER_STATUS_SETTLE_MS 100 /* a call's end shown in the status file this much later */
#define KEEPER_MAX 32 /* warm MCP servers per run directory; past them calls start their own */

static uint64_t now_ms(void) { return cap_now_ms(CLOCK_MONOTONIC); }

/* Keeps the status file current (gateway/instance.h): `capsule ps` lists
 * the keeper, `capsule stop` ends it (SIGTERM: it speaks no stop request) */
static void keeper_status(struct keeper *k, enum gw_instance_state state, bool busy)
{
  k->info.state = k->retired ? GW_INSTANCE_STOPPING : state; /* no new call: not warm */
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
  if (!keeper_put_server(k, init, strlen(init)))
    return false;
  uint64_t deadline = now_ms() + KEEPER_INIT_MS;
  for (;;) {
    _cleanup_free_ char *line = keeper_take_line(&k->out);
    if (!line) {
      uint64_t t = now_ms();
      struct pollfd p = {.fd = k->out.fd, .events = POLLIN};
      if (k->out.eof || t >= deadline || poll(&p, 1, (int)(deadline - t)) <= 0)
        return false;
      keeper_fill(&k->out);
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
      return keeper_put_server(k, done, sizeof done - 1);
    }
  }
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
  /* the name is the next keeper's now: the status moves to one of this
   * keeper's own (listed while its calls go on), before the lock goes */
  size_t plen = strlen(path) - strlen(".sock"); /* RUN/KEY.mcp */
  const char *key = strrchr(path, '/') + 1;
  _cleanup_free_ char *run = cap_xstrndup(path, (size_t)(key - 1 - path));
  _cleanup_free_ char *name = cap_xstrndup(key, plen - (size_t)(key - path));
  gw_instance_status_retire(run, name, k->status_path, sizeof k->status_path, &k->info);
  struct stat a, b;
  if (fstat(k->listener, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino)
    unlink(path);
  k->retired = true;
  close(k->lock_fd);
  k->lock_fd = -1;
  close(k->listener);
  k->listener = -1;
}

/* "taken" on a new connection, with the read end of its take pipe (the
 * calls after this one, on the connection kept, are said taken by a byte
 * on it: runtime/mcp_client.c); *ack gets the write end, or -1 without a
 * pipe (then a line says each call taken). false: the caller is gone. */
static bool say_taken(int conn, int *ack)
{
  static const char taken[] = "{\"keeper\":\"taken\"}\n"; /* the call may not be retried now */
  int pipe_fds[2];
  *ack = -1;
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
    return keeper_put_line(conn, taken, sizeof taken - 2);
  ssize_t n = cap_send_fd(conn, taken, sizeof taken - 1, pipe_fds[0]);
  close(pipe_fds[0]);
  bool whole = n == (ssize_t)(sizeof taken - 1) ||
               (n >= 0 && cap_write_all(conn, taken + n, sizeof taken - 1 - (size_t)n,
                                        CAP_IO_NOSIGPIPE) == 0);
  if (!whole) {
    close(pipe_fds[1]);
    return false;
  }
  *ack = pipe_fds[1];
  return true;
}

static void accept_call(struct keeper *k)
{
  /* blocking: a line is written whole, as a slow reader takes it (it reads as it goes) */
  int conn = accept4(k->listener, NULL, NULL, SOCK_CLOEXEC);
  if (conn < 0)
    return;
  int ack;
  if (!say_taken(conn, &ack)) {
    close(conn);
    return;
  }
  if (keeper_conn_add(k, conn, ack) && !k->shown_busy) /* a burst: one status write at its start */
    keeper_status(k, GW_INSTANCE_SERVING, true);
}

/* Reads what every connection and the server sent; false once the server
 * is gone. */
static bool pump(struct keeper *k, const struct pollfd *p, size_t n_conns)
{
  size_t before = keeper_calls(k);
  if (p[1].revents) {
    keeper_fill(&k->out);
    char *line;
    while ((line = keeper_take_line(&k->out))) {
      keeper_from_server(k, line);
      free(line);
    }
  }
  struct keeper_conn *polled[KEEPER_MAX_CONNS];
  memcpy(polled, k->conns, n_conns * sizeof *polled); /* a drop moves the list */
  for (size_t i = 0; i < n_conns; i++) {
    struct keeper_conn *c = polled[i];
    if (!p[3 + i].revents)
      continue;
    keeper_fill(&c->in);
    char *line;
    while ((line = keeper_take_line(&c->in))) {
      keeper_from_conn(k, c, line);
      free(line);
    }
    if (c->in.eof)
      keeper_conn_drop(k, c);
  }
  size_t after = keeper_calls(k);
  if (before && !after) /* the last call ended: answered, or gone */
    k->idle_since = cap_now_ms(CLOCK_REALTIME);
  if (after && !k->shown_busy) /* a call began on a kept connection */
    keeper_status(k, GW_INSTANCE_SERVING, true);
  return !k->out.eof;
}

/* Whether poll woke for the server's stdout alone: no call can have come
 * (the package is checked before what a caller sends is read, not when
 * the server answers) */
static bool only_server(const struct pollfd *p, size_t n_conns)
{
  if (p[0].revents || p[2].revents)
    return false;
  for (size_t i = 0; i < n_conns; i++)
    if (p[3 + i].revents)
      return false;
  return true;
}

/* Calls, as they come, until idle, the server's exit, or a change (then
 * the calls connected are finished first) */
static void serve_calls(struct keeper *k)
{
  uint64_t idle_until = now_ms() + KEEPER_IDLE_MS;
  for (;;) {
    uint64_t t = now_ms();
    if (keeper_calls(k) || keeper_watchers(k))
      idle_until = t + KEEPER_IDLE_MS;
    else if (t >= idle_until || k->retired)
      return; /* idle (or retired, its calls done; kept connections see the end): stopped */
    int wait = (int)(idle_until - t);
    if (k->ino < 0 && wait > KEEPER_RECHECK_MS)
      wait = KEEPER_RECHECK_MS;
    if (k->shown_busy) /* shown idle once no call came for a moment */
      wait = wait < KEEPER_STATUS_SETTLE_MS ? wait : KEEPER_STATUS_SETTLE_MS;
    struct pollfd p[3 + KEEPER_MAX_CONNS] = {
        {.fd = k->n_conns < KEEPER_MAX_CONNS ? k->listener : -1, .events = POLLIN},
        {.fd = k->out.fd, .events = POLLIN},
        {.fd = k->ino, .events = POLLIN}};
    size_t n = k->n_conns;
    for (size_t i = 0; i < n; i++)
      p[3 + i] = (struct pollfd){.fd = k->conns[i]->fd, .events = POLLIN};
    int r = poll(p, 3 + n, wait);
    if (r < 0 && errno != EINTR)
      return;
    if (!k->retired && (r <= 0 || !only_server(p, n)) &&
        package_changed(k, k->ino >= 0 && p[2].revents)) {
      retire(k, k->path);
      /* watchers and kept connections go to the new keeper; calls finish here */
      for (size_t i = n; i-- > 0;)
        if (k->conns[i]->watch || !k->conns[i]->in_call) {
          keeper_conn_drop(k, k->conns[i]);
          n--;
        }
    }
    if (r > 0 && !pump(k, p, n))
      return;                                        /* the server exited */
    if (k->shown_busy && !keeper_calls(k) && r == 0) /* no call for a moment: shown idle */
      keeper_status(k, GW_INSTANCE_SERVING, false);
    if (r > 0 && p[0].revents && !k->retired)
      accept_call(k);
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

/* Once its status is out: a revoke since its call read the count of
 * revokes (epoch; gateway/instance.h, gw_grants_epoch) ends the keeper */
static void keeper_check_revokes(struct keeper *k, const char *run_dir, const uint64_t *epoch)
{
  if (!epoch || !gw_grants_epoch_moved(run_dir, k->spec->id, *epoch))
    return;
  verdict(k, KEEPER_REVOKED "its grants were revoked while it started; call again");
  unlink(k->status_path);
  _exit(0);
}

static _Noreturn void keeper_main(const struct gw_call *call, const struct cap_spec *spec,
                                  char *const *env, size_t n_env, const char *path, int status,
                                  int lock, const uint64_t *epoch)
{
  int null = keeper_fds(status, lock);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  cap_proctitle_set("capsule-mcp", "capsule mcp-keeper %s", spec->id); /* never a call's args */
  struct keeper k = {
      .spec = spec, .status_fd = 3, .lock_fd = 4, .connector = -1, .next_id = 1, .path = path};
  keeper_route_init(&k, call->run_dir, spec->id, call->user);
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
  keeper_check_revokes(&k, call->run_dir, epoch);
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
      .proxy = {.sink = &k.egress_sink}, /* its decisions go to the calls' egress log */
  };
  struct sandbox_result res = {0};
  struct cap_error err = {0};
  int r = sandbox_run(&run_spec, &opt, &res, &err);
  if (r < 0)
    verdict(&k, err.message ? err.message : "cannot start the sandbox");
  if (k.started)
    pthread_join(k.thread, NULL);
  keeper_route_end(&k); /* the proxy has stopped: what it decided since the last call kept */
  struct stat a, b;
  if (fstat(k.listener, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino) {
    unlink(path); /* still ours, and so is the status */
    unlink(k.status_path);
  } else if (k.retired) {
    unlink(k.status_path); /* its own name (retire) */
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
  /* gateway/instance.h, gw_grants_epoch: ESTALE fails the call (run_mcp) */
  const uint64_t *epoch = call->grants_epoch_read ? &call->grants_epoch : NULL;
  if (epoch && gw_grants_epoch_moved(call->run_dir, spec->id, *epoch))
    return cap_error_set(err, ESTALE, "%s's grants were revoked while this call began; call again",
                         spec->id);
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
    keeper_main(call, spec, env, n_env, path, status[1], lock, epoch);
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
  if (strncmp(msg, KEEPER_REVOKED, strlen(KEEPER_REVOKED)) == 0)
    return cap_error_set(err, ESTALE, "%s's warm server did not start: %s", spec->id,
                         msg + strlen(KEEPER_REVOKED));
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

/* The server names computed before (gw_instance_key reads the manifest
 * and the run directory's salt and checks the directory): by what the
 * name is made of that a call may change (the run directory, the
 * capability, its manifest's path, the program's file, the credentials,
 * the user and session, and what its sandbox may reach:
 * gw_spec_rights_digest, which the operator's grants and revokes change
 * with no change to the package), the last name, tried first. A keeper that
 * retired after a change in its package, or ended, has left its socket:
 * the name is then computed anew. */
static struct {
  pthread_mutex_t mu;
  struct {
    unsigned char in[16];
    char key[33];
  } seen[32];
  size_t next;
} names = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void name_inputs(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                        size_t n_env, unsigned char out[16])
{
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, 16);
  const char *parts[] = {call->run_dir,
                         spec->id,
                         spec->source_path,
                         call->user ? call->user : "",
                         call->session_id ? call->session_id : "",
                         spec->runtime.command.len ? spec->runtime.command.v[0] : ""};
  for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
    crypto_generichash_update(&st, (const unsigned char *)parts[i], strlen(parts[i]) + 1);
  struct stat sb; /* an upgraded interpreter is another server */
  if (parts[5][0] == '/' && stat(parts[5], &sb) == 0) {
    int64_t id[4] = {(int64_t)sb.st_ino, (int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec,
                     (int64_t)sb.st_mtim.tv_nsec};
    crypto_generichash_update(&st, (const unsigned char *)id, sizeof id);
  }
  for (size_t i = 0; i < n_env; i++)
    crypto_generichash_update(&st, (const unsigned char *)env[i], strlen(env[i]) + 1);
  unsigned char rights[32]; /* the operator's grants: a revoked one names another server */
  gw_spec_rights_digest(spec, rights);
  crypto_generichash_update(&st, rights, sizeof rights);
  crypto_generichash_final(&st, out, 16);
}

static bool name_seen(const unsigned char in[16], char key[33])
{
  bool found = false;
  pthread_mutex_lock(&names.mu);
  for (size_t i = 0; i < ARRAY_SIZE(names.seen) && !found; i++)
    if (names.seen[i].key[0] && memcmp(names.seen[i].in, in, 16) == 0) {
      memcpy(key, names.seen[i].key, 33);
      found = true;
    }
  pthread_mutex_unlock(&names.mu);
  return found;
}

static void name_keep(const unsigned char in[16], const char key[33])
{
  pthread_mutex_lock(&names.mu);
  size_t i = 0;
  while (i < ARRAY_SIZE(names.seen) && memcmp(names.seen[i].in, in, 16) != 0)
    i++;
  if (i == ARRAY_SIZE(names.seen))
    i = names.next++ % ARRAY_SIZE(names.seen);
  memcpy(names.seen[i].in, in, 16);
  memcpy(names.seen[i].key, key, 33);
  pthread_mutex_unlock(&names.mu);
}

int gw_mcp_keeper_connect(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                          size_t n_env, struct cap_error *err)
{
  char path[GW_MCP_KEEPER_PATH_MAX];
  int ack;
  return gw_mcp_keeper_open(call, spec, env, n_env, false, path, &ack, err); /* ack: -1 */
}

void gw_mcp_keeper_keep(const char *path, int fd, int ack) { keeper_pool_put(path, fd, ack); }

/* A kept connection to the keeper at path (and its take pipe), else a new one */
static int reach(const char *path, bool kept, int *ack)
{
  int fd = kept ? keeper_pool_take(path, ack) : -1;
  return fd >= 0 ? fd : connect_to(path);
}

int gw_mcp_keeper_open(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                       size_t n_env, bool kept, char out[GW_MCP_KEEPER_PATH_MAX], int *ack,
                       struct cap_error *err)
{
  char key[33];
  *out = '\0';
  *ack = -1;
  if (!call->run_dir)
    return cap_error_set(err, EINVAL, "no run directory for warm servers");
  unsigned char in[16];
  name_inputs(call, spec, env, n_env, in);
  if (name_seen(in, key) && /* its keeper, when it still serves that name */
      snprintf(out, GW_MCP_KEEPER_PATH_MAX, "%s/%s.mcp.sock", call->run_dir, key) <
          GW_MCP_KEEPER_PATH_MAX) {
    int fd = reach(out, kept, ack);
    if (fd >= 0)
      return fd;
  }
  int r = gw_instance_key(call, spec, NULL, false, env, n_env, key, err); /* the keeper watches */
  if (r < 0)
    return r;
  name_keep(in, key);
  _cleanup_free_ char *path = cap_xasprintf("%s/%s.mcp.sock", call->run_dir, key);
  if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return cap_error_set(err, ENAMETOOLONG, "the run directory's path is too long for a socket");
  snprintf(out, GW_MCP_KEEPER_PATH_MAX, "%s", path);
  int fd = reach(path, kept, ack);
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

bool gw_mcp_keeper_watch(int fd)
{
  static const char watch[] = "{\"keeper\":\"watch\"}";
  return keeper_put_line(fd, watch, sizeof watch - 1);
}
