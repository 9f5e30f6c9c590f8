/* The contract between libcapsule and the Selu gRPC module
 * (capsule-selu-rpc.so, built from selu_rpc.c and selu_h2.c): the module
 * exports one table under SELU_RPC_MODULE_SYMBOL and nothing else (it is
 * built with hidden visibility). nghttp2 and protobuf-c are linked into
 * the module only, so a process that never talks to a Selu server never
 * maps them (selu_rpc_load.c opens the module on first use).
 * The functions have the contracts of selu_rpc.h. */
#ifndef CAPSULE_RUNTIME_SELU_RPC_MODULE_H
#define CAPSULE_RUNTIME_SELU_RPC_MODULE_H

#include "runtime/selu_rpc.h"

#define SELU_RPC_MODULE_NAME "capsule-selu-rpc.so"
#define SELU_RPC_MODULE_SYMBOL "selu_rpc_module_v3"

struct selu_rpc_module {
  size_t size; /* sizeof(struct selu_rpc_module) as the module was built */
  int (*channel_open)(int fd, size_t max_response, struct selu_channel **ret,
                      struct cap_error *err);
  void (*channel_close)(struct selu_channel *ch);
  int (*health)(struct selu_channel *ch, int timeout_ms, enum selu_protocol *proto, bool *healthy,
                struct cap_error *err);
  int (*invoke)(struct selu_channel *ch, enum selu_protocol proto, bool stream,
                const struct selu_invoke_args *a, int timeout_ms, struct selu_response *resp,
                struct cap_error *err);
  int (*artifact_upload)(struct selu_channel *ch, const char *filename, const char *mime_type,
                         const char *data, size_t len, int timeout_ms, char **id,
                         struct cap_error *err);
  int (*artifact_download)(struct selu_channel *ch, const char *id, int timeout_ms,
                           struct selu_artifact *out, struct cap_error *err);
  bool (*channel_usable)(struct selu_channel *ch);
};

#endif
