/* Finding, detecting and loading manifests of any of the four formats.
 *
 * Detection: by file name first (manifest.yaml/.yml -> Selu, agent.toml or
 * any *.toml -> Covenant), then for JSON by content (a top-level "functions"
 * array -> Talos; "version" with nono's domains -> nono). A directory holds
 * one manifest (manifest.yaml, manifest.yml, agent.toml, manifest.json,
 * capability.json, nono.json), or Covenant's agents/<id>/agent.toml layout. */
#ifndef CAPSULE_MANIFEST_LOAD_H
#define CAPSULE_MANIFEST_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/diag.h"
#include "core/error.h"
#include "manifest/model.h"

#define CAP_MANIFEST_MAX_BYTES (4u << 20) /* 4 MiB: far beyond any real manifest */

enum cap_format_hint { CAP_HINT_AUTO = -1 };

/* Expands PATH into manifest files: a file is itself; a directory yields the
 * manifest it holds, or its agents/<id>/agent.toml files sorted by id.
 * Problems (nothing found, unreadable) go to diags. Returns 0 or -errno. */
int cap_manifest_discover(const char *path, struct cap_strv *files, struct cap_diags *diags);

/* Expands a capabilities directory (what --caps names) into manifest files
 * exactly as the gateway's registry loads it: a Covenant home's
 * agents/<id>/agent.toml, then each subdirectory's capability in name order
 * (hidden entries skipped). Problems go to diags; returns 0, or -errno when
 * dir cannot be read. */
int cap_caps_discover(const char *dir, struct cap_strv *files, struct cap_diags *diags);

/* Whether path is a directory holding a manifest file itself (one
 * capability, not a directory of them). */
bool cap_is_capability_dir(const char *path);

/* Reads, parses, checks and lowers one manifest file. Returns 0 with *ret set
 * when the manifest is valid (warnings may be in diags); -EINVAL when it is
 * not (errors in diags); another -errno for I/O failures (also in diags). */
int cap_manifest_load(const char *path, struct cap_spec **ret, struct cap_diags *diags);

/* A nono profile by file path (JSONC) or by name, looked up as nono does:
 * $XDG_CONFIG_HOME/nono/profiles/NAME.json[c], then nono's built-in
 * profiles. Results as cap_manifest_load. */
int cap_manifest_load_profile(const char *name, struct cap_spec **ret, struct cap_diags *diags);

/* The same from memory. `name` is the file name shown in diagnostics and
 * used for detection; format is a enum cap_format or CAP_HINT_AUTO;
 * package_dir is where the capability lives (NULL: the name's directory). */
int cap_manifest_load_buffer(const char *data, size_t len, const char *name, int format,
                             const char *package_dir, struct cap_spec **ret,
                             struct cap_diags *diags);

/* Writes the resolved capability manifest as JSON (pretty when asked). */
char *cap_spec_to_json(const struct cap_spec *spec, bool pretty);

#endif
