/* Selu's two gRPC contracts over HTTP/2 (nghttp2, runtime/selu_h2.c, with
 * messages from protobuf-c): a channel on an already-connected socket (made inside
 * the capability's network namespace, see sandbox_connect), and the calls,
 * each with a deadline. The two contracts share the package
 * selu.capability.v1:
 *   - CapabilityService, the seed's (tool_name, parameters, a context map;
 *     HealthCheck optional): proto/selu/capability/v1/capability.proto;
 *   - Capability, the orchestrator's current one (args_json, config_json,
 *     session_id, capability_id, thread_id; Healthcheck; StreamInvoke):
 *     proto/selu/orchestrator/capability.proto.
 * selu_health tells which one a server speaks; the caller remembers it
 * (per warm instance) and passes it to every selu_invoke. Nothing here
 * prints; errors are values. */
#ifndef CAPSULE_RUNTIME_SELU_RPC_H
#define CAPSULE_RUNTIME_SELU_RPC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

struct selu_channel;

enum selu_protocol {
  SELU_PROTOCOL_UNKNOWN = 0,
  SELU_PROTOCOL_SERVICE,    /* the seed's selu.capability.v1.CapabilityService */
  SELU_PROTOCOL_CAPABILITY, /* the orchestrator's selu.capability.v1.Capability */
};
/* "CapabilityService", "Capability", or "unknown". */
const char *selu_protocol_name(enum selu_protocol p);

/* Takes ownership of fd (a connected stream socket) whatever the outcome.
 * Responses larger than max_response bytes are refused (-EFBIG at the
 * call). */
/* Maps the gRPC module now (without starting gRPC), so that the children
 * a long-lived process forks find it mapped: what serve's call processes
 * do. 0, or -errno with err set when it cannot be opened. */
int selu_rpc_preload(struct cap_error *err);

int selu_channel_open(int fd, size_t max_response, struct selu_channel **ret,
                      struct cap_error *err);
void selu_channel_close(struct selu_channel *ch);
/* Whether a channel kept between calls may take another: false once its
 * connection failed or was shut (it never reconnects). A channel carries
 * calls from several threads at once; closing waits for none of them. */
bool selu_channel_usable(struct selu_channel *ch);

/* The health check, and which contract the server speaks: with *proto
 * SELU_PROTOCOL_UNKNOWN it asks the orchestrator's Capability/Healthcheck
 * first (what Selu asks) and, when the server does not implement it, the
 * seed's CapabilityService/HealthCheck; *proto is set to the one that
 * answered. A server that implements neither health call is taken as the
 * seed's (whose HealthCheck is optional) and ready once it answers: 0 with
 * *healthy true and *proto SERVICE. A known *proto asks that one only.
 * Errors: -ETIMEDOUT, -ECONNRESET, -EPROTO (an answer that is not the
 * contract's message, any other status). */
int selu_health(struct selu_channel *ch, int timeout_ms, enum selu_protocol *proto, bool *healthy,
                struct cap_error *err);

/* One call's request, for either contract. CapabilityService gets tool and
 * args_json as tool_name and parameters, and a context map of session_id
 * and user_id; Capability gets every field but user_id (config_json: the
 * capability's declared credentials as a JSON object). */
struct cap_cancel;
struct cap_wait_hook;
struct selu_invoke_args {
  const char *tool;
  const char *args_json;
  const char *config_json; /* NULL: "{}" */
  const char *session_id, *user_id, *thread_id, *capability_id;
  /* fired while the call runs: the call cancelled on the server
   * (RST_STREAM), -ECANCELED; NULL: not cancellable */
  struct cap_cancel *cancel;
  /* run once when no answer came within CAP_WAIT_SOON_US (the caller
   * hands over what others wait on: core/wait_hook.h); NULL: nothing */
  struct cap_wait_hook *wait;
};

struct selu_response {
  bool success;
  char *result; /* JSON text as the capability returned it; owned */
  char *error;  /* its message when !success; owned */
};

/* Invoke (stream false) or, Capability only, StreamInvoke (stream true: the
 * chunks' data concatenated until the one marked done; a chunk with an
 * error fails the call with it). Errors: -ETIMEDOUT past the deadline,
 * -ECONNRESET when the server went away, -EFBIG over max_response (the
 * whole stream counts), -ENOSYS when the server does not implement the
 * method, -EPROTO otherwise (with the status). */
int selu_invoke(struct selu_channel *ch, enum selu_protocol proto, bool stream,
                const struct selu_invoke_args *a, int timeout_ms, struct selu_response *resp,
                struct cap_error *err);
void selu_response_free(struct selu_response *resp);

/* The orchestrator's artifact calls (Capability only). Upload sends data
 * as UploadInputArtifact chunks of 256 KiB (the first naming filename and
 * mime_type) and returns the capability's id for it (*id, owned); download
 * reads DownloadOutputArtifact's chunks until the one marked done, bounded
 * by the channel's max_response (-EFBIG), and fails on a chunk's error or
 * an artifact without bytes (as Selu's orchestrator does). */
struct selu_artifact {
  char *data; /* owned */
  size_t len, cap;
  char *filename, *mime_type; /* as the chunks said, or NULL */
};
int selu_artifact_upload(struct selu_channel *ch, const char *filename, const char *mime_type,
                         const char *data, size_t len, int timeout_ms, char **id,
                         struct cap_error *err);
int selu_artifact_download(struct selu_channel *ch, const char *id, int timeout_ms,
                           struct selu_artifact *out, struct cap_error *err);
void selu_artifact_free(struct selu_artifact *a);

#endif
