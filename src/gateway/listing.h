/* What `capsule list` shows, as JSON: each capability of a registry, its
 * tools with their effective policy for a user and where it comes from,
 * its readiness and the operator's grants. Written here once for the CLI
 * alone and for serve's capsule/list (the CLI through a running serve,
 * which answers from its own registry, state and remembered readiness);
 * the CLI prints it (docs/cli.md, `list`). Not thread-safe per state. */
#ifndef CAPSULE_GATEWAY_LISTING_H
#define CAPSULE_GATEWAY_LISTING_H

#include <stddef.h>

#include "core/json.h"
#include "gateway/ready_memo.h"
#include "gateway/registry.h"
#include "gateway/state.h"

struct gw_list_env {
  struct gw_state *st; /* NULL: the manifests' own policies, no credentials, no grants */
  const char *user;    /* whose policies and credentials */
  const char *cache, *images;
  const char *const *hidden; /* the state's private paths, masked in the dry run */
  size_t n_hidden;
  struct gw_ready_memo *memo; /* the registry's remembered readiness, or NULL */
};

/* The array of capabilities (`list --json`'s) into w */
void gw_list_write(const struct gw_registry *reg, const struct gw_list_env *env, struct cap_jw *w);

#endif
