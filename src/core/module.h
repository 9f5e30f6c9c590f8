/* Capsule's own shared modules (capsule-*.so): code that links heavy
 * libraries (libgrpc, OpenSSL) and only some processes need, opened on
 * first use so that every other verb starts without mapping them.
 *
 * A module is looked for, in order (never through the environment: a
 * module is code run with the caller's privileges):
 * - in the build tree, when the running executable is in it (tests and
 *   benches run uninstalled): CAPSULE_MODULE_BUILDDIR;
 * - installed: CAPSULE_MODULE_RELDIR from the executable's directory
 *   (bindir to libdir/capsule, as meson installs them);
 * - beside the executable (a relocated binary with its modules).
 * Each exports one table whose first member is its size. */
#ifndef CAPSULE_CORE_MODULE_H
#define CAPSULE_CORE_MODULE_H

#include <stddef.h>

#include "core/error.h"

/* Opens module `name` and returns its table `symbol` of `size` bytes
 * (never closed), or NULL with err set (ELIBACC) naming where it belongs. */
const void *cap_module_open(const char *name, const char *symbol, size_t size, const char *what,
                            struct cap_error *err);

#endif
