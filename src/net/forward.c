#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/buf.h"
#include "net/http.h"
#include "net/proxy_internal.h"
#include "net/rules.h"
#include "net/tls.h"

/* ---- one HTTP request, forwarded ---- */

/* Whether a Connection header of req lists name (comma-separated tokens,
 * any case, optional white space). */
static bool connection_names(const struct http_request *req, const char *name)
{
  size_t len = strlen(name);
  for (size_t i = 0; i < req->n_headers; i++) {
    if (strcasecmp(req->headers[i].name, "Connection") != 0)
      continue;
    for (const char *v = req->headers[i].value; *v;) {
      v += strspn(v, " \t,");
      size_t n = strcspn(v, ",");
      size_t m = n;
      while (m && (v[m - 1] == ' ' || v[m - 1] == '\t'))
        m--;
      if (m == len && strncasecmp(v, name, len) == 0)
        return true;
      v += n;
    }
  }
  return false;
}

/* Hop-by-hop headers, never forwarded: capsule's own Host and framing
 * replace the client's, Proxy-* are for capsule, and the headers the
 * client's Connection names are for this hop only. Content-Length stays
 * whatever Connection says: it frames the body capsule forwards. */
static bool hop_header(const struct http_request *req, const char *name)
{
  static const char *const hop[] = {"Host", "Connection", "Keep-Alive",        "Upgrade",
                                    "TE",   "Trailer",    "Transfer-Encoding", NULL};
  for (size_t i = 0; hop[i]; i++)
    if (strcasecmp(name, hop[i]) == 0)
      return true;
  if (strncasecmp(name, "Proxy-", 6) == 0)
    return true;
  return strcasecmp(name, "Content-Length") != 0 && connection_names(req, name);
}

/* The answer to a failed proxy_dial: a refusal is the policy's (403),
 * anything else the upstream's fault (502). */
static const char *dial_status(int e) { return e == -EACCES ? "403 Forbidden" : "502 Bad Gateway"; }

/* Streams the request body (exactly the bytes the parser says are this
 * request's) from the client to the upstream. */
static bool forward_body(struct http_request *req, struct stream *client, struct stream *up,
                         const char *have, size_t have_len, struct event *ev)
{
  char buf[65536];
  struct cap_buf body = {0};
  bool ok = true;
  while (ok && !req->body_done) {
    if (!have_len) {
      ssize_t n = proxy_stream_read(client, buf, sizeof buf);
      if (n <= 0) {
        ok = false;
        break;
      }
      have = buf;
      have_len = (size_t)n;
    }
    body.len = 0;
    long used = http_body_feed(req, have, have_len, &body);
    if (used < 0 || (used == 0 && !req->body_done)) {
      ok = false;
      break;
    }
    /* the decoded body, in framing of capsule's own making */
    if (body.len && req->chunked) {
      char size[24];
      int n = snprintf(size, sizeof size, "%zx\r\n", body.len);
      ok = proxy_stream_write(up, size, (size_t)n) && proxy_stream_write(up, body.data, body.len) &&
           proxy_stream_write(up, "\r\n", 2);
    } else if (body.len) {
      ok = proxy_stream_write(up, body.data, body.len);
    }
    ev->bytes_up += (long long)body.len;
    have += used;
    have_len -= (size_t)used;
  }
  if (ok && req->chunked)
    ok = proxy_stream_write(up, "0\r\n\r\n", 5);
  cap_buf_free(&body);
  return ok;
}

/* One request on its way: what forward_request's steps share. */
struct forwarding {
  struct worker *w;
  struct stream *client;
  struct http_request *req;
  const struct http_url *t;
  const struct cap_credential_route *route; /* or NULL */
  const struct route_secret *sec;           /* the route's, or NULL */
  size_t base_len;                          /* the route's base path inside t->path */
  bool via_route;                           /* reachable through the route alone */
  char path_only[4096];                     /* t->path without its query */
  const struct dest *dest;                  /* where t->host led (resolved once) */
  int up_fd;                                /* connected to dest already (the slot's), or -1 */
  struct dest own;                          /* dest, when this request resolved it */
  struct event *ev;
};

/* The L7 rules for this request's destination: those of the endpoint its
 * name matched, when that one has rules; otherwise those of every endpoint
 * with rules whose name resolves to an address this one resolved to (the
 * same server reached by its IP or another name), all of which must allow
 * it. */
static bool endpoint_rules_allow(struct forwarding *f, const struct cap_endpoint *by_name)
{
  const char *method = f->req->method;
  if (by_name && by_name->n_rules)
    return net_rules_allow(by_name->rules, by_name->n_rules, method, f->path_only);
  const struct cap_endpoint *at[16];
  size_t n = proxy_endpoints_at(f->w->px, f->dest, f->t->port, at, 16);
  for (size_t i = 0; i < n; i++)
    if (!net_rules_allow(at[i]->rules, at[i]->n_rules, method, f->path_only))
      return false;
  return true;
}

/* The allowlist, the host's L7 rules, the route's rules: NULL when the
 * request may go, else why not (*status set). */
static const char *check_request(struct forwarding *f, const char **status)
{
  struct proxy *px = f->w->px;
  const char *method = f->req->method;
  *status = "403 Forbidden";
  const struct cap_endpoint *endpoint = NULL;
  bool host_ok = net_host_allowed(&px->spec->network, f->t->host, f->t->port, &endpoint);
  if (!host_ok && !f->via_route && !f->route)
    return "this host:port is not in the capability's network allowlist";
  if (!f->dest) {
    const char *why = NULL;
    int e = proxy_resolve(px, f->t->host, f->t->port, &f->own, &why);
    if (e < 0) {
      *status = dial_status(e);
      return why;
    }
    f->dest = &f->own;
  }
  if (!endpoint_rules_allow(f, endpoint))
    return "the capability's rules for this host do not allow this method and path";
  if (strcasecmp(method, "TRACE") == 0 || strcasecmp(method, "TRACK") == 0) {
    /* a server that echoes the request would hand back what capsule added */
    *status = "405 Method Not Allowed";
    return "TRACE and TRACK are not forwarded";
  }
  if (!f->route)
    return NULL;
  /* with or without endpoint_rules: a secret never goes to a path an
   * upstream could read as outside the route (.., encoded slashes) */
  if (!net_path_matches("/**", f->path_only))
    return "the path is ambiguous (\".\" or \"..\" segments, encoded separators); send it "
           "normalised";
  const char *rel = f->path_only[f->base_len] ? f->path_only + f->base_len : "/";
  if (!net_rules_allow(f->route->rules, f->route->n_rules, method, rel))
    return "the credential's endpoint_rules do not allow this method and path";
  return NULL;
}

/* The header a header or basic_auth route injects, or NULL. */
static const char *inject_header_of(const struct cap_credential_route *route)
{
  if (route && route->mode == CAP_INJECT_HEADER)
    return route->header ? route->header : "Authorization";
  if (route && route->mode == CAP_INJECT_BASIC_AUTH)
    return "Authorization";
  return NULL;
}

/* The client's end-to-end headers into head, the injected header's value
 * checked for the phantom and dropped. Returns NULL, or why the request is
 * refused. */
static const char *put_client_headers(struct forwarding *f, const char *inject_header,
                                      struct cap_buf *head)
{
  const struct route_secret *sec = f->sec;
  bool phantom_seen = false;
  for (size_t i = 0; i < f->req->n_headers; i++) {
    const struct http_header *h = &f->req->headers[i];
    if (hop_header(f->req, h->name) || (f->route && strcasecmp(h->name, "Accept-Encoding") == 0))
      continue; /* routed: uncompressed, so the response can be scrubbed */
    if (inject_header && strcasecmp(h->name, inject_header) == 0) {
      phantom_seen |= sec->phantom[0] && proxy_header_has_phantom(sec, f->route->mode, h->value);
      continue; /* the tool's value never reaches the upstream */
    }
    cap_buf_printf(head, "%s: %s\r\n", h->name, h->value);
  }
  if (inject_header && sec->phantom[0] && !phantom_seen)
    return "the request does not carry this session's token for the credential "
           "(send the value of its env_var)";
  return NULL;
}

/* The upstream head: origin form, Host from the checked target, the
 * client's end-to-end headers, the credential, Connection: close. Returns
 * NULL, or why the request is refused (head then holds no secret). */
static const char *build_head(struct forwarding *f, struct cap_buf *head)
{
  const struct http_url *t = f->t;
  const struct cap_credential_route *route = f->route;
  const char *refused = NULL;
  cap_buf_printf(head, "%s ", f->req->method);
  if (route)
    refused = proxy_rewrite_path(route, f->sec, t->path, head);
  else
    cap_buf_puts(head, t->path);
  bool v6 = strchr(t->host, ':') != NULL;
  cap_buf_printf(head, " HTTP/1.1\r\nHost: %s%s%s", v6 ? "[" : "", t->host, v6 ? "]" : "");
  if (t->port != (t->tls ? 443 : 80))
    cap_buf_printf(head, ":%u", t->port);
  cap_buf_puts(head, "\r\n");
  const char *inject_header = inject_header_of(route);
  if (!refused)
    refused = put_client_headers(f, inject_header, head);
  if (refused) {
    OPENSSL_cleanse(head->data, head->len);
    head->len = 0;
    return refused;
  }
  if (inject_header) {
    cap_buf_printf(head, "%s: ", inject_header);
    if (route->mode == CAP_INJECT_BASIC_AUTH) {
      cap_buf_puts(head, "Basic ");
      proxy_put_base64(head, f->sec->secret);
    } else {
      proxy_put_format(head, route->format ? route->format : "Bearer {}", f->sec->secret);
    }
    cap_buf_puts(head, "\r\n");
  }
  if (route)
    cap_buf_puts(head, "Accept-Encoding: identity\r\n");
  if (f->req->chunked)
    cap_buf_puts(head, "Transfer-Encoding: chunked\r\n");
  cap_buf_puts(head, "Connection: close\r\n\r\n");
  return NULL;
}

/* Connects to the checked target (TLS when it is https). Returns false
 * after denying. */
static bool open_upstream(struct forwarding *f, struct stream *up)
{
  struct proxy *px = f->w->px;
  const char *why = NULL;
  int fd = f->up_fd >= 0 ? f->up_fd : proxy_connect_dest(f->w, f->dest, &why);
  if (fd < 0) {
    proxy_deny(px, f->client, f->ev, dial_status(fd), why);
    return false;
  }
  if (f->up_fd < 0)
    proxy_slot_set_upstream(f->w, fd);
  *up = (struct stream){.fd = fd};
  if (!f->t->tls)
    return true;
  f->w->tls = true;
  up->ssl = SSL_new(tls_client_ctx(px->ca));
  if (!up->ssl || tls_client_expect_host(up->ssl, f->t->host) < 0 || SSL_set_fd(up->ssl, fd) != 1 ||
      SSL_connect(up->ssl) != 1) {
    char errbuf[256], msg[400];
    snprintf(msg, sizeof msg, "TLS to the upstream failed verification or handshake: %s",
             tls_last_error(errbuf, sizeof errbuf));
    SSL_free(up->ssl);
    up->ssl = NULL;
    proxy_deny(px, f->client, f->ev, "502 Bad Gateway", msg);
    return false;
  }
  return true;
}

/* The response, to the end (the upstream closes: Connection: close):
 * spliced when neither side is TLS and no secret was added; with a secret,
 * parsed and masked (response.c). */
static void stream_response(struct forwarding *f, struct stream *up)
{
  struct worker *w = f->w;
  struct stream *client = f->client;
  if (f->route) {
    proxy_relay_masked(w, up, client, f->sec->secret, strcasecmp(f->req->method, "HEAD") == 0,
                       f->ev);
    return;
  }
  for (;;) {
    ssize_t n;
    if (!up->ssl && !client->ssl) {
      n = proxy_pump(w, 1, up->fd, client->fd, true, NULL);
      if (n == -2) { /* nothing yet: wait for it */
        struct pollfd pf = {.fd = up->fd, .events = POLLIN};
        if (poll(&pf, 1, STREAM_TIMEOUT_S * 1000) <= 0)
          break;
        continue;
      }
    } else {
      n = proxy_stream_read(up, w->buf, sizeof w->buf);
      if (n > 0 && !proxy_stream_write(client, w->buf, (size_t)n))
        n = -1;
    }
    if (n <= 0)
      break;
    f->ev->bytes_down += n;
  }
}

/* Checks one request against the allowlist, the host's L7 rules and the
 * route's rules, injects the route's credential, forwards it, and streams
 * the response back. route may be NULL; base_len is the route's base path
 * length inside t->path. via_route: the host is reachable because of the
 * route alone (reverse-proxy form). rest: body bytes already read. */
static void forward_request(struct worker *w, struct stream *client, struct http_request *req,
                            struct http_url *t, const struct cap_credential_route *route,
                            size_t base_len, bool via_route, const struct dest *d, int up_fd,
                            const char *rest, size_t rest_len, struct event *ev)
{
  struct proxy *px = w->px;
  struct forwarding f = {.w = w,
                         .client = client,
                         .req = req,
                         .t = t,
                         .route = route,
                         .sec = route ? proxy_secret_of(px, route) : NULL,
                         .base_len = base_len,
                         .via_route = via_route,
                         .dest = d,
                         .up_fd = up_fd,
                         .ev = ev};
  ev->method = req->method;
  ev->host = t->host;
  ev->port = t->port;
  ev->route = route ? route->name : NULL;
  snprintf(f.path_only, sizeof f.path_only, "%.*s", (int)strcspn(t->path, "?"), t->path);
  const char *status, *why = check_request(&f, &status);
  if (why) {
    proxy_deny(px, client, ev, status, why);
    return;
  }
  struct cap_buf head = {0};
  why = build_head(&f, &head);
  struct stream up = {.fd = -1};
  if (why || !open_upstream(&f, &up)) {
    if (why)
      proxy_deny(px, client, ev, "403 Forbidden", why);
    OPENSSL_cleanse(head.data, head.len);
    cap_buf_free(&head);
    return;
  }
  bool ok = proxy_stream_write(&up, head.data, head.len);
  OPENSSL_cleanse(head.data, head.len);
  cap_buf_free(&head);
  ok = ok && forward_body(req, client, &up, rest, rest_len, ev);
  if (ok) {
    /* no half-close toward the upstream: Connection: close says there is no
     * other request, and a server that takes a FIN for an abort (Node's
     * http) cuts a response of a few MB short */
    stream_response(&f, &up);
    if (!client->ssl) /* the client sees the end now, not after the log line */
      shutdown(client->fd, SHUT_WR);
  }
  proxy_log_event(px, ev, true, ok ? "allowed" : "allowed; the request body broke off");
  if (up.ssl) {
    SSL_shutdown(up.ssl);
    SSL_free(up.ssl);
  }
}

/* ---- a connection ---- */

/* Reads a request head from s into buf (which keeps what follows it).
 * fresh: nothing can be there yet (worker.fresh): wait before the first
 * read. Returns the head length, or -1 (*why set when it is the client's
 * fault). */
static long read_request(struct stream *s, struct http_request *req, char *buf, size_t size,
                         bool fresh, size_t *got, const char **why)
{
  *got = 0;
  for (;;) {
    /* a client usually sends its request with the connection: try first,
     * wait only when nothing is there yet */
    ssize_t n = -1;
    errno = EAGAIN;
    if (!s->ssl && !fresh)
      n = recv(s->fd, buf + *got, size - *got, MSG_DONTWAIT);
    fresh = false;
    if (n < 0 && (s->ssl || errno == EAGAIN)) {
      if (!s->ssl || SSL_pending(s->ssl) == 0) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, IO_TIMEOUT_MS) <= 0) {
          *why = NULL;
          return -1;
        }
      }
      n = proxy_stream_read(s, buf + *got, size - *got);
    }
    if (n <= 0) {
      *why = NULL;
      return -1;
    }
    *got += (size_t)n;
    long r = http_request_parse(req, buf, *got, why);
    if (r != 0)
      return r;
    if (*got == size) {
      *why = "the request head is larger than 16 KiB";
      return -1;
    }
  }
}

void proxy_serve_origin(struct worker *w, struct stream *client, const char *host, uint16_t port,
                        bool tls, const struct dest *d, int up_fd, struct event *ev)
{
  struct proxy *px = w->px;
  struct http_request *req = &w->req;
  char *buf = w->buf;
  size_t got;
  const char *why = NULL;
  long head = read_request(client, req, buf, sizeof w->buf, false, &got, &why);
  if (head < 0) {
    if (why)
      proxy_deny(px, client, ev, "400 Bad Request", why);
    return;
  }
  struct http_url t = {.tls = tls, .port = port};
  snprintf(t.host, sizeof t.host, "%s", host);
  ev->path = req->target;
  if (req->target[0] != '/' || strlen(req->target) >= sizeof t.path || strchr(req->target, '#')) {
    proxy_deny(px, client, ev, "400 Bad Request",
               "a request to this host needs an origin-form /path (no #fragment)");
    return;
  }
  snprintf(t.path, sizeof t.path, "%s", req->target);
  size_t base = 0;
  const struct cap_credential_route *route = proxy_route_for(px, &t, &base);
  forward_request(w, client, req, &t, route, base, false, d, up_fd, buf + head, got - (size_t)head,
                  ev);
}

void proxy_intercept(struct worker *w, struct stream *client, const char *host, uint16_t port,
                     const struct dest *d, struct event *ev, bool announce)
{
  struct proxy *px = w->px;
  w->tls = true;
  SSL_CTX *ctx = tls_ca_server_ctx(px->ca, host);
  SSL *ssl = ctx ? SSL_new(ctx) : NULL;
  SSL_CTX_free(ctx);
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  if (announce)
    ev->kind = "intercept";
  if (!ssl || (announce && !proxy_stream_write(client, ok, sizeof ok - 1)) ||
      SSL_set_fd(ssl, client->fd) != 1 || SSL_accept(ssl) != 1) {
    char errbuf[256];
    proxy_log_event(px, ev, false, tls_last_error(errbuf, sizeof errbuf));
    SSL_free(ssl);
    return;
  }
  struct stream tls = {.fd = client->fd, .ssl = ssl};
  /* the CONNECT request is done with: its buffers are reused */
  proxy_serve_origin(w, &tls, host, port, true, d, -1, ev);
  SSL_shutdown(ssl);
  SSL_free(ssl);
}

static void handle_connect(struct worker *w, struct stream *client, struct http_request *req,
                           const char *rest, size_t rest_len, struct event *ev)
{
  struct proxy *px = w->px;
  char authority[300];
  char *host;
  uint16_t port;
  ev->kind = "tunnel";
  snprintf(authority, sizeof authority, "%s", req->target);
  if (!http_split_authority(authority, &host, &port)) {
    proxy_deny(px, client, ev, "400 Bad Request", "CONNECT needs host:port");
    return;
  }
  ev->host = host;
  ev->port = port;
  const struct cap_endpoint *endpoint = NULL;
  bool allowed = net_host_allowed(&px->spec->network, host, port, &endpoint);
  bool routed = proxy_has_route_host(px, host, port);
  if (!allowed && !routed) {
    proxy_deny(px, client, ev, "403 Forbidden",
               "this host:port is not in the capability's network allowlist");
    return;
  }
  /* resolved once: the addresses whose rules apply are the ones used */
  struct dest d;
  const char *why = NULL;
  int e = proxy_resolve(px, host, port, &d, &why);
  if (e < 0) {
    proxy_deny(px, client, ev, dial_status(e), why);
    return;
  }
  const struct cap_endpoint *at[1];
  bool ruled = endpoint && endpoint->n_rules;
  if (ruled || routed || proxy_endpoints_at(px, &d, port, at, 1) > 0) {
    if (rest_len) {
      proxy_deny(px, client, ev, "400 Bad Request", "data sent before the tunnel was established");
      return;
    }
    proxy_intercept(w, client, host, port, &d, ev, true);
    return;
  }
  int up = proxy_connect_dest(w, &d, &why);
  if (up < 0) {
    proxy_deny(px, client, ev, dial_status(up), why);
    return;
  }
  proxy_slot_set_upstream(w, up);
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  struct stream upstream = {.fd = up};
  if (proxy_stream_write(client, ok, sizeof ok - 1) &&
      (!rest_len || proxy_stream_write(&upstream, rest, rest_len))) {
    ev->bytes_up += (long long)rest_len;
    proxy_relay(w, client->fd, up, ev);
  }
  proxy_log_event(px, ev, true, "tunnel closed");
}

/* Every spelling of this machine's loopback: localhost (a trailing dot
 * too), 127/8 in any inet_aton form (127.1), ::1, ::ffff:127.x.y.z. */
static bool is_loopback_name(const char *host)
{
  if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0)
    return true;
  struct in_addr v4;
  if (inet_aton(host, &v4))
    return (ntohl(v4.s_addr) >> 24) == 127;
  struct in6_addr v6;
  if (inet_pton(AF_INET6, host, &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  return false;
}

/* GET /<credential-name>/rest: the reverse-proxy form (path is the origin
 * form the tool sent) */
static void handle_reverse(struct worker *w, struct stream *client, struct http_request *req,
                           const char *path, const char *rest, size_t rest_len, struct event *ev)
{
  struct proxy *px = w->px;
  ev->kind = "reverse";
  ev->path = path;
  if (strchr(path, '#')) {
    proxy_deny(px, client, ev, "400 Bad Request", "a request target carries no #fragment");
    return;
  }
  const char *name = path + 1;
  size_t nlen = strcspn(name, "/?");
  const struct cap_credential_route *route = NULL;
  for (size_t i = 0; i < px->spec->n_routes && !route; i++)
    if (strlen(px->spec->routes[i].name) == nlen &&
        strncmp(px->spec->routes[i].name, name, nlen) == 0)
      route = &px->spec->routes[i];
  if (!route) {
    proxy_deny(
        px, client, ev, "404 Not Found",
        "no credential route of this name: send proxy requests (absolute URLs or CONNECT), or "
        "/<credential-name>/path for a route the capability declares");
    return;
  }
  struct http_url t;
  if (!http_parse_url(route->upstream, &t)) {
    proxy_deny(px, client, ev, "502 Bad Gateway", "the credential's upstream URL cannot be parsed");
    return;
  }
  size_t base = strlen(t.path);
  while (base && t.path[base - 1] == '/')
    base--;
  const char *tail = name + nlen; /* "/rest?q", "?q" or "" */
  if (base + strlen(tail) + 2 >= sizeof t.path) {
    proxy_deny(px, client, ev, "414 URI Too Long", "the path is too long");
    return;
  }
  snprintf(t.path + base, sizeof t.path - base, "%s%s", *tail == '/' ? "" : "/", tail);
  forward_request(w, client, req, &t, route, base, true, NULL, -1, rest, rest_len, ev);
}

void proxy_serve_one(struct worker *w, int fd)
{
  struct proxy *px = w->px;
  struct stream client = {.fd = fd}; /* timeouts inherited from the listener */
  struct http_request *req = &w->req;
  char *buf = w->buf;
  size_t got;
  const char *why = NULL;
  struct event ev = {.kind = "http"};
  long head = read_request(&client, req, buf, sizeof w->buf, w->fresh, &got, &why);
  if (head < 0) {
    if (why)
      proxy_deny(px, &client, &ev, "400 Bad Request", why);
  } else if (strcmp(req->method, "CONNECT") == 0) {
    handle_connect(w, &client, req, buf + head, got - (size_t)head, &ev);
  } else if (req->target[0] == '/') {
    handle_reverse(w, &client, req, req->target, buf + head, got - (size_t)head, &ev);
  } else {
    struct http_url t;
    ev.path = req->target;
    if (!http_parse_url(req->target, &t) || t.tls) {
      proxy_deny(px, &client, &ev, "400 Bad Request",
                 "a proxy request needs an absolute http:// URL (use CONNECT for https)");
    } else if (t.port == PROXY_PORT && is_loopback_name(t.host)) {
      /* addressed to the proxy itself (a client that ignores NO_PROXY):
       * the reverse-proxy form, never the host's own port 3128 */
      handle_reverse(w, &client, req, t.path, buf + head, got - (size_t)head, &ev);
    } else {
      ev.path = t.path;
      size_t base = 0;
      const struct cap_credential_route *route = proxy_route_for(px, &t, &base);
      forward_request(w, &client, req, &t, route, base, false, NULL, -1, buf + head,
                      got - (size_t)head, &ev);
    }
  }
}
