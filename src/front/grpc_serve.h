/* The gRPC front door: Selu's two capability contracts, the seed's
 * CapabilityService (Invoke, HealthCheck) and the orchestrator's current
 * Capability (Invoke, StreamInvoke, Healthcheck, UploadInputArtifact,
 * DownloadOutputArtifact), served on a TCP or unix
 * address, each call handed to the caller's
 * handler on a thread of the server's pool. The server (HTTP/2 over
 * nghttp2, TLS over OpenSSL) lives in the module capsule-grpc-serve.so
 * (grpc_serve_module.h; mapped only by a process that serves it), opened
 * on the first grpc_serve_start.
 *
 * Authentication is the handler's: every call carries the bearer token of
 * its `authorization` metadata (NULL when none), loopback included.
 * Ownership: the strings of struct grpc_serve_call belong to the server
 * and live during the handler's call; the handler fills the answer with
 * strings it allocated (malloc), which the server frees. */
#ifndef CAPSULE_FRONT_GRPC_SERVE_H
#define CAPSULE_FRONT_GRPC_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cancel.h"
#include "core/error.h"
#include "core/wait_hook.h"

/* gRPC status codes the handler may answer with (grpc/status.h's values) */
enum grpc_serve_status {
  GRPC_SERVE_OK = 0,
  GRPC_SERVE_CANCELLED = 1,
  GRPC_SERVE_INVALID_ARGUMENT = 3,
  GRPC_SERVE_DEADLINE_EXCEEDED = 4,
  GRPC_SERVE_NOT_FOUND = 5,
  GRPC_SERVE_PERMISSION_DENIED = 7,
  GRPC_SERVE_RESOURCE_EXHAUSTED = 8,
  GRPC_SERVE_UNIMPLEMENTED = 12,
  GRPC_SERVE_INTERNAL = 13,
  GRPC_SERVE_UNAVAILABLE = 14,
  GRPC_SERVE_UNAUTHENTICATED = 16,
};

/* The methods served: the seed's CapabilityService and the orchestrator's
 * Capability (both in package selu.capability.v1). */
enum grpc_serve_method {
  GRPC_SERVE_INVOKE,       /* CapabilityService/Invoke */
  GRPC_SERVE_HEALTH,       /* CapabilityService/HealthCheck */
  GRPC_SERVE_CAP_INVOKE,   /* Capability/Invoke */
  GRPC_SERVE_CAP_STREAM,   /* Capability/StreamInvoke: the answer as one chunk */
  GRPC_SERVE_CAP_HEALTH,   /* Capability/Healthcheck */
  GRPC_SERVE_CAP_UPLOAD,   /* Capability/UploadInputArtifact: chunks in, an id out */
  GRPC_SERVE_CAP_DOWNLOAD, /* Capability/DownloadOutputArtifact: an id in, chunks out */
};

/* An artifact's chunk: UploadInputArtifactChunk (filename, mime_type,
 * data) in, ArtifactChunk (all) out. Received, the strings and data live
 * until the next recv_chunk. */
struct grpc_serve_chunk {
  const char *filename, *mime_type; /* "" when the chunk does not say */
  const uint8_t *data;
  size_t len;
  bool done;
  const char *error; /* sent: NULL or "" for none */
};

/* The stream of an artifact call, what recv_chunk and send_chunk act on */
struct grpc_serve_stream;

struct grpc_serve_call {
  enum grpc_serve_method method;
  bool health;            /* a health check; otherwise an invocation */
  const char *tool_name;  /* the request's tool_name */
  const char *parameters; /* its JSON arguments ("" when empty) */
  const char *const *context_keys, *const *context_values; /* the seed's context map */
  size_t n_context;
  const char *session_id, *thread_id; /* the orchestrator's fields, or context's; NULL: none */
  const char *bearer;                 /* the token of "authorization: Bearer TOKEN", or NULL */
  const char *user;        /* what the options' authenticate answered for it, or NULL without one */
  const char *peer;        /* the client's address, as gRPC names it */
  const char *artifact_id; /* DownloadOutputArtifact's capability_artifact_id */
  /* Run (cap_wait_hook_run) before anything that may wait long (a call
   * process, a stream, an instance's slow answer): the server lets
   * another thread take new calls then. */
  struct cap_wait_hook *wait;
  /* The client's deadline (its grpc-timeout): the ms left of it when the
   * handler is called, at least 1; 0: the client set none. */
  uint64_t deadline_ms;
  /* Fired (on the server's thread) when the client is gone before the
   * answer: it reset the call (a cancellation, its deadline past) or its
   * connection was lost, or the server stopped past its drain. The
   * handler arms it with what stops its work (core/cancel.h). */
  struct cap_cancel *cancel;
  /* The artifact calls' stream: recv_chunk (UploadInputArtifact) gives
   * the next chunk, 1, or 0 at the client's end of the stream, -1 when
   * the stream failed (the client went away, sent a message that is not
   * a chunk, or sent none for the options' stream_idle_ms); send_chunk
   * (DownloadOutputArtifact) sends one, false when the client is gone or
   * did not take it within stream_idle_ms. NULL otherwise. */
  struct grpc_serve_stream *stream;
  int (*recv_chunk)(struct grpc_serve_stream *s, struct grpc_serve_chunk *c);
  bool (*send_chunk)(struct grpc_serve_stream *s, const struct grpc_serve_chunk *c);
};

#define GRPC_SERVE_STREAM_IDLE_MS 30000

struct grpc_serve_answer {
  enum grpc_serve_status status; /* not OK: the call fails with it */
  char *status_message;          /* with a status other than OK */
  char *result;                  /* Invoke: the JSON result */
  bool success;                  /* Invoke: the tool succeeded; Health: healthy */
  char *error;                   /* Invoke: the tool's error when !success; Health: why not */
  /* UploadInputArtifact: result is the capability_artifact_id, size its
   * size_bytes, error its error; DownloadOutputArtifact: only the status
   * (the chunks are sent) */
  uint64_t size;
  /* Called (when set) once the answer went, or did not: the client
   * cancelled the call first (an upload it gave up on after its last
   * chunk is undone this way); finish_ctx is the handler's. */
  void (*finish)(void *ctx, bool delivered);
  void *finish_ctx;
};

/* Called on a worker thread, several at once (up to max_calls). */
typedef void (*grpc_serve_handler)(void *arg, const struct grpc_serve_call *call,
                                   struct grpc_serve_answer *answer);

struct grpc_serve_options {
  const char *address;            /* "127.0.0.1:50051", "[::1]:0", "unix:/path" */
  const char *tls_cert, *tls_key; /* PEM files: TLS; both NULL: plaintext */
  unsigned max_calls;             /* calls at once; more are refused (0: 64) */
  size_t max_message;             /* bytes of a request (0: 4 MiB) */
  int stream_idle_ms; /* a call's first message, a stream's next: within this, else the call is
                         cancelled (0: GRPC_SERVE_STREAM_IDLE_MS) */
  grpc_serve_handler handler;
  void *arg;
  /* The bearer token's user (malloc'd), or NULL: the call is refused
   * UNAUTHENTICATED with unauthenticated_message as soon as its headers
   * have come, none of its body kept, so a peer without a token holds no
   * thread nor memory of the server's. Called on the connection's reader
   * thread, several at once. NULL: the handler's. */
  char *(*authenticate)(void *arg, const char *bearer);
  const char *unauthenticated_message;
  /* Called (may be NULL) when an idle worker ends, with the workers left:
   * what the handler keeps per worker (pooled connections) can shrink to
   * that, so a burst's resources do not outlive it. */
  void (*workers_shrank)(void *arg, unsigned workers);
};

struct grpc_serve;

/* Starts serving (a thread of its own); *port is the TCP port bound (for
 * ":0"), 0 for a unix address. */
int grpc_serve_start(const struct grpc_serve_options *opt, struct grpc_serve **ret, int *port,
                     struct cap_error *err);
/* Stops taking calls, gives those in progress up to drain_ms to finish,
 * cancels the rest, and frees s. */
void grpc_serve_stop(struct grpc_serve *s, int drain_ms);

#endif
