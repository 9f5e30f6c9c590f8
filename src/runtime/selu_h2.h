/* gRPC's client side over HTTP/2 (nghttp2) on a connected socket: what
 * the Selu module (selu_rpc.c) calls a server with. One connection
 * carries calls from several threads at once (a warm instance's kept
 * channel in serve): nghttp2's session is shared under a mutex, and one
 * waiting thread at a time reads the socket for all of them; no thread of
 * its own, so a process may fork at any time. Messages are gRPC's
 * length-prefixed frames, uncompressed (no grpc-accept-encoding is
 * offered). Nothing here prints; errors are values. */
#ifndef CAPSULE_RUNTIME_SELU_H2_H
#define CAPSULE_RUNTIME_SELU_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/cancel.h"
#include "core/error.h"
#include "core/wait_hook.h"

struct h2_conn;
struct h2_call;

/* gRPC's status codes (grpc/status.h) that the callers tell apart */
enum {
  H2_GRPC_OK = 0,
  H2_GRPC_CANCELLED = 1,
  H2_GRPC_UNKNOWN = 2,
  H2_GRPC_DEADLINE_EXCEEDED = 4,
  H2_GRPC_PERMISSION_DENIED = 7,
  H2_GRPC_RESOURCE_EXHAUSTED = 8,
  H2_GRPC_UNIMPLEMENTED = 12,
  H2_GRPC_INTERNAL = 13,
  H2_GRPC_UNAVAILABLE = 14,
  H2_GRPC_UNAUTHENTICATED = 16,
};

/* Takes fd (a connected stream socket) whatever the outcome; a message
 * (one answer, or a stream's total) larger than max_message is refused
 * (-EFBIG at the call). */
int h2_open(int fd, size_t max_message, struct h2_conn **ret, struct cap_error *err);
/* Closes the socket; the calls on it must have ended (h2_call_free). */
void h2_close(struct h2_conn *c);
/* Not known broken: neither hung up, nor failed, nor told to go away. */
bool h2_usable(struct h2_conn *c);

/* Starts a call of path (/package.Service/Method) that must end within
 * timeout_ms (sent as grpc-timeout too); cancel (or NULL), once fired,
 * ends it. Never fails here: a failure shows at the call's first send or
 * receive. */
struct h2_call *h2_call_start(struct h2_conn *c, const char *path, int timeout_ms,
                              struct cap_cancel *cancel);
/* wait (or NULL) is run once the call has waited CAP_WAIT_SOON_US for
 * what it needs from the server (core/wait_hook.h). */
void h2_call_on_wait(struct h2_call *k, struct cap_wait_hook *wait);
/* Sends one message (len bytes, framed here); last ends the client's side
 * of the stream. Returns once the message is taken (flow control). */
int h2_call_send(struct h2_call *k, const uint8_t *msg, size_t len, bool last,
                 struct cap_error *err);
/* The next message into *msg (emptied first): 1; 0 when the server ended
 * the stream (h2_call_status says how); -errno with err set when the call
 * failed (ETIMEDOUT past the deadline, ECANCELED, ECONNRESET when the
 * connection went, EFBIG past max_message, EPROTO). */
int h2_call_recv(struct h2_call *k, struct cap_buf *msg, struct cap_error *err);
/* Waits for the call's end: 0 with *code (a gRPC status) and *message (the
 * call's, NUL-terminated, owned by the call); -errno as h2_call_recv. */
int h2_call_status(struct h2_call *k, int *code, const char **message, struct cap_error *err);
/* Ends the call (reset if it is still open: nothing more is wanted) and
 * frees it. */
void h2_call_free(struct h2_call *k);

#endif
