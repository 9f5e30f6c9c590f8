/* The four format front ends. Each checks a parsed document against its
 * published specification (docs/manifests.md) and lowers it into the canonical spec, reporting
 * every problem through the context. The caller (load.c) has already set
 * spec->source_path and spec->package_dir and added the system and package
 * grants; a lowering adds what its format declares and fills every default. */
#ifndef CAPSULE_MANIFEST_FORMATS_H
#define CAPSULE_MANIFEST_FORMATS_H

#include "core/node.h"
#include "manifest/fields.h"
#include "manifest/model.h"

void cap_selu_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec);
void cap_covenant_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec);
void cap_talos_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec);
void cap_nono_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec);
/* nono's shared readers: obj[key] as HTTP rules ({method, path}: a token
 * or "*", a path from '/'), and as TCP ports 1..65535 */
void cap_nono_rules(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                    struct cap_http_rule **rules, size_t *n);
void cap_nono_ports(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                    struct cap_ports *out);
/* a nono profile: extends, groups, legacy keys resolved (nono_profile*.c) */
void cap_nono_profile_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec);
/* nono's profile names: letters, digits, inner hyphens */
bool cap_nono_profile_name_valid(const char *name);
/* $XDG_CONFIG_HOME/nono/profiles/NAME.jsonc or .json, where nono looks
 * first: 1 and *ret_path (the caller frees it) when found; 0 when neither
 * exists or NAME is a built-in's (the built-in wins; a warning in diags
 * names the file it ignored); -EPERM (an error in diags) when the file or
 * its directories belong to another user or others can write them. */
int cap_nono_user_profile(const char *name, struct cap_diags *diags, char **ret_path);
/* Whether NAME is one of nono's built-in profiles; *ret_names (when not
 * NULL) gets them all, comma-separated, for a message (the caller frees). */
bool cap_nono_builtin_profile(const char *name, char **ret_names);

/* The optional `x-capsule` object (TOML: [x-capsule] table) every format may
 * carry; call with the member's value (NULL-safe). Known keys: command
 * (array of strings), workspace (string path), notes (string). */
void cap_xcapsule_lower(struct mf_ctx *c, const struct cap_node *x, struct cap_spec *spec);

/* A tool's parameter schema, the member `key` of the tool object: must be a
 * JSON Schema object (tools take objects), compiled with the draft 2020-12
 * validator (an invalid schema is reported at its own file:line:col).
 * Adopts it into the spec and sets tool->input_schema and tool->validator;
 * returns false when unusable. */
bool cap_tool_schema(struct mf_ctx *c, const struct cap_node *tool_node, const char *key,
                     struct cap_spec *spec, struct cap_tool *tool);

#endif
