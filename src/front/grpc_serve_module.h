/* The contract between libcapsule and the gRPC server module
 * (capsule-grpc-serve.so, built from grpc_serve.c): one exported table,
 * functions with the contracts of grpc_serve.h. */
#ifndef CAPSULE_FRONT_GRPC_SERVE_MODULE_H
#define CAPSULE_FRONT_GRPC_SERVE_MODULE_H

#include "front/grpc_serve.h"

#define GRPC_SERVE_MODULE_NAME "capsule-grpc-serve.so"
#define GRPC_SERVE_MODULE_SYMBOL "grpc_serve_module_v1"

struct grpc_serve_module {
  size_t size; /* sizeof(struct grpc_serve_module) as the module was built */
  int (*start)(const struct grpc_serve_options *opt, struct grpc_serve **ret, int *port,
               struct cap_error *err);
  void (*stop)(struct grpc_serve *s, int drain_ms);
};

#endif
