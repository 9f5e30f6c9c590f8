/* The Selu runtime of the gateway: a call becomes an Invoke on the
 * capability's warm instance (gateway/instance.h), over a connection made
 * inside its network namespace; `tool_source: dynamic` capabilities have
 * their tools discovered through the discovery tool and cached in the
 * state directory. */
#ifndef CAPSULE_GATEWAY_SELU_H
#define CAPSULE_GATEWAY_SELU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/call.h"
#include "manifest/model.h"

/* gRPC channels to warm instances kept between calls (selu_channels.c),
 * for a long-lived caller: gw_call.channels. Thread-safe. take: the
 * channel kept for an instance key, referenced, or NULL (none, or its
 * connection failed: then forgotten); get: its channel and the keeper's
 * instance it reaches; keep: ch (owned from now) as the key's channel for
 * that instance, replacing an older one (or the least recently used),
 * returned referenced; forget: it is broken (the reference stays the
 * caller's); give: the caller's reference back. */
struct gw_channels;
struct gw_channel;
struct selu_channel;
struct gw_channels *gw_channels_new(void);
void gw_channels_free(struct gw_channels *c);
struct gw_channel *gw_channels_take(struct gw_channels *c, const char *key);
struct selu_channel *gw_channel_get(const struct gw_channel *e, uint64_t *instance);
struct gw_channel *gw_channels_keep(struct gw_channels *c, const char *key, uint64_t instance,
                                    struct selu_channel *ch);
void gw_channels_forget(struct gw_channels *c, struct gw_channel *e);
void gw_channels_give(struct gw_channels *c, struct gw_channel *e);
/* Connections to the keepers kept between leases (gw_lease_release_keep),
 * by instance key: keep_control takes fd (-1: nothing), the oldest closed
 * past the table's room; take_control returns one for key still open and
 * silent (owned by the caller), or -1. With ahead, fd's next lease was
 * asked (gw_lease_release_ahead): take_control returns it as it is, with
 * *ahead set, and a thread of the table's closes it (the lease with it)
 * when no call took it within GW_AHEAD_LINGER_MS. */
#define GW_AHEAD_LINGER_MS 20
void gw_channels_keep_control(struct gw_channels *c, const char *key, int fd, bool ahead);
int gw_channels_take_control(struct gw_channels *c, const char *key, bool *ahead);
/* A table whose owner calls gw_channels_flush once each call's answer
 * went (serve --grpc): a call's lease that its keeper would end and
 * renew ahead in one message is parked instead (park_control: true, the
 * lease's connection taken; false: not parked, the lease untouched), so
 * that message and the keeper's wake-up are not on the call's path.
 * flush sends it for every lease parked; a call that finds its key's
 * lease still parked sends it itself; one no flush came for within
 * GW_AHEAD_LINGER_MS is closed, which ends it. */
struct gw_lease;
struct gw_channels *gw_channels_new_deferred(void);
bool gw_channels_park_control(struct gw_channels *c, const char *key, struct gw_lease *lease);
void gw_channels_flush(struct gw_channels *c);

/* Tools a dynamic capability reported; they own their schemas (doc). */
struct gw_tools {
  struct cap_doc *doc;
  struct cap_tool *tools;
  size_t n;
};
void gw_tools_free(struct gw_tools *t);
const struct cap_tool *gw_tools_find(const struct gw_tools *t, const char *name);

/* Reads a discovery answer (untrusted: the capability's own): a JSON array
 * of tools or {"tools": [...]}, each {name, description?, input_schema
 * (or inputSchema), recommended_policy?, terminal_on_success?}; every schema
 * compiled. what names it in errors. */
int gw_tools_parse(const char *text, size_t len, const char *what, struct gw_tools *out,
                   struct cap_error *err);
/* An MCP server's tools: MCP has no recommended_policy nor
 * terminal_on_success, and a third-party server does not choose its own
 * policy: every tool back to `block` (default) until the operator allows
 * it, none terminal. */
void gw_tools_drop_server_policy(struct gw_tools *t);

/* The cached tools of a dynamic capability (none when never discovered). */
/* Keeps a discovery answer (text) as the capability's cached tools in
 * cache_dir (NULL: nowhere); best effort. */
void gw_tools_cache_store(const char *cache_dir, const struct cap_spec *spec, const char *text);
int gw_selu_cached_tools(const char *cache_dir, const struct cap_spec *spec, struct gw_tools *out,
                         struct cap_error *err);
/* The same, parsed and compiled once per version of the cache file
 * (its inode, size and times: gw_tools_cache_store renames a new one in)
 * and shared between calls and threads: NULL when there is none (or it
 * does not parse), else tools valid until gw_tools_unhold(*hold).
 * gateway/tools_cache.c. */
const struct gw_tools *gw_tools_cached_hold(const char *cache_dir, const struct cap_spec *spec,
                                            void **hold);
void gw_tools_unhold(void *hold);
/* Asks the capability's discovery tool (starting an instance with env) and
 * caches the answer. */
/* An MCP server capability's tools (tools/list), cached like the Selu
 * servers' (gateway/mcp.c). */
enum gw_outcome gw_mcp_discover(const struct gw_call *call, const struct cap_spec *spec,
                                char *const *env, size_t n_env, struct gw_tools *out,
                                struct cap_error *err);
enum gw_outcome gw_selu_discover(const struct gw_call *call, const struct cap_spec *spec,
                                 char *const *env, size_t n_env, struct gw_tools *out,
                                 struct cap_error *err);

/* One Invoke; *result is the tool's JSON result. */
/* The stored image a capability names (its `image:`): -ENOENT with the
 * outcome "host" and a message naming `capsule image pull/import` when
 * the store lacks it. */
struct image_info;
int gw_selu_image_resolve(const char *image_dir, const struct cap_spec *spec,
                          struct image_info *info, struct cap_error *err);

/* An image's environment as Selu's runner gives it: the image's Env (with
 * a default PATH when it names none), SELU_CAPABILITY_ID; appended to env. */
void gw_selu_image_env(const struct cap_spec *spec, const struct image_info *info,
                       struct cap_strv *env);
/* Selu's runner: user 1000:1000 whatever the image says */
#define SELU_IMAGE_ID 1000
/* Makes a copy of a spec (shallow; its grants array is replaced and the
 * caller's to free) the spec an image runs as: the host's system
 * directories and the package directory not granted, a private noexec
 * /tmp, Selu's 256 open files (docs/images.md). */
void gw_selu_image_spec(struct cap_spec *run_spec);

enum gw_outcome gw_selu_invoke(const struct gw_call *call, const struct cap_spec *spec,
                               const char *tool, const char *args, char *const *env, size_t n_env,
                               char **result, struct cap_error *err);

/* A warm server's name (Selu instances, MCP keepers): a keyed hash of the
 * capability, what it runs now (manifest, package tree, grants: the spec's
 * digest, without the package tree when tree is false: its keeper then
 * watches the tree; an image's digest; a server program outside the
 * package), the credentials it starts with, the user and session; any
 * change starts a new server and the old one idles out. 32 hex digits. */
int gw_instance_key(const struct gw_call *call, const struct cap_spec *spec,
                    const char *image_digest, bool tree, char *const *env, size_t n_env,
                    char out[33], struct cap_error *err);

/* A warm third-party MCP server for this call (gateway/mcp_keeper.c): a
 * connection to its keeper, started when none runs; the server behind it
 * is initialized, and the connection carries one exchange (requests with
 * the caller's ids, the server's messages, the caller's answers). -errno
 * with err set when there is none to be had (the caller may run the
 * server for this call alone). */
int gw_mcp_keeper_connect(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                          size_t n_env, struct cap_error *err);
/* As gw_mcp_keeper_connect, a kept connection first when kept is true
 * (gateway/mcp_keeper_pool.c); path gets the keeper's socket, for
 * gw_mcp_keeper_keep once the call ended with its answer, and *ack the
 * kept connection's take pipe (-1: a new connection; runtime/mcp_client.h),
 * the caller's to close. */
#define GW_MCP_KEEPER_PATH_MAX 108
int gw_mcp_keeper_open(const struct gw_call *call, const struct cap_spec *spec, char *const *env,
                       size_t n_env, bool kept, char path[GW_MCP_KEEPER_PATH_MAX], int *ack,
                       struct cap_error *err);
/* fd (gw_mcp_keeper_open's, its call answered, nothing else in flight on
 * it) and its take pipe ack (or -1) kept for the next call to that
 * keeper, or closed. */
void gw_mcp_keeper_keep(const char *path, int fd, int ack);
/* Makes fd (gw_mcp_keeper_connect's, its exchange done) a watcher's: what
 * the server says of its resources and lists between calls comes on it
 * (gateway/mcp_keeper_route.c). false: the keeper is gone. */
bool gw_mcp_keeper_watch(int fd);

#endif
