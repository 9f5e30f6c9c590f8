/* What supervise.c (the connect supervisor, the notification loop) and
 * supervise_open.c (exec_strategy "supervised": opens outside the grants)
 * share: the supervisor's state. */
#ifndef CAPSULE_SANDBOX_SUPERVISE_INTERNAL_H
#define CAPSULE_SANDBOX_SUPERVISE_INTERNAL_H

#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"
#include "sandbox/supervise.h"

#define SUPERVISE_MAX_IN_FLIGHT 64 /* requests served at once; more answer EAGAIN */
#define SUPERVISE_MAX_GRANTED 64
#define SUPERVISE_PIDFDS_KEPT 16

struct socket_id {
  dev_t dev;
  ino_t ino;
};

/* An object the operator decided about in this run: its access bits
 * (SUPERVISE_READ, SUPERVISE_WRITE) allowed and denied. */
struct expand_memory {
  dev_t dev;
  ino_t ino;
  unsigned allowed, denied;
};
#define SUPERVISE_READ 1u
#define SUPERVISE_WRITE 2u

/* Shared by the supervisor, its pool and its workers; the last one out
 * frees it. */
struct supervise {
  atomic_int refs;
  int listener;   /* the notification fd, -1 until supervise_start */
  int channel[2]; /* [0] the parent's end, [1] the command's */
  int stop[2];    /* supervise_free writes [1]: the waiting thread leaves */
  /* the pool, under lock: threads waiting for a notification, threads
   * serving one (or a worker of supervise_spawn) each; recv_lock: one RECV
   * at a time */
  pthread_mutex_t lock, recv_lock;
  bool stopping;
  bool pool_started; /* set by the supervise loop at the first notification */
  int waiting, busy, threads;
  unsigned traps; /* SUPERVISE_TRAP_* */
  bool own_netns; /* abstract names are the sandbox's own */
  bool private_tmp;
  bool drop_creds; /* capsule runs as root: connect with the tool's ids */
  uid_t tool_uid;
  gid_t tool_gid;
  bool check_tcp; /* Landlock handles TCP: mirror its ports */
  /* the sandbox's egress proxy (supervise_attach_proxy), under proxy_lock:
   * a connection made to one of its listeners is served by the thread
   * that made it */
  pthread_mutex_t proxy_lock;
  struct proxy *proxy;
  uint16_t ports[SANDBOX_MAX_LISTENERS];
  size_t n_ports;
  struct socket_id granted[SUPERVISE_MAX_GRANTED];
  size_t n_granted;
  /* pidfds of the tool's threads that asked (PIDFD_THREAD ones only),
   * under pidfd_lock: a connect from a thread seen before costs no
   * pidfd_open and close (about 10 us here) */
  pthread_mutex_t pidfd_lock;
  struct {
    pid_t tid;
    int fd;
  } pidfds[SUPERVISE_PIDFDS_KEPT];
  size_t n_pidfds, next_pidfd;
  /* expansion (supervise_open.c) */
  enum sandbox_expand_verdict (*ask)(void *ctx, const struct sandbox_expansion *req);
  void (*record)(void *ctx, const struct sandbox_expansion *req, enum sandbox_expand_verdict v);
  void *ctx;
  bool landlock;    /* Landlock holds an injected fd's reopening (else: no expansion) */
  char **protected; /* real paths never expanded to: deny entries, capsule's state */
  size_t n_protected;
  pthread_mutex_t ask_lock;    /* one question at a time */
  pthread_mutex_t memory_lock; /* guards what follows; never held while asking */
  struct expand_memory *memory;
  size_t n_memory, cap_memory;
  double tokens; /* the prompts' token bucket */
  uint64_t refilled_ms;
  unsigned questions; /* put to the operator and not yet answered */
};

void supervise_unref(struct supervise *sup);
/* Answers a notification: result < 0 an errno, else the value. */
void supervise_answer(const struct supervise *sup, uint64_t id, int result);
/* supervise_pidfd.c: the tool's socket at fd (the one there now) of
 * thread pid, which asked notification id, or -errno. Whether the asker
 * still waits once the socket is taken is the caller's to check. */
int supervise_take_socket(struct supervise *sup, pid_t pid, uint64_t id, int fd);
/* Whether the task that sent notification id still waits for it. */
bool supervise_still_waiting(const struct supervise *sup, uint64_t id);
/* Runs fn(arg) in a detached thread holding a reference to sup and one of
 * its busy slots; false (nothing started) past the limit. The thread has
 * its maker's ids: make it from a pool thread (capsule's own). */
bool supervise_spawn(struct supervise *sup, void *(*fn)(void *), void *arg);
/* The worker's end of supervise_spawn. */
void supervise_worker_done(struct supervise *sup);

/* supervise_open.c */
int supervise_open_prepare(struct supervise *sup, const struct cap_spec *spec,
                           const struct sandbox_options *opt);
void supervise_open_free(struct supervise *sup);
bool supervise_is_open(int nr);
void supervise_open_handle(struct supervise *sup, const struct seccomp_notif *req);

#endif
