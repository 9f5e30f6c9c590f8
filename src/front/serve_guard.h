/* What the HTTP listeners of `capsule serve` (MCP at /mcp, serve_http.c;
 * the dashboard, ui.c) share before a request is read: the address to
 * listen on, the Host values it answers to (DNS rebinding), the Origin a
 * browser's request may come from, and the TLS files. Inside the module
 * capsule-serve-http.so. Not thread-safe to build; read-only afterwards. */
#ifndef CAPSULE_FRONT_SERVE_GUARD_H
#define CAPSULE_FRONT_SERVE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
/* after the system headers it relies on */
#include <microhttpd.h>

#include "core/error.h"
#include "front/serve.h"

#define SERVE_GUARD_MAX_HOSTS 4

struct serve_guard {
  struct sockaddr_storage ss;
  bool loopback, wildcard, tls;
  char *hosts[SERVE_GUARD_MAX_HOSTS]; /* Host values accepted; none: any (a wildcard address) */
  size_t n_hosts;
  char *cert, *key; /* PEM, when tls */
};

/* addr (IP:PORT, [IPv6]:PORT or localhost:PORT; port 0: any free one)
 * for the option named option; TLS from opt's files. A non-loopback
 * address needs TLS, or opt->insecure. */
int serve_guard_init(struct serve_guard *g, const char *option, const char *addr,
                     const struct serve_options *opt, struct cap_error *err);
/* The Host values once the port is known (the bound one, for port 0). */
void serve_guard_set_port(struct serve_guard *g, const char *addr, int port);
/* ADDR (HOST:PORT) with the port bound instead of its own (0: any free
 * one), as `serve status` shows it. The caller frees it. */
char *serve_guard_bound_addr(const char *addr, int port);
bool serve_guard_host_ok(const struct serve_guard *g, const char *host);
/* The request's Host header; NULL unless there is exactly one (RFC 9112:
 * several are a 400; the checks must not read one and a proxy another). */
const char *serve_guard_request_host(struct MHD_Connection *c);
/* An Origin (a browser's request) must be this server's own; none is fine. */
bool serve_guard_origin_ok(const struct serve_guard *g, const char *origin);
void serve_guard_free(struct serve_guard *g);
/* How serve_guard_daemon's connections are bounded: at most connections
 * at once and per_ip from one address, closed after timeout_s idle (a
 * connection's own timeout may be raised later); on_conn (may be NULL)
 * told of each connection's start and end (MHD_OPTION_NOTIFY_CONNECTION). */
struct serve_guard_limits {
  unsigned connections, per_ip, timeout_s;
  MHD_NotifyConnectionCallback on_conn;
  void *conn_ctx;
};
/* Starts libmicrohttpd on g's address and port (TLS with g's files), a
 * thread per connection, 64 KiB per connection, within lim; NULL when it
 * cannot listen. */
struct MHD_Daemon *serve_guard_daemon(const struct serve_guard *g, int port,
                                      MHD_AccessHandlerCallback on_request,
                                      MHD_RequestCompletedCallback on_done, void *ctx,
                                      const struct serve_guard_limits *lim);

#endif
