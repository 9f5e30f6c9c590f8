/* serve --grpc's side of the orchestrator's artifact calls, on the store
 * of gateway/artifact_store.h (STATE/run/artifacts), as Selu's
 * orchestrator uses a capability's (its agents/artifacts.rs):
 *
 *  - UploadInputArtifact: the chunks stored as the caller's artifact, its
 *    id answered (capability_artifact_id, size_bytes; a refusal in error);
 *  - an Invoke whose arguments' "attachments" name those ids: checked
 *    here (the caller's, alive), then uploaded by the pipeline to the Selu
 *    capability that runs the tool (gw_call's artifact_store);
 *  - the artifacts a Selu tool's result names are downloaded into the
 *    store by the pipeline, and named by capsule's ids in the result;
 *  - DownloadOutputArtifact: the caller's artifact as ArtifactChunks (the
 *    first naming the file, the last done), or one chunk with the error.
 *
 * Each stored, sent, named or refused artifact is an audit record of its
 * own (gw_audit_change): artifact-upload, artifact-download, artifact-in,
 * artifact-out, the artifact's id in the tool column.
 *
 * A user has at most SERVE_GRPC_USER_STREAMS upload and download streams
 * open at once (more are refused RESOURCE_EXHAUSTED): a stream holds one
 * of the server's call slots (64) while it trickles, and one token holder
 * is not to hold them all. */
#ifndef CAPSULE_FRONT_SERVE_GRPC_ARTIFACTS_H
#define CAPSULE_FRONT_SERVE_GRPC_ARTIFACTS_H

#include <pthread.h>
#include <stdbool.h>

#include "front/grpc_serve.h"

struct gw_state;
struct serve;

#define SERVE_GRPC_USER_STREAMS 8

/* The users with artifact streams open, and how many each (at most one
 * entry per call slot). Zero-initialised but for mu. */
struct serve_grpc_streams {
  pthread_mutex_t mu;
  struct serve_grpc_user_streams {
    char *user;
    unsigned n;
  } * users;
  size_t n_users;
};

struct serve_grpc_artifacts {
  char *store;         /* STATE/run/artifacts */
  struct gw_state *st; /* for the audit records */
  pthread_mutex_t *mu; /* around st */
  const char *only;    /* --capability, or NULL: the records' capability for up/downloads */
  struct serve_grpc_streams *streams; /* the artifact streams open */
  struct serve *sv;                   /* for serve's log */
};

/* UploadInputArtifact or DownloadOutputArtifact (call->method), within the
 * user's bound of streams at once. */
void serve_grpc_artifact_stream(const struct serve_grpc_artifacts *x,
                                const struct grpc_serve_call *call, const char *user,
                                struct grpc_serve_answer *a);
/* Before an invocation: true when its arguments name no artifact, or only
 * the user's (each audited); false with a answered (the call's error)
 * when one is not. */
bool serve_grpc_artifacts_in(const struct serve_grpc_artifacts *x,
                             const struct grpc_serve_call *call, const char *user,
                             struct grpc_serve_answer *a);
/* After it: the artifacts its result names that the tool made, audited. */
void serve_grpc_artifacts_out(const struct serve_grpc_artifacts *x,
                              const struct grpc_serve_call *call, const char *user,
                              const char *result);

#endif
