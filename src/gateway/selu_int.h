/* Shared by gateway/selu.c (the Selu runtime) and gateway/selu_artifacts.c
 * (the orchestrator's artifact calls): internal to src/gateway. */
#ifndef CAPSULE_GATEWAY_SELU_INT_H
#define CAPSULE_GATEWAY_SELU_INT_H

#include <stddef.h>

#include "core/error.h"
#include "gateway/call.h"
#include "runtime/selu_rpc.h"

/* Uploads call->attach's files on ch and returns args (a JSON object) with
 * an entry for each appended to its "attachments" array (*out, owned);
 * each file at most max bytes. */
int gw_selu_attach(struct selu_channel *ch, const struct gw_call *call, const char *args,
                   int timeout_ms, size_t max, char **out, struct cap_error *err);
/* Downloads the artifacts result's "artifact"/"artifacts" entries name
 * into call->artifacts_dir; *out is the result with those entries
 * rewritten (path, size_bytes), or NULL when it names none. */
int gw_selu_capture(struct selu_channel *ch, const struct gw_call *call, const char *result,
                    int timeout_ms, char **out, struct cap_error *err);

/* serve --grpc (call->artifact_store): the arguments' "attachments"
 * entries that name an artifact of the store (gateway/artifact_store.h,
 * call->user's) uploaded on ch, each entry rewritten with the
 * capability's id for it (*out, owned; NULL when args name none); an
 * entry naming no artifact of the user's fails the call. */
int gw_selu_attach_stored(struct selu_channel *ch, const struct gw_call *call, const char *args,
                          int timeout_ms, char **out, struct cap_error *err);
/* 0 when args name no artifact in their "attachments"; -ENOTSUP (spec
 * speaks the seed's contract, which has no artifacts) otherwise. */
int gw_selu_attach_refused(const struct cap_spec *spec, const char *args, struct cap_error *err);
/* And the result's artifacts downloaded into the store, each entry's
 * capability_artifact_id replaced by the store's id for it. */
int gw_selu_capture_stored(struct selu_channel *ch, const struct gw_call *call, const char *result,
                           int timeout_ms, char **out, struct cap_error *err);

#endif
