/* Shared by mcp_keeper.c (the keeper process: its sandbox, its socket,
 * its life) and mcp_keeper_route.c (what passes between the calls
 * connected at once and the one server): internal to src/gateway. */
#ifndef CAPSULE_GATEWAY_MCP_KEEPER_INT_H
#define CAPSULE_GATEWAY_MCP_KEEPER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "gateway/egress_spool.h"
#include "gateway/egress_store.h"
#include "gateway/instance.h"
#include "gateway/registry.h"

#define KEEPER_MAX_CONNS 128   /* calls and watchers connected at once; more wait in the backlog */
#define KEEPER_MAX_WATCHERS 64 /* of them, watchers (front doors' sessions with subscriptions) */
#define KEEPER_MAX_PENDING 256 /* the calls' requests in flight on the server */

/* A stream of newline-terminated lines read from fd. */
struct lines {
  int fd;
  struct cap_buf buf;
  bool eof;
};
char *keeper_take_line(struct lines *l); /* a full line (allocated), else NULL */
void keeper_fill(struct lines *l);
bool keeper_put_line(int fd, const char *text, size_t len);
struct keeper;
bool keeper_put_server(struct keeper *k, const char *text, size_t len); /* to its stdin */

/* A connection to the keeper: a call's exchange, a front door's kept
 * connection between two calls (idle: not a call), or a watcher (a front
 * door's channel for what the server says between calls). A call begins
 * at accept, or on a kept connection with its first request (the keeper
 * then says "taken" again: a byte on the connection's take pipe, handed
 * over with the first "taken", which wakes nobody; a line without one),
 * and ends with the answer to its last request in flight. */
struct keeper_conn {
  int fd;
  int ack; /* the take pipe's end (O_NONBLOCK): a byte a call taken on a kept connection; or -1 */
  struct lines in;
  uint64_t serial; /* in the order calls began: the oldest call gets what names none */
  bool watch;
  bool in_call;                   /* a call is under way on it (else idle, or a watcher) */
  uint64_t calls;                 /* calls ended on it */
  unsigned asked;                 /* the server's requests sent to its call, not yet answered */
  struct gw_egress_batch *egress; /* a call's: the proxy's decisions while it is the oldest */
};

struct keeper_pending {
  char *theirs; /* the call's id (JSON text); NULL: a free slot */
  int64_t ours; /* the server's id, and the progress token it is given */
  struct keeper_conn *conn;
  char *token; /* the call's progress token (JSON text), or NULL */
};

struct keeper {
  const struct cap_spec *spec;
  int in_w, connector, listener, status_fd;
  int child[3]; /* the sandbox's ends: closed once it runs */
  struct lines out;
  int64_t next_id;
  uint64_t next_serial;
  struct keeper_pending pending[KEEPER_MAX_PENDING];
  struct keeper_conn *conns[KEEPER_MAX_CONNS];
  size_t n_conns;
  /* the proxy's threads hand decisions to the oldest call: conns and the
   * batches are changed under this lock */
  pthread_mutex_t egress_lock;
  struct gw_egress_batch *egress_next; /* made with no call connected: the next one's */
  struct gw_egress_spool egress_spool; /* egress_next on disk, for a keeper ending first */
  struct proxy_egress_sink egress_sink;
  pthread_t thread;
  bool started;
  char status_path[4096];       /* RUN/KEY.mcp.status: what `capsule ps` lists */
  struct gw_instance_info info; /* its content */
  const char *path;             /* the socket's */
  int lock_fd;                  /* held while this keeper takes calls */
  int ino;                      /* inotify on the package's tree, or -1 */
  struct gw_package_id pkg;     /* with it: the package dir's identity then */
  unsigned char digest[32];     /* without inotify: the package's at the start */
  bool retired;                 /* the package changed: a new keeper took the name */
  bool shown_busy;              /* the status file says a call is in */
  uint64_t idle_since;          /* when the last call ended (CLOCK_REALTIME ms) */
};

/* run_dir, capability and user: egress_spool's */
void keeper_route_init(struct keeper *k, const char *run_dir, const char *capability,
                       const char *user);
/* The keeper ends (its proxy stopped): the connections left dropped, what
 * their calls had of the proxy's decisions and what came with no call in
 * left in the spool's file for the state (egress_spool.h). */
void keeper_route_end(struct keeper *k);
/* A new connection and its take pipe (-1: none), both owned from here
 * on; false: no room (closed). */
bool keeper_conn_add(struct keeper *k, int fd, int ack);
/* The connection is gone: what its call left in flight is cancelled. */
void keeper_conn_drop(struct keeper *k, struct keeper_conn *c);
/* A line from connection c, and one from the server. */
void keeper_from_conn(struct keeper *k, struct keeper_conn *c, const char *line);
void keeper_from_server(struct keeper *k, const char *line);
/* Calls under way (watchers and idle kept connections not counted), and
 * watchers connected. */
size_t keeper_calls(const struct keeper *k);
size_t keeper_watchers(const struct keeper *k);

/* A front door's kept connections (mcp_keeper_pool.c): one to the
 * keeper at path, checked (-1: none), with its take pipe in *ack (or -1),
 * and one kept with its take pipe (both closed past the bound). */
int keeper_pool_take(const char *path, int *ack);
void keeper_pool_put(const char *path, int fd, int ack);

#endif
