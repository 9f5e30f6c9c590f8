/* The gRPC server's connections (internal to capsule-grpc-serve.so):
 * HTTP/2 over nghttp2, in plaintext or TLS (OpenSSL, ALPN h2), on
 * non-blocking sockets. grpc_serve.c owns the server, its threads and
 * the calls; grpc_serve_conn.c a connection's bytes, frames and streams.
 *
 * Locking: a connection's session, socket, TLS and streams are touched
 * only under its mu. A connection's mu may be taken under the server's
 * lock, never the other way round. A stream's cv waits on its
 * connection's mu. */
#ifndef CAPSULE_FRONT_GRPC_SERVE_H2_H
#define CAPSULE_FRONT_GRPC_SERVE_H2_H

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/wait_hook.h"
#include "front/grpc_serve.h"

/* The options grpc_serve_conn.c needs */
struct gs_limits {
  size_t max_message;
  size_t held_max; /* bytes of unary requests' bodies held at once, server-wide */
  int stream_idle_ms;
  char *(*authenticate)(void *arg, const char *bearer);
  void *arg;
};

#define GS_MAX_LISTEN 8 /* addresses a name may bind */

/* Work for the server's threads: a connection to read, a call to answer. */
struct gs_task {
  struct gs_task *next;
  void (*run)(struct gs_task *t);
};

struct gs_conn;

/* One stream: a call from its request's headers to its answer. Until it
 * is dispatched the connection owns it (freed when the stream closes);
 * then the thread answering it does (gs_stream_done), until its answer is
 * all sent, or given back to the connection with the rest to send. */
struct gs_stream {
  struct gs_task task;
  struct gs_conn *c;
  struct gs_stream *prev, *next; /* the connection's streams */
  struct gs_stream *ready_next;  /* the connection's ready list */
  int32_t id;
  bool known; /* a method capsule serves */
  enum grpc_serve_method method;
  char *path;
  char *bearer;                     /* "authorization: Bearer" */
  char *user;                       /* the options' authenticate's answer (admitted) */
  bool admitted;                    /* authenticate said yes, or there is none */
  bool grpc_type;                   /* content-type application/grpc[+proto] */
  int encoding;                     /* grpc-encoding (enum grpc_serve_encoding) */
  bool compressed;                  /* a message compressed in no encoding capsule takes */
  uint64_t deadline_us, started_us; /* CLOCK_MONOTONIC µs; deadline 0: none */
  size_t headers;                   /* header bytes (RFC 9113's size) */
  /* received: DATA from in_off; the next message's prefix at scan */
  struct cap_buf in;
  size_t in_off, scan;
  size_t deferred; /* received but not yet consumed for flow control */
  bool too_big;    /* a message past max_message */
  bool second;     /* a unary request's second message (too_big with it) */
  bool crowded;    /* its body past the server's held_max: refused */
  size_t held;     /* of in, bytes counted in the server's held */
  bool remote_end; /* the client's side ended */
  bool closed;     /* the stream is gone (answered, reset, the connection lost) */
  bool dispatched; /* handed to a thread to answer */
  bool answered;   /* its thread is done, its answer still going out */
  bool reset;      /* the server's RST_STREAM submitted */
  uint64_t answered_us;
  bool ready; /* on the ready list */
  /* sent: framed messages from out_off, then the trailers */
  struct cap_buf out;
  size_t out_off;
  bool headers_sent, out_end, out_deferred;
  int status;
  char *status_message;
  bool handling;             /* the handler runs: cancel fires when the stream goes */
  struct cap_cancel cancel;  /* grpc_serve_call's */
  pthread_cond_t cv;         /* a message came, room to send, or the stream closed */
  struct cap_wait_hook lead; /* answered on its reader's thread: hand the reading over */
};

/* The server (grpc_serve.c): its counters under lock */
struct grpc_serve {
  struct grpc_serve_options opt;
  struct gs_limits lim;
  SSL_CTX *tls;
  int lfd[GS_MAX_LISTEN];
  size_t n_lfd;
  char *unix_path; /* unlinked at the stop */
  int stop[2];
  pthread_t acceptor;
  pthread_mutex_t lock;
  pthread_cond_t idle; /* calls, connections or threads went down */
  pthread_cond_t work; /* a task came, or closing */
  struct gs_task *head, **tail;
  unsigned queued, threads, waiting, calls, conns;
  size_t held; /* unary requests' body bytes held (atomic: counted under a connection's mu) */
  struct gs_conn *list;
  bool stopping, closing;
};

struct gs_conn {
  struct gs_task read_task;
  struct grpc_serve *srv;
  struct gs_conn *prev, *next; /* the server's connections */
  pthread_mutex_t mu;
  nghttp2_session *h2;
  int fd;
  SSL *ssl;
  bool handshaken;
  int wake[2];
  char peer[96];
  char host[64];    /* the peer's address alone ("" on a unix socket) */
  unsigned refused; /* calls whose token authenticate refused */
  bool ending;      /* ended by the server (too many refused) */
  bool dead;        /* no more I/O: lost, broken, or closed */
  bool ingoing;     /* admitted a call: the preface deadline is over */
  uint64_t opened_us;
  struct cap_buf out; /* frames not written yet, from out_off */
  size_t out_off;
  bool want_out; /* a write would block: the reader polls for room */
  /* since when the socket has taken under WRITE_GATHER bytes of out
   * without out going all (0: it takes them) */
  uint64_t stuck_us;
  size_t stuck_sent;
  bool more;          /* the reader stopped with bytes left to read */
  uint64_t waited_us; /* the reader's last poll lasted this long (its own) */
  unsigned refs;      /* the reader, and each dispatched stream */
  unsigned calls;     /* of them, dispatched calls not yet answered */
  struct gs_stream *streams;
  struct gs_stream *ready, **ready_tail; /* requests to dispatch */
  char reason[160];
};

/* A connection on an accepted socket (non-blocking); ssl NULL for
 * plaintext. NULL when nghttp2 cannot start one. */
struct gs_conn *gs_conn_new(struct grpc_serve *srv, int fd, SSL *ssl, const char *peer);
/* Its session's limits, from the server (grpc_serve.c) */
const struct gs_limits *gs_server_limits(const struct grpc_serve *srv);
/* Frees a connection no one refers to */
void gs_conn_free(struct gs_conn *c);
/* Waits for the socket (or a wake) up to ms, then reads what came into
 * the session and writes what it queued; under mu on return. false once
 * the connection is dead. */
bool gs_conn_pump(struct gs_conn *c, int ms);
/* Writes what the session queued, as far as the socket takes (under mu) */
void gs_conn_flush(struct gs_conn *c);
void gs_conn_wake(struct gs_conn *c);
/* Resets streams not dispatched whose request is late, or whose answer
 * waits for the client too long, and drops a connection that admitted
 * nothing within its preface deadline, or whose client took under 64 KiB
 * of its bytes in stream_idle_ms (under mu) */
void gs_conn_sweep(struct gs_conn *c, uint64_t now_us);
/* How long the reader may wait for the socket: -1, or the sweep's beat */
int gs_conn_poll_ms(const struct gs_conn *c);
/* The server's GOAWAY: no new streams (under mu) */
void gs_conn_goaway(struct gs_conn *c);
/* Resets every stream still open (under mu) */
void gs_conn_cancel_all(struct gs_conn *c);
/* Ends the connection (under mu): dead, the socket shut */
void gs_conn_kill(struct gs_conn *c, const char *why);

/* The answer's parts on a stream (under mu): headers with the first
 * message, messages, then the status. false when the stream is gone. */
bool gs_stream_send(struct gs_stream *k, const uint8_t *msg, size_t len);
bool gs_stream_finish(struct gs_stream *k, int status, const char *message);
/* The next whole message copied into msg (under mu), *packed whether it
 * came compressed: 1, 0 at the client's end, -1 when none is there yet,
 * -2 for a message the end cut short; gives its bytes back to the
 * client's window. */
int gs_stream_take(struct gs_stream *k, struct cap_buf *msg, bool *packed);
const char *gs_stream_path(const struct gs_stream *k);
/* A dispatched stream's thread is done with it (under mu): freed, or
 * left to the connection while its answer goes out. */
void gs_stream_done(struct gs_stream *k);

/* grpc_serve.c: a task for the pool; a reference to c dropped (taken
 * and released under its mu: held on the call, released on return) */
void gs_enqueue(struct grpc_serve *s, struct gs_task *t);
/* CLOCK_REALTIME ms from now: the deadline of a condition wait */
struct timespec gs_in_ms(int ms);
void gs_conn_unref_locked(struct gs_conn *c);
/* grpc_serve_call.c: answers a dispatched stream (its reference and its
 * count in calls dropped): true when the lead (its reader's) was handed
 * over on the way. gs_answer_task is the pool's form. */
bool gs_answer(struct gs_stream *k);
void gs_answer_task(struct gs_task *t);
/* grpc_serve_listen.c: the TLS context of the options (none without
 * files), the listening sockets of opt.address, closed again */
int gs_tls_new(const struct grpc_serve_options *opt, SSL_CTX **ret, struct cap_error *err);
int gs_listen(struct grpc_serve *s, struct cap_error *err, int *port);
void gs_close_listeners(struct grpc_serve *s);

#endif
