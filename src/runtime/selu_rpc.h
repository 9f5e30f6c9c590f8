/* Selu's CapabilityService over gRPC (the core C API, libgrpc, with
 * messages from protobuf-c): a channel on an already-connected socket (made
 * inside the capability's network namespace, see sandbox_connect), and the
 * two unary calls, HealthCheck and Invoke, each with a deadline. Nothing
 * here prints; errors are values. */
#ifndef CAPSULE_RUNTIME_SELU_RPC_H
#define CAPSULE_RUNTIME_SELU_RPC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

struct selu_channel;

/* Takes ownership of fd (a connected stream socket) whatever the outcome.
 * Responses larger than max_response bytes are refused (-EFBIG at the
 * call). */
int selu_channel_open(int fd, size_t max_response, struct selu_channel **ret,
                      struct cap_error *err);
void selu_channel_close(struct selu_channel *ch);

/* HealthCheck. -ENOSYS when the server does not implement it (the seed
 * makes it optional: such a server is taken as ready once it answers). */
int selu_health(struct selu_channel *ch, int timeout_ms, bool *healthy, struct cap_error *err);

struct selu_response {
  bool success;
  char *result; /* JSON text as the capability returned it; owned */
  char *error;  /* its message when !success; owned */
};

/* Invoke. context is n_context key/value pairs (keys[i], values[i]).
 * Errors: -ETIMEDOUT past the deadline, -ECONNRESET when the server went
 * away, -EFBIG over max_response, -EPROTO otherwise (with the status). */
int selu_invoke(struct selu_channel *ch, const char *tool, const char *parameters,
                const char *const *keys, const char *const *values, size_t n_context,
                int timeout_ms, struct selu_response *resp, struct cap_error *err);
void selu_response_free(struct selu_response *resp);

#endif
