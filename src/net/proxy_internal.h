/* What the proxy's files share, and no one else: src/net/proxy.c (listeners,
 * workers, life cycle), upstream.c (streams, dialling, relaying),
 * forward.c (a request forwarded, CONNECT, interception, the reverse form),
 * inject.c (credential routes, injection, secrets, response masking) and
 * egress_log.c (the decision log). The public contract is proxy.h. */
#ifndef CAPSULE_NET_PROXY_INTERNAL_H
#define CAPSULE_NET_PROXY_INTERNAL_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "core/buf.h"
#include "net/egress_plan.h"
#include "net/http.h"
#include "net/proxy.h"

struct addrinfo;

#define IO_TIMEOUT_MS 30000      /* a request head must arrive within this */
#define STREAM_TIMEOUT_S 300     /* a response or tunnel may idle this long */
#define CONNECT_TIMEOUT_MS 10000 /* upstream connect deadline */
#define MAX_CONNS 256
#define SECRET_MAX 8192
#define PIPE_BYTES (256 << 10)

/* What a listener serves (proxy_start's layout). */
enum slot_kind {
  SLOT_PROXY,       /* the proxy's own listener: HTTP proxy requests */
  SLOT_FORWARD,     /* ports.localhost: relay to the host's 127.0.0.1:arg */
  SLOT_DNS,         /* the resolver over TCP */
  SLOT_TRANSPARENT, /* a synthetic address's port: listener arg of the plan */
  SLOT_CAPTURE,     /* any port of a synthetic address, redirected (SO_ORIGINAL_DST) */
};

/* A connection's two sockets, so proxy_stop can shut them down. */
struct slot {
  bool used;
  int client, upstream;
  enum slot_kind kind;
  size_t arg; /* the port (SLOT_FORWARD) or the plan's listener (SLOT_TRANSPARENT) */
};

struct route_secret {
  char *secret;     /* the real value; wiped when freed */
  char phantom[65]; /* what the tool holds instead, "" without env_var */
};

/* What one decision is about. */
struct event {
  const char *kind; /* "connect", "tunnel", "http", "intercept", "reverse" */
  const char *host;
  unsigned port;
  const char *method; /* NULL for tunnels */
  const char *path;   /* as the tool sent it (no secret), NULL for tunnels */
  const char *route;  /* credential route used, or NULL */
  long long bytes_up, bytes_down;
};

/* What bounds the egress log (egress_log.c): the last denial written, its
 * repeats since, the token bucket, the bytes written. */
struct egress_log {
  bool has_last, capped;
  struct event last; /* kind and port of the last denial */
  char *last_host, *last_method, *last_reason;
  long long repeats, dropped, bytes;
  int64_t repeat_since_ms, refilled_ms;
  double tokens;
};

struct proxy {
  const struct cap_spec *spec;
  struct proxy_options opt;
  struct tls_ca *ca;             /* NULL when nothing is intercepted */
  struct host_addrs *host_addrs; /* refused like loopback */
  struct dns_cache *dns;         /* the host side's resolver (dns_client.h) */
  char *bundle;
  size_t bundle_len;
  struct route_secret *secrets; /* one per spec->routes[] */
  char **tool_env;
  size_t n_tool_env;
  pthread_mutex_t log_lock;
  struct egress_log log; /* under log_lock */

  struct egress_plan plan; /* the transparent path (egress_plan.h) */
  struct egress_pool pool; /* its on-demand names */
  bool pool_on;            /* plan.pool and opt.pool: the resolver gives them */
  int listen_fds[PROXY_MAX_LISTENERS];
  size_t n_listen;
  int stop_pipe[2];
  int accept_stop[2]; /* readable once stopping: wakes every acceptor's epoll */
  bool started;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t idle; /* a worker ended */
  pthread_cond_t work; /* a connection was queued, or stopping */
  size_t active;       /* slots in use */
  size_t n_workers, idle_workers;
  size_t acceptors; /* workers waiting in epoll_wait on the accepted listeners */
  bool stopping;
  bool supervised;         /* proxy_expect_supervisor: no acceptors, the poll thread sweeps */
  size_t held;             /* proxy_hold's, not yet released */
  size_t serving_held;     /* of those, serving a connection on their own thread */
  struct worker *spare;    /* buffers for held threads, kept between connections */
  struct worker *lent;     /* those serving now: their CPU counts as it is spent */
  size_t queue[MAX_CONNS]; /* slots waiting for a worker */
  size_t q_head, q_len;
  struct slot slots[MAX_CONNS];
  /* Every worker made, until proxy_stop joins it. The CPU the workers
   * spend is the sandbox's (proxy_cpu_ms): the running ones are read
   * through their thread clocks, and one that ends adds its own to
   * retired_cpu_ns first. Both under lock. */
  struct worker *workers;
  int64_t retired_cpu_ns;
};

/* A byte stream: a plain socket, or TLS over one. */
struct stream {
  int fd;
  SSL *ssl;
};

/* A thread that serves one connection at a time, with what it reuses. */
struct worker {
  struct proxy *px;
  struct worker *next; /* px->workers, under px->lock */
  pthread_t thread;
  clockid_t cpu_clock;     /* this thread's CPU clock, valid until it ends */
  int64_t cpu_start;       /* lent to a supervisor's thread: its clock when it began */
  int epfd;                /* its epoll set of the listeners acceptors watch */
  bool ended;              /* its CPU is in px->retired_cpu_ns (under px->lock) */
  size_t slot;             /* the connection being served */
  int pipes[2][2];         /* splice pipes, one per direction; -1 until used */
  int spare_up;            /* proxy_spare_socket's, for the next dial; -1 */
  bool tls;                /* OpenSSL was used on this thread for the connection */
  bool fresh;              /* the supervisor's thread accepted it as it made it: the
                              tool has not run since, so nothing it sent is there yet */
  bool bulk[2];            /* this direction moved a full small buffer: splice it */
  char small[16384];       /* the first bytes of each direction, copied */
  struct http_request req; /* the request being parsed */
  char buf[HTTP_HEAD_MAX + 65536];
};

/* ---- upstream.c: streams and upstream connections ---- */

/* recv or SSL_read: bytes read, 0 at the end, -1 on error */
ssize_t proxy_stream_read(struct stream *s, char *buf, size_t n);
/* Writes all of buf[0..n); false on error. */
bool proxy_stream_write(struct stream *s, const char *buf, size_t n);
void proxy_set_timeouts(int fd, int seconds);
/* connect() with a deadline; a connected fd, or -1. spare: an IPv4 socket
 * made ahead by proxy_spare_socket (used for an IPv4 address, and then
 * *spare is -1), or NULL. */
int proxy_connect_bounded(const struct addrinfo *ai, int *spare);
/* An IPv4 TCP socket with the timeouts proxy_connect_bounded sets, or -1:
 * made after a connection is done with, so that the next one's dial is
 * one connect (a socket and its options cost about 5 us here). */
int proxy_spare_socket(void);
/* Where a host name led: the addresses checked, then connected to. */
#define DEST_MAX_ADDRS 16
struct dest {
  struct sockaddr_storage addrs[DEST_MAX_ADDRS];
  size_t n;
};
/* Resolves host:port into d. 0, or a negative errno with *why set: -EACCES
 * when an address is one capsule never connects to (the tool gets 403),
 * -ENOENT when the name does not resolve (502). */
int proxy_resolve(struct proxy *px, const char *host, uint16_t port, struct dest *d,
                  const char **why);
/* Connects to the first of d's addresses that accepts (with w's spare
 * socket for an IPv4 one): the fd, or -ECONNREFUSED with *why set. */
int proxy_connect_dest(struct worker *w, const struct dest *d, const char **why);
/* The endpoints with L7 rules (at most max, into out) whose host, for
 * port, resolves to any of d's addresses: the same server by another
 * name. Patterns (*.x) name no address and are skipped. */
size_t proxy_endpoints_at(struct proxy *px, const struct dest *d, uint16_t port,
                          const struct cap_endpoint **out, size_t max);
/* One read's worth from one socket to the other (splice for bulk): bytes
 * moved, 0 at the end, -1 on error, -2 when nothing was there after all.
 * last: non-NULL when from's end may follow (poll saw its peer half-close):
 * when a second read finds it right behind a small read's bytes, they are sent with to's FIN in one
 * segment (shutdown(to, SHUT_WR) done here) and *last is set. */
ssize_t proxy_pump(struct worker *w, int dir, int from, int to, bool wait, bool *last);
/* Both ways until both ends are done (half-closes passed on) or idle. */
void proxy_relay(struct worker *w, int a, int b, struct event *ev);

/* ---- proxy.c ---- */

/* Records the upstream fd of w's connection, so proxy_stop can shut it. */
void proxy_slot_set_upstream(struct worker *w, int fd);

/* ---- egress_log.c ---- */

void proxy_log_event(struct proxy *px, const struct event *ev, bool allowed, const char *why);
/* Writes the summaries still owed (repeats, dropped lines) and frees the
 * log's state: when the proxy stops. */
void proxy_log_flush(struct proxy *px);
/* A short text/plain answer with Connection: close. */
void proxy_respond(struct stream *s, const char *status, const char *why);
/* Logs the denial and answers the tool. */
void proxy_deny(struct proxy *px, struct stream *s, struct event *ev, const char *status,
                const char *why);

/* ---- forward.c ---- */

/* Serves one proxy connection (the listener's) to its end. */
void proxy_serve_one(struct worker *w, int fd);
/* One request read from client (TLS or not), which must be origin-form,
 * checked and forwarded to host:port like an absolute-form request to
 * http[s]://host:port/path; d: where host led (resolved and checked once);
 * up_fd: a connection to d already made (the slot's upstream), or -1. */
void proxy_serve_origin(struct worker *w, struct stream *client, const char *host, uint16_t port,
                        bool tls, const struct dest *d, int up_fd, struct event *ev);
/* TLS terminated with a leaf for host minted by the session CA, then one
 * request served as proxy_serve_origin does. announce: the CONNECT path's
 * "200 Connection established" first. */
void proxy_intercept(struct worker *w, struct stream *client, const char *host, uint16_t port,
                     const struct dest *d, struct event *ev, bool announce);

/* ---- resolver.c: the sandbox's DNS ---- */

/* Answers every query waiting on the (non-blocking) UDP socket fd. */
void proxy_dns_udp(struct proxy *px, int fd);
/* Serves one DNS-over-TCP connection (length-prefixed queries). */
void proxy_dns_tcp(struct worker *w, int fd);

/* ---- transparent.c ---- */

/* Serves one connection to listener (the plan's index) of a synthetic
 * address: checked, resolved host-side once, spliced or intercepted. */
void proxy_serve_transparent(struct worker *w, int fd, size_t listener);
/* The same for a connection the any-port redirect brought to the capture
 * listener: its original destination decides the name and port. */
void proxy_serve_captured(struct worker *w, int fd);

/* ---- inject.c: credential routes ---- */

/* The route whose upstream is t's scheme, host and port and whose base path
 * prefixes t's path (at a segment boundary); *base_len its length. */
const struct cap_credential_route *proxy_route_for(const struct proxy *px, const struct http_url *t,
                                                   size_t *base_len);
bool proxy_has_route_host(const struct proxy *px, const char *host, uint16_t port);
const struct route_secret *proxy_secret_of(const struct proxy *px,
                                           const struct cap_credential_route *r);
/* fmt with its "{}" replaced by value */
void proxy_put_format(struct cap_buf *out, const char *fmt, const char *value);
void proxy_put_base64(struct cap_buf *out, const char *s);
/* Whether the tool's value of the injected header carries the phantom. */
bool proxy_header_has_phantom(const struct route_secret *s, enum cap_inject_mode mode,
                              const char *v);
/* The upstream's origin form for url_path and query_param routes, into out.
 * Returns NULL, or why the request is refused. */
const char *proxy_rewrite_path(const struct cap_credential_route *r, const struct route_secret *s,
                               const char *path, struct cap_buf *out);
/* Reads a route's secret (env://, file://, or capsule's store). */
int proxy_read_secret(const struct cap_credential_route *r, const struct proxy_store *store,
                      char **ret, struct cap_error *err);
void proxy_wipe_secrets(struct proxy *px);

/* ---- response.c ---- */

/* Relays a routed response from up to client with the secret masked in
 * its head and in its de-chunked body (re-chunked by capsule), refusing
 * (502) a body in a content coding capsule cannot inspect. head_request:
 * the response has no body whatever its head says. False when the
 * exchange broke off. */
bool proxy_relay_masked(struct worker *w, struct stream *up, struct stream *client,
                        const char *secret, bool head_request, struct event *ev);

#endif
