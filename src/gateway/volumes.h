/* Selu's volumes as capsule keeps them: a session's workspace
 * (`filesystem: workspace`, seen at /workspace) per user and session, and
 * a capability's cache (`cache.enabled`, seen at /cache) per user and
 * capability, kept as directories under the state directory:
 *
 *   STATE/volumes/workspaces/USER/SESSION/
 *   STATE/volumes/caches/USER/CAPABILITY/
 *
 * each 0700 and the caller's. USER and SESSION are encoded
 * (gw_volume_encode) so any string is one path component. A sandbox is
 * granted exactly its own directory (struct cap_fs_grant.volume): never
 * another user's, session's or capability's, nor the state around them.
 * Each is bounded by the capability's limits.workspace_bytes: as root a
 * file system of that size of its own (gw_volume_quota), and checked
 * before each call (gw_volume_usage) either way; see docs/gateway.md.
 * Nothing here prints; not thread-safe beyond what the file system is. */
#ifndef CAPSULE_GATEWAY_VOLUMES_H
#define CAPSULE_GATEWAY_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "manifest/model.h"

enum gw_volume_kind { GW_VOLUME_WORKSPACE, GW_VOLUME_CACHE };

/* "workspace", "cache". */
const char *gw_volume_kind_name(enum gw_volume_kind k);

/* s as one path component: [A-Za-z0-9_-] and inner dots kept, any other
 * byte as %XX ("" is "%"). Allocated. gw_volume_decode reverses it (NULL
 * for a name this did not make). */
char *gw_volume_encode(const char *s);
char *gw_volume_decode(const char *name);

/* The grants of spec with its placeholders (CAP_SESSION_WORKSPACE,
 * CAP_CAPABILITY_CACHE) replaced by the directories of user and session
 * under volumes_dir, made when missing; *dirs (may be NULL) gets their
 * paths, the workspace's first. With volumes_dir NULL the placeholders are
 * dropped (a dry run before any session). *grants is a new array of
 * spec->n_grants or fewer entries (*n), freed with gw_volumes_free. A
 * workspace with no session is refused (-EINVAL, naming --session).
 * *unbounded (may be NULL) is set when spec has a workspace bound that
 * some volume holds as a check before each call only, not as a quota
 * (unprivileged, or a volume made before quotas): for a warning. */
int gw_volumes_bind(const struct cap_spec *spec, const char *volumes_dir, const char *user,
                    const char *session, struct cap_fs_grant **grants, size_t *n,
                    struct cap_strv *dirs, bool *unbounded, struct cap_error *err);
void gw_volumes_free(struct cap_fs_grant *grants, size_t n);

/* The bytes the files below dir take (allocated blocks, each inode once),
 * not following links nor crossing into other file systems, in *bytes.
 * -errno when some entry could not be looked at or walked (a directory
 * made unreadable by its owner, the tool): *bytes is then only what was
 * seen, and the volume's size is not known. */
int gw_volume_usage(const char *dir, uint64_t *bytes);

/* As root, with a bound: dir made the mount point of a file system of
 * its own of exactly `bytes` (gateway/volume_fs.c: an ext4 image under
 * STATE/volumes/images, loop-mounted), so the bound is a quota; *enforced
 * says whether it is (false unprivileged, or for a volume that holds
 * files from before, which keeps the check). 0, or -errno with err set
 * (no loop device, no mkfs.ext4). gw_volume_quota_release unmounts dir
 * and removes the image. */
int gw_volume_quota(const char *dir, const char *image, uint64_t bytes, bool *enforced,
                    struct cap_error *err);
int gw_volume_quota_release(const char *dir, const char *image, struct cap_error *err);

struct gw_volume_info {
  enum gw_volume_kind kind;
  char *user;
  char *name; /* the session (workspace) or the capability (cache) */
  char *path;
  uint64_t bytes;
  int64_t modified_ms; /* the directory's mtime, realtime ms */
};

/* Every volume under volumes_dir, sorted by kind, user and name; a missing
 * volumes_dir has none. Free with gw_volume_list_free. */
int gw_volume_list(const char *volumes_dir, struct gw_volume_info **out, size_t *n,
                   struct cap_error *err);
void gw_volume_list_free(struct gw_volume_info *v, size_t n);

/* Removes one volume and everything in it (never following a link out of
 * it); -ENOENT when there is none. */
int gw_volume_remove(const char *volumes_dir, enum gw_volume_kind kind, const char *user,
                     const char *name, struct cap_error *err);

#endif
