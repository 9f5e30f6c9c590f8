/* The sandbox's mount tree as the host sees it, resolved in the parent with
 * the caller's rights before the clone (mount_plan.c), then built in the
 * child from it (mount.c). The parent owns the plan; the child reads its
 * copy. Internal to src/sandbox. */
#ifndef CAPSULE_SANDBOX_MOUNT_PLAN_H
#define CAPSULE_SANDBOX_MOUNT_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "manifest/model.h"
#include "sandbox/sandbox.h"

enum plan_kind { PLAN_MISSING, PLAN_DIR, PLAN_FILE, PLAN_LINK };

struct plan_grant {
  char *host; /* the path as granted (~ expanded) */
  char *at;   /* where it appears inside: the grant's `at`, else host */
  char *real; /* its real path on the host (directories and files) */
  char *link; /* PLAN_LINK: the link's target, recreated inside */
  enum plan_kind kind;
  bool read_only;
  bool volume; /* the gateway's own directory below its state (cap_fs_grant.volume) */
  int tree;    /* as root: the tree opened by the parent (open_tree), else -1 */
};

/* Something hidden by an empty mount: `at` is a path inside the sandbox
 * (resolved there, in its root), `why` and `source` say what asked. */
struct sandbox_mask {
  char *at;
  const char *why;
  char *source;
  bool deny; /* a deny entry: Landlock holds it too (landlock.c) */
};

struct sandbox_mount_plan {
  struct plan_grant *grants; /* one per spec->grants[i], same order */
  size_t n_grants;
  struct sandbox_mask *masks;
  size_t n_masks;
  /* sandbox_options.rootfs: its top-level entries, host = "/NAME" inside,
   * real = the entry on the host (mount.c binds them read-only) */
  struct plan_grant *image;
  size_t n_image;
  bool image_root; /* the root is an image's (even an empty one) */
};

/* "~/x" -> "$HOME/x"; other paths as they are (allocated). */
char *sandbox_expand_path(const char *path);

/* Opens `host` (not following a final symlink) and, when want_tree, a
 * detached copy of its tree (open_tree, recursive): returns the tree fd,
 * -ENOTSUP when !want_tree, or -errno. The real path is read from the
 * opened handle: -ESTALE when it is not expect_real (the grant moved since
 * the plan mapped masks to it); stored in *ret_real (allocated) when
 * asked. */
int sandbox_open_grant_tree(const char *host, const char *expect_real, char **ret_real,
                            bool want_tree);

/* Resolves the grants and the masks. Returns 0, or -errno with err set: a
 * grant at or below a state directory (-EPERM), a grant or deny entry that
 * cannot be resolved. */
int sandbox_mount_plan_new(const struct cap_spec *spec, const struct sandbox_options *opt,
                           struct sandbox_mount_plan **ret, struct cap_error *err);
/* Closes the opened trees (the parent, once the child has its copies). */
void sandbox_mount_plan_close_trees(struct sandbox_mount_plan *plan);
void sandbox_mount_plan_free(struct sandbox_mount_plan *plan);
/* Appends to buf (a sandbox_result.unenforced) what the plan cannot bound:
 * a disk limit over writable grants, which no quota backs here. */
void sandbox_mount_note_unenforced(const struct cap_spec *spec,
                                   const struct sandbox_mount_plan *plan, char *buf, size_t size);

#endif
