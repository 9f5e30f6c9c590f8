#include "gateway/grants.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "gateway/plugin_state.h"
#include "gateway/registry.h"

static bool is_file(const char *path)
{
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

struct collect {
  struct gw_granted *g;
  struct cap_strv hosts;
  struct cap_strv paths;
  enum cap_access access[64];
};

static void collect_one(void *arg, const char *cap, enum gw_grant_kind kind, const char *value,
                        const char *created)
{
  struct collect *c = arg;
  if (kind == GW_GRANT_HOST) {
    cap_strv_push(&c->hosts, value);
    return;
  }
  if (c->paths.len >= sizeof c->access / sizeof *c->access)
    return; /* gw_grant_add keeps fewer than this */
  c->access[c->paths.len] = kind == GW_GRANT_READ    ? CAP_ACCESS_READ
                            : kind == GW_GRANT_WRITE ? CAP_ACCESS_WRITE
                                                     : CAP_ACCESS_READWRITE;
  cap_strv_push(&c->paths, value);
}

static void add_paths(struct gw_granted *g, const struct cap_spec *spec, struct collect *c)
{
  g->grants = cap_xcalloc(spec->n_grants + c->paths.len + 1, sizeof *g->grants);
  if (spec->n_grants)
    memcpy(g->grants, spec->grants, spec->n_grants * sizeof *g->grants);
  for (size_t i = 0; i < c->paths.len; i++) {
    cap_strv_push(&g->owned, c->paths.v[i]);
    g->grants[spec->n_grants + i] = (struct cap_fs_grant){
        .path = g->owned.v[g->owned.len - 1],
        .access = c->access[i],
        .type = is_file(c->paths.v[i]) ? CAP_FS_FILE : CAP_FS_DIRECTORY,
        .origin = CAP_ORIGIN_OPERATOR,
    };
  }
  g->spec.grants = g->grants;
  g->spec.n_grants = spec->n_grants + c->paths.len;
}

static void add_hosts(struct gw_granted *g, const struct cap_spec *spec, struct collect *c)
{
  if (!c->hosts.len || spec->network.mode == CAP_NET_UNRESTRICTED)
    return;
  size_t n = spec->network.mode == CAP_NET_PROXY ? spec->network.n_endpoints : 0;
  g->endpoints = cap_xcalloc(n + c->hosts.len + 1, sizeof *g->endpoints);
  if (n)
    memcpy(g->endpoints, spec->network.endpoints, n * sizeof *g->endpoints);
  for (size_t i = 0; i < c->hosts.len; i++) {
    cap_strv_push(&g->owned, c->hosts.v[i]);
    g->endpoints[n + i] = (struct cap_endpoint){.host = g->owned.v[g->owned.len - 1]};
  }
  if (spec->network.mode == CAP_NET_BLOCKED) {
    g->spec.network.allow_domains = (struct cap_strv){0};
    g->spec.network.connect = (struct cap_ports){0};
  }
  g->spec.network.mode = CAP_NET_PROXY;
  g->spec.network.endpoints = g->endpoints;
  g->spec.network.n_endpoints = n + c->hosts.len;
}

int gw_spec_with_grants(struct gw_state *st, const struct cap_spec *spec, struct gw_granted *out,
                        struct cap_error *err)
{
  *out = (struct gw_granted){.spec = *spec};
  struct collect c = {.g = out};
  int r = st ? gw_grant_list(st, spec->id, collect_one, &c, err) : 0;
  if (r == 0 && c.paths.len)
    add_paths(out, spec, &c);
  if (r == 0)
    add_hosts(out, spec, &c);
  out->n_added = r == 0 ? c.paths.len + c.hosts.len : 0;
  cap_strv_free(&c.hosts);
  cap_strv_free(&c.paths);
  return r;
}

void gw_granted_free(struct gw_granted *g)
{
  free(g->grants);
  free(g->endpoints);
  cap_strv_free(&g->owned);
  *g = (struct gw_granted){0};
}
