/* nono profiles (the human-written format nono compiles to its capability
 * manifest), shared by the two files that handle them:
 *   nono_profile.c        reads one profile document (legacy aliases
 *                         drained, every problem reported at file:line:col);
 *   nono_profile_extends.c resolves `extends` (siblings, the user's nono
 *                         profile directory, nono's built-in profiles) and
 *                         merges as nono's merge_profiles() does;
 *   nono_profile_lower.c  nono's embedded policy (groups, network profiles),
 *                         path variables, and the resolved profile lowered
 *                         onto a cap_spec as nono's resolve_to_manifest()
 *                         (`nono profile show NAME --format manifest`) does.
 * Nothing here outlives one load; a np_profile owns its strings. */
#ifndef CAPSULE_MANIFEST_NONO_PROFILE_H
#define CAPSULE_MANIFEST_NONO_PROFILE_H

#include "core/diag.h"
#include "core/node.h"
#include "manifest/fields.h"
#include "manifest/model.h"

/* the filesystem lists of a profile, in nono's order */
enum np_fs {
  NP_FS_ALLOW,
  NP_FS_READ,
  NP_FS_WRITE,
  NP_FS_ALLOW_FILE,
  NP_FS_READ_FILE,
  NP_FS_WRITE_FILE,
  NP_FS_DENY,
  NP_FS_BYPASS,
  NP_FS_COUNT,
};
extern const char *const np_fs_keys[NP_FS_COUNT];

enum np_workdir { NP_WORKDIR_NONE, NP_WORKDIR_READ, NP_WORKDIR_WRITE, NP_WORKDIR_READWRITE };

/* a field a child may leave unset (inherit), set, or clear with null */
enum np_inherit { NP_INHERIT, NP_SET, NP_CLEARED };

struct np_domain {
  char *domain;
  struct cap_http_rule *rules;
  size_t n_rules;
};

struct np_credential {
  char *name, *upstream, *key, *header, *format, *path_pattern, *path_replacement, *query, *env_var;
  enum cap_inject_mode mode;
  struct cap_http_rule *rules;
  size_t n_rules;
};

struct np_profile {
  char *name; /* meta.name, or NULL */
  struct cap_strv extends;
  const char *extends_file; /* where `extends` was written, for errors */
  uint32_t extends_line, extends_col;
  int signal_mode, process_info_mode, ipc_mode; /* -1: unset */
  int capability_elevation;                     /* -1: unset, else 0 or 1 */
  struct cap_strv include, exclude, cmd_allow, cmd_deny;
  struct cap_strv fs[NP_FS_COUNT];
  bool block;
  enum np_inherit netprof_set;
  char *network_profile;
  struct np_domain *domains;
  size_t n_domains;
  struct cap_ports open_port, listen_port, connect_port;
  enum np_inherit creds_set;
  struct cap_strv credentials;
  struct np_credential *custom;
  size_t n_custom;
  enum np_workdir workdir;
  struct cap_strv rb_patterns, rb_globs;
};

void np_profile_init(struct np_profile *p);
void np_credential_free(struct np_credential *k);
void np_profile_free(struct np_profile *p);

/* nono's embedded policy.json / network-policy.json, parsed once per load. */
struct np_policy {
  struct cap_doc *doc, *net_doc;
  const struct cap_node *groups, *profiles;         /* policy.json */
  const struct cap_node *net_groups, *net_profiles; /* network-policy.json */
};
int np_policy_open(struct np_policy *pol, struct cap_diags *diags);
void np_policy_close(struct np_policy *pol);
/* groups[name] (NULL: unknown) and whether nono marks it required */
const struct cap_node *np_policy_group(const struct np_policy *pol, const char *name);
bool np_group_required(const struct cap_node *group);

/* Reads one profile document into p (which np_profile_init prepared). */
void np_read(struct mf_ctx *c, const struct np_policy *pol, const struct cap_node *root,
             struct np_profile *p);

/* Resolves p's `extends` chain in place (p becomes the merged profile);
 * dir is the directory of the file p came from (siblings), self that file.
 * Problems go to c's diagnostics. */
void np_resolve_extends(struct mf_ctx *c, const struct np_policy *pol, struct np_profile *p,
                        const char *dir, const char *self);

/* The finished profile onto spec (nono's resolve_to_manifest). */
void np_lower(struct mf_ctx *c, const struct np_policy *pol, struct np_profile *p,
              const struct cap_node *root, struct cap_spec *spec);

#endif
