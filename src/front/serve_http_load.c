/* serve_http.c's functions for libcapsule, through the module
 * capsule-serve-http.so, opened by the first serve_http_start: only a
 * serve with --mcp-http maps libmicrohttpd and GnuTLS. */
#include <pthread.h>

#include "core/module.h"
#include "front/serve_internal.h"

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const struct serve_http_module *module;
static struct cap_error module_err;

static void module_load(void)
{
  module = cap_module_open(SERVE_HTTP_MODULE_NAME, SERVE_HTTP_MODULE_SYMBOL, sizeof *module,
                           "HTTP serving (MCP, the dashboard)", &module_err);
}

static int module_get(struct cap_error *err)
{
  pthread_once(&module_once, module_load);
  return module ? 0 : cap_error_set(err, module_err.code, "%s", module_err.message);
}

int serve_ui_start(struct serve *sv, const struct serve_hooks *hooks,
                   const struct serve_options *opt, struct serve_ui **ret, struct cap_error *err)
{
  *ret = NULL;
  int r = module_get(err);
  return r < 0 ? r : module->ui_start(sv, hooks, opt, ret, err);
}

void serve_ui_quiesce(struct serve_ui *u)
{
  if (u)
    module->ui_quiesce(u);
}

void serve_ui_stop(struct serve_ui *u)
{
  if (u)
    module->ui_stop(u);
}

int serve_http_start(struct serve *sv, const struct serve_hooks *hooks,
                     const struct serve_options *opt, struct serve_http **ret,
                     struct cap_error *err)
{
  *ret = NULL;
  int r = module_get(err);
  return r < 0 ? r : module->start(sv, hooks, opt, ret, err);
}

void serve_http_quiesce(struct serve_http *h)
{
  if (h)
    module->quiesce(h);
}

void serve_http_stop(struct serve_http *h)
{
  if (h)
    module->stop(h);
}
