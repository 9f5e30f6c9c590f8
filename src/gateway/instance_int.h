/* Shared by instance.c (leases), instance_keeper.c (the keeper) and
 * instance_status.c (listing, stopping): internal to src/gateway. */
#ifndef CAPSULE_GATEWAY_INSTANCE_INT_H
#define CAPSULE_GATEWAY_INSTANCE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/un.h>
#include <time.h>

#include "core/clock.h"
#include "gateway/egress_spool.h"
#include "gateway/egress_store.h"
#include "gateway/instance.h"

#define KEEPER_MAX_CLIENTS 256
#define KEEPER_READY "ready\n"
#define KEEPER_HOST "host: " /* the verdict's prefix when the host cannot enforce the sandbox */
#define KEEPER_REVOKED "revoked: " /* its prefix when a revoke came while it started */
#define KEEPER_ASK_MS 5000         /* a client that neither asks nor holds a lease is dropped */

/* A lease is asked with 'L', optionally followed by the 8 bytes of the
 * instance the caller keeps a connection to (struct gw_channels): the
 * keeper then grants the lease without a new connection. What the keeper
 * answers; an fd travels with 0 unless the caller's instance is this one.
 * The size is an earlier capsule's, whose keepers and clients read the
 * message where it was: instance is where its message ended (zeros with a
 * lease: 0, "none"). */
struct lease_reply {
  int32_t code;     /* 0, or a positive errno */
  int32_t protocol; /* with a lease: the enum selu_protocol the server speaks */
  char message[472];
  uint64_t instance; /* with a lease: this keeper's instance (random, not 0), or 0 */
};
_Static_assert(sizeof(struct lease_reply) == 488, "the lease reply's size is the wire's");

/* The egress log of a warm instance's calls (docs/state.md, "A warm
 * instance's egress"). A keeper that keeps it grants a lease with
 * KEEPER_EGRESS_OFFER as its reply's message; the call, when done, sends
 * 'E' on its control socket and the keeper answers with the lease's
 * decisions (gw_egress_batch_encode) in messages of at most
 * KEEPER_EGRESS_CHUNK bytes after a 5-byte head: KEEPER_EGRESS_MAGIC,
 * then 1 on the last message, else 0. */
#define KEEPER_EGRESS_OFFER "egress"
/* A keeper that takes 'R' (the lease ends, its connection stays for the
 * next 'L') says so with this word in its reply's message ("keep", or
 * "egress keep" with its egress offered, which only a proxied server's
 * keeper does: a server without a proxy makes no decisions). */
#define KEEPER_KEEP "keep"
/* Where a keeper can vouch for the package between a lease and the call
 * that takes it (a tree its inotify watches, or an image) and the server
 * has no egress proxy, its grants say KEEPER_AHEAD_OFFER: a caller that
 * keeps a channel to the instance may then end a lease and ask for its
 * next one in one message: 'R', 'A' and the instance's 8 bytes. The
 * keeper grants it as any lease (in arrival order, the package checked
 * then), its reply adding "ahead DEV INO" (the package directory's
 * identity, 0 0 for an image) and passing its inotify descriptor. The caller takes
 * that lease for its next call only while the descriptor has no event
 * queued, the keeper has said nothing since and the package's path still
 * names DEV:INO; otherwise it drops the connection (the lease with it)
 * and asks anew. A keeper that finds events queued tells the holders of
 * leases asked ahead before it reads them, so a call made after an edit
 * never takes one. A lease asked ahead is held: the caller drops it when
 * no call came within a few ms (gateway/selu_channels.c). */
#define KEEPER_AHEAD_OFFER "ahead-ok"
#define KEEPER_AHEAD "ahead"
#define KEEPER_EGRESS_MAGIC "EGRS"
#define KEEPER_EGRESS_CHUNK 32768

/* The keeper's side (instance_egress.c). Its proxy's sink hands each
 * decision to the oldest lease held when it is made, or while none is
 * held to the next lease granted. The proxy's threads call the sink; the
 * keeper's loop grants and ends. */
struct keeper_egress {
  pthread_mutex_t lock;
  struct gw_egress_batch *held[KEEPER_MAX_CLIENTS]; /* the leases' batches, oldest first */
  size_t n;
  struct gw_egress_batch *next; /* the next lease's: what came while none was held */
  struct gw_egress_spool spool; /* next on disk, for a keeper ending first */
  struct proxy_egress_sink sink;
  bool closed; /* the spool left to the recovery: no batch goes to a call after */
};
/* run_dir, capability and user: spool's (egress_spool.h) */
void keeper_egress_init(struct keeper_egress *e, const char *run_dir, const char *capability,
                        const char *user);
/* The keeper ends (its proxy stopped): what came while no lease was held
 * left in the spool's file for the state. A lease still held keeps its
 * batch: its call may still ask for it. */
void keeper_egress_close(struct keeper_egress *e);
/* A lease granted: its batch (what came while none was held is in it). */
struct gw_egress_batch *keeper_egress_grant(struct keeper_egress *e);
/* A lease ended: b no longer takes decisions; they are sent on fd (-1:
 * the caller is gone, they go to the oldest lease held, else the next
 * granted, as those made with none held), then b is freed. */
void keeper_egress_end(struct keeper_egress *e, struct gw_egress_batch *b, int fd);

/* Milliseconds until deadline, as poll wants them (0 when past). */
static inline int ms_until(uint64_t deadline)
{
  uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
  if (t >= deadline)
    return 0;
  return deadline - t > INT32_MAX ? INT32_MAX : (int)(deadline - t);
}

static inline void sleep_ms(unsigned ms)
{
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Whether what the server sent on a connection so far (HTTP/2 frames,
 * peeked: they stay for the caller) holds a GOAWAY (instance_proc.c) */
bool gw_keeper_says_goaway(int fd);
/* A line of the keeper's own in its log ("capsule keeper[PID]: ...") */
void gw_keeper_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#ifdef CAPSULE_TEST_HOOKS
void gw_keeper_test_pause(void);
#endif

/* The keeper process (instance_keeper.c): never returns. status_fd gets
 * its verdict (KEEPER_READY or why not); lock_fd is held while it starts.
 * epoch: the count of revokes its call read before the grants
 * (gw_call.grants_epoch), checked once its status is out; NULL: none. */
void gw_keeper_main(const struct gw_instance_request *req, const struct sockaddr_un *sa,
                    int status_fd, int lock_fd, const uint64_t *epoch) __attribute__((noreturn));

/* The keeper's set-up (instance_proc.c): every descriptor from 3 up
 * closed but keep's n (sorted here); stdin and stdout /dev/null
 * (returned), stderr the log (*log; /dev/null when it cannot be opened);
 * the server's argv (a "./" command is the package's own program). */
void gw_keeper_close_all_but(int *keep, size_t n);
int gw_keeper_stdio(const char *log_path, int *log);
char **gw_keeper_server_argv(const struct cap_spec *spec);

/* Connects to the keeper at sa by deadline (a full backlog is waited out),
 * and only to one run by this user: returns the socket, or -EPERM for a
 * socket planted by someone else, or -errno. */
int gw_instance_connect(const struct sockaddr_un *sa, uint64_t deadline);

#endif
