/* What passes between the calls connected to a warm MCP server's keeper
 * and the server (mcp_keeper_int.h). Several calls at once, each on its
 * own connection: their requests get server ids of the keeper's (ids must
 * not repeat on one server) and answers go back under the caller's, on
 * the connection that asked; a progress token is replaced by the server
 * id of its request and restored in the server's progress. What names no
 * call (a log line) goes to the oldest call connected, as it did to the
 * one call served at a time, and a request of the server's to the oldest
 * call not waiting on its client's answer to an earlier one; what the server
 * says of its resources and lists (notifications/resources/updated,
 * .../list_changed) goes to the watchers (a front door's channel held
 * between calls), or with none to the oldest call. The egress proxy's
 * decisions go to the oldest call's batch, sent back as a line
 * {"egress":"HEX"} before the answer to its request. A connection that
 * ends with requests in flight gets notifications/cancelled sent to the
 * server for each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/io.h"
#include "core/json.h"
#include "gateway/call.h"
#include "gateway/mcp_keeper_int.h"

#define KEEPER_MAX_LINE (GW_DEFAULT_OUTPUT_CAP + 65536)

/* ---- lines ---- */

char *keeper_take_line(struct lines *l)
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

void keeper_fill(struct lines *l)
{
  char buf[65536];
  ssize_t n = read(l->fd, buf, sizeof buf);
  if (n > 0)
    cap_buf_append(&l->buf, buf, (size_t)n);
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    l->eof = true;
}

/* A line in one write (its reader wakes once); send(2) on a socket, so
 * that a caller's process that does not ignore SIGPIPE gets EPIPE */
static bool put_line(int fd, const char *text, size_t len, unsigned flags)
{
  char small[4096];
  char *line = len < sizeof small ? small : cap_xmalloc(len + 1);
  memcpy(line, text, len);
  line[len] = '\n';
  bool ok = cap_write_all(fd, line, len + 1, flags) == 0;
  if (line != small)
    free(line);
  return ok;
}

bool keeper_put_line(int fd, const char *text, size_t len)
{
  return put_line(fd, text, len, CAP_IO_NOSIGPIPE);
}

/* To the server's stdin, a pipe: write(2) (the keeper ignores SIGPIPE),
 * not a send(2) that fails first with ENOTSOCK */
bool keeper_put_server(struct keeper *k, const char *text, size_t len)
{
  return put_line(k->in_w, text, len, 0);
}

/* ---- messages ---- */

static struct cap_doc *parse_object(const char *line, const char *what, const struct cap_node **msg)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  *msg = cap_json_parse(doc, line, strlen(line), what, 64, &d) == 0 &&
                 doc->root->kind == CAP_NODE_OBJECT
             ? doc->root
             : NULL;
  cap_diags_free(&d);
  return doc;
}

static void send_rewritten(struct keeper *k, int fd, const struct cap_node *msg,
                           const char *const *path, size_t depth, const char *json)
{
  _cleanup_free_ char *text = cap_json_rewritten(msg, path, depth, json);
  if (fd == k->in_w)
    keeper_put_server(k, text, strlen(text));
  else
    keeper_put_line(fd, text, strlen(text));
}

static const char *method_of(const struct cap_node *m)
{
  const struct cap_node *method = cap_node_get(m, "method");
  return method && method->kind == CAP_NODE_STRING ? method->u.str.ptr : NULL;
}

/* ---- connections ---- */

/* The call under way that began first (a kept connection's call begins
 * with its request, not at accept) */
static struct keeper_conn *oldest_call(const struct keeper *k)
{
  struct keeper_conn *o = NULL;
  for (size_t i = 0; i < k->n_conns; i++)
    if (k->conns[i]->in_call && (!o || k->conns[i]->serial < o->serial))
      o = k->conns[i];
  return o;
}

/* Whose a request of the server's is (it names no call): the oldest call
 * not itself waiting on an answer to one (a call held for its client's
 * input, 2026-07-28, waits long: the next call's request is not its),
 * else the oldest */
static struct keeper_conn *call_for_request(const struct keeper *k)
{
  struct keeper_conn *o = NULL;
  for (size_t i = 0; i < k->n_conns; i++)
    if (k->conns[i]->in_call && !k->conns[i]->asked && (!o || k->conns[i]->serial < o->serial))
      o = k->conns[i];
  return o ? o : oldest_call(k);
}

static void egress_event(void *arg, const struct proxy_egress_event *ev)
{
  struct keeper *k = arg;
  pthread_mutex_lock(&k->egress_lock);
  struct keeper_conn *c = oldest_call(k);
  struct gw_egress_batch *b = c ? c->egress : k->egress_next;
  b->sink.event(b->sink.arg, ev);
  /* on disk too until it goes to a call's front door (send_egress): a
   * keeper killed before leaves it to the recovery, a call's in progress
   * too */
  gw_egress_spool_event(&k->egress_spool, ev);
  pthread_mutex_unlock(&k->egress_lock);
}

/* The spool holds what no front door has had yet: every call's batch and
 * the next's (under egress_lock), after one went (send_egress). */
static void spool_rewrite(struct keeper *k)
{
  gw_egress_spool_clear(&k->egress_spool);
  for (size_t i = 0; i < k->n_conns; i++)
    if (k->conns[i]->egress)
      gw_egress_spool_batch(&k->egress_spool, k->conns[i]->egress);
  gw_egress_spool_batch(&k->egress_spool, k->egress_next);
}

static struct gw_egress_batch *batch_new(void)
{
  struct gw_egress_batch *b = cap_xmalloc(sizeof *b);
  gw_egress_batch_init(b);
  return b;
}

static void batch_free(struct gw_egress_batch *b)
{
  if (b)
    gw_egress_batch_free(b);
  free(b);
}

void keeper_route_init(struct keeper *k, const char *run_dir, const char *capability,
                       const char *user)
{
  pthread_mutex_init(&k->egress_lock, NULL);
  k->egress_next = batch_new();
  gw_egress_spool_init(&k->egress_spool, run_dir, capability, user);
  k->egress_sink = (struct proxy_egress_sink){.event = egress_event, .arg = k};
}

void keeper_route_end(struct keeper *k)
{
  while (k->n_conns)
    keeper_conn_drop(k, k->conns[k->n_conns - 1]);
  gw_egress_spool_close(&k->egress_spool);
  batch_free(k->egress_next);
  k->egress_next = NULL;
}

bool keeper_conn_add(struct keeper *k, int fd, int ack)
{
  if (k->n_conns >= KEEPER_MAX_CONNS) {
    close(fd);
    if (ack >= 0)
      close(ack);
    return false;
  }
  struct keeper_conn *c = cap_xcalloc(1, sizeof *c);
  *c = (struct keeper_conn){
      .fd = fd, .ack = ack, .in = {.fd = fd}, .serial = k->next_serial++, .in_call = true};
  struct gw_egress_batch *fresh = batch_new();
  pthread_mutex_lock(&k->egress_lock);
  c->egress = k->egress_next; /* what came with no call in: the next call's (still spooled) */
  k->egress_next = fresh;
  k->conns[k->n_conns++] = c;
  pthread_mutex_unlock(&k->egress_lock);
  return true;
}

void keeper_conn_drop(struct keeper *k, struct keeper_conn *c)
{
  for (size_t i = 0; i < KEEPER_MAX_PENDING; i++) {
    struct keeper_pending *p = &k->pending[i];
    if (!p->theirs || p->conn != c)
      continue;
    _cleanup_free_ char *text = cap_xasprintf(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
        "%lld,\"reason\":\"the call ended\"}}",
        (long long)p->ours);
    keeper_put_server(k, text, strlen(text));
    free(p->theirs);
    free(p->token);
    *p = (struct keeper_pending){0};
  }
  pthread_mutex_lock(&k->egress_lock);
  for (size_t i = 0; i < k->n_conns; i++)
    if (k->conns[i] == c) {
      memmove(&k->conns[i], &k->conns[i + 1], (k->n_conns - i - 1) * sizeof *k->conns);
      k->n_conns--;
      break;
    }
  /* a call gone without its answer (its deadline, a cancellation, its
   * front door's end): its decisions go to the next call, as those made
   * with no call in, never dropped (a server that does not answer would
   * leave no trace of its connections) */
  if (c->egress) /* (spooled already) */
    gw_egress_batch_take(c->egress, k->egress_next);
  pthread_mutex_unlock(&k->egress_lock);
  batch_free(c->egress);
  close(c->fd);
  if (c->ack >= 0)
    close(c->ack);
  cap_buf_free(&c->in.buf);
  free(c);
}

size_t keeper_calls(const struct keeper *k)
{
  size_t n = 0;
  for (size_t i = 0; i < k->n_conns; i++)
    n += k->conns[i]->in_call;
  return n;
}

size_t keeper_watchers(const struct keeper *k)
{
  size_t n = 0;
  for (size_t i = 0; i < k->n_conns; i++)
    n += k->conns[i]->watch;
  return n;
}

/* A request on a kept connection with no call under way begins one: the
 * keeper says it took it (the front door retries a call the keeper ended
 * before), before the request goes to the server: a byte on the take
 * pipe (its reader is not woken; the byte stays there if the keeper
 * dies), else a line; what the proxy decided with no call in is the
 * call's. false: it cannot be said (a take pipe its reader let fill up):
 * the connection is ended, the call not taken. */
static bool call_begin(struct keeper *k, struct keeper_conn *c)
{
  if (c->in_call || c->watch)
    return true;
  static const char taken[] = "{\"keeper\":\"taken\"}";
  ssize_t put;
  while (c->ack >= 0 && (put = write(c->ack, "t", 1)) < 0 && errno == EINTR)
    ;
  if (c->ack >= 0 ? put != 1 : !keeper_put_line(c->fd, taken, sizeof taken - 1)) {
    shutdown(c->fd, SHUT_RDWR);
    c->in.eof = true;
    c->in.buf.len = 0; /* nothing more of it is read */
    return false;
  }
  struct gw_egress_batch *fresh = batch_new();
  pthread_mutex_lock(&k->egress_lock);
  c->in_call = true;
  c->asked = 0;
  c->serial = k->next_serial++;
  struct gw_egress_batch *old = c->egress;
  c->egress = k->egress_next; /* (spooled until it goes) */
  k->egress_next = fresh;
  if (old) /* what came on the connection after its last answer: this call's */
    gw_egress_batch_take(old, c->egress);
  pthread_mutex_unlock(&k->egress_lock);
  batch_free(old);
  return true;
}

/* The call ends with the answer to its last request in flight: the
 * connection is idle, kept by the front door for its next call. */
static void call_end_if_done(struct keeper *k, struct keeper_conn *c)
{
  for (size_t i = 0; i < KEEPER_MAX_PENDING; i++)
    if (k->pending[i].theirs && k->pending[i].conn == c)
      return;
  pthread_mutex_lock(&k->egress_lock);
  c->in_call = false;
  pthread_mutex_unlock(&k->egress_lock);
  c->calls++;
}

/* ---- from a connection ---- */

static void request_from_conn(struct keeper *k, struct keeper_conn *c, const struct cap_node *m,
                              const struct cap_node *id)
{
  struct keeper_pending *slot = NULL;
  for (size_t i = 0; i < KEEPER_MAX_PENDING && !slot; i++)
    if (!k->pending[i].theirs)
      slot = &k->pending[i];
  if (!slot) { /* more in flight than the server is given at once */
    _cleanup_free_ char *theirs = cap_json_text(id);
    _cleanup_free_ char *text = cap_xasprintf(
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32603,\"message\":\"the warm "
        "server has %d requests in flight; try again\"}}",
        theirs, KEEPER_MAX_PENDING);
    keeper_put_line(c->fd, text, strlen(text));
    return call_end_if_done(k, c);
  }
  slot->theirs = cap_json_text(id);
  slot->ours = k->next_id++;
  slot->conn = c;
  char ours[24];
  snprintf(ours, sizeof ours, "%lld", (long long)slot->ours);
  static const char *const id_path[] = {"id"};
  static const char *const token_path[] = {"params", "_meta", "progressToken"};
  const struct cap_node *token =
      cap_node_get(cap_node_get(cap_node_get(m, "params"), "_meta"), "progressToken");
  if (!token)
    return send_rewritten(k, k->in_w, m, id_path, 1, ours);
  slot->token = cap_json_text(token); /* two calls' tokens may be alike: the server sees ours */
  _cleanup_free_ char *renumbered = cap_json_rewritten(m, id_path, 1, ours);
  const struct cap_node *again = NULL;
  struct cap_doc *doc = parse_object(renumbered, "call", &again);
  if (again)
    send_rewritten(k, k->in_w, again, token_path, 3, ours);
  cap_doc_free(doc);
}

void keeper_from_conn(struct keeper *k, struct keeper_conn *c, const char *line)
{
  const struct cap_node *m;
  struct cap_doc *doc = parse_object(line, "call", &m);
  const struct cap_node *id = m ? cap_node_get(m, "id") : NULL;
  const char *method = m ? method_of(m) : NULL;
  const struct cap_node *keeper = m ? cap_node_get(m, "keeper") : NULL;
  if (keeper && keeper->kind == CAP_NODE_STRING && strcmp(keeper->u.str.ptr, "watch") == 0) {
    if (k->n_conns - keeper_calls(k) >= KEEPER_MAX_WATCHERS) { /* no room: its watcher sees EOF */
      shutdown(c->fd, SHUT_RDWR);
      c->in.eof = true;
      cap_doc_free(doc);
      return;
    }
    pthread_mutex_lock(&k->egress_lock);
    c->watch = true; /* a channel, not a call: no egress of its own */
    c->in_call = false;
    if (c->egress) /* what it took at its accept: the next call's again (spooled already) */
      gw_egress_batch_take(c->egress, k->egress_next);
    pthread_mutex_unlock(&k->egress_lock);
  } else if (method && id) {
    if (call_begin(k, c))
      request_from_conn(k, c, m, id);
  } else if (method && strcmp(method, "notifications/cancelled") == 0) {
    const struct cap_node *named = cap_node_get(cap_node_get(m, "params"), "requestId");
    _cleanup_free_ char *rid = named ? cap_json_text(named) : NULL; /* none: nothing to cancel */
    static const char *const path[] = {"params", "requestId"};
    for (size_t i = 0; rid && i < KEEPER_MAX_PENDING; i++)
      if (k->pending[i].theirs && k->pending[i].conn == c &&
          strcmp(k->pending[i].theirs, rid) == 0) {
        char ours[24];
        snprintf(ours, sizeof ours, "%lld", (long long)k->pending[i].ours);
        send_rewritten(k, k->in_w, m, path, 2, ours);
      }
  } else if (m) { /* a notification, or an answer to the server's request */
    if (!method && id && c->asked)
      c->asked--;
    keeper_put_server(k, line, strlen(line));
  }
  cap_doc_free(doc);
}

/* ---- from the server ---- */

/* The call's egress decisions so far, as a line before its answer */
static void send_egress(struct keeper *k, struct keeper_conn *c)
{
  pthread_mutex_lock(&k->egress_lock); /* the proxy's threads add to it under this lock */
  bool none = !c->egress->n && !c->egress->over;
  pthread_mutex_unlock(&k->egress_lock);
  if (none) /* the usual call: no batch to swap */
    return;
  struct gw_egress_batch *fresh = batch_new();
  pthread_mutex_lock(&k->egress_lock);
  struct gw_egress_batch *b = c->egress;
  c->egress = fresh;
  /* out of the spool before it goes: a keeper killed right between loses
   * it (the front door has not stored it), never stores it twice */
  spool_rewrite(k);
  pthread_mutex_unlock(&k->egress_lock);
  {
    struct cap_buf bin = {0}, line = {0};
    gw_egress_batch_encode(b, &bin);
    cap_buf_puts(&line, "{\"egress\":\"");
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < bin.len; i++) {
      unsigned char ch = (unsigned char)bin.data[i];
      cap_buf_putc(&line, hex[ch >> 4]);
      cap_buf_putc(&line, hex[ch & 15]);
    }
    cap_buf_puts(&line, "\"}");
    bool sent = keeper_put_line(c->fd, line.data, line.len);
    cap_buf_free(&bin);
    cap_buf_free(&line);
    if (!sent) { /* its front door gone (it takes no cut line): the next call's, spooled again */
      pthread_mutex_lock(&k->egress_lock);
      gw_egress_spool_batch(&k->egress_spool, b);
      gw_egress_batch_take(b, k->egress_next);
      pthread_mutex_unlock(&k->egress_lock);
    }
  }
  batch_free(b);
}

static void answer_from_server(struct keeper *k, const struct cap_node *m, int64_t id)
{
  for (size_t i = 0; i < KEEPER_MAX_PENDING; i++) {
    struct keeper_pending *p = &k->pending[i];
    if (!p->theirs || p->ours != id)
      continue;
    struct keeper_conn *c = p->conn;
    send_egress(k, c);
    static const char *const path[] = {"id"};
    send_rewritten(k, c->fd, m, path, 1, p->theirs);
    free(p->theirs);
    free(p->token);
    *p = (struct keeper_pending){0};
    return call_end_if_done(k, c);
  }
}

/* The server's progress for a request's token: to that request's call */
static bool progress_from_server(struct keeper *k, const struct cap_node *m)
{
  const struct cap_node *t = cap_node_get(cap_node_get(m, "params"), "progressToken");
  if (!t || t->kind != CAP_NODE_INT)
    return false;
  for (size_t i = 0; i < KEEPER_MAX_PENDING; i++) {
    struct keeper_pending *p = &k->pending[i];
    if (p->theirs && p->token && p->ours == t->u.num.i) {
      static const char *const path[] = {"params", "progressToken"};
      send_rewritten(k, p->conn->fd, m, path, 2, p->token);
      return true;
    }
  }
  return false;
}

/* What the server says of its resources and lists, for whoever watches */
static bool for_watchers(const char *method)
{
  size_t n = strlen(method);
  static const char changed[] = "/list_changed";
  return strncmp(method, "notifications/resources/", 24) == 0 ||
         (n > sizeof changed - 1 && strcmp(method + n - (sizeof changed - 1), changed) == 0);
}

void keeper_from_server(struct keeper *k, const char *line)
{
  const struct cap_node *m;
  struct cap_doc *doc = parse_object(line, "server", &m);
  const struct cap_node *id = m ? cap_node_get(m, "id") : NULL;
  const char *method = m ? method_of(m) : NULL;
  if (m && !cap_node_get(m, "method") && id && id->kind == CAP_NODE_INT) {
    answer_from_server(k, m, id->u.num.i);
  } else if (method && strcmp(method, "notifications/progress") == 0 &&
             progress_from_server(k, m)) {
    /* sent to its call */
  } else if (method) {
    bool watched = false;
    for (size_t i = 0; i < k->n_conns && for_watchers(method); i++)
      if (k->conns[i]->watch)
        watched = keeper_put_line(k->conns[i]->fd, line, strlen(line)) || watched;
    struct keeper_conn *c = watched ? NULL : id ? call_for_request(k) : oldest_call(k);
    if (c && id) /* the server's request: answered by that call's client */
      c->asked++;
    if (c) /* the server's notification or request: the oldest call's */
      keeper_put_line(c->fd, line, strlen(line));
  }
  cap_doc_free(doc);
}
