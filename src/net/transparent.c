/* The transparent path: a connection the tool made to a synthetic address
 * (egress_plan.h) without any proxy support. The address stands for one
 * allowed name and the listener for one port, so the destination is known
 * before a byte is read (an on-demand address, through the capture
 * listener, stands for the pattern's name it was given to): it is checked like a CONNECT (allowlist
 * or route, then resolved once on the host side with every refusal of proxy_resolve), and then
 *  - for a host with L7 rules or a credential route, the client must speak
 *    first: TLS (its SNI, when sent, must be the name) is terminated with
 *    the session CA and one request served as proxy_intercept does; plain
 *    HTTP is served as an absolute-form request; anything else is refused;
 *  - otherwise the upstream is dialled at once (server-first protocols:
 *    SMTP, IMAP), and whichever side speaks first decides: a client's TLS
 *    ClientHello must name the name (or none), plain HTTP is served as an
 *    absolute-form request, anything else and everything the server starts
 *    is spliced.
 * The first bytes are only peeked (SO_RCVLOWAT waits for the rest of a
 * record), so what is spliced or handed to TLS is untouched, and at most
 * one TLS record (SNI_RECORD_MAX) is ever looked at. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "net/proxy_internal.h"
#include "net/rules.h"
#include "net/sni.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h, which clashes with netinet/in.h */
#endif

/* What the client's first bytes are. */
enum first_bytes { FIRST_GONE, FIRST_TLS, FIRST_HTTP, FIRST_OTHER, FIRST_BAD };

/* Whether buf[0..n) starts an HTTP request line ("METHOD /"): 1 yes, 0 no,
 * -1 cannot tell yet (*want: bytes needed). */
static int http_start(const char *buf, size_t n, size_t *want)
{
  size_t i = 0;
  while (i < n && i < 20 && buf[i] >= 'A' && buf[i] <= 'Z')
    i++;
  if (i == n && n < 21) { /* upper case so far */
    *want = n + 1;
    return -1;
  }
  if (i < 3 || i >= 20 || buf[i] != ' ')
    return 0;
  if (i + 1 >= n) {
    *want = i + 2;
    return -1;
  }
  return buf[i + 1] == '/';
}

/* Peeks at the client's first bytes until they say what they are, within
 * IO_TIMEOUT_MS; a TLS ClientHello's server name into sni ("" when none).
 * peeked: bytes a peek already put in w->buf (no second look at them), or
 * -1. */
static enum first_bytes peek_first(struct worker *w, int fd, ssize_t peeked, char sni[SNI_NAME_MAX],
                                   const char **why)
{
  char *buf = w->buf;
  enum first_bytes r = FIRST_GONE;
  *why = "the connection closed before it said anything";
  /* one deadline for all of it: a client trickling a byte at a time does
   * not hold the worker longer */
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + IO_TIMEOUT_MS;
  ssize_t seen = -1;
  bool lowered = false; /* SO_RCVLOWAT raised: set back before returning */
  for (;;) {
    ssize_t n = peeked > 0 ? peeked : recv(fd, buf, SNI_RECORD_MAX, MSG_PEEK | MSG_DONTWAIT);
    peeked = -1;
    size_t want = 0;
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      break;
    if (n > 0 && n == seen) { /* woken with nothing new: the client half-closed */
      *why = "the client stopped sending in the middle of its first message";
      r = FIRST_BAD;
      break;
    }
    seen = n;
    if (n > 0 && (uint8_t)buf[0] == 0x16) {
      enum sni_result s = sni_parse((const uint8_t *)buf, (size_t)n, sni);
      if (s == SNI_FOUND || s == SNI_NONE) {
        r = FIRST_TLS;
        break;
      }
      if (s != SNI_NEED_MORE) {
        *why = "a TLS ClientHello capsule does not accept (split over records, or malformed)";
        r = FIRST_BAD;
        break;
      }
      want = n < 5 ? 5 : 5 + ((size_t)(uint8_t)buf[3] << 8 | (uint8_t)buf[4]);
    } else if (n > 0) {
      int h = http_start(buf, (size_t)n, &want);
      if (h >= 0) {
        r = h ? FIRST_HTTP : FIRST_OTHER;
        break;
      }
    }
    /* wait for the rest: readable means want bytes are there */
    int lowat = want ? (int)want : 1;
    if (lowat > 1)
      lowered = setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0) {
      *why = "the client's first bytes did not arrive in time";
      r = FIRST_BAD;
      break;
    }
  }
  int one = 1;
  if (lowered)
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
  return r;
}

/* Whether host:port needs interception: L7 rules for its name or its
 * addresses, or a credential route. */
static bool needs_intercept(struct proxy *px, const struct cap_endpoint *endpoint, const char *host,
                            uint16_t port, const struct dest *d)
{
  const struct cap_endpoint *at[1];
  return (endpoint && endpoint->n_rules) || proxy_has_route_host(px, host, port) ||
         proxy_endpoints_at(px, d, port, at, 1) > 0;
}

/* The first bytes' verdict against the name: NULL when they may go on. */
static const char *check_first(enum first_bytes first, const char *sni, const char *name,
                               const char *why)
{
  if (first == FIRST_GONE || first == FIRST_BAD)
    return why;
  if (first == FIRST_TLS && sni[0] && strcmp(sni, name) != 0)
    return "the TLS server name (SNI) is not the name this address stands for";
  return NULL;
}

/* A host with rules or a route: the client speaks first, TLS or HTTP. */
static void serve_intercepted(struct worker *w, struct stream *client, const char *name,
                              uint16_t port, const struct dest *d, struct event *ev)
{
  char sni[SNI_NAME_MAX];
  const char *why = NULL;
  enum first_bytes first = peek_first(w, client->fd, -1, sni, &why);
  const char *refused = check_first(first, sni, name, why);
  if (!refused && first == FIRST_OTHER)
    refused = "this host has L7 rules or a credential route: only TLS or HTTP may reach it";
  if (refused) {
    proxy_log_event(w->px, ev, false, refused);
    return;
  }
  if (first == FIRST_TLS)
    proxy_intercept(w, client, name, port, d, ev, false);
  else
    proxy_serve_origin(w, client, name, port, false, d, -1, ev);
}

/* Any other host: the first side to speak decides. The client usually has
 * spoken by the time its connection is served (HTTP, TLS): then its bytes
 * are judged before anything is dialled; otherwise the upstream is dialled
 * at once, for protocols where the server speaks first (SMTP, IMAP). */
static void serve_spliced(struct worker *w, struct stream *client, const char *name, uint16_t port,
                          const struct dest *d, struct event *ev)
{
  struct proxy *px = w->px;
  const char *why = NULL;
  char sni[SNI_NAME_MAX];
  /* the first look is also peek_first's (one call fewer per connection);
   * none when the connection is fresh (worker.fresh): nothing is there */
  ssize_t peeked =
      w->fresh ? -1 : recv(client->fd, w->buf, SNI_RECORD_MAX, MSG_PEEK | MSG_DONTWAIT);
  bool client_first = peeked > 0;
  int up = -1;
  if (!client_first) {
    up = proxy_connect_dest(w, d, &why);
    if (up < 0) {
      proxy_log_event(px, ev, false, why);
      return;
    }
    proxy_slot_set_upstream(w, up);
    struct pollfd p[2] = {{.fd = client->fd, .events = POLLIN}, {.fd = up, .events = POLLIN}};
    if (poll(p, 2, STREAM_TIMEOUT_S * 1000) <= 0) {
      proxy_log_event(px, ev, false, "neither side said anything");
      return;
    }
    client_first = p[0].revents != 0;
    peeked = -1;
  }
  if (client_first) { /* look before anything goes through */
    enum first_bytes first = peek_first(w, client->fd, peeked, sni, &why);
    const char *refused = check_first(first, sni, name, why);
    if (refused) {
      proxy_log_event(px, ev, false, refused);
      return;
    }
    if (first == FIRST_HTTP) {
      proxy_serve_origin(w, client, name, port, false, d, up, ev);
      return;
    }
  }
  if (up < 0) {
    up = proxy_connect_dest(w, d, &why);
    if (up < 0) {
      proxy_log_event(px, ev, false, why);
      return;
    }
    proxy_slot_set_upstream(w, up);
  }
  proxy_relay(w, client->fd, up, ev);
  proxy_log_event(px, ev, true, "transparent connection closed");
}

/* A connection to name:port, on the synthetic address that stands for name. */
static void serve_name(struct worker *w, int fd, const char *name, uint16_t port)
{
  struct proxy *px = w->px;
  struct event ev = {.kind = "transparent", .host = name, .port = port};
  struct stream client = {.fd = fd}; /* timeouts inherited from the listener */
  const struct cap_endpoint *endpoint = NULL;
  if (!net_host_allowed(&px->spec->network, name, port, &endpoint) &&
      !proxy_has_route_host(px, name, port)) {
    proxy_log_event(px, &ev, false, "this host:port is not in the capability's network allowlist");
    return;
  }
  /* resolved once: the addresses checked are the ones dialled */
  struct dest d;
  const char *why = NULL;
  if (proxy_resolve(px, name, port, &d, &why) < 0) {
    proxy_log_event(px, &ev, false, why);
    return;
  }
  if (needs_intercept(px, endpoint, name, port, &d))
    serve_intercepted(w, &client, name, port, &d, &ev);
  else
    serve_spliced(w, &client, name, port, &d, &ev);
}

void proxy_serve_transparent(struct worker *w, int fd, size_t listener)
{
  const struct egress_listener *l = &w->px->plan.listeners[listener];
  serve_name(w, fd, w->px->plan.names[l->name].name, l->port);
}

void proxy_serve_captured(struct worker *w, int fd)
{
  struct sockaddr_in orig;
  socklen_t len = sizeof orig;
  const char *name = NULL;
  if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len) == 0 && len == sizeof orig &&
      orig.sin_family == AF_INET) {
    const struct egress_name *n =
        egress_plan_by_addr(&w->px->plan, (const uint8_t *)&orig.sin_addr);
    /* else an address the resolver gave a pattern's name */
    name = n ? n->name : egress_pool_by_addr(&w->px->pool, (const uint8_t *)&orig.sin_addr);
  }
  if (!name) { /* not a redirected connection to a synthetic address */
    struct event ev = {.kind = "transparent", .host = "(unknown address)"};
    proxy_log_event(w->px, &ev, false, "no synthetic address is this connection's destination");
    return;
  }
  serve_name(w, fd, name, ntohs(orig.sin_port));
}
