/* selu_rpc.h's functions for libcapsule: each opens the Selu gRPC module
 * (selu_rpc_module.h) on first use and calls through its table, so only a
 * process that talks to a Selu server maps libgrpc and its ~50 libraries
 * (they cost every other verb ~10 ms of start-up).
 *
 * Where the module is looked for, in order (never in the environment: a
 * module is code run with the caller's privileges):
 * - in the build tree, when the running executable is in it (tests and
 *   benches run uninstalled): CAPSULE_MODULE_BUILDDIR;
 * - installed: CAPSULE_MODULE_RELDIR from the executable's directory
 *   (bindir to libdir/capsule, as meson installs it);
 * - beside the executable (a relocated binary with its module). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/selu_rpc_module.h"

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const struct selu_rpc_module *module;
static char module_why[PATH_MAX + 256]; /* why it could not be loaded */

/* The directory of the running executable, into dir[PATH_MAX]. */
static bool exe_dir(char *dir)
{
  ssize_t n = readlink("/proc/self/exe", dir, PATH_MAX - 1);
  if (n <= 0)
    return false;
  dir[n] = '\0';
  char *slash = strrchr(dir, '/');
  if (!slash)
    return false;
  *slash = '\0';
  return true;
}

static bool under(const char *path, const char *root)
{
  size_t n = strlen(root);
  return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static const struct selu_rpc_module *try_open(const char *path)
{
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(module_why, sizeof module_why, "%s", dlerror());
    return NULL;
  }
  const struct selu_rpc_module *m = dlsym(h, SELU_RPC_MODULE_SYMBOL);
  if (!m || m->size != sizeof *m) {
    snprintf(module_why, sizeof module_why, "%s: no %s table of this capsule's version", path,
             SELU_RPC_MODULE_SYMBOL);
    dlclose(h);
    return NULL;
  }
  return m; /* never closed: libgrpc does not unload cleanly */
}

static void module_load(void)
{
  char dir[PATH_MAX], path[PATH_MAX + 64];
  if (!exe_dir(dir)) {
    snprintf(module_why, sizeof module_why, "cannot read /proc/self/exe");
    return;
  }
  snprintf(module_why, sizeof module_why, "%s: not found", SELU_RPC_MODULE_NAME);
  const char *const candidates[] = {
      under(dir, CAPSULE_BUILD_ROOT) ? CAPSULE_MODULE_BUILDDIR : NULL,
      CAPSULE_MODULE_RELDIR,
      ".",
  };
  for (size_t i = 0; i < sizeof candidates / sizeof *candidates && !module; i++) {
    if (!candidates[i])
      continue;
    if (candidates[i][0] == '/')
      snprintf(path, sizeof path, "%s/%s", candidates[i], SELU_RPC_MODULE_NAME);
    else
      snprintf(path, sizeof path, "%s/%s/%s", dir, candidates[i], SELU_RPC_MODULE_NAME);
    if (access(path, F_OK) == 0)
      module = try_open(path);
  }
}

static int module_get(struct cap_error *err)
{
  pthread_once(&module_once, module_load);
  if (module)
    return 0;
  return cap_error_set(err, ELIBACC,
                       "cannot load capsule's Selu gRPC module (%s); it belongs in %s "
                       "relative to the capsule executable's directory",
                       module_why, CAPSULE_MODULE_RELDIR);
}

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

void selu_channel_close(struct selu_channel *ch)
{
  if (ch) /* a channel exists only when the module is loaded */
    module->channel_close(ch);
}

int selu_health(struct selu_channel *ch, int timeout_ms, bool *healthy, struct cap_error *err)
{
  return module->health(ch, timeout_ms, healthy, err);
}

int selu_invoke(struct selu_channel *ch, const char *tool, const char *parameters,
                const char *const *keys, const char *const *values, size_t n_context,
                int timeout_ms, struct selu_response *resp, struct cap_error *err)
{
  return module->invoke(ch, tool, parameters, keys, values, n_context, timeout_ms, resp, err);
}

void selu_response_free(struct selu_response *resp)
{
  free(resp->result);
  free(resp->error);
  *resp = (struct selu_response){0};
}
