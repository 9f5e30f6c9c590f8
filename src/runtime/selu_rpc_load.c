/* selu_rpc.h's functions for libcapsule: each opens the Selu gRPC module
 * (selu_rpc_module.h, found as core/module.h says) on first use and calls
 * through its table, so only a process that talks to a Selu server maps
 * nghttp2 and protobuf-c. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"
#include "core/module.h"
#include "runtime/selu_rpc_module.h"

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const struct selu_rpc_module *module;
static struct cap_error module_err;

static void module_load(void)
{
  module = cap_module_open(SELU_RPC_MODULE_NAME, SELU_RPC_MODULE_SYMBOL, sizeof *module,
                           "Selu gRPC", &module_err);
}

static int module_get(struct cap_error *err)
{
  pthread_once(&module_once, module_load);
  if (module)
    return 0;
  return cap_error_set(err, module_err.code, "%s", module_err.message);
}

int selu_rpc_preload(struct cap_error *err) { return module_get(err); }

int selu_channel_open(int fd, size_t max_response, struct selu_channel **ret, struct cap_error *err)
{
  *ret = NULL;
  int r = module_get(err);
  if (r < 0) {
    close(fd); /* ours whatever the outcome */
    return r;
  }
  return module->channel_open(fd, max_response, ret, err);
}

bool selu_channel_usable(struct selu_channel *ch)
{
  return module && ch && module->channel_usable(ch);
}

void selu_channel_close(struct selu_channel *ch)
{
  if (ch) /* a channel exists only when the module is loaded */
    module->channel_close(ch);
}

int selu_health(struct selu_channel *ch, int timeout_ms, enum selu_protocol *proto, bool *healthy,
                struct cap_error *err)
{
  return module->health(ch, timeout_ms, proto, healthy, err);
}

int selu_invoke(struct selu_channel *ch, enum selu_protocol proto, bool stream,
                const struct selu_invoke_args *a, int timeout_ms, struct selu_response *resp,
                struct cap_error *err)
{
  return module->invoke(ch, proto, stream, a, timeout_ms, resp, err);
}

int selu_artifact_upload(struct selu_channel *ch, const char *filename, const char *mime_type,
                         const char *data, size_t len, int timeout_ms, char **id,
                         struct cap_error *err)
{
  return module->artifact_upload(ch, filename, mime_type, data, len, timeout_ms, id, err);
}

int selu_artifact_download(struct selu_channel *ch, const char *id, int timeout_ms,
                           struct selu_artifact *out, struct cap_error *err)
{
  return module->artifact_download(ch, id, timeout_ms, out, err);
}

void selu_artifact_free(struct selu_artifact *a)
{
  free(a->data);
  free(a->filename);
  free(a->mime_type);
  *a = (struct selu_artifact){0};
}

const char *selu_protocol_name(enum selu_protocol p)
{
  switch (p) {
  case SELU_PROTOCOL_SERVICE: return "CapabilityService";
  case SELU_PROTOCOL_CAPABILITY: return "Capability";
  default: return "unknown";
  }
}

void selu_response_free(struct selu_response *resp)
{
  free(resp->result);
  free(resp->error);
  *resp = (struct selu_response){0};
}
