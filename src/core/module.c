#include "core/module.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static const void *try_open(const char *path, const char *symbol, size_t size, char *why,
                            size_t why_len)
{
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, why_len, "%s", dlerror());
    return NULL;
  }
  const size_t *table = dlsym(h, symbol);
  if (!table || *table != size) {
    snprintf(why, why_len, "%s: no %s table of this capsule's version", path, symbol);
    dlclose(h);
    return NULL;
  }
  return table; /* never closed: libgrpc and OpenSSL do not unload cleanly */
}

const void *cap_module_open(const char *name, const char *symbol, size_t size, const char *what,
                            struct cap_error *err)
{
  char dir[PATH_MAX], path[PATH_MAX + 128], why[PATH_MAX + 256];
  snprintf(why, sizeof why, "%s: not found", name);
  if (!exe_dir(dir)) {
    snprintf(why, sizeof why, "cannot read /proc/self/exe");
  } else {
    const char *const candidates[] = {
        under(dir, CAPSULE_BUILD_ROOT) ? CAPSULE_MODULE_BUILDDIR : NULL,
        CAPSULE_MODULE_RELDIR,
        ".",
    };
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
      if (!candidates[i])
        continue;
      if (candidates[i][0] == '/')
        snprintf(path, sizeof path, "%s/%s", candidates[i], name);
      else
        snprintf(path, sizeof path, "%s/%s/%s", dir, candidates[i], name);
      if (access(path, F_OK) < 0)
        continue;
      const void *table = try_open(path, symbol, size, why, sizeof why);
      if (table)
        return table;
    }
  }
  cap_error_set(err, ELIBACC,
                "cannot load capsule's %s module (%s); it belongs in %s relative to the capsule "
                "executable's directory",
                what, why, CAPSULE_MODULE_RELDIR);
  return NULL;
}
