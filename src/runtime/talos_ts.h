/* TypeScript for Talos plugins: every .ts/.mts file of a plugin's package
 * (node_modules and dot folders left out) transformed to JavaScript by
 * esbuild on the host, one file at a time (types stripped, nothing
 * bundled, so the plugin's imports stay as written), and cached under
 * CACHE_DIR/talos/ by the SHA-256 of the source and the transformer. The
 * shim serves the cached text in place of the file inside the sandbox.
 * esbuild is found as $CAPSULE_ESBUILD, else the copy scripts/deps.sh
 * installs (src/runtime/talos-loader/node_modules), else the one beside an
 * installed capsule (LIBDIR/capsule/talos-loader), else `esbuild` on PATH.
 * Not thread-safe (it forks). */
#ifndef CAPSULE_RUNTIME_TALOS_TS_H
#define CAPSULE_RUNTIME_TALOS_TS_H

#include "core/error.h"
#include "core/json.h"
#include "manifest/model.h"

/* Writes the JSON object {"/abs/file.ts": "compiled JS", ...} for the
 * package's TypeScript files to w. cache_dir NULL: nothing is cached. */
int talos_ts_sources(const struct cap_spec *spec, const char *cache_dir, struct cap_jw *w,
                     struct cap_error *err);

/* The node_modules capsule installs for Talos plugins (esbuild, undici):
 * src/runtime/talos-loader's from the build tree, else LIBDIR/capsule's
 * beside an installed capsule; NULL when neither exists (allocated). */
char *talos_loader_modules(void);

/* The esbuild program (allocated), or NULL with err set. */
char *talos_ts_esbuild(struct cap_error *err);

#endif
