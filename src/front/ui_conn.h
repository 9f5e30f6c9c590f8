/* The dashboard's connections (ui.c), so that a signed-in operator always
 * gets in: on loopback every local user is 127.0.0.1, and a listener with
 * a fixed number of slots is full as soon as anyone holds them. A
 * connection is "pending" from accept until a request on it shows a
 * signed-in session ("trusted"). Pending ones hold at most
 * UI_CONN_PENDING of the UI_CONN_MAX slots: one more evicts the pending
 * connection accepted longest ago (its socket shut down, so its thread
 * ends), and they time out after UI_CONN_PENDING_TIMEOUT_S idle; a
 * trusted one keeps UI_CONN_TRUSTED_TIMEOUT_S. Inside the module
 * capsule-serve-http.so; thread-safe (its own mutex). */
#ifndef CAPSULE_FRONT_UI_CONN_H
#define CAPSULE_FRONT_UI_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
/* after the system headers it relies on */
#include <microhttpd.h>

#define UI_CONN_MAX 64
#define UI_CONN_PENDING 16
#define UI_CONN_PENDING_TIMEOUT_S 10
#define UI_CONN_TRUSTED_TIMEOUT_S 60

struct ui_conn;

struct ui_conns {
  pthread_mutex_t mu;
  struct ui_conn *oldest, *newest; /* the pending ones, by accept time */
  size_t n_pending;
};

void ui_conns_init(struct ui_conns *cs);
void ui_conns_destroy(struct ui_conns *cs);
/* MHD_OPTION_NOTIFY_CONNECTION's callback, cls a struct ui_conns. */
void ui_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);
/* The request on c showed a signed-in session: c leaves the pending
 * share and keeps the longer timeout. */
void ui_conns_trust(struct ui_conns *cs, struct MHD_Connection *c);

#endif
