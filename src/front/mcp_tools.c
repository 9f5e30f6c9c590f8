/* MCP tool names and tools/list (front/mcp.h). Every ready tool of every
 * capability gets a name hosts accept, [A-Za-z0-9_-]{1,64}:
 * CAPABILITY__TOOL with other characters replaced by '_', or the tool's
 * own name when one capability is served. Names that would collide, or
 * that are too long, get a short hash of the capability and tool as a
 * suffix. A call finds its tool in this table, never by splitting the
 * name at "__". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"
#include "gateway/ready.h"

#define NAME_MAX_LEN 64

static void sanitize(struct cap_buf *b, const char *s)
{
  for (; *s; s++) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    cap_buf_putc(b, ok ? c : '_');
  }
}

static char *base_name(const char *only, const char *cap, const char *tool)
{
  struct cap_buf b = {0};
  if (!only) {
    sanitize(&b, cap);
    cap_buf_puts(&b, "__");
  }
  sanitize(&b, tool);
  if (!b.data)
    cap_buf_puts(&b, "_");
  return cap_buf_steal(&b);
}

/* name cut to leave room for "_" + hexlen hex digits of the pair's hash */
static char *suffixed(const char *name, const char *cap, const char *tool, size_t hexlen)
{
  struct cap_buf pair = {0};
  cap_buf_puts(&pair, cap);
  cap_buf_putc(&pair, '\0');
  cap_buf_puts(&pair, tool);
  char hex[65];
  gw_sha256_hex(pair.data, pair.len, hex);
  cap_buf_free(&pair);
  size_t keep = strlen(name);
  if (keep > NAME_MAX_LEN - 1 - hexlen)
    keep = NAME_MAX_LEN - 1 - hexlen;
  return cap_xasprintf("%.*s_%.*s", (int)keep, name, (int)hexlen, hex);
}

static size_t count_name(const struct mcp_table *t, const char *name)
{
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++)
    k += strcmp(t->v[i].name, name) == 0;
  return k;
}

/* Every colliding or overlong name gets a suffix; a longer one while any
 * two still collide. */
static void make_unique(struct mcp_table *t)
{
  bool *clash = cap_xcalloc(t->n + 1, sizeof *clash);
  for (size_t i = 0; i < t->n; i++)
    clash[i] = strlen(t->v[i].name) > NAME_MAX_LEN || count_name(t, t->v[i].name) > 1;
  for (size_t hexlen = 6; hexlen <= 24; hexlen += 6) {
    char **names = cap_xcalloc(t->n + 1, sizeof *names);
    for (size_t i = 0; i < t->n; i++)
      names[i] = clash[i] ? suffixed(t->v[i].name, t->v[i].spec->id, t->v[i].tool->name, hexlen)
                          : cap_xstrdup(t->v[i].name);
    bool unique = true;
    for (size_t i = 0; i < t->n && unique; i++)
      for (size_t j = i + 1; j < t->n && unique; j++)
        unique = strcmp(names[i], names[j]) != 0;
    if (unique || hexlen == 24) {
      for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].name);
        t->v[i].name = names[i];
      }
      free(names);
      break;
    }
    for (size_t i = 0; i < t->n; i++)
      free(names[i]);
    free(names);
  }
  free(clash);
}

static void add_tools(struct mcp_session *s, const struct cap_spec *spec,
                      const struct cap_tool *tools, size_t n)
{
  struct mcp_table *t = &s->table;
  t->v = cap_xrealloc(t->v, (t->n + n + 1) * sizeof *t->v);
  for (size_t i = 0; i < n; i++)
    t->v[t->n++] = (struct mcp_tool){
        .name = base_name(s->cfg->only, spec->id, tools[i].name), .spec = spec, .tool = &tools[i]};
}

static bool ready(const struct mcp_session *s, const struct cap_spec *spec, size_t i)
{
  if (spec->runtime.kind == CAP_RUNTIME_EXEC)
    return false;
  if (s->cfg->skip_readiness)
    return true;
  struct cap_error why = {0};
  enum gw_outcome o = gw_ready_memo_get(s->cfg->ready_memo, i, spec, s->cfg->base.image_dir,
                                        s->cfg->base.hidden, s->cfg->base.n_hidden, &why);
  cap_error_clear(&why);
  return o == GW_OUTCOME_OK;
}

void mcp_table_build(struct mcp_session *s)
{
  struct mcp_table *t = &s->table;
  if (t->built)
    return;
  t->built = true;
  const struct gw_registry *reg = s->cfg->reg;
  t->dynamic = cap_xcalloc(reg->n + 1, sizeof *t->dynamic);
  for (size_t i = 0; i < reg->n; i++) {
    const struct cap_spec *spec = reg->caps[i];
    if ((s->cfg->only && strcmp(spec->id, s->cfg->only) != 0) || !ready(s, spec, i))
      continue;
    if (spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC) {
      struct gw_tools *d = &t->dynamic[t->n_dynamic++];
      struct cap_error ignored = {0};
      gw_selu_cached_tools(s->cfg->base.cache_dir, spec, d, &ignored);
      cap_error_clear(&ignored);
      add_tools(s, spec, d->tools, d->n);
    } else {
      add_tools(s, spec, spec->tools, spec->n_tools);
    }
  }
  make_unique(t);
}

void mcp_table_free(struct mcp_table *t)
{
  for (size_t i = 0; i < t->n; i++)
    free(t->v[i].name);
  free(t->v);
  for (size_t i = 0; i < t->n_dynamic; i++)
    gw_tools_free(&t->dynamic[i]);
  free(t->dynamic);
  *t = (struct mcp_table){0};
}

const struct mcp_tool *mcp_table_find(const struct mcp_table *t, const char *name)
{
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->v[i].name, name) == 0)
      return &t->v[i];
  return NULL;
}

/* ---- tools/list ---- */

static bool blocked(const struct mcp_session *s, const struct mcp_tool *m)
{
  enum cap_policy policy = m->tool->policy;
  const char *source;
  struct cap_error err = {0};
  if (s->cfg->st && gw_effective_policy(s->cfg->st, m->spec->id, m->tool, s->cfg->base.user,
                                        &policy, &source, &err) < 0) {
    cap_error_clear(&err);
    return true; /* a policy that cannot be read lists nothing */
  }
  return policy == CAP_POLICY_BLOCK;
}

/* No network and nothing writable but its private tmp: it cannot change
 * the world outside its sandbox. */
static bool read_only(const struct cap_spec *spec)
{
  if (spec->network.mode != CAP_NET_BLOCKED)
    return false;
  for (size_t i = 0; i < spec->n_grants; i++)
    if (spec->grants[i].access != CAP_ACCESS_READ)
      return false;
  return true;
}

static void write_tool(struct cap_jw *w, const struct mcp_tool *m)
{
  cap_jw_begin_object(w);
  cap_jw_key(w, "name");
  cap_jw_string(w, m->name);
  cap_jw_key(w, "title");
  _cleanup_free_ char *title =
      cap_xasprintf("%s: %s", m->spec->name ? m->spec->name : m->spec->id, m->tool->name);
  cap_jw_string(w, title);
  if (m->tool->description && *m->tool->description) {
    cap_jw_key(w, "description");
    cap_jw_string(w, m->tool->description);
  }
  cap_jw_key(w, "inputSchema");
  const struct cap_node *schema = m->tool->input_schema;
  if (schema && schema->kind == CAP_NODE_OBJECT) {
    cap_jw_node(w, schema);
  } else {
    cap_jw_begin_object(w);
    cap_jw_key(w, "type");
    cap_jw_string(w, "object");
    cap_jw_end_object(w);
  }
  cap_jw_key(w, "annotations");
  cap_jw_begin_object(w);
  cap_jw_key(w, "readOnlyHint");
  cap_jw_bool(w, read_only(m->spec));
  cap_jw_key(w, "openWorldHint");
  cap_jw_bool(w, m->spec->network.mode != CAP_NET_BLOCKED);
  cap_jw_end_object(w);
  cap_jw_end_object(w);
}

/* The cursor is the table index to resume at, as "t<index>". */
static bool parse_cursor(const struct cap_node *params, size_t n, size_t *at)
{
  const struct cap_node *c = cap_node_get(params, "cursor");
  *at = 0;
  if (!c || c->kind == CAP_NODE_NULL)
    return true;
  if (c->kind != CAP_NODE_STRING || c->u.str.ptr[0] != 't' || !c->u.str.ptr[1])
    return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(c->u.str.ptr + 1, &end, 10);
  if (*end || errno || v > n || c->u.str.ptr[1] < '0' || c->u.str.ptr[1] > '9')
    return false;
  *at = (size_t)v;
  return true;
}

void mcp_tools_list(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  mcp_table_build(s);
  const struct mcp_table *t = &s->table;
  size_t at;
  if (!parse_cursor(params, t->n, &at))
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "invalid cursor: pass back the nextCursor of the previous page", NULL);
  size_t page = s->cfg->page_size ? s->cfg->page_size : MCP_PAGE_SIZE, listed = 0;
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "tools");
  cap_jw_begin_array(&w);
  size_t i = at;
  for (; i < t->n && listed < page; i++)
    if (!blocked(s, &t->v[i])) {
      write_tool(&w, &t->v[i]);
      listed++;
    }
  cap_jw_end_array(&w);
  while (i < t->n && blocked(s, &t->v[i]))
    i++;
  if (i < t->n) {
    char cursor[32];
    snprintf(cursor, sizeof cursor, "t%zu", i);
    cap_jw_key(&w, "nextCursor");
    cap_jw_string(&w, cursor);
  }
  if (s->modern) { /* 2026-07-28 caching: a user's own list (policies), for a minute */
    cap_jw_key(&w, "ttlMs");
    cap_jw_int(&w, 60000);
    cap_jw_key(&w, "cacheScope");
    cap_jw_string(&w, "private");
  }
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}
