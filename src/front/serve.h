/* `capsule serve`: a long-running gateway in front of the call pipeline.
 * It holds the registry (reloaded on SIGHUP and when the capabilities
 * directory changes, through inotify, or a rescan every 2 s where this
 * user's inotify limits are reached), serves MCP sessions (front/mcp.h)
 * on a unix socket (newline-delimited JSON-RPC; the caller is who
 * SO_PEERCRED says) and, when asked, over Streamable HTTP at /mcp
 * (front/serve_http.c, libmicrohttpd), where every request carries a
 * bearer token (gateway/access.h) whose user the calls are made as.
 * SIGTERM or SIGINT drain: no new requests, up to drain_ms for the calls
 * in flight, then the rest are stopped. Logs are JSON lines handed to
 * opt->log (the library never prints). */
#ifndef CAPSULE_FRONT_SERVE_H
#define CAPSULE_FRONT_SERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/call.h"
#include "gateway/state.h"

#define SERVE_DRAIN_MS 10000
#define SERVE_MAX_SESSIONS 1000
#define SERVE_MAX_LISTENS_PER_USER 16 /* subscriptions/listen streams open per user */
#define SERVE_RATE 200

struct serve_options {
  const char *caps_dir;
  const char *state_dir;
  struct gw_state *st;     /* opened by the caller; serve uses it under its own lock */
  const char *socket_path; /* NULL: STATE/serve.sock */
  const char *http_addr;   /* HOST:PORT for MCP over HTTP, or NULL */
  const char *ui_addr;     /* HOST:PORT for the dashboard (front/ui.h; port 0: any free), or NULL */
  const char *grpc_addr;   /* HOST:PORT or unix:PATH for gRPC (serve_grpc.c), or NULL */
  const char *only;        /* one capability, its tools under their own names */
  const char *tls_cert, *tls_key;
  bool insecure;        /* a non-loopback http_addr without TLS */
  uint64_t deadline_ms; /* per call; 0: the pipeline's default */
  uint64_t drain_ms;    /* 0: SERVE_DRAIN_MS */
  uint32_t rate; /* HTTP requests a second per token (a burst of twice as many); 0: SERVE_RATE */
  const char *version;
  void (*log)(void *ctx, const char *json_line);
  void *log_ctx;
  /* called once everything listens (tests wait for the status file) */
};

/* Runs until SIGTERM/SIGINT. Returns 0, or -errno with err set when it
 * cannot start (the address, the socket, TLS files, the registry). */
int serve_run(const struct serve_options *opt, struct cap_error *err);

/* The warm Selu process (serve_grpc_mcp.c), for serve and for `capsule
 * mcp` on stdio: a Selu call on a running instance made without a fork,
 * in a process that keeps the instances' gRPC channels and pooled state
 * connections (gw_call with selu_warm_only: policy, validation,
 * credentials, audit). gRPC does not survive a fork and the host forks
 * its other calls' children, so that process is forked by a spawner,
 * itself forked by serve_selu_open: call it before the host has any
 * thread, and before it initialised gRPC. What the spawner and its
 * processes read of the host (their copies, made at the fork): */
struct serve_selu_host {
  const struct serve_options *opt; /* caps_dir, state_dir, deadline_ms, drain_ms, log */
  const int *foreign;              /* the host's descriptors, closed in the spawner */
  size_t n_foreign;
};
/* The handle (kept to the end): the spawner forked, and the process
 * started when reg has a Selu capability (else by the first Selu call: a
 * capability a reload adds is warm too); err set when none could be (the
 * calls then run apart; a process that dies is started again, at most
 * once a second, by the next call). */
struct serve_selu;
struct serve_selu *serve_selu_open(const struct serve_selu_host *h, const struct gw_registry *reg,
                                   struct cap_error *err);
/* mcp_config.selu_warm, its ctx the handle (NULL is fine):
 * GW_OUTCOME_NOT_WARM when nothing ran (no instance running, policy ask,
 * no process), else the pipeline's outcome; cancel_fd readable cancels
 * the call, audited as cancelled by the client. */
enum gw_outcome serve_selu_warm(void *selu, const struct gw_registry *reg,
                                const struct gw_call *call, int cancel_fd, struct gw_result *res,
                                struct cap_error *err);
/* The host's registry was loaded again: the warm process reloads its own
 * from caps_dir (NULL is fine). */
void serve_selu_reloaded(struct serve_selu *s);
/* Its calls in flight finish (up to drain_ms, then it is killed), and the
 * handle is freed (NULL is fine). */
void serve_selu_stop(struct serve_selu *s, int drain_ms);

/* STATE/serve.json: what a running serve says about itself. */
char *serve_status_path(const char *state_dir);

#endif
