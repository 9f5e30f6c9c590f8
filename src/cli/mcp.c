/* `capsule mcp`: the MCP dispatcher (front/mcp.h) on stdio. Messages are
 * newline-delimited JSON-RPC (the MCP stdio transport); a line longer than
 * MCP_MAX_MESSAGE is answered with an error and skipped to its end. Stdout
 * carries only protocol messages; capsule's own words go to stderr.
 *
 * The protocol moves off descriptors 0 and 1 at the start (to copies
 * closed on exec; 0 becomes /dev/null, 1 a copy of stderr), so no child
 * of this process, forked or exec'd, can write into it. Calls run as in
 * serve: the session's thread holds the state lock while it works, a
 * call whose run step alone needs a child runs in a thread of this
 * process (mcp_run.c's warm path), and a Selu call on a running instance
 * goes to the warm Selu process (front/serve.h, serve_selu_open) with no
 * fork; everything else runs in a child of its own. A change under
 * --caps reloads the registry as serve's does (front/caps_watch.h) and
 * tells the client (notifications/tools/list_changed). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "front/caps_watch.h"
#include "front/mcp.h"
#include "front/serve.h"
#include "gateway/db.h"
#include "gateway/registry.h"
#include "gateway/state.h"
#include "image/image.h"

static volatile sig_atomic_t stop_requested;
/* written by on_stop: the session's thread wakes even when a call's
 * thread took the signal */
static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig)
{
  (void)sig;
  stop_requested = 1;
  int e = errno;
  if (stop_pipe[1] >= 0 && write(stop_pipe[1], "s", 1) < 0) {
    /* full: it is awake already */
  }
  errno = e;
}

struct stdio_ctx {
  int in, out; /* the protocol's descriptors */
  bool broken; /* stdout is gone: the client left */
};

static void send_line(void *ctx, const char *for_id, bool final, const char *json, size_t len)
{
  (void)for_id;
  (void) final;
  struct stdio_ctx *c = ctx;
  if (!json)
    return; /* a request that ends without an answer */
  char nl = '\n';
  struct iovec iov[2] = {{(void *)json, len}, {&nl, 1}};
  size_t left = len + 1;
  while (!c->broken && left) {
    ssize_t n = writev(c->out, iov, 2);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      c->broken = true;
      break;
    }
    left -= (size_t)n;
    for (int i = 0; i < 2 && n > 0; i++) {
      size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
      iov[i].iov_base = (char *)iov[i].iov_base + k;
      iov[i].iov_len -= k;
      n -= (ssize_t)k;
    }
  }
}

/* Splits what stdin gave into lines and hands each to the session. */
struct lines {
  struct cap_buf buf;
  bool skipping; /* inside a line past the limit */
};

static void feed(struct mcp_session *s, struct lines *l, const char *data, size_t n)
{
  for (size_t i = 0; i < n;) {
    const char *nl = memchr(data + i, '\n', n - i);
    size_t end = nl ? (size_t)(nl - data) : n;
    if (!l->skipping)
      cap_buf_append(&l->buf, data + i, end - i);
    if (!l->skipping && l->buf.len > MCP_MAX_MESSAGE) {
      mcp_session_receive(s, l->buf.data, l->buf.len); /* the size error */
      cap_buf_free(&l->buf);
      l->skipping = true;
    }
    if (nl) {
      size_t len = l->buf.len;
      while (len && (l->buf.data[len - 1] == '\r' || l->buf.data[len - 1] == ' '))
        len--;
      if (!l->skipping && len)
        mcp_session_receive(s, l->buf.data, len);
      cap_buf_free(&l->buf);
      l->skipping = false;
    }
    i = end + (nl ? 1 : 0);
  }
}

/* The state lock (gw_call.state_lock): the session's thread holds it
 * while it works (SQLite included, and so while it forks a call's child);
 * a call's thread takes it for its own use of the state. */
static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER;
static void lock_state(void *ctx)
{
  (void)ctx;
  pthread_mutex_lock(&state_mu);
}
static void unlock_state(void *ctx)
{
  (void)ctx;
  pthread_mutex_unlock(&state_mu);
}
/* The registry: a generation per load (the first, then one per reload),
 * held by the session while it is current and by each call running in a
 * thread (mcp_config.reg_hold), freed with its last hold. Under state_mu. */
struct gen {
  struct gw_registry reg;
  int refs;
};
static struct gen *gen_cur;

static void gen_unref(struct gen *g)
{
  if (g && --g->refs == 0) {
    gw_registry_free(&g->reg);
    free(g);
  }
}

static void *reg_hold(void *ctx)
{
  (void)ctx;
  gen_cur->refs++;
  return gen_cur;
}

static void reg_release(void *ctx, void *held)
{
  (void)ctx;
  gen_unref(held);
}

/* What a reload touches besides the registry. */
struct reloader {
  struct caps_watch watch;
  struct mcp_config *cfg;
  struct mcp_session *s;
  struct serve_selu *selu;
};

/* The watch renewed (a change while the tree is read: another reload),
 * its mode said on stderr when it changed. */
static void rewatch(struct caps_watch *w)
{
  bool was = w->rescan;
  if (!caps_watch_renew(w))
    return;
  if (w->rescan)
    fprintf(stderr,
            "capsule mcp: warning: cannot watch %s with inotify (%s): rescanning it every 2 s\n",
            w->dir, w->error);
  else if (was)
    fprintf(stderr, "capsule mcp: watching %s with inotify again\n", w->dir);
}

/* A new generation from the directory, made current, the session moved
 * to it and told; the one before stays when the directory cannot be
 * read. Its diagnostics on stderr, as at the start. */
static void reload(struct reloader *rl)
{
  rewatch(&rl->watch);
  struct gen *g = cap_xcalloc(1, sizeof *g);
  struct cap_diags diags = {0};
  int r = gw_registry_load(rl->watch.dir, &g->reg, &diags);
  cap_diags_sort(&diags);
  cap_diags_print(&diags, stderr);
  size_t problems = diags.len;
  cap_diags_free(&diags);
  if (r < 0) {
    fprintf(stderr,
            "capsule mcp: cannot read the capabilities in %s; the ones loaded before stay\n",
            rl->watch.dir);
    free(g);
    return;
  }
  fprintf(stderr, "capsule mcp: reloaded %s: %zu capabilities, %zu problems\n", rl->watch.dir,
          g->reg.n, problems);
  g->refs = 1;
  struct gen *old = gen_cur;
  gen_cur = g;
  rl->cfg->reg = &g->reg;
  mcp_session_registry_changed(rl->s);
  gen_unref(old);
  serve_selu_reloaded(rl->selu);
}

/* The warm process's log lines (warnings) on stderr. */
static void log_stderr(void *ctx, const char *line)
{
  (void)ctx;
  struct iovec iov[2] = {{(void *)line, strlen(line)}, {"\n", 1}};
  if (writev(STDERR_FILENO, iov, 2) < 0) {
    /* nowhere else to say it */
  }
}

/* The protocol moved off 0 and 1 (the file comment): false when it
 * cannot be. */
static bool take_stdio(struct stdio_ctx *io)
{
  io->in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  io->out = io->in >= 0 ? fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3) : -1;
  int null = io->out >= 0 ? open("/dev/null", O_RDWR | O_CLOEXEC) : -1;
  if (null < 0) { /* nothing changed */
    if (io->in >= 0)
      close(io->in);
    if (io->out >= 0)
      close(io->out);
    return false;
  }
  /* the copies hold the protocol: 0 and 1 cannot fail to be replaced */
  dup2(null, STDIN_FILENO);
  if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) /* no stderr */
    dup2(null, STDOUT_FILENO);
  close(null);
  return true;
}

static int serve_stdio(struct mcp_session *s, struct stdio_ctx *io, struct reloader *rl)
{
  struct lines l = {0};
  bool eof = false;
  while (!eof && !io->broken && !stop_requested) {
    struct pollfd fds[3 + MCP_MAX_RUNNING];
    int timeout;
    size_t n = mcp_session_poll(s, fds + 3, MCP_MAX_RUNNING, &timeout);
    fds[0] = (struct pollfd){.fd = io->in, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = stop_pipe[0], .events = POLLIN};
    fds[2] = (struct pollfd){.fd = rl->watch.fd, .events = POLLIN};
    timeout = caps_watch_timeout(&rl->watch, timeout);
    pthread_mutex_unlock(&state_mu);
    int ready = poll(fds, n + 3, timeout);
    pthread_mutex_lock(&state_mu);
    if (ready < 0 && errno != EINTR)
      break;
    if (fds[0].revents) {
      char buf[65536];
      ssize_t got = read(io->in, buf, sizeof buf);
      if (got > 0)
        feed(s, &l, buf, (size_t)got);
      else if (got == 0 || (errno != EINTR && errno != EAGAIN))
        eof = true;
    }
    mcp_session_events(s, fds + 3, n);
    if (caps_watch_turn(&rl->watch, ready > 0 ? fds[2].revents : 0))
      reload(rl);
  }
  cap_buf_free(&l.buf);
  return CLI_EXIT_OK;
}

/* The protocol moved off 0 and 1 into io (*threads: the calls' threads
 * may be used; false: it could not be, the calls run in children), and
 * the warm Selu process's spawner forked (before any thread; the process
 * itself when reg has a Selu capability, else at the first Selu call):
 * its handle, or NULL. */
static struct serve_selu *open_warm(struct stdio_ctx *io, const struct gw_registry *reg,
                                    const char *state_dir, uint64_t deadline_ms, int watch_fd,
                                    bool *threads)
{
  *io = (struct stdio_ctx){.in = STDIN_FILENO, .out = STDOUT_FILENO};
  *threads = take_stdio(io);
  if (!*threads) {
    io->in = STDIN_FILENO;
    io->out = STDOUT_FILENO;
    return NULL;
  }
  if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    stop_pipe[0] = stop_pipe[1] = -1; /* poll skips -1: a signal still interrupts it */
  /* read by the spawner and the warm process, in their copies */
  struct serve_options opt = {
      .caps_dir = reg->dir, .state_dir = state_dir, .deadline_ms = deadline_ms, .log = log_stderr};
  int foreign[] = {io->in, io->out, stop_pipe[0], stop_pipe[1], watch_fd};
  struct serve_selu_host host = {.opt = &opt, .foreign = foreign, .n_foreign = ARRAY_SIZE(foreign)};
  struct cap_error err = {0};
  struct serve_selu *selu = serve_selu_open(&host, reg, &err);
  if (err.message)
    fprintf(stderr, "capsule mcp: %s\n", err.message);
  cap_error_clear(&err);
  return selu;
}

static const struct gw_state_lock state_lock = {.acquire = lock_state, .release = unlock_state};

static void catch_stop(void)
{
  signal(SIGPIPE, SIG_IGN); /* a client that left is seen as EPIPE */
  /* SIGTERM, SIGINT, SIGHUP: stop reading, stop the calls in flight (each
   * audited by its pipeline), exit */
  struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: poll returns */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* The first generation (gen_cur), the capability --capability names in
 * it: 0, or the exit code. */
static int load_first(const struct common *o)
{
  struct gen *first = cap_xcalloc(1, sizeof *first);
  bool bad = false;
  int r = load_registry(o, &first->reg, &bad);
  if (r) {
    free(first);
    return r;
  }
  first->refs = 1;
  if (o->capability && !gw_registry_find(&first->reg, o->capability)) {
    fprintf(stderr, "capsule mcp: no capability \"%s\" in %s; `capsule list` shows them\n",
            o->capability, first->reg.dir);
    gen_unref(first);
    return CLI_EXIT_INVALID;
  }
  gen_cur = first;
  return 0;
}

int cmd_mcp(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("mcp", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (optind < argc)
    return cli_usage_error("mcp", "takes no arguments, not '%s'", argv[optind]);
  if ((r = load_first(&o)))
    return r;
  struct gw_registry *reg = &gen_cur->reg;
  struct gw_state *st = NULL;
  gw_db_checkpoints_apart(); /* a call waits on no checkpoint (gateway/db_checkpoint.c) */
  if ((r = open_state(&o, &st))) {
    gen_unref(gen_cur);
    return r;
  }
  _cleanup_free_ char *dflt = o.state ? NULL : gw_state_default_dir();
  const char *state_dir = o.state ? o.state : dflt;
  _cleanup_free_ char *logs = cap_xasprintf("%s/logs", state_dir);
  _cleanup_free_ char *run = cap_xasprintf("%s/run", state_dir);
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", state_dir);
  _cleanup_free_ char *volumes = cap_xasprintf("%s/volumes", state_dir);
  _cleanup_free_ char *images = image_store_dir(state_dir);
  char **hidden = NULL;
  size_t n_hidden = gw_state_private_paths(state_dir, &hidden);
  _cleanup_free_ char *caps_dir = cap_xstrdup(reg->dir);
  struct reloader rl = {0};
  caps_watch_init(&rl.watch, caps_dir);
  rewatch(&rl.watch);
  struct stdio_ctx io_ctx;
  bool threads = false;
  struct serve_selu *selu =
      open_warm(&io_ctx, reg, state_dir, (uint64_t)o.timeout_s * 1000, rl.watch.fd, &threads);
  struct mcp_config cfg = {
      .reg = reg,
      .st = st,
      .state_dir = state_dir,
      .only = o.capability,
      .server_version = CAPSULE_VERSION,
      .reg_hold = threads ? reg_hold : NULL,
      .reg_release = reg_release,
      .list_changed = true, /* a reload tells the client */
      .no_warm_relay = true,
      .selu_warm = selu ? serve_selu_warm : NULL,
      .selu_warm_ctx = selu,
      .base = {.user = o.user,
               .state_lock = threads ? &state_lock : NULL,
               .deadline_ms = o.timeout_s * 1000,
               .approval_ttl_ms = (int64_t)o.approval_ttl_s * 1000,
               .log_dir = logs,
               .run_dir = run,
               .cache_dir = cache,
               .volumes_dir = volumes,
               .image_dir = images,
               .session_id = o.session,
               .thread_id = o.thread,
               .hidden = (const char *const *)hidden,
               .n_hidden = n_hidden},
  };
  catch_stop();
  struct mcp_io io = {.send = send_line, .ctx = &io_ctx};
  pthread_mutex_lock(&state_mu);
  rl.cfg = &cfg;
  rl.selu = selu;
  struct mcp_session *s = mcp_session_new(&cfg, &io);
  rl.s = s;
  r = serve_stdio(s, &io_ctx, &rl);
  mcp_session_free(s); /* the calls in flight stopped, each audited */
  pthread_mutex_unlock(&state_mu);
  caps_watch_free(&rl.watch);
  serve_selu_stop(selu, SERVE_DRAIN_MS); /* none in flight: it ends */
  gw_state_private_paths_free(hidden, n_hidden);
  gw_state_close(st);
  gen_unref(gen_cur);
  return r;
}
