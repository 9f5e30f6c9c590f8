#include "runtime/talos.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "runtime/covenant.h"

/* generated from talos_shim.mjs by scripts/embed.py */
extern const char talos_shim[];

char *talos_module_path(const struct cap_spec *spec)
{
  return cap_xasprintf("%s/%s", spec->package_dir,
                       spec->runtime.entry ? spec->runtime.entry : "index.js");
}

/* The shim's request: the module, the function, its arguments and context. */
static void shim_request(const struct cap_spec *spec, const struct cap_tool *tool,
                         const struct cap_node *args, char *const *handler, struct cap_buf *line)
{
  _cleanup_free_ char *module = talos_module_path(spec);
  struct cap_jw w;
  cap_jw_init(&w, line, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "module");
  cap_jw_string(&w, module);
  cap_jw_key(&w, "function");
  cap_jw_string(&w, tool->name);
  cap_jw_key(&w, "args");
  cap_jw_node(&w, args);
  cap_jw_key(&w, "settings");
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < spec->n_settings; i++) {
    cap_jw_key(&w, spec->settings[i].name);
    if (spec->settings[i].default_value)
      cap_jw_node(&w, spec->settings[i].default_value);
    else
      cap_jw_null(&w);
  }
  cap_jw_end_object(&w);
  cap_jw_key(&w, "credentials");
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < spec->n_secrets; i++)
    if (handler[i]) {
      cap_jw_key(&w, spec->secrets[i].name);
      cap_jw_string(&w, handler[i]);
    }
  cap_jw_end_object(&w);
  cap_jw_key(&w, "dataDir");
  cap_jw_string(&w, "/tmp/capsule-data");
  cap_jw_end_object(&w);
  cap_buf_putc(line, '\n');
}

/* The shim's answer: {"ok": true, "result": ...} or {"ok": false, "error"}. */
static enum gw_outcome shim_answer(const char *raw, char **result, struct cap_error *err)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  const struct cap_node *ok = NULL, *value = NULL, *error = NULL;
  if (cap_json_parse(doc, raw, strlen(raw), "shim", 0, &diags) == 0 &&
      doc->root->kind == CAP_NODE_OBJECT) {
    ok = cap_node_get(doc->root, "ok");
    value = cap_node_get(doc->root, "result");
    error = cap_node_get(doc->root, "error");
  }
  enum gw_outcome o = GW_OUTCOME_OK;
  if (ok && ok->kind == CAP_NODE_BOOL && ok->u.boolean && value) {
    struct cap_buf b = {0};
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    cap_jw_node(&w, value);
    *result = cap_buf_steal(&b);
  } else {
    cap_error_set(err, EIO, "the tool failed: %s",
                  error && error->kind == CAP_NODE_STRING ? error->u.str.ptr : "no result");
    o = GW_OUTCOME_FAILED;
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return o;
}

enum gw_outcome talos_run(const struct gw_call *call, const struct cap_spec *spec,
                          const struct cap_tool *tool, const struct cap_node *args,
                          char *const *handler, char **result, struct cap_error *err)
{
  struct cap_buf line = {0};
  shim_request(spec, tool, args, handler, &line);
  char *const cmd[] = {"node", "--input-type=module", "-e", (char *)talos_shim, NULL};
  _cleanup_free_ char *raw = NULL;
  enum gw_outcome o = covenant_run_line(call, spec, cmd, &line, NULL, 0, &raw, err);
  sodium_memzero(line.data, line.len); /* it held the credentials */
  cap_buf_free(&line);
  return o == GW_OUTCOME_OK ? shim_answer(raw, result, err) : o;
}
