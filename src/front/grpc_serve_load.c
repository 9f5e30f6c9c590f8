/* grpc_serve.h's functions for libcapsule: the server module opened on
 * first use (core/module.h), so only `capsule serve --grpc` maps its
 * nghttp2 and OpenSSL. */
#include <pthread.h>

#include "core/module.h"
#include "front/grpc_serve_module.h"

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const struct grpc_serve_module *module;
static struct cap_error module_err;

static void module_load(void)
{
  module = cap_module_open(GRPC_SERVE_MODULE_NAME, GRPC_SERVE_MODULE_SYMBOL, sizeof *module,
                           "gRPC server", &module_err);
}

int grpc_serve_start(const struct grpc_serve_options *opt, struct grpc_serve **ret, int *port,
                     struct cap_error *err)
{
  *ret = NULL;
  pthread_once(&module_once, module_load);
  if (!module)
    return cap_error_set(err, module_err.code, "%s", module_err.message);
  return module->start(opt, ret, port, err);
}

void grpc_serve_stop(struct grpc_serve *s, int drain_ms)
{
  if (s) /* a server exists only when the module is loaded */
    module->stop(s, drain_ms);
}
