/* MCP Streamable HTTP at /mcp (front/serve.h), on libmicrohttpd with a
 * thread per connection. Before anything is read: the path, the method,
 * the Host (DNS rebinding), the Origin (403 for a foreign one) and the
 * bearer token (401), on every request, loopback included. A POST body is
 * at most MCP_MAX_MESSAGE bytes (413). A request's answer is JSON, or for
 * tools/call an SSE stream carrying its progress, its elicitation and
 * then its result (with a comment every second, so a client that left is
 * seen soon and idle proxies keep it). Sessions are Mcp-Session-Id; a session is
 * its token's user's alone. A GET (Accept: text/event-stream) opens the
 * session's own SSE stream, for what belongs to no request (a subscribed
 * resource's update). Built as a module (capsule-serve-http.so, with
 * libmicrohttpd and GnuTLS) that serve_http_load.c opens when serve is
 * asked for HTTP: no other process maps them. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/text.h"
#include "front/serve_conn.h"
#include "front/serve_guard.h"
#include "front/serve_internal.h"

#define KEEPALIVE_MS 1000
#define SSE_RECHECK_MS 100 /* a stream's token asked again at most this often */
/* Connections (front/serve_conn.h): at most HTTP_CONN_MAX (and from one
 * address, unless on loopback, where every local user is 127.0.0.1:
 * there the pending share is the bound), HTTP_CONN_PENDING of them
 * without a valid token yet, idle after 10 s; with one, 60 s. */
#define HTTP_CONN_MAX 512
#define HTTP_CONN_PER_ADDRESS 64
#define HTTP_CONN_PENDING 64
#define HTTP_CONN_TRUSTED_TIMEOUT_S 60
#define ANSWER_SOON_MS 50
#define SSE_RETRY_MS 1000 /* how long a client waits before it resumes a stream cut */

/* Per-token rate limits: a bucket of 2*rate requests refilled at rate a
 * second; a token past it gets 429. Only authenticated tokens get a
 * bucket, so there are as many as tokens issued (at most MAX_BUCKETS:
 * the one used longest ago makes room). */
#define MAX_BUCKETS 4096
struct bucket {
  char *token;
  double left;
  uint64_t last_ms;
};

struct serve_http {
  struct MHD_Daemon *d;
  pthread_mutex_t rate_mu;
  struct bucket *buckets;
  size_t n_buckets;
  double rate;
  struct serve *sv;
  const struct serve_hooks *hooks;
  struct serve_guard guard;
  struct serve_conns conns; /* pending and trusted connections */
  bool ready;               /* the Host values are final: requests are read */
};

struct req {
  struct cap_buf body;
  bool too_big;
  char *user;
  char *token; /* its bearer token: an SSE answer asks it again (sse_allowed) */
};

/* A request being answered: its server, connection and admitted request */
struct asker {
  struct serve_http *h;
  struct MHD_Connection *c;
  struct req *q;
};

/* One reader of a stream: an SSE answer (a POST's, a GET's, or a GET
 * resuming a stream with Last-Event-ID). A newer reader of the stream
 * ends it. */
struct sse_reader {
  struct stream *s; /* a reference */
  unsigned gen;
  uint64_t after; /* the newest event written */
  struct cap_buf pending;
  size_t pending_off;
  struct serve_http *h;
  char *token;         /* the request's: asked again as the stream goes on (sse_allowed) */
  uint64_t checked_ms; /* when it last was */
};

static void free_token(char *token)
{
  if (token)
    explicit_bzero(token, strlen(token));
  free(token);
}

/* Whether r's token still admits its holder: a token revoked while its
 * stream is open (the session's GET stream stays open for hours) ends the
 * stream at its next message or keep-alive. Asked at most every
 * SSE_RECHECK_MS (each is a read of the state on PostgreSQL). */
static bool sse_allowed(struct sse_reader *r)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  if (!r->token || (r->checked_ms && now - r->checked_ms < SSE_RECHECK_MS))
    return true;
  char *user = r->h->hooks->authenticate(r->h->sv, r->token);
  free(user);
  r->checked_ms = now;
  return user != NULL;
}

/* Waits (s->mu held) until a message after r's, the end, a newer reader,
 * or ms pass. */
static void wait_for(struct sse_reader *r, int ms)
{
  struct stream *s = r->s;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (long)(ms % 1000) * 1000000;
  if (t.tv_nsec >= 1000000000) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000;
  }
  while (stream_next(s, r->after) == s->n && !s->done && r->gen == s->reader)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &t) == ETIMEDOUT)
      break;
}

/* ---- responses ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, const char *session)
{
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  if (*body)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (session)
    MHD_add_response_header(r, "Mcp-Session-Id", session);
  if (status == MHD_HTTP_UNAUTHORIZED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"capsule\"");
  if (status == MHD_HTTP_TOO_MANY_REQUESTS)
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, POST, DELETE");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

/* A JSON-RPC error as the answer, for request id_json (NULL: none, as
 * for refusals before the dispatcher), with data (JSON text) or none */
static enum MHD_Result refuse_id(struct MHD_Connection *c, unsigned status, int code,
                                 const char *id_json, const char *msg, const char *data_json)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":",
                 id_json ? id_json : "null", code);
  cap_json_quote(&b, msg, strlen(msg));
  if (data_json)
    cap_buf_printf(&b, ",\"data\":%s", data_json);
  cap_buf_puts(&b, "}}");
  enum MHD_Result r = reply(c, status, "application/json", b.data, NULL);
  cap_buf_free(&b);
  return r;
}

static enum MHD_Result refuse(struct MHD_Connection *c, unsigned status, int code, const char *msg)
{
  return refuse_id(c, status, code, NULL, msg, NULL);
}

/* 400 with the revision's UnsupportedProtocolVersionError: the versions
 * served (supported, a JSON array) and the one asked for */
static enum MHD_Result refuse_version(struct MHD_Connection *c, const char *id_json,
                                      const char *supported, const char *requested)
{
  struct cap_buf data = {0};
  cap_buf_printf(&data, "{\"supported\":%s,\"requested\":", supported);
  cap_json_quote(&data, requested, strlen(requested));
  cap_buf_putc(&data, '}');
  enum MHD_Result r = refuse_id(c, MHD_HTTP_BAD_REQUEST, -32022, id_json,
                                "Unsupported protocol version", data.data);
  cap_buf_free(&data);
  return r;
}

/* One event into r->pending: a resumable stream's carries its id, and
 * stays for a later reader; any other's is freed once written. */
static void sse_event(struct sse_reader *r, size_t i)
{
  struct stream *s = r->s;
  cap_buf_puts(&r->pending, "event: message\n");
  if (s->resumable) {
    char id[STREAM_ID_MAX];
    stream_event_id(id, s->number, s->ev[i].seq);
    cap_buf_printf(&r->pending, "id: %s\n", id);
  }
  cap_buf_puts(&r->pending, "data: ");
  cap_buf_append(&r->pending, s->ev[i].json, s->ev[i].len);
  cap_buf_puts(&r->pending, "\n\n");
  r->after = s->ev[i].seq;
  if (s->resumable) {
    s->sent = r->after;
  } else { /* i is head: nothing before it is held */
    free(s->ev[i].json);
    s->head = i + 1;
  }
}

/* SSE: each message an event; a comment while nothing comes. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  (void)pos;
  struct sse_reader *r = cls;
  struct stream *s = r->s;
  pthread_mutex_lock(&s->mu);
  if (r->pending_off >= r->pending.len) {
    cap_buf_free(&r->pending);
    r->pending_off = 0;
    if (r->gen == s->reader)
      wait_for(r, KEEPALIVE_MS);
    pthread_mutex_unlock(&s->mu); /* the check may take the state's lock */
    bool allowed = sse_allowed(r);
    pthread_mutex_lock(&s->mu);
    if (!allowed) {
      pthread_mutex_unlock(&s->mu);
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t i = stream_next(s, r->after);
    if (r->gen != s->reader || (i == s->n && s->done)) { /* resumed elsewhere, or the end */
      pthread_mutex_unlock(&s->mu);
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (i < s->n)
      sse_event(r, i);
    else
      cap_buf_puts(&r->pending, ": keepalive\n\n");
  }
  size_t n = r->pending.len - r->pending_off;
  if (n > max)
    n = max;
  memcpy(buf, r->pending.data + r->pending_off, n);
  r->pending_off += n;
  pthread_mutex_unlock(&s->mu);
  return (ssize_t)n;
}

static void sse_free(void *cls)
{
  struct sse_reader *r = cls;
  struct stream *s = r->s;
  pthread_mutex_lock(&s->mu);
  if (r->gen == s->reader) /* left before the end (not replaced by a resumption) */
    s->closed = !s->done || stream_next(s, r->after) < s->n;
  pthread_mutex_unlock(&s->mu);
  cap_buf_free(&r->pending);
  stream_unref(s);
  free_token(r->token);
  free(r);
}

/* The SSE response reading s (gen: a resumption's reader, which the main
 * thread made current; 0: a new reader, made current here) after the
 * event after. What the client is told first: how long to wait before it
 * reconnects (retry, in ms), and on a POST's stream for a 2025-11-25
 * client, the id to resume from before any message came (the revision's
 * priming event; older clients cannot read its empty data). */
static enum MHD_Result sse_response(const struct asker *a, struct stream *s, unsigned gen,
                                    uint64_t after, bool prime, const char *session)
{
  struct MHD_Connection *c = a->c;
  struct sse_reader *r = cap_xcalloc(1, sizeof *r);
  r->h = a->h;
  r->token = a->q->token ? cap_xstrdup(a->q->token) : NULL;
  r->s = s;
  r->after = after;
  pthread_mutex_lock(&s->mu);
  s->refs++; /* the reader's */
  if (!gen) {
    gen = ++s->reader;
    s->closed = false;
  }
  r->gen = gen;
  if (s->resumable && prime) {
    char id[STREAM_ID_MAX];
    stream_event_id(id, s->number, s->prime_seq);
    cap_buf_printf(&r->pending, "id: %s\nretry: %d\ndata: \n\n", id, SSE_RETRY_MS);
  } else if (s->resumable) {
    cap_buf_printf(&r->pending, "retry: %d\n\n", SSE_RETRY_MS);
  }
  pthread_cond_broadcast(&s->cv); /* an older reader ends */
  pthread_mutex_unlock(&s->mu);
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, r, sse_free);
  if (!resp) {
    sse_free(r);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  if (session)
    MHD_add_response_header(resp, "Mcp-Session-Id", session);
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* ---- checks before the body ---- */

static char *bearer(struct MHD_Connection *c)
{
  const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
  if (!a || strncasecmp(a, "Bearer ", 7) != 0)
    return NULL;
  a += 7;
  while (*a == ' ')
    a++;
  return cap_xstrdup(a);
}

static uint64_t mono_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static bool within_rate(struct serve_http *h, const char *token)
{
  uint64_t now = mono_ms();
  pthread_mutex_lock(&h->rate_mu);
  struct bucket *b = NULL;
  for (size_t i = 0; i < h->n_buckets && !b; i++)
    if (strcmp(h->buckets[i].token, token) == 0)
      b = &h->buckets[i];
  if (!b && h->n_buckets < MAX_BUCKETS) {
    h->buckets = cap_xrealloc(h->buckets, (h->n_buckets + 1) * sizeof *h->buckets);
    b = &h->buckets[h->n_buckets++];
    *b = (struct bucket){.token = cap_xstrdup(token), .left = 2 * h->rate, .last_ms = now};
  } else if (!b) {
    b = &h->buckets[0];
    for (size_t i = 1; i < h->n_buckets; i++)
      if (h->buckets[i].last_ms < b->last_ms)
        b = &h->buckets[i];
    free(b->token);
    *b = (struct bucket){.token = cap_xstrdup(token), .left = 2 * h->rate, .last_ms = now};
  }
  b->left += (double)(now - b->last_ms) * h->rate / 1000.0;
  if (b->left > 2 * h->rate)
    b->left = 2 * h->rate;
  b->last_ms = now;
  bool ok = b->left >= 1;
  if (ok)
    b->left -= 1;
  pthread_mutex_unlock(&h->rate_mu);
  return ok;
}

/* ---- one request ---- */

static void req_done(void *cls, struct MHD_Connection *c, void **con_cls,
                     enum MHD_RequestTerminationCode code)
{
  (void)cls;
  (void)c;
  (void)code;
  struct req *q = *con_cls;
  if (!q)
    return;
  cap_buf_free(&q->body);
  free(q->user);
  free_token(q->token);
  free(q);
  *con_cls = NULL;
}

static bool known_version(const char *v)
{
  static const char *const known[] = {"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"};
  for (size_t i = 0; i < ARRAY_SIZE(known); i++)
    if (strcmp(v, known[i]) == 0)
      return true;
  return false;
}

/* A call whose answer is its only message within ANSWER_SOON_MS (a warm
 * server's, typically) is answered with that JSON object, which the
 * transport allows the server to choose: the client reads a complete
 * body and keeps its connection, where an SSE stream costs a stream's
 * set-up and often the connection. Anything sent before the answer
 * (progress, logging, a request to the client), or a longer call, gets
 * the SSE stream, whose keep-alive comments also show a client that left.
 * Called with st->mu held. */
static bool answered_soon(struct stream *st)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += ANSWER_SOON_MS * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  while (st->head == st->n && !st->done)
    if (pthread_cond_timedwait(&st->cv, &st->mu, &until) == ETIMEDOUT)
      break;
  return st->done && st->n - st->head == 1 && !st->http_status;
}

/* A GET's stream the main thread pointed at the stream it resumes: that
 * stream's SSE response, its events after the client's last. */
static enum MHD_Result resumed(const struct asker *a, struct stream *st)
{
  struct stream *target = st->resume;
  st->resume = NULL;
  unsigned gen = st->resume_gen;
  uint64_t after = st->resume_after;
  pthread_mutex_unlock(&st->mu);
  enum MHD_Result r = sse_response(a, target, gen, after, false, NULL);
  stream_unref(target);
  return r;
}

/* The answer once the main thread has it: the refusal, the JSON, or an
 * SSE stream for a call. */
static enum MHD_Result answer(const struct asker *a, struct stream *st, bool sse, bool prime)
{
  struct MHD_Connection *c = a->c;
  pthread_mutex_lock(&st->mu);
  /* a call's SSE answer starts once the request is taken (its headers
   * then, its messages as they come); anything else waits for its answer */
  while (st->head == st->n && !st->done && !(sse && st->accepted))
    pthread_cond_wait(&st->cv, &st->mu);
  if (st->resume)
    return resumed(a, st);
  if (sse && !st->http_status && answered_soon(st)) {
    sse = false;       /* the answer alone, as JSON: nothing came before it */
    st->closed = true; /* and no reader comes for its events: forgettable */
  }
  _cleanup_free_ char *session = st->session_id ? cap_xstrdup(st->session_id) : NULL;
  int status = st->http_status;
  _cleanup_free_ char *error = st->error ? cap_xstrdup(st->error) : NULL;
  if (!status && !sse) {
    while (!st->done)
      pthread_cond_wait(&st->cv, &st->mu);
  }
  _cleanup_free_ char *last =
      !status && !sse && st->n > st->head ? cap_xstrdup(st->ev[st->n - 1].json) : NULL;
  pthread_mutex_unlock(&st->mu);
  if (status)
    return error ? refuse(c, (unsigned)status, -32000, error)
                 : reply(c, (unsigned)status, "", "", NULL);
  if (!sse)
    return last ? reply(c, MHD_HTTP_OK, "application/json", last, session)
                : reply(c, MHD_HTTP_ACCEPTED, "", "", session);
  return sse_response(a, st, 0, 0, prime, session);
}

/* Requests answered once a child has run (a tool call, a request relayed
 * to a third-party MCP server): an SSE stream, which also carries what
 * is sent before the answer (progress, logging, sampling, elicitation) */
static bool answered_later(const char *method)
{
  static const char *const later[] = {
      "tools/call",   "resources/list", "resources/templates/list", "resources/read",
      "prompts/list", "prompts/get",    "completion/complete",      "subscriptions/listen"};
  for (size_t i = 0; i < ARRAY_SIZE(later); i++)
    if (strcmp(method, later[i]) == 0)
      return true;
  return false;
}

/* What the body is: a request (its id and method), or not. */
struct parsed {
  bool object, request, initialize, call;
  bool tools_call; /* may be answered on this thread (serve_hooks.fast_call) */
  bool modern;     /* its _meta names 2026-07-28: no session */
  bool listen;     /* subscriptions/listen: a stream that stays open */
  bool unknown;    /* a method the dispatcher does not have */
  bool note26;     /* a notification in the 2026-07-28 form (its _meta's or the header's) */
  char *id_json;
  char *mismatch; /* 2026-07-28: the headers disagree with the body (mcp_headers.c) */
};

static void classify(const char *body, size_t len, const struct mcp_http_headers *hh,
                     struct parsed *p)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, body, len, "body", 64, &d) == 0 && doc->root->kind == CAP_NODE_OBJECT) {
    p->object = true;
    const struct cap_node *id = cap_node_get(doc->root, "id");
    const struct cap_node *m = cap_node_get(doc->root, "method");
    if (m && m->kind == CAP_NODE_STRING && id &&
        (id->kind == CAP_NODE_STRING || id->kind == CAP_NODE_INT)) {
      p->request = true;
      p->initialize = strcmp(m->u.str.ptr, "initialize") == 0;
      p->call = answered_later(m->u.str.ptr);
      p->tools_call = strcmp(m->u.str.ptr, "tools/call") == 0;
      p->listen = strcmp(m->u.str.ptr, "subscriptions/listen") == 0;
      p->unknown = !mcp_method_known(m->u.str.ptr);
      const struct cap_node *meta = cap_node_get(cap_node_get(doc->root, "params"), "_meta");
      p->modern = cap_node_get(meta, "io.modelcontextprotocol/protocolVersion") != NULL;
      struct cap_buf b = {0};
      if (id->kind == CAP_NODE_INT)
        cap_buf_printf(&b, "%lld", (long long)id->u.num.i);
      else
        cap_json_quote(&b, id->u.str.ptr, id->u.str.len);
      p->id_json = cap_buf_steal(&b);
    } else if (m && m->kind == CAP_NODE_STRING && !id) {
      const struct cap_node *meta = cap_node_get(cap_node_get(doc->root, "params"), "_meta");
      const struct cap_node *pv = cap_node_get(meta, "io.modelcontextprotocol/protocolVersion");
      p->note26 = (pv && pv->kind == CAP_NODE_STRING && strcmp(pv->u.str.ptr, "2026-07-28") == 0) ||
                  (!pv && hh->version && strcmp(hh->version, "2026-07-28") == 0);
    }
    mcp_headers_match(doc->root, hh, &p->mismatch);
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static enum MHD_Result on_post(struct serve_http *h, struct MHD_Connection *c, struct req *q,
                               const char *session)
{
  if (q->too_big)
    return refuse(c, MHD_HTTP_CONTENT_TOO_LARGE, -32600, "the body is larger than 4 MiB");
  const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Protocol-Version");
  if (v && !known_version(v))
    return refuse_version(c, NULL, "[\"2026-07-28\",\"2025-11-25\",\"2025-06-18\"]", v);
  struct parsed p = {0};
  struct mcp_http_headers hh = {v, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Method"),
                                MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Name")};
  classify(q->body.data ? q->body.data : "", q->body.len, &hh, &p);
  if (!p.object) /* JSON-RPC batches are not MCP's since 2025-06-18 */
    return refuse(c, MHD_HTTP_BAD_REQUEST, q->body.len && q->body.data[0] == '[' ? -32600 : -32700,
                  "Parse error: the body must be one JSON-RPC message, a JSON object");
  if (p.mismatch) {
    enum MHD_Result r = refuse_id(c, MHD_HTTP_BAD_REQUEST, -32020, p.id_json, p.mismatch, NULL);
    free(p.mismatch);
    free(p.id_json);
    return r;
  }
  if (p.modern && p.unknown) { /* the transport's 404, which a legacy server's 404 lacks */
    enum MHD_Result r = refuse_id(c, MHD_HTTP_NOT_FOUND, -32601, p.id_json,
                                  "Method not found: tools/list and server/discover say what "
                                  "this server offers",
                                  NULL);
    free(p.id_json);
    return r;
  }
  if (p.modern && v && strcmp(v, "2026-07-28") != 0) { /* the body's, matching the header */
    enum MHD_Result r = refuse_version(c, p.id_json, "[\"2026-07-28\"]", v);
    free(p.id_json);
    return r;
  }
  /* 2026-07-28 defines no client notification over HTTP (closing a
   * request's stream cancels it) and no session to give one to: accepted,
   * as the transport says of a notification the server takes */
  if (p.note26 && !session)
    return reply(c, MHD_HTTP_ACCEPTED, "", "", NULL);
  if (!p.initialize && !session && !p.modern) {
    free(p.id_json);
    return refuse(c, MHD_HTTP_BAD_REQUEST, -32000,
                  "Bad Request: an Mcp-Session-Id header is required (initialize first)");
  }
  char *fast = NULL; /* a warm server's call, answered here */
  if (p.tools_call && session && !p.modern &&
      h->hooks->fast_call(h->sv, session, q->user, q->body.data, q->body.len, &fast)) {
    free(p.id_json);
    enum MHD_Result r = fast ? reply(c, MHD_HTTP_OK, "application/json", fast, NULL)
                             : reply(c, MHD_HTTP_ACCEPTED, "", "", NULL);
    free(fast);
    return r;
  }
  struct inbound *in = cap_xcalloc(1, sizeof *in);
  in->kind = INBOUND_MESSAGE;
  in->session_id = p.initialize ? NULL : session ? cap_xstrdup(session) : NULL;
  in->sessionless = p.modern && !session;
  in->listen = p.listen;
  in->user = cap_xstrdup(q->user);
  in->len = q->body.len;
  in->body = cap_buf_steal(&q->body);
  if (!in->body)
    in->body = cap_xstrdup("");
  in->id_json = p.id_json;
  in->sse = p.call;
  /* a notification or an answer to us: 202 at once */
  struct stream *st = p.request ? stream_new() : NULL;
  if (st) {
    st->refs++; /* the inbound's, then its route's */
    in->stream = st;
  }
  h->hooks->enqueue(h->sv, in);
  if (!st)
    return reply(c, MHD_HTTP_ACCEPTED, "", "", NULL);
  /* the priming event: for 2025-11-25 clients (the header names the
   * session's version), whose readers accept an event with no data */
  bool prime = v && strcmp(v, "2025-11-25") >= 0;
  enum MHD_Result r = answer(&(struct asker){h, c, q}, st, p.call, prime);
  stream_unref(st);
  return r;
}

/* A session's DELETE or GET stream, handed to serve's main thread, the
 * answer streamed (sse: as server-sent events; last_event_id: a GET's
 * Last-Event-ID, the stream it resumes). */
static enum MHD_Result enqueue_session(struct serve_http *h, struct MHD_Connection *c,
                                       struct req *q, const char *session, enum inbound_kind kind,
                                       bool sse, const char *last_event_id)
{
  if (!session)
    return refuse(c, MHD_HTTP_BAD_REQUEST, -32000, "Bad Request: no Mcp-Session-Id");
  struct inbound *in = cap_xcalloc(1, sizeof *in);
  in->kind = kind;
  in->session_id = cap_xstrdup(session);
  in->user = cap_xstrdup(q->user);
  in->last_event_id = last_event_id ? cap_xstrdup(last_event_id) : NULL;
  struct stream *st = stream_new();
  st->refs++;
  in->stream = st;
  h->hooks->enqueue(h->sv, in);
  enum MHD_Result r = answer(&(struct asker){h, c, q}, st, sse, false);
  stream_unref(st);
  return r;
}

static enum MHD_Result on_delete(struct serve_http *h, struct MHD_Connection *c, struct req *q,
                                 const char *session)
{
  return enqueue_session(h, c, q, session, INBOUND_DELETE, false, NULL);
}

/* The session's GET stream: what belongs to no request (a subscribed
 * resource's update), as SSE, until the client leaves or the session
 * ends; a new one replaces it. With Last-Event-ID: the stream that event
 * was on (the GET stream, or a POST's) resumed after it. */
static enum MHD_Result on_get(struct serve_http *h, struct MHD_Connection *c, struct req *q,
                              const char *session)
{
  const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
  if (!accept || !strstr(accept, "text/event-stream"))
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "", "", NULL);
  return enqueue_session(h, c, q, session, INBOUND_LISTEN, true,
                         MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID"));
}

/* The first call for a request: every check that needs no body. */
static enum MHD_Result admit(struct serve_http *h, struct MHD_Connection *c, const char *url,
                             const char *method, void **con_cls)
{
  if (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE)) /* the port is not known yet */
    return refuse(c, MHD_HTTP_SERVICE_UNAVAILABLE, -32000, "the server is starting");
  if (strcmp(url, "/mcp") != 0)
    return refuse(c, MHD_HTTP_NOT_FOUND, -32000, "Not Found: the MCP endpoint is /mcp");
  if (!serve_guard_host_ok(&h->guard, serve_guard_request_host(c)))
    return refuse(c, MHD_HTTP_FORBIDDEN, -32000, "Forbidden: unexpected Host");
  if (!serve_guard_origin_ok(&h->guard, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin")))
    return refuse(c, MHD_HTTP_FORBIDDEN, -32000, "Forbidden: foreign Origin");
  _cleanup_free_ char *token = bearer(c);
  char *user = token ? h->hooks->authenticate(h->sv, token) : NULL;
  if (!user)
    return refuse(c, MHD_HTTP_UNAUTHORIZED, -32000,
                  "Unauthorized: send `Authorization: Bearer TOKEN` (`capsule access issue`)");
  serve_conns_trust(&h->conns, c, user); /* a token's holder: out of the pending share */
  if (!within_rate(h, token)) {
    free(user);
    return refuse(c, MHD_HTTP_TOO_MANY_REQUESTS, -32000,
                  "Too Many Requests: this token's rate limit (`capsule serve --rate`)");
  }
  if (h->hooks->stopping(h->sv)) {
    free(user);
    return refuse(c, MHD_HTTP_SERVICE_UNAVAILABLE, -32000, "the server is stopping");
  }
  if (strcmp(method, "POST") && strcmp(method, "DELETE") && strcmp(method, "GET")) {
    free(user);
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "", "", NULL);
  }
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  struct req *q = cap_xcalloc(1, sizeof *q);
  q->user = user;
  q->token = steal_pointer(&token);
  q->too_big = cl && strtoull(cl, NULL, 10) > MCP_MAX_MESSAGE;
  *con_cls = q;
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
  (void)version;
  struct serve_http *h = cls;
  struct req *q = *con_cls;
  if (!q)
    return admit(h, c, url, method, con_cls);
  if (*size) {
    if (!q->too_big && q->body.len + *size <= MCP_MAX_MESSAGE)
      cap_buf_append(&q->body, data, *size);
    else {
      q->too_big = true;
      cap_buf_free(&q->body);
    }
    *size = 0;
    return MHD_YES;
  }
  const char *session = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
  if (strcmp(method, "GET") == 0)
    return on_get(h, c, q, session);
  return strcmp(method, "DELETE") == 0 ? on_delete(h, c, q, session) : on_post(h, c, q, session);
}

/* ---- the daemon ---- */

int serve_http_start(struct serve *sv, const struct serve_hooks *hooks,
                     const struct serve_options *opt, struct serve_http **ret,
                     struct cap_error *err)
{
  struct serve_http *h = cap_xcalloc(1, sizeof *h);
  h->sv = sv;
  h->hooks = hooks;
  pthread_mutex_init(&h->rate_mu, NULL);
  serve_conns_init(&h->conns, HTTP_CONN_PENDING, HTTP_CONN_MAX - HTTP_CONN_PENDING - 1,
                   HTTP_CONN_TRUSTED_TIMEOUT_S);
  h->rate = opt->rate ? opt->rate : SERVE_RATE;
  int port = serve_guard_init(&h->guard, "--mcp-http", opt->http_addr, opt, err);
  if (port < 0) {
    serve_http_stop(h);
    return port;
  }
  struct serve_guard *g = &h->guard;
  h->d = serve_guard_daemon(g, port, on_request, req_done, h,
                            &(struct serve_guard_limits){
                                HTTP_CONN_MAX, g->loopback ? HTTP_CONN_MAX : HTTP_CONN_PER_ADDRESS,
                                SERVE_CONN_PENDING_TIMEOUT_S, serve_conns_notify, &h->conns});
  if (!h->d) {
    serve_http_stop(h);
    return cap_error_set(err, EADDRNOTAVAIL, "cannot listen on %s (in use, or not this host's)",
                         opt->http_addr);
  }
  int bound = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT)->port;
  if (port == 0) /* any free port: the Host values name the one bound */
    serve_guard_set_port(g, opt->http_addr, bound);
  _cleanup_free_ char *addr = serve_guard_bound_addr(opt->http_addr, bound);
  hooks->http_bound(sv, addr);
  __atomic_store_n(&h->ready, true, __ATOMIC_RELEASE);
  *ret = h;
  return 0;
}

void serve_http_quiesce(struct serve_http *h)
{
  if (h && h->d)
    MHD_quiesce_daemon(h->d); /* the listening socket stays open until stop */
}

void serve_http_stop(struct serve_http *h)
{
  if (!h)
    return;
  if (h->d)
    MHD_stop_daemon(h->d);
  serve_guard_free(&h->guard);
  for (size_t i = 0; i < h->n_buckets; i++) {
    explicit_bzero(h->buckets[i].token, strlen(h->buckets[i].token));
    free(h->buckets[i].token);
  }
  free(h->buckets);
  serve_conns_destroy(&h->conns);
  free(h);
}

__attribute__((visibility("default"))) const struct serve_http_module serve_http_module_v1 = {
    .size = sizeof(struct serve_http_module),
    .start = serve_http_start,
    .quiesce = serve_http_quiesce,
    .stop = serve_http_stop,
    .ui_start = serve_ui_start,
    .ui_quiesce = serve_ui_quiesce,
    .ui_stop = serve_ui_stop,
};
