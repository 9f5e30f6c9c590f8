/* capsule as the client of a third-party MCP server over stdio, the server
 * in the capability's sandbox (mcp_client.h). The sandbox is cloned from
 * this process while it is single-threaded; the exchange runs on a thread
 * started once the sandbox runs (sandbox_options.on_started), which stops
 * the sandbox by closing its connector when the answer is in. */
#include "runtime/mcp_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/io.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/egress_store.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox.h"

struct exchange {
  int in_w, out_r, conn; /* the server's stdin and stdout, the connector: ours */
  int child[3];          /* the sandbox's ends: closed once it runs */
  uint64_t deadline;     /* CLOCK_MONOTONIC ms */
  size_t cap;            /* bytes of output read at most */
  const char *method, *params;
  pthread_t thread;
  bool started;
  struct cap_buf pending;     /* stdout read past the last full line */
  struct gw_mcp_relay *relay; /* the front door's channel, or NULL */
  int relay_fd;               /* relay->fd while it is open; -1 */
  struct cap_buf relay_in;    /* read from the relay past the last full line */
  /* the outcome */
  char *result; /* the response's result (JSON text) */
  char *error;  /* why there is none */
  bool timed_out, rpc_error;
  bool not_taken; /* warm: the keeper ended before it took this call (nothing was sent) */
  bool warm;
  bool level_sent; /* warm: a logging/setLevel sent before the request (its answer not awaited) */
  int ack;         /* warm: the connection's take pipe (gateway/mcp_keeper.c), or -1 */
  bool acked;      /* warm: the keeper took the call (its "taken", or a byte on ack) */
  bool ended;      /* its stdout (or the keeper's connection) ended */
  struct gw_egress_batch *egress; /* warm: the call's, for the keeper's proxy's decisions */
};

/* send(2) with MSG_NOSIGNAL on a socket: a warm server's keeper that is
 * gone leaves EPIPE, not a SIGPIPE pending for when the caller's signal
 * mask is put back */
static bool write_all(int fd, const char *p, size_t len)
{
  return cap_write_all(fd, p, len, CAP_IO_NOSIGPIPE) == 0;
}

/* A line in one write: its reader (a keeper, a server) wakes once */
static bool send_line(struct exchange *x, const char *text)
{
  size_t n = strlen(text);
  char small[4096];
  char *line = n < sizeof small ? small : cap_xmalloc(n + 1);
  memcpy(line, text, n);
  line[n] = '\n';
  bool ok = write_all(x->in_w, line, n + 1);
  if (line != small)
    free(line);
  return ok;
}

/* What the front door sent (its client's answers to the server's
 * requests, notifications/cancelled): each full line to the server. */
static void relay_read(struct exchange *x)
{
  char buf[65536];
  ssize_t n = read(x->relay_fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR)
    return;
  if (n <= 0) { /* the front door is gone: nothing more comes */
    x->relay_fd = -1;
    return;
  }
  cap_buf_append(&x->relay_in, buf, (size_t)n);
  char *nl;
  while (x->relay_in.len && (nl = memchr(x->relay_in.data, '\n', x->relay_in.len))) {
    size_t k = (size_t)(nl - x->relay_in.data) + 1;
    write_all(x->in_w, x->relay_in.data, k);
    memmove(x->relay_in.data, x->relay_in.data + k, x->relay_in.len - k);
    x->relay_in.len -= k;
  }
  if (x->relay_in.len > MCP_CLIENT_MAX_RELAYED) /* no line that long comes from the front door */
    x->relay_in.len = 0;
}

/* A read of the keeper's connection, which may carry the connection's
 * take pipe (with its first "taken"): kept in x->ack (O_NONBLOCK: the
 * keeper's pipe2), any other descriptor closed */
static ssize_t recv_keeper(struct exchange *x, char *buf, size_t len)
{
  return cap_recv_fd(x->out_r, buf, len, &x->ack);
}

/* The next full line of the server's stdout (allocated), or NULL at its
 * end, at the deadline (timed_out) or past the output cap. */
static char *next_line(struct exchange *x)
{
  for (;;) {
    char *nl = x->pending.len ? memchr(x->pending.data, '\n', x->pending.len) : NULL;
    if (nl) {
      size_t n = (size_t)(nl - x->pending.data);
      char *line = cap_xstrndup(x->pending.data, n);
      memmove(x->pending.data, nl + 1, x->pending.len - n - 1);
      x->pending.len -= n + 1;
      return line;
    }
    if (x->pending.len > x->cap)
      return NULL;
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    if (now >= x->deadline) {
      x->timed_out = true;
      return NULL;
    }
    bool cancellable = x->relay && x->relay->cancellable;
    struct pollfd p[3] = {{.fd = x->out_r, .events = POLLIN},
                          {.fd = x->relay_fd, .events = POLLIN},
                          {.fd = cancellable ? x->relay->cancel_fd : -1, .events = POLLIN}};
    int r = poll(p, 3, (int)(x->deadline - now));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      continue; /* the deadline, checked above */
    if (x->relay_fd >= 0 && p[1].revents)
      relay_read(x);
    if (p[2].revents || (x->relay_fd < 0 && x->relay && x->relay->fd >= 0 && x->conn < 0)) {
      /* warm, and the front door stopped the call (it closed the relay
       * after notifications/cancelled): leaving the keeper's connection
       * cancels what is still in flight on the server */
      x->error = cap_xstrdup("the call was cancelled by the client");
      return NULL;
    }
    if (!p[0].revents)
      continue;
    char buf[65536];
    ssize_t n = x->warm ? recv_keeper(x, buf, sizeof buf) : read(x->out_r, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      x->ended = true;
      return NULL; /* the server closed its stdout (it exited) */
    }
    cap_buf_append(&x->pending, buf, (size_t)n);
  }
}

/* A request the server makes of capsule: refused, so it does not wait. */
static void refuse_request(struct exchange *x, const struct cap_node *id, const char *method)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "jsonrpc");
  cap_jw_string(&w, "2.0");
  cap_jw_key(&w, "id");
  cap_jw_node(&w, id);
  cap_jw_key(&w, "error");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "code");
  cap_jw_int(&w, -32601);
  cap_jw_key(&w, "message");
  _cleanup_free_ char *msg =
      cap_xasprintf("capsule does not offer %s to a server it runs as a capability", method);
  cap_jw_string(&w, msg);
  cap_jw_end_object(&w);
  cap_jw_end_object(&w);
  send_line(x, b.data);
  cap_buf_free(&b);
}

static char *node_json(const struct cap_node *n)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, n);
  return b.data ? b.data : cap_xstrdup("null");
}

/* A warm server's egress decisions while this call was its oldest, sent
 * by the keeper as {"egress":"HEX"} (gateway/mcp_keeper_route.c): into
 * the call's batch, stored with its audit record. */
static void take_egress(struct exchange *x, const struct cap_node *hex)
{
  if (!x->egress || hex->kind != CAP_NODE_STRING || hex->u.str.len % 2)
    return;
  size_t n = hex->u.str.len / 2;
  _cleanup_free_ char *bin = cap_xmalloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    int hi = cap_hex_digit(hex->u.str.ptr[2 * i]), lo = cap_hex_digit(hex->u.str.ptr[2 * i + 1]);
    if (hi < 0 || lo < 0 || hi > 15 || lo > 15)
      return;
    bin[i] = (char)(hi << 4 | lo);
  }
  const char *p = bin;
  gw_egress_batch_decode(x->egress, &p, bin + n);
}

/* Reads until the response to request `id`: true with x->result, or
 * false with x->error (or timed_out). */
static bool await_response(struct exchange *x, int64_t id)
{
  for (;;) {
    _cleanup_free_ char *line = next_line(x);
    if (!line) {
      if (!x->timed_out && !x->error)
        x->error = cap_xstrdup(x->pending.len > x->cap
                                   ? "the server's answer is larger than the output cap"
                                   : "the server exited before it answered");
      return false;
    }
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags d = {0};
    int r = cap_json_parse(doc, line, strlen(line), "the server's stdout", 0, &d);
    cap_diags_free(&d);
    const struct cap_node *m = r == 0 ? doc->root : NULL;
    if (!m || m->kind != CAP_NODE_OBJECT) { /* not JSON-RPC: a stray line */
      cap_doc_free(doc);
      continue;
    }
    const struct cap_node *rid = cap_node_get(m, "id");
    const struct cap_node *method = cap_node_get(m, "method");
    const struct cap_node *egress = x->warm ? cap_node_get(m, "egress") : NULL;
    if (egress && !rid && !method) { /* the keeper's, never the server's (it has neither) */
      take_egress(x, egress);
      cap_doc_free(doc);
      continue;
    }
    if (method && method->kind == CAP_NODE_STRING && x->relay_fd >= 0) {
      /* a notification or a request for the front door's client */
      _cleanup_free_ char *text = node_json(m); /* wrapped: it cannot pass for the report */
      if (!write_all(x->relay_fd, "{\"relay\":", 9) ||
          !write_all(x->relay_fd, text, strlen(text)) || !write_all(x->relay_fd, "}\n", 2))
        x->relay_fd = -1;
    } else if (method && method->kind == CAP_NODE_STRING && rid)
      refuse_request(x, rid, method->u.str.ptr);
    bool ours = !method && rid && rid->kind == CAP_NODE_INT && rid->u.num.i == id;
    const struct cap_node *res = ours ? cap_node_get(m, "result") : NULL;
    const struct cap_node *e = ours ? cap_node_get(m, "error") : NULL;
    if (res)
      x->result = node_json(res);
    else if (ours) {
      if (e && x->relay) /* the client reads the server's own error */
        x->relay->raw_error = node_json(e);
      const struct cap_node *msg = e ? cap_node_get(e, "message") : NULL;
      x->error = msg && msg->kind == CAP_NODE_STRING
                     ? cap_xasprintf("the server answered with an error: %s", msg->u.str.ptr)
                     : cap_xstrdup("the server's answer has neither a result nor an error");
      x->rpc_error = true;
    }
    cap_doc_free(doc);
    if (ours)
      return res != NULL;
  }
}

/* Whether an initialize result declares capabilities.logging */
static bool offers_logging(const char *init_result)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  bool yes = cap_json_parse(doc, init_result, strlen(init_result), "initialize", 0, &d) == 0 &&
             cap_node_get(cap_node_get(doc->root, "capabilities"), "logging") != NULL;
  cap_diags_free(&d);
  cap_doc_free(doc);
  return yes;
}

/* A warm server's keeper (gateway/mcp_keeper.c) has initialized it: the
 * session's level, then the request, sent at once (they wait in the
 * connection until the keeper takes it: no round trip first). */
static void exchange_warm(struct exchange *x, const char *req)
{
  _cleanup_free_ char *level =
      x->relay && x->relay->log_level /* answered with id 3: not awaited */
          ? cap_xasprintf("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\","
                          "\"params\":{\"level\":%s}}",
                          x->relay->log_level)
          : NULL;
  x->level_sent = level != NULL;
  bool kept = x->ack >= 0; /* a kept connection whose keeper takes calls on its pipe */
  bool sent = (!level || send_line(x, level)) && send_line(x, req);
  /* the keeper says it took the call before the call reaches the server:
   * a keeper that ends before it (its server exited) has read nothing of
   * it, and the call may go to the next one. On a new connection its
   * first line says so; on a kept one with a take pipe, a byte on the
   * pipe, which wakes nobody (nothing polls it) and outlives the keeper. */
  if (!kept) {
    static const char hello[] = "{\"keeper\":";
    _cleanup_free_ char *taken = next_line(x);
    if (!taken || strncmp(taken, hello, sizeof hello - 1) != 0) {
      x->not_taken = !x->timed_out && !x->error; /* else cancelled, or out of time */
      if (!x->error)
        x->error = cap_xstrdup("the warm server's keeper ended before it took the call");
      return;
    }
    x->acked = true;
  }
  if (sent)
    await_response(x, MCP_CLIENT_REQUEST_ID);
  char byte;
  if (kept) /* this call's take: there once the keeper read the call */
    x->acked = read(x->ack, &byte, 1) == 1;
  if (!x->acked && !x->result && !x->rpc_error && (x->ended || !sent)) {
    free(x->error); /* gone before it took the call: nothing of it reached the server */
    x->error = cap_xstrdup("the warm server's keeper ended before it took the call");
    x->not_taken = true;
  } else if (!sent && !x->error)
    x->error = cap_xstrdup("the warm server's keeper is gone (the server exited)");
}

/* SIGPIPE blocked on this thread (old: the mask before, or NULL) */
static void block_sigpipe(sigset_t *old)
{
  /* a server that exits leaves its stdin without a reader: a write then
   * fails with EPIPE, on this thread, instead of killing capsule */
  sigset_t pipe_sig;
  sigemptyset(&pipe_sig);
  sigaddset(&pipe_sig, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_sig, old);
}

#define ID_TEXT_(n) #n
#define ID_TEXT(n) ID_TEXT_(n) /* the request's id, as a literal */

static void *exchange_thread(void *arg)
{
  struct exchange *x = arg;
  if (!x->warm) /* a thread of its own (the warm path's caller blocked it) */
    block_sigpipe(NULL);
  struct cap_buf req = {0}; /* put, not printed: once a call, the params of any size */
  cap_buf_reserve(&req, 64 + strlen(x->method) + strlen(x->params));
  cap_buf_puts(&req, "{\"jsonrpc\":\"2.0\",\"id\":" ID_TEXT(MCP_CLIENT_REQUEST_ID) ",\"method\":");
  cap_json_quote(&req, x->method, strlen(x->method));
  cap_buf_puts(&req, ",\"params\":");
  cap_buf_puts(&req, x->params);
  cap_buf_putc(&req, '}');
  if (x->conn < 0) { /* warm: no sandbox of this call's to stop (nor initialize to send) */
    exchange_warm(x, req.data);
    cap_buf_free(&req);
    return NULL;
  }
  const char *caps = x->relay && x->relay->client_caps ? x->relay->client_caps : "{}";
  _cleanup_free_ char *init = cap_xasprintf(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
      "\"%s\",\"capabilities\":%s,\"clientInfo\":{\"name\":\"capsule\",\"version\":\"%s\"}}}",
      MCP_CLIENT_PROTOCOL, caps, CAPSULE_VERSION);
  if (!send_line(x, init))
    x->error = cap_xstrdup("the server exited before it answered (its stdin is closed)");
  else if (await_response(x, 1)) {
    bool logs = offers_logging(x->result); /* else nothing of its answer matters to capsule */
    free(x->result);
    x->result = NULL;
    _cleanup_free_ char *level = NULL;
    if (logs && x->relay && x->relay->log_level) /* answered with id 3: not awaited */
      level = cap_xasprintf("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\","
                            "\"params\":{\"level\":%s}}",
                            x->relay->log_level);
    if (!send_line(x, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") ||
        (level && !send_line(x, level)) || !send_line(x, req.data))
      x->error = cap_xstrdup("the server exited before it answered (its stdin is closed)");
    else
      await_response(x, MCP_CLIENT_REQUEST_ID);
  }
  cap_buf_free(&req);
  /* the answer is in (or will not come): the sandbox is stopped */
  close(x->conn);
  x->conn = -1;
  return NULL;
}

static void on_started(void *ctx, struct sandbox_running *running)
{
  (void)running;
  struct exchange *x = ctx;
  for (int i = 0; i < 3; i++) { /* the server's ends: its exit is then seen */
    close(x->child[i]);
    x->child[i] = -1;
  }
  x->started = pthread_create(&x->thread, NULL, exchange_thread, x) == 0;
  if (!x->started) { /* no thread: the sandbox is stopped at once */
    x->error = cap_xstrdup("cannot start the exchange's thread");
    close(x->conn);
    x->conn = -1;
  }
}

static int open_log(const struct gw_call *call, const struct cap_spec *spec, char **path)
{
  *path = gw_tool_log_prepare(call->log_dir, spec);
  int fd = *path ? open(*path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
  return fd >= 0 ? fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
}

/* The server's command, NULL-terminated, "~/x" as the grants expand it
 * (a server's directory argument names what a grant gives): the caller
 * frees it with cap_strv_free. */
static void server_argv(const struct cap_spec *spec, struct cap_strv *argv)
{
  for (size_t i = 0; i < spec->runtime.command.len; i++) {
    _cleanup_free_ char *a = sandbox_expand_path(spec->runtime.command.v[i]);
    cap_strv_push(argv, a);
  }
}

static enum gw_outcome judge(struct exchange *x, int r, const struct sandbox_result *res,
                             const char *log_path, char **result, struct cap_error *err)
{
  const char *see = log_path ? "; its stderr is in " : "";
  if (r < 0)
    return r == -ENOTSUP ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
  if (x->result) {
    *result = steal_pointer(&x->result);
    return GW_OUTCOME_OK;
  }
  if (x->timed_out || (res->killed_by && !x->error))
    return cap_error_set(err, ETIMEDOUT, "the MCP server did not answer in time (%s)%s%s",
                         res->killed_by ? res->killed_by : "the call's deadline", see,
                         log_path ? log_path : ""),
           GW_OUTCOME_KILLED_BY_LIMIT;
  return cap_error_set(err, EIO, "MCP server: %s%s%s", x->error ? x->error : "no answer",
                       x->rpc_error ? "" : see, x->rpc_error || !log_path ? "" : log_path),
         GW_OUTCOME_FAILED;
}

enum gw_outcome mcp_client_request(const struct gw_call *call, const struct cap_spec *spec,
                                   const char *method, const char *params, char *const *env,
                                   size_t n_env, char **result, struct cap_error *err)
{
  *result = NULL;
  if (!spec->runtime.command.len)
    return cap_error_set(err, EINVAL, "capability %s names no MCP server to run", spec->id),
           GW_OUTCOME_FAILED;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, conn[2] = {-1, -1};
  _cleanup_free_ char *log_path = NULL;
  _cleanup_close_ int log_fd = open_log(call, spec, &log_path);
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, conn) < 0 || log_fd < 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (in[i] >= 0)
        close(in[i]);
      if (out[i] >= 0)
        close(out[i]);
    }
    return cap_error_errno(err, e, "cannot set up the MCP server's stdio"), GW_OUTCOME_FAILED;
  }
  uint64_t deadline = call->deadline_ms ? call->deadline_ms : GW_DEFAULT_DEADLINE_MS;
  struct exchange x = {.in_w = in[1],
                       .out_r = out[0],
                       .conn = conn[0],
                       .deadline = cap_now_ms(CLOCK_MONOTONIC) + deadline,
                       .cap = GW_DEFAULT_OUTPUT_CAP,
                       .child = {in[0], out[1], conn[1]},
                       .method = method,
                       .params = params,
                       .relay = call->relay,
                       .relay_fd = call->relay ? call->relay->fd : -1};
  struct cap_spec run_spec = *spec; /* shallow: only the wall clock changes */
  if (!run_spec.limits.wall_ms || run_spec.limits.wall_ms > deadline + 2000)
    run_spec.limits.wall_ms = deadline + 2000; /* the thread's deadline comes first */
  struct cap_strv args = {0};
  server_argv(spec, &args);
  _cleanup_free_ char **argv = cap_xcalloc(args.len + 1, sizeof *argv);
  memcpy(argv, args.v, args.len * sizeof *argv);
  struct sandbox_options opt = {
      .argv = argv,
      .workdir = spec->package_dir, /* relative paths are the package's, as for Selu */
      .extra_env = env,
      .n_extra_env = n_env,
      .redirect_stdio = true,
      .stdio = {in[0], out[1], log_fd},
      .has_connector = true,
      .connector_fd = conn[1],
      .hidden = call->hidden,
      .n_hidden = call->n_hidden,
      .id_base = call->id_base,
      .log_max_bytes = gw_tool_log_bound(spec), /* a call cannot fill the disk */
      .on_started = on_started,
      .on_started_ctx = &x,

      .proxy = {.sink = call->egress_sink}, /* the call's egress log */
  };
  struct sandbox_result res = {0};
  int r = sandbox_run(&run_spec, &opt, &res, err);
  for (int i = 0; i < 3; i++)
    if (x.child[i] >= 0)
      close(x.child[i]);
  if (x.started)
    pthread_join(x.thread, NULL);
  if (x.conn >= 0)
    close(x.conn);
  close(x.in_w);
  close(x.out_r);
  enum gw_outcome o = judge(&x, r, &res, log_path, result, err);
  cap_buf_free(&x.relay_in);
  cap_strv_free(&args);
  free(x.result);
  free(x.error);
  cap_buf_free(&x.pending);
  return o;
}

enum gw_outcome mcp_client_request_warm(const struct gw_call *call, int fd, int *ack,
                                        const char *method, const char *params, char **result,
                                        bool *reusable, struct cap_error *err)
{
  *result = NULL;
  uint64_t deadline = call->deadline_ms ? call->deadline_ms : GW_DEFAULT_DEADLINE_MS;
  struct exchange x = {.in_w = fd,
                       .out_r = fd,
                       .conn = -1,
                       .deadline = cap_now_ms(CLOCK_MONOTONIC) + deadline,
                       .cap = GW_DEFAULT_OUTPUT_CAP,
                       .child = {-1, -1, -1},
                       .method = method,
                       .params = params,
                       .relay = call->relay,
                       .relay_fd = call->relay ? call->relay->fd : -1,
                       .warm = true,
                       .ack = ack ? *ack : -1,
                       .egress = call->egress_sink ? gw_egress_batch_of(call->egress_sink) : NULL};
  /* SIGPIPE blocked where a write may raise it: with no relay, the
   * exchange writes only to the keeper's connection, a socket, with
   * send(MSG_NOSIGNAL) (write_all), which never raises it: no system call */
  sigset_t old;
  bool block = x.relay_fd >= 0;
  if (block)
    block_sigpipe(&old);
  exchange_thread(&x);
  if (block && !sigismember(&old, SIGPIPE))
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (reusable) /* answered, nothing else asked nor read past the answer */
    *reusable =
        (x.result || x.rpc_error) && x.acked && !x.timed_out && !x.level_sent && !x.pending.len;
  if (ack) /* the caller's, kept with fd */
    *ack = x.ack;
  else if (x.ack >= 0)
    close(x.ack);
  struct sandbox_result res = {0};
  enum gw_outcome o = x.not_taken
                          ? (cap_error_set(err, ECONNABORTED, "%s", x.error), GW_OUTCOME_FAILED)
                          : judge(&x, 0, &res, NULL, result, err);
  free(x.result);
  free(x.error);
  cap_buf_free(&x.pending);
  cap_buf_free(&x.relay_in);
  return o;
}

/* The tool's answer as capsule returns it (mcp_client.h). */
static enum gw_outcome tool_result(const char *text, char **result, struct cap_error *err)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  int r = cap_json_parse(doc, text, strlen(text), "the tool's result", 0, &d);
  cap_diags_free(&d);
  const struct cap_node *res = r == 0 ? doc->root : NULL;
  const struct cap_node *structured = res ? cap_node_get(res, "structuredContent") : NULL;
  const struct cap_node *content = res ? cap_node_get(res, "content") : NULL;
  const struct cap_node *is_error = res ? cap_node_get(res, "isError") : NULL;
  bool failed = is_error && is_error->kind == CAP_NODE_BOOL && is_error->u.boolean;
  /* the text of the content's text items, joined */
  struct cap_buf t = {0};
  for (size_t i = 0; content && content->kind == CAP_NODE_ARRAY && i < content->u.arr.len; i++) {
    const struct cap_node *item = content->u.arr.items[i];
    const struct cap_node *type = cap_node_get(item, "type");
    const struct cap_node *txt = cap_node_get(item, "text");
    if (type && type->kind == CAP_NODE_STRING && strcmp(type->u.str.ptr, "text") == 0 && txt &&
        txt->kind == CAP_NODE_STRING)
      cap_buf_printf(&t, "%s%s", t.len ? "\n" : "", txt->u.str.ptr);
  }
  enum gw_outcome o = GW_OUTCOME_OK;
  if (!res || res->kind != CAP_NODE_OBJECT) {
    o = GW_OUTCOME_FAILED;
    cap_error_set(err, EPROTO, "the MCP server's tools/call result is not an object");
  } else if (failed) {
    o = GW_OUTCOME_FAILED;
    cap_error_set(err, EIO, "the tool failed: %s", t.data ? t.data : "(no message)");
  } else if (structured && structured->kind == CAP_NODE_OBJECT) {
    *result = node_json(structured);
  } else if (t.data && (*result = cap_json_canonical(t.data, t.len))) {
    /* text that is JSON: the value itself */
  } else if (t.data) {
    struct cap_buf q = {0};
    cap_json_quote(&q, t.data, t.len);
    *result = q.data;
  } else {
    *result = content ? node_json(content) : cap_xstrdup("null");
  }
  cap_buf_free(&t);
  cap_doc_free(doc);
  return o;
}

enum gw_outcome mcp_client_call(const struct gw_call *call, const struct cap_spec *spec,
                                char *const *env, size_t n_env, char **result,
                                struct cap_error *err)
{
  return mcp_client_call_on(call, spec, -1, NULL, env, n_env, result, NULL, err);
}

enum gw_outcome mcp_client_call_on(const struct gw_call *call, const struct cap_spec *spec,
                                   int warm_fd, int *ack, char *const *env, size_t n_env,
                                   char **result, bool *reusable, struct cap_error *err)
{
  *result = NULL;
  struct cap_buf params = {0};
  cap_buf_puts(&params, "{\"name\":");
  cap_json_quote(&params, call->tool, strlen(call->tool));
  cap_buf_puts(&params, ",\"arguments\":");
  cap_buf_append(&params, call->args, call->args_len);
  if (call->relay && call->relay->progress_token) /* the server reports progress itself */
    cap_buf_printf(&params, ",\"_meta\":{\"progressToken\":%s}", call->relay->progress_token);
  cap_buf_putc(&params, '}');
  char *raw = NULL;
  enum gw_outcome o = warm_fd >= 0 ? mcp_client_request_warm(call, warm_fd, ack, "tools/call",
                                                             params.data, &raw, reusable, err)
                                   : mcp_client_request(call, spec, "tools/call", params.data, env,
                                                        n_env, &raw, err);
  cap_buf_free(&params);
  if (o == GW_OUTCOME_OK) {
    o = tool_result(raw, result, err);
    if (call->relay) /* the client gets the server's content as it is (images, resources...) */
      call->relay->raw_result = steal_pointer(&raw);
  }
  free(raw);
  return o;
}
