/* prompts/list and prompts/get (front/mcp.h): with --capability naming a
 * third-party MCP server, relayed to it (mcp_relay.c); otherwise each
 * served Talos plugin with a prompt.md (Talos: "LLM instructions for
 * using the plugin", beside its manifest.json) is one prompt, named by
 * the capability's id, without arguments, whose one user message is the
 * file's text. Nothing is invented for the other formats. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"

#define PROMPT_MAX (256u << 10) /* a larger prompt.md is not served */

/* The plugin's prompt.md (allocated, NUL-terminated), NULL when it has
 * none (not a regular file in the package, not UTF-8 text we can send,
 * or too large). */
static char *read_prompt(const struct cap_spec *spec)
{
  if (spec->format != CAP_FORMAT_TALOS || !spec->package_dir)
    return NULL;
  _cleanup_close_ int dir = open(spec->package_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int fd =
      dir >= 0 ? openat(dir, "prompt.md", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > PROMPT_MAX)
    return NULL;
  char *text = cap_xmalloc((size_t)sb.st_size + 1);
  size_t got = 0;
  while (got < (size_t)sb.st_size) {
    ssize_t n = read(fd, text + got, (size_t)sb.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  text[got] = '\0';
  return text;
}

static bool served(const struct mcp_session *s, const struct cap_spec *spec)
{
  return !s->cfg->only || strcmp(s->cfg->only, spec->id) == 0;
}

bool mcp_has_prompts(const struct mcp_session *s)
{
  if (mcp_served_server(s))
    return true;
  for (size_t i = 0; s->cfg->reg && i < s->cfg->reg->n; i++) {
    const struct cap_spec *spec = s->cfg->reg->caps[i];
    _cleanup_free_ char *text = served(s, spec) ? read_prompt(spec) : NULL;
    if (text)
      return true;
  }
  return false;
}

void mcp_prompts_list(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  if (mcp_served_server(s))
    return mcp_forward(s, id, params, "prompts/list");
  if (mcp_gather_wanted(s)) /* the servers' and the Talos plugins' (mcp_gather.c) */
    return mcp_gather_start(s, id, "prompts/list");
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "prompts");
  cap_jw_begin_array(&w);
  mcp_talos_prompts_write(s, &w);
  cap_jw_end_array(&w);
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}

void mcp_talos_prompts_write(const struct mcp_session *s, struct cap_jw *w)
{
  for (size_t i = 0; s->cfg->reg && i < s->cfg->reg->n; i++) {
    const struct cap_spec *spec = s->cfg->reg->caps[i];
    _cleanup_free_ char *text = served(s, spec) ? read_prompt(spec) : NULL;
    if (!text)
      continue;
    cap_jw_begin_object(w);
    cap_jw_key(w, "name");
    cap_jw_string(w, spec->id);
    cap_jw_key(w, "title");
    cap_jw_string(w, spec->name ? spec->name : spec->id);
    cap_jw_key(w, "description");
    _cleanup_free_ char *d = cap_xasprintf("How to use the tools of %s (its prompt.md)",
                                           spec->name ? spec->name : spec->id);
    cap_jw_string(w, d);
    cap_jw_end_object(w);
  }
}

void mcp_prompts_get(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  if (mcp_served_server(s))
    return mcp_forward(s, id, params, "prompts/get");
  const struct cap_node *name = cap_node_get(params, "name");
  if (!name || name->kind != CAP_NODE_STRING)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS, "prompts/get needs params.name, a string",
                          NULL);
  const struct cap_spec *spec = s->cfg->reg ? gw_registry_find(s->cfg->reg, name->u.str.ptr) : NULL;
  _cleanup_free_ char *text = spec && served(s, spec) ? read_prompt(spec) : NULL;
  if (!text && mcp_gather_route(s, id, params, "prompts/get")) /* a server's (mcp_gather.c) */
    return;
  if (!text) {
    struct cap_buf m = {0};
    cap_buf_puts(&m, "Unknown prompt: ");
    cap_buf_append(&m, name->u.str.ptr, strnlen(name->u.str.ptr, 200));
    cap_buf_puts(&m, " (prompts/list names the prompts)");
    mcp_send_error(s, id, MCP_INVALID_PARAMS, m.data, NULL);
    return cap_buf_free(&m);
  }
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "description");
  _cleanup_free_ char *d =
      cap_xasprintf("How to use the tools of %s", spec->name ? spec->name : spec->id);
  cap_jw_string(&w, d);
  cap_jw_key(&w, "messages");
  cap_jw_begin_array(&w);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "role");
  cap_jw_string(&w, "user");
  cap_jw_key(&w, "content");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "type");
  cap_jw_string(&w, "text");
  cap_jw_key(&w, "text");
  cap_jw_string(&w, text); /* the JSON writer makes bytes that are not UTF-8 U+FFFD */
  cap_jw_end_object(&w);
  cap_jw_end_object(&w);
  cap_jw_end_array(&w);
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}
