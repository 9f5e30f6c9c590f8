/* The HTTP listeners' connections (the dashboard, ui.c; /mcp,
 * serve_http.c), so that an authenticated client always gets in: on
 * loopback every local user is 127.0.0.1, and a listener with a fixed
 * number of slots is full as soon as anyone holds them. A connection is
 * "pending" from accept until a request on it authenticates (a signed-in
 * session, a valid bearer token: "trusted"). Each has an owner: on
 * loopback the local user owning the client's socket (the kernel's
 * socket table, sock_diag), else the client's address. The listener
 * holds at most max_pending pending connections: one more evicts the
 * oldest pending connection of the owner holding most (its socket shut
 * down, so its thread ends), so a flood evicts its own connections and
 * never another user's, and one client's burst below the share is never
 * cut. Pending ones are closed after the listener's idle
 * timeout (short), a trusted one after trusted_timeout_s. Inside the module
 * capsule-serve-http.so; thread-safe (its own mutex). */
#ifndef CAPSULE_FRONT_SERVE_CONN_H
#define CAPSULE_FRONT_SERVE_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
/* after the system headers it relies on */
#include <microhttpd.h>

/* A pending connection's idle timeout, for the listeners that use this. */
#define SERVE_CONN_PENDING_TIMEOUT_S 10

struct serve_conn;

struct serve_conns {
  pthread_mutex_t mu;
  struct serve_conn *oldest, *newest;     /* the pending ones, by accept time */
  struct serve_conn *t_oldest, *t_newest; /* the trusted ones, by their last request */
  size_t n_pending, max_pending, n_trusted, max_trusted;
  unsigned trusted_timeout_s;
};

/* max_trusted: the listener's slots less max_pending and one, so that a
 * new connection always finds a slot */
void serve_conns_init(struct serve_conns *cs, size_t max_pending, size_t max_trusted,
                      unsigned trusted_timeout_s);
void serve_conns_destroy(struct serve_conns *cs);
/* MHD_OPTION_NOTIFY_CONNECTION's callback, cls a struct serve_conns. */
void serve_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* A request on c authenticated as who (a token's user, a signed-in
 * operator): c leaves the pending share and keeps the longer timeout.
 * Past max_trusted, the least recently used trusted connection of the
 * user holding most is shut down: a token holder holding every slot
 * (keep-alive connections, one request a minute each) evicts its own,
 * never another user's while it holds more. */
void serve_conns_trust(struct serve_conns *cs, struct MHD_Connection *c, const char *who);

#endif
