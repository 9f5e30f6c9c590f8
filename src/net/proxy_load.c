/* proxy.h's functions for libcapsule, through the egress proxy module
 * (proxy_module.h), opened by the first proxy_new. A struct proxy exists
 * only once the module is loaded, so the others need no check of their
 * own beyond NULL, which they take without loading anything. */
#include <pthread.h>

#include "core/module.h"
#include "net/proxy_module.h"

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const struct proxy_module *module;
static struct cap_error module_err;

static void module_load(void)
{
  module = cap_module_open(PROXY_MODULE_NAME, PROXY_MODULE_SYMBOL, sizeof *module, "egress proxy",
                           &module_err);
}

int proxy_new(const struct cap_spec *spec, const struct proxy_options *opt, struct proxy **ret,
              struct cap_error *err)
{
  *ret = NULL;
  pthread_once(&module_once, module_load);
  if (!module)
    return cap_error_set(err, module_err.code, "%s", module_err.message);
  return module->create(spec, opt, ret, err);
}

const char *proxy_ca_bundle(const struct proxy *p, size_t *len)
{
  *len = 0;
  return p ? module->ca_bundle(p, len) : NULL;
}

char *const *proxy_tool_env(const struct proxy *p, size_t *n)
{
  *n = 0;
  return p ? module->tool_env(p, n) : NULL;
}

void proxy_scrub(struct proxy *p)
{
  if (p)
    module->scrub(p);
}

int proxy_start(struct proxy *p, const int *fds, size_t n, struct cap_error *err)
{
  return module->start(p, fds, n, err);
}

void proxy_stop(struct proxy *p)
{
  if (p)
    module->stop(p);
}

int64_t proxy_cpu_ms(struct proxy *p) { return p ? module->cpu_ms(p) : 0; }

void proxy_expect_supervisor(struct proxy *p)
{
  if (p)
    module->expect_supervisor(p);
}

bool proxy_hold(struct proxy *p) { return p && module->hold(p); }

void proxy_connected(struct proxy *p, const struct sockaddr *dest, socklen_t len, int *made)
{
  module->connected(p, dest, len, made);
}

/* tls_client.h, through the same module: a struct tls_client exists only
 * once tls_client_open loaded it */
int tls_client_open(int fd, const char *host, const struct tls_client_files *files,
                    uint64_t deadline, struct tls_client **ret, struct cap_error *err)
{
  *ret = NULL;
  pthread_once(&module_once, module_load);
  if (!module)
    return cap_error_set(err, module_err.code, "%s", module_err.message);
  return module->tls_open(fd, host, files, deadline, ret, err);
}

ssize_t tls_client_read(struct tls_client *c, void *buf, size_t len)
{
  return module->tls_read(c, buf, len);
}

ssize_t tls_client_write(struct tls_client *c, const void *buf, size_t len)
{
  return module->tls_write(c, buf, len);
}

size_t tls_client_pending(const struct tls_client *c) { return module->tls_pending(c); }

void tls_client_free(struct tls_client *c)
{
  if (c)
    module->tls_free(c);
}
