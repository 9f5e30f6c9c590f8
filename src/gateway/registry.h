/* The registry: every capability under a --caps directory, in any of the
 * four formats (each subdirectory one capability; a Covenant home's
 * agents/<id>/agent.toml layout too), loaded in a deterministic order
 * (sorted by id). A manifest that does not load is reported and left out;
 * an id found in two places is an error naming both, and neither is used. */
#ifndef CAPSULE_GATEWAY_REGISTRY_H
#define CAPSULE_GATEWAY_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/diag.h"
#include "core/error.h"
#include "manifest/model.h"

struct gw_registry {
  struct cap_spec **caps; /* sorted by id */
  size_t n;
  char *dir;
};

/* Returns 0 (problems, if any, in diags: the capabilities that loaded are
 * usable), or -errno when dir cannot be read at all. */
int gw_registry_load(const char *dir, struct gw_registry *reg, struct cap_diags *diags);
void gw_registry_free(struct gw_registry *reg);

const struct cap_spec *gw_registry_find(const struct gw_registry *reg, const char *id);
const struct cap_tool *gw_spec_tool(const struct cap_spec *spec, const char *name);

/* A digest of what a capability runs: its manifest file, its package tree
 * (each entry's relative path, type, mode, owner, size, inode, mtime and
 * ctime, and symlink targets; not the contents, so a tree costs one stat
 * per entry) and its resolved grants. Editing, adding, removing or
 * touching any file under the package directory, or changing the
 * manifest, changes it. At most GW_DIGEST_MAX_ENTRIES entries and 64
 * levels are walked; a tree past either gets a random digest each time
 * (fail closed: nothing can be bound to what was not seen). */
#define GW_DIGEST_MAX_ENTRIES 100000
int gw_spec_digest(const struct cap_spec *spec, unsigned char out[32], struct cap_error *err);
/* The same, or without the package tree (tree false: the manifest, the
 * grants and the package's path only; for a warm server whose keeper
 * watches the tree itself, gateway/mcp_keeper.c). */
int gw_spec_digest_opts(const struct cap_spec *spec, bool tree, unsigned char out[32],
                        struct cap_error *err);
/* A digest of what a capability's sandbox may reach beyond what its
 * manifest's text says: its resolved path grants and denies and its
 * network (mode, hosts, ports), which the operator's grants change
 * (gateway/grants.h) without touching the manifest or the package. Part
 * of a warm server's name (gw_instance_key, and the names a process
 * remembers, gateway/mcp_keeper.c), so a grant revoked, or a host
 * removed, is never served by a server started with it. */
void gw_spec_rights_digest(const struct cap_spec *spec, unsigned char out[32]);
/* What a warm server's keeper watches instead of the tree
 * (gateway/mcp_keeper.c, gateway/instance_keeper.c): an inotify
 * descriptor (non-blocking) on every directory and regular file of the
 * package dir (a file's own watch sees a hard link made to it later, and
 * writes through that link), set up before the server reads any of it;
 * readable once anything in it changed (an overflow too). A watch follows inodes, not the path the
 * capability names: *at holds the package dir's identity when the watch began, and gw_package_moved
 * says whether the path names another directory since (a parent renamed and replaced, a symlinked
 * parent switched: no event on the watched tree). -1 when that cannot be had (no inotify, more than
 * GW_WATCH_MAX_DIRS directories or GW_WATCH_MAX_FILES files, deeper than
 * 64, an unreadable one, no watch left for this user, a file
 * with another hard link, whose edits through that link raise no event
 * here): then the keeper compares gw_spec_digest instead. */
#define GW_WATCH_MAX_DIRS 8192
#define GW_WATCH_MAX_FILES 8192
struct gw_package_id {
  dev_t dev;
  ino_t ino;
};
int gw_package_watch(const char *dir, struct gw_package_id *at);
bool gw_package_moved(const char *dir, const struct gw_package_id *at);

#endif
