#include "runtime/talos.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "runtime/covenant.h"
#include "runtime/talos_internal.h"
#include "runtime/talos_ts.h"

/* generated from talos_shim.mjs by scripts/embed.py */
extern const char talos_shim[];

char *talos_module_path(const struct cap_spec *spec)
{
  const char *entry = spec->runtime.entry ? spec->runtime.entry : "index.ts";
  return entry[0] == '/' ? cap_xstrdup(entry) : cap_xasprintf("%s/%s", spec->package_dir, entry);
}

static bool is_dir(const char *p)
{
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

char *talos_default_node_path(const struct cap_spec *spec)
{
  _cleanup_free_ char *parent = cap_xstrdup(spec->package_dir);
  char *slash = strrchr(parent, '/');
  if (!slash || slash == parent)
    return NULL;
  *slash = '\0';
  const char *base = strrchr(parent, '/');
  if (!base || strcmp(base + 1, "plugins") != 0)
    return NULL;
  char *root = cap_xstrndup(parent, (size_t)(base - parent));
  _cleanup_free_ char *nm = cap_xasprintf("%s/node_modules", *root ? root : "");
  if (!*root || !is_dir(nm)) {
    free(root);
    return NULL;
  }
  return root;
}

/* A setting's value as Talos stores it: text ("5", "true"). */
static void setting_text(struct cap_jw *w, const struct cap_setting *s, const char *stored)
{
  if (stored) {
    cap_jw_string(w, stored);
    return;
  }
  const struct cap_node *d = s->default_value;
  if (d->kind == CAP_NODE_STRING) {
    cap_jw_string(w, d->u.str.ptr);
    return;
  }
  struct cap_buf b = {0};
  struct cap_jw inner;
  cap_jw_init(&inner, &b, false);
  cap_jw_node(&inner, d);
  cap_jw_string_n(w, b.data ? b.data : "", b.len);
  cap_buf_free(&b);
}

const char *const talos_oauth_names[TALOS_OAUTH_N] = {"access_token", "refresh_token",
                                                      "token_expiry", "client_id", "client_secret"};

static bool declared_secret(const struct cap_spec *spec, const char *name)
{
  for (size_t i = 0; i < spec->n_secrets; i++)
    if (strcmp(spec->secrets[i].name, name) == 0)
      return true;
  return false;
}

/* The handler's config: one flat object of strings, settings then
 * credentials (a credential wins a name both declare), then the OAuth
 * tokens the plugin did not declare. */
static void write_config(struct cap_jw *w, const struct cap_spec *spec,
                         const struct talos_input *in)
{
  cap_jw_begin_object(w);
  for (size_t i = 0; i < spec->n_settings; i++) {
    const char *stored = in && in->settings ? in->settings[i] : NULL;
    if (!stored && !spec->settings[i].default_value)
      continue;
    cap_jw_key(w, spec->settings[i].name);
    setting_text(w, &spec->settings[i], stored);
  }
  for (size_t i = 0; in && in->secrets && i < spec->n_secrets; i++)
    if (in->secrets[i]) {
      cap_jw_key(w, spec->secrets[i].name);
      cap_jw_string(w, in->secrets[i]);
    }
  for (size_t i = 0; in && in->oauth && i < TALOS_OAUTH_N; i++)
    if (in->oauth->values[i] && !declared_secret(spec, talos_oauth_names[i])) {
      cap_jw_key(w, talos_oauth_names[i]);
      cap_jw_string(w, in->oauth->values[i]);
    }
  cap_jw_end_object(w);
  if (in && in->oauth && in->oauth->token_url) {
    cap_jw_key(w, "oauth");
    cap_jw_begin_object(w);
    cap_jw_key(w, "tokenUrl");
    cap_jw_string(w, in->oauth->token_url);
    cap_jw_end_object(w);
  }
}

/* The tokens the shim renewed, handed to the caller to store. */
static void oauth_refreshed(const struct talos_input *in, const struct cap_node *root)
{
  const struct cap_node *o = cap_node_get(root, "oauth");
  if (!o || o->kind != CAP_NODE_OBJECT || !in || !in->oauth || !in->oauth->store)
    return;
  const struct cap_node *a = cap_node_get(o, "access_token"), *r = cap_node_get(o, "refresh_token"),
                        *e = cap_node_get(o, "token_expiry");
  if (a && a->kind == CAP_NODE_STRING && e && e->kind == CAP_NODE_STRING)
    in->oauth->store(in->oauth->store_arg, a->u.str.ptr,
                     r && r->kind == CAP_NODE_STRING ? r->u.str.ptr : NULL, e->u.str.ptr);
}

/* The node_modules root, as the shim sees it: the operator's, else a
 * checkout's root; a path ending in node_modules names its parent. */
static char *node_root(const struct cap_spec *spec, const struct talos_input *in)
{
  if (!in || !in->node_path)
    return talos_default_node_path(spec);
  char *p = cap_xstrdup(in->node_path);
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/')
    p[--n] = '\0';
  if (n > 13 && strcmp(p + n - 13, "/node_modules") == 0)
    p[n - 13] = '\0';
  return p;
}

/* The request's common part: op, plugin, module, sources, nodePath. */
static int request_head(struct cap_jw *w, const struct gw_call *call, const struct cap_spec *spec,
                        const char *op, const char *node_root, const char *undici,
                        struct cap_error *err)
{
  _cleanup_free_ char *module = talos_module_path(spec);
  cap_jw_begin_object(w);
  cap_jw_key(w, "op");
  cap_jw_string(w, op);
  cap_jw_key(w, "plugin");
  cap_jw_string(w, spec->id);
  cap_jw_key(w, "module");
  cap_jw_string(w, module);
  cap_jw_key(w, "nodePath");
  cap_jw_string_or_null(w, node_root);
  cap_jw_key(w, "undici");
  _cleanup_free_ char *entry = undici ? cap_xasprintf("%s/index.js", undici) : NULL;
  cap_jw_string_or_null(w, entry);
  cap_jw_key(w, "sources");
  int r = talos_ts_sources(spec, call->cache_dir, w, err);
  if (r < 0)
    cap_error_prefix(err, "plugin %s", spec->id);
  return r;
}

/* Where undici is, when the plugin's network goes through the proxy:
 * the shim makes it fetch's dispatcher (allocated; NULL otherwise). */
static char *undici_dir(const struct cap_spec *spec)
{
  if (spec->network.mode != CAP_NET_PROXY)
    return NULL;
  _cleanup_free_ char *modules = talos_loader_modules();
  char *dir = modules ? cap_xasprintf("%s/undici", modules) : NULL;
  if (dir && !is_dir(dir)) {
    free(dir);
    return NULL;
  }
  return dir;
}

/* Runs the shim on line in the sandbox, with the read-only directories
 * it needs besides the package (node_root's node_modules, undici) and the
 * call's deadline as the wall clock. */
static enum gw_outcome exchange(const struct gw_call *call, const struct cap_spec *spec,
                                const char *const *reads, size_t n_reads, struct cap_buf *line,
                                char **raw, talos_line_fn *stream, void *stream_arg,
                                struct cap_error *err)
{
  cap_buf_putc(line, '\n');
  struct cap_spec run_spec = *spec; /* shallow: grants and the wall clock change */
  _cleanup_free_ struct cap_fs_grant *grants =
      cap_xcalloc(spec->n_grants + n_reads + 1, sizeof *grants);
  if (spec->n_grants)
    memcpy(grants, spec->grants, spec->n_grants * sizeof *grants);
  run_spec.grants = grants;
  for (size_t i = 0; i < n_reads; i++)
    if (reads[i] && is_dir(reads[i]))
      grants[run_spec.n_grants++] = (struct cap_fs_grant){.path = (char *)reads[i],
                                                          .access = CAP_ACCESS_READ,
                                                          .type = CAP_FS_DIRECTORY,
                                                          .origin = CAP_ORIGIN_PACKAGE};
  if (call->deadline_ms) /* the call's --timeout wins over Talos's 120 s */
    run_spec.limits.wall_ms = call->deadline_ms;
  if (stream) /* a subscription runs until it is stopped */
    run_spec.limits.wall_ms = 0;
  char *const cmd[] = {"node", "--input-type=module", "-e", (char *)talos_shim, NULL};
  enum gw_outcome o = stream ? talos_stream_run(call, &run_spec, cmd, line, stream, stream_arg, err)
                             : covenant_run_line(call, &run_spec, cmd, line, NULL, 0, raw, err);
  sodium_memzero(line->data, line->len); /* it held the credentials */
  cap_buf_free(line);
  return o;
}

/* The shim's answer: {"ok": true, ...} (the document, parsed) or the
 * error it names. */
static enum gw_outcome shim_answer(const char *raw, const char *prefix, struct cap_doc **ret,
                                   struct cap_error *err)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  const struct cap_node *ok = NULL, *error = NULL;
  if (cap_json_parse(doc, raw, strlen(raw), "shim", 0, &diags) == 0 &&
      doc->root->kind == CAP_NODE_OBJECT) {
    ok = cap_node_get(doc->root, "ok");
    error = cap_node_get(doc->root, "error");
  }
  cap_diags_free(&diags);
  if (ok && ok->kind == CAP_NODE_BOOL && ok->u.boolean) {
    *ret = doc;
    return GW_OUTCOME_OK;
  }
  cap_error_set(err, EIO, "%s%s", prefix,
                error && error->kind == CAP_NODE_STRING ? error->u.str.ptr : "no result");
  cap_doc_free(doc);
  return GW_OUTCOME_FAILED;
}

static char *node_json(const struct cap_node *n)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  if (n)
    cap_jw_node(&w, n);
  else
    cap_jw_null(&w);
  return cap_buf_steal(&b);
}

/* Builds the request (head, then extra(w, arg)), runs it, parses the
 * answer; with stream, hands each line to it instead (answer unset). */
static enum gw_outcome run_request(const struct gw_call *call, const struct cap_spec *spec,
                                   const char *op, const struct talos_input *in,
                                   void (*extra)(struct cap_jw *, const void *), const void *arg,
                                   talos_line_fn *stream, void *stream_arg, struct cap_doc **answer,
                                   struct cap_error *err)
{
  _cleanup_free_ char *root = node_root(spec, in);
  _cleanup_free_ char *undici = undici_dir(spec);
  _cleanup_free_ char *nm = root ? cap_xasprintf("%s/node_modules", root) : NULL;
  struct cap_buf line = {0};
  struct cap_jw w;
  cap_jw_init(&w, &line, false);
  if (request_head(&w, call, spec, op, root, undici, err) < 0) {
    cap_buf_free(&line);
    return GW_OUTCOME_FAILED;
  }
  cap_jw_key(&w, "config");
  write_config(&w, spec, in);
  if (extra)
    extra(&w, arg);
  cap_jw_end_object(&w);
  _cleanup_free_ char *raw = NULL;
  const char *reads[] = {nm, undici};
  enum gw_outcome o = exchange(call, spec, reads, 2, &line, &raw, stream, stream_arg, err);
  if (stream)
    return o;
  const char *prefix = strcmp(op, "probe") == 0 ? "" : "the tool failed: ";
  return o == GW_OUTCOME_OK ? shim_answer(raw, prefix, answer, err) : o;
}

static enum gw_outcome roundtrip(const struct gw_call *call, const struct cap_spec *spec,
                                 const char *op, const struct talos_input *in,
                                 void (*extra)(struct cap_jw *, const void *), const void *arg,
                                 struct cap_doc **answer, struct cap_error *err)
{
  return run_request(call, spec, op, in, extra, arg, NULL, NULL, answer, err);
}

struct call_extra {
  const struct cap_tool *tool;
  const struct cap_node *args;
};

static void call_fields(struct cap_jw *w, const void *arg)
{
  const struct call_extra *x = arg;
  cap_jw_key(w, "function");
  cap_jw_string(w, x->tool->name);
  cap_jw_key(w, "args");
  cap_jw_node(w, x->args);
}

enum gw_outcome talos_run(const struct gw_call *call, const struct cap_spec *spec,
                          const struct cap_tool *tool, const struct cap_node *args,
                          const struct talos_input *in, char **result, struct cap_error *err)
{
  struct call_extra x = {tool, args};
  struct cap_doc *answer = NULL;
  enum gw_outcome o = roundtrip(call, spec, "call", in, call_fields, &x, &answer, err);
  if (o == GW_OUTCOME_OK) {
    oauth_refreshed(in, answer->root);
    *result = node_json(cap_node_get(answer->root, "result"));
  }
  cap_doc_free(answer);
  return o;
}

struct poll_extra {
  const char *trigger;
  const struct cap_node *state;
  const struct cap_node *task_config; /* or NULL */
};

static void poll_fields(struct cap_jw *w, const void *arg)
{
  const struct poll_extra *x = arg;
  cap_jw_key(w, "trigger");
  cap_jw_string(w, x->trigger);
  cap_jw_key(w, "state");
  cap_jw_node(w, x->state);
  cap_jw_key(w, "taskConfig");
  if (x->task_config)
    cap_jw_node(w, x->task_config);
  else
    cap_jw_null(w);
}

/* text as a JSON object in a new document, or NULL. */
static struct cap_doc *parse_object(const char *text)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, text, strlen(text), "state", 0, &diags);
  cap_diags_free(&diags);
  if (r < 0 || doc->root->kind != CAP_NODE_OBJECT) {
    cap_doc_free(doc);
    return NULL;
  }
  return doc;
}

enum gw_outcome talos_poll(const struct gw_call *call, const struct cap_spec *spec,
                           const char *trigger, const struct talos_input *in, const char *state,
                           const char *task_config, char **event, char **new_state, bool *pass,
                           struct cap_error *err)
{
  *pass = true;
  struct cap_doc *sdoc = parse_object(state);
  if (!sdoc) {
    return cap_error_set(err, EINVAL,
                         "plugin %s, trigger %s: its stored state is not a JSON object; reset it "
                         "with `capsule triggers reset %s %s`",
                         spec->id, trigger, spec->id, trigger),
           GW_OUTCOME_FAILED;
  }
  struct cap_doc *tdoc = task_config ? parse_object(task_config) : NULL;
  struct poll_extra x = {trigger, sdoc->root, tdoc ? tdoc->root : NULL};
  struct cap_doc *answer = NULL;
  enum gw_outcome o = roundtrip(call, spec, "poll", in, poll_fields, &x, &answer, err);
  cap_doc_free(sdoc);
  cap_doc_free(tdoc);
  if (o != GW_OUTCOME_OK)
    return o;
  oauth_refreshed(in, answer->root);
  const struct cap_node *ok = cap_node_get(answer->root, "pass");
  *pass = !ok || ok->kind != CAP_NODE_BOOL || ok->u.boolean;
  const struct cap_node *ev = cap_node_get(answer->root, "event");
  *event = ev && ev->kind != CAP_NODE_NULL ? node_json(ev) : NULL;
  *new_state = node_json(cap_node_get(answer->root, "newState"));
  cap_doc_free(answer);
  return GW_OUTCOME_OK;
}

static void probe_fields(struct cap_jw *w, const void *arg)
{
  const struct cap_spec *spec = arg;
  cap_jw_key(w, "functions");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_tools; i++)
    cap_jw_string(w, spec->tools[i].name);
  cap_jw_end_array(w);
}

enum gw_outcome talos_probe(const struct gw_call *call, const struct cap_spec *spec,
                            const struct talos_input *in, bool *subscribes, struct cap_error *err)
{
  struct cap_doc *answer = NULL;
  enum gw_outcome o = roundtrip(call, spec, "probe", in, probe_fields, spec, &answer, err);
  const struct cap_node *push = o == GW_OUTCOME_OK ? cap_node_get(answer->root, "subscribe") : NULL;
  for (size_t i = 0; subscribes && i < spec->n_triggers; i++) {
    const struct cap_node *v = push ? cap_node_get(push, spec->triggers[i].local_id) : NULL;
    subscribes[i] = v && v->kind == CAP_NODE_BOOL && v->u.boolean;
  }
  cap_doc_free(answer);
  return o;
}

/* ---- push triggers ---- */

struct push {
  const struct talos_input *in;
  const char *plugin, *trigger;
  talos_event_fn *fn;
  void *arg;
  bool subscribed;
  char *error; /* the shim's {"ok": false, "error"} */
};

static void push_line(void *arg, const char *line)
{
  struct push *p = arg;
  struct cap_doc *doc = NULL;
  struct cap_error err = {0};
  if (shim_answer(line, "", &doc, &err) != GW_OUTCOME_OK) {
    free(p->error);
    p->error = cap_xstrdup(err.message ? err.message : "an answer that is not JSON");
    cap_error_clear(&err);
    return;
  }
  const struct cap_node *ev = cap_node_get(doc->root, "event");
  const struct cap_node *pass = cap_node_get(doc->root, "pass");
  oauth_refreshed(p->in, doc->root);
  if (cap_node_get(doc->root, "subscribed"))
    p->subscribed = true;
  else if (ev && ev->kind == CAP_NODE_OBJECT) {
    _cleanup_free_ char *event = node_json(ev);
    p->fn(p->arg, event, !pass || pass->kind != CAP_NODE_BOOL || pass->u.boolean);
  }
  cap_doc_free(doc);
}

enum gw_outcome talos_subscribe(const struct gw_call *call, const struct cap_spec *spec,
                                const char *trigger, const struct talos_input *in,
                                const char *task_config, talos_event_fn *fn, void *arg,
                                struct cap_error *err)
{
  struct cap_doc *tdoc = task_config ? parse_object(task_config) : NULL;
  struct cap_doc *empty = parse_object("{}");
  struct poll_extra x = {trigger, empty->root, tdoc ? tdoc->root : NULL};
  struct push p = {.in = in, .plugin = spec->id, .trigger = trigger, .fn = fn, .arg = arg};
  enum gw_outcome o =
      run_request(call, spec, "subscribe", in, poll_fields, &x, push_line, &p, NULL, err);
  cap_doc_free(tdoc);
  cap_doc_free(empty);
  if (p.error) { /* what the shim said outweighs how it ended */
    cap_error_clear(err);
    cap_error_set(err, EIO, "%s", p.error);
    o = GW_OUTCOME_FAILED;
  } else if (o == GW_OUTCOME_OK && !p.subscribed) {
    cap_error_set(err, EIO, "plugin %s, trigger %s: the subscription ended before it began",
                  spec->id, trigger);
    o = GW_OUTCOME_FAILED;
  }
  free(p.error);
  return o;
}
