#include "gateway/call.h"
#include "gateway/call_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/escape.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/approval.h"
#include "gateway/artifact_store.h"
#include "gateway/covenant_gate.h"
#include "gateway/egress_store.h"
#include "gateway/hermes_call.h"
#include "gateway/instance.h"
#include "gateway/grants.h"
#include "gateway/plugin_state.h"
#include "gateway/selu.h"
#include "jsonschema/jsonschema.h"
#include "runtime/covenant.h"
#include "runtime/mcp_client.h"
#include "runtime/talos.h"

void gw_uuid4(char out[37])
{
  unsigned char b[16];
  randombytes_buf(b, sizeof b);
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

static void free_secrets(struct call_ctx *c)
{
  for (size_t i = 0; i < c->n_env; i++)
    gw_secret_free(c->env[i]);
  free(c->env);
  for (size_t i = 0; c->handler && c->spec && i < c->spec->n_secrets; i++)
    gw_secret_free(c->handler[i]);
  free(c->handler);
  c->env = c->handler = NULL;
  c->n_env = 0;
}

/* ---- credentials ---- */

/* Required secrets, found in gw_cred_lookup's order: environment variables
 * NAME=value, or (Talos) the handler's context. The one place that looks
 * credentials up for a call. */
static enum gw_outcome resolve_credentials(struct call_ctx *c, struct cap_error *err)
{
  const struct gw_call *call = c->call;
  const struct cap_spec *spec = c->spec;
  c->env = cap_xcalloc(spec->n_secrets + 1, sizeof *c->env);
  c->handler = cap_xcalloc(spec->n_secrets + 1, sizeof *c->handler);
  for (size_t i = 0; i < spec->n_secrets; i++) {
    const struct cap_secret *sec = &spec->secrets[i];
    char *value = NULL;
    bool found = false;
    int r = gw_cred_lookup(c->st, spec->id, sec->name, call->user, &value, &found, err);
    if (r < 0)
      return GW_OUTCOME_FAILED;
    if (!found) {
      if (!sec->required)
        continue;
      /* names in the command to paste are quoted for the shell: they are
       * the package's to choose */
      _cleanup_free_ char *qid = cap_shell_quote(spec->id), *qname = cap_shell_quote(sec->name),
                          *quser = cap_shell_quote(call->user);
      if (sec->scope == CAP_SCOPE_USER)
        cap_error_set(err, ENOENT,
                      "credential %s is not set for user %s; set it with `capsule cred set %s %s "
                      "--scope user --user %s` (the value on stdin)",
                      sec->name, call->user, qid, qname, quser);
      else
        cap_error_set(err, ENOENT,
                      "credential %s is not set; set it with `capsule cred set %s %s --scope "
                      "system` (the value on stdin)",
                      sec->name, qid, qname);
      return GW_OUTCOME_FAILED;
    }
    if (sec->delivery == CAP_DELIVERY_HANDLER)
      c->handler[i] = value; /* Talos: in the handler's context, not the environment */
    else {
      c->env[c->n_env++] = cap_xasprintf("%s=%s", sec->name, value);
      gw_secret_free(value);
    }
  }
  return GW_OUTCOME_OK;
}

static enum gw_outcome step_credentials(struct call_ctx *c, struct cap_error *err)
{
  enum gw_outcome o = resolve_credentials(c, err);
  if (o != GW_OUTCOME_OK) { /* refused, whatever the policy said */
    c->rec.decision = "refused";
    c->rec.outcome = "missing credential";
  }
  return o;
}

/* ---- resolve ---- */

static bool is_dynamic(const struct cap_spec *spec)
{
  return (spec->runtime.kind == CAP_RUNTIME_GRPC || spec->runtime.kind == CAP_RUNTIME_MCP) &&
         spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC;
}

/* A dynamic capability's tool: as cached, else ask the capability (which
 * needs its credentials to start). */
static enum gw_outcome find_dynamic_tool(struct call_ctx *c, struct cap_error *err)
{
  c->cached = gw_tools_cached_hold(c->call->cache_dir, c->spec, &c->cached_hold);
  c->tool = c->cached ? gw_tools_find(c->cached, c->call->tool) : NULL;
  if (c->tool)
    return GW_OUTCOME_OK;
  gw_tools_unhold(c->cached_hold);
  c->cached = c->cached_hold = NULL;
  if (c->call->selu_warm_only) /* discovery may start an instance */
    return GW_OUTCOME_NOT_WARM;
  if (c->call->warm_only) /* discovery starts the server for itself */
    return cap_error_set(err, ENOENT, "%s has no tool %s as last discovered", c->spec->id,
                         c->call->tool),
           GW_OUTCOME_FAILED;
  enum gw_outcome o = resolve_credentials(c, err);
  if (o == GW_OUTCOME_OK)
    o = c->spec->runtime.kind == CAP_RUNTIME_MCP
            ? gw_mcp_discover(c->call, c->spec, c->env, c->n_env, &c->dynamic, err)
            : gw_selu_discover(c->call, c->spec, c->env, c->n_env, &c->dynamic, err);
  free_secrets(c);
  c->tool = o == GW_OUTCOME_OK ? gw_tools_find(&c->dynamic, c->call->tool) : NULL;
  return o;
}

/* "a, b, c" for messages: at most 20 names. */
static void name_list(struct cap_buf *b, const char *(*name)(const void *, size_t),
                      const void *items, size_t n)
{
  for (size_t i = 0; i < n && i < 20; i++)
    cap_buf_printf(b, "%s%s", i ? ", " : "", name(items, i));
  if (!b->data)
    cap_buf_puts(b, "none");
}

static const char *spec_name(const void *items, size_t i)
{
  return ((const struct cap_spec *const *)items)[i]->id;
}

static const char *tool_name(const void *items, size_t i)
{
  return ((const struct cap_tool *)items)[i].name;
}

/* The call's own copy (c->with_ids), made once, for what gw_call sets in it */
static struct gw_call *own_call(struct call_ctx *c)
{
  if (c->call != &c->with_ids) {
    c->with_ids = *c->call;
    c->call = &c->with_ids;
  }
  return &c->with_ids;
}

/* As root, the host ids the capability's tools run under: its own range
 * (gw_state_id_range), never another capability's nor the host's nobody;
 * before anything of it runs (a dynamic capability's discovery too). */
static enum gw_outcome step_ids(struct call_ctx *c, struct cap_error *err)
{
  if (geteuid() != 0)
    return GW_OUTCOME_OK;
  own_call(c);
  _cleanup_free_ char *key = gw_id_range_key(c->spec->id, c->spec->package_dir);
  uint32_t found = 0;
  int r = c->reading ? gw_state_id_range(c->st, key, false, &found, err) : 0;
  if (r == 0 && c->reading && !found) /* a new range takes the write lock: not in a read */
    reads_done(c);
  c->with_ids.id_base = found;
  if (r == 0 && found) /* read once: the registry's check alone left */
    r = gw_state_id_range_known(c->st, key, found, err);
  else if (r == 0)
    r = gw_state_id_range(c->st, key, true, &c->with_ids.id_base, err);
  if (r < 0) {
    cap_error_prefix(err, "cannot allocate capability %s's host ids", c->spec->id);
    return GW_OUTCOME_FAILED;
  }
  return GW_OUTCOME_OK;
}

/* A capability with warm servers (Selu, MCP), on a call that may start
 * one: the count of its revokes (gateway/instance.h), read before the
 * call's first state read, so that a revoke committed after the call read
 * the grants has moved it by the time the call's keeper looks. */
static enum gw_outcome step_epoch(struct call_ctx *c, struct cap_error *err)
{
  const struct gw_call *call = c->call;
  bool warm = c->spec->runtime.kind == CAP_RUNTIME_GRPC || c->spec->runtime.kind == CAP_RUNTIME_MCP;
  if (!warm || call->selu_warm_only || !call->run_dir)
    return GW_OUTCOME_OK;
  struct gw_call *own = own_call(c);
  if (gw_grants_epoch(call->run_dir, c->spec->id, &own->grants_epoch, err) < 0)
    return GW_OUTCOME_FAILED;
  own->grants_epoch_read = true;
  return GW_OUTCOME_OK;
}

static enum gw_outcome step_resolve(struct call_ctx *c, struct cap_error *err)
{
  const struct gw_call *call = c->call;
  c->spec = gw_registry_find(c->reg, call->capability);
  if (!c->spec) {
    struct cap_buf have = {0};
    name_list(&have, spec_name, c->reg->caps, c->reg->n);
    cap_error_set(err, ENOENT, "no capability \"%s\" in %s (it has: %s); `capsule list` shows them",
                  call->capability, c->reg->dir, have.data);
    cap_buf_free(&have);
    return GW_OUTCOME_FAILED;
  }
  if (call->selu_warm_only && c->spec->runtime.kind != CAP_RUNTIME_GRPC)
    return GW_OUTCOME_NOT_WARM; /* a sandbox of its own per call: a fresh process's */
  if (step_epoch(c, err) != GW_OUTCOME_OK || step_ids(c, err) != GW_OUTCOME_OK)
    return GW_OUTCOME_FAILED;
  if (call->mcp_method) { /* a request to the capability's MCP server: no tool */
    if (c->spec->runtime.kind == CAP_RUNTIME_MCP)
      return GW_OUTCOME_OK;
    return cap_error_set(err, ENOTSUP, "capability %s is not an MCP server: it has no %s",
                         c->spec->id, call->mcp_method),
           GW_OUTCOME_FAILED;
  }
  c->tool = gw_spec_tool(c->spec, call->tool);
  if (!c->tool && is_dynamic(c->spec)) {
    enum gw_outcome o = find_dynamic_tool(c, err);
    if (o != GW_OUTCOME_OK)
      return o;
  }
  if (!c->tool) {
    struct cap_buf have = {0};
    if (c->dynamic.n)
      name_list(&have, tool_name, c->dynamic.tools, c->dynamic.n);
    else
      name_list(&have, tool_name, c->spec->tools, c->spec->n_tools);
    cap_error_set(err, ENOENT, "capability %s has no tool \"%s\" (it has: %s)", c->spec->id,
                  call->tool, have.data);
    cap_buf_free(&have);
    return GW_OUTCOME_FAILED;
  }
  return GW_OUTCOME_OK;
}

/* ---- validate ---- */

static void validation_message(const struct cap_js_errors *errs, struct cap_buf *b)
{
  cap_buf_puts(b, "the arguments do not match the tool's input schema:");
  for (size_t i = 0; i < errs->len && i < 20; i++) {
    const struct cap_js_error *e = &errs->items[i];
    cap_buf_printf(b, "\n  args: %s: %s (keyword %s)",
                   e->instance_location[0] ? e->instance_location : "/", e->message,
                   e->keyword_location[0] ? e->keyword_location : "/");
  }
}

static enum gw_outcome step_validate(struct call_ctx *c, struct cap_error *err)
{
  c->args = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(c->args, c->call->args, c->call->args_len, "args", 0, &diags);
  if (r < 0) {
    const struct cap_diag *d = diags.len ? &diags.items[0] : NULL;
    cap_error_set(err, EINVAL, "the arguments are not JSON: %s", d ? d->message : "parse error");
  }
  cap_diags_free(&diags);
  if (r == 0 && c->tool->validator) {
    struct cap_js_errors errs = {0};
    if (!cap_js_validate(c->tool->validator, c->args->root, 0, &errs)) {
      struct cap_buf b = {0};
      validation_message(&errs, &b);
      r = cap_error_set(err, EINVAL, "%s", b.data);
      cap_buf_free(&b);
    }
    cap_js_errors_free(&errs);
  }
  if (r < 0) { /* refused, whatever the policy said */
    c->rec.decision = "refused";
    c->rec.outcome = "invalid arguments";
  }
  return r < 0 ? GW_OUTCOME_FAILED : GW_OUTCOME_OK;
}

/* ---- run ---- */

/* The run, in the capability's sandbox with the operator's grants added. */
static enum gw_outcome run_granted(struct call_ctx *c, const struct cap_spec *spec,
                                   struct cap_error *err);

static bool runs_apart(const struct gw_call *call, const struct cap_spec *spec)
{
  return call->run_apart && gw_runs_apart(spec);
}

struct apart {
  struct call_ctx *c;
  const struct cap_spec *spec;
};

static enum gw_outcome run_apart_step(void *arg, char **out, struct cap_error *err)
{
  struct apart *a = arg;
  enum gw_outcome o = run_granted(a->c, a->spec, err);
  *out = steal_pointer(&a->c->out);
  return o;
}

static enum gw_outcome step_run(struct call_ctx *c, struct cap_error *err)
{
  struct gw_granted g;
  int r = gw_spec_with_grants(c->st, c->spec, &g, err);
  reads_done(c);
  if (r < 0)
    return GW_OUTCOME_FAILED;
  struct apart a = {.c = c, .spec = &g.spec};
  struct gw_talos_config talos;
  enum gw_outcome o = GW_OUTCOME_OK;
  bool apart = runs_apart(c->call, &g.spec);
  if (apart && g.spec.runtime.kind == CAP_RUNTIME_TALOS_NODE) {
    if (gw_talos_config_load(c->st, &g.spec, c->call->user, c->handler, &talos, err) < 0)
      o = GW_OUTCOME_FAILED;
    else
      c->talos = &talos;
  }
  if (o == GW_OUTCOME_OK)
    o = apart ? gw_run_apart(c->call, run_apart_step, &a, &c->out, err)
              : run_granted(c, &g.spec, err);
  if (c->talos)
    gw_talos_config_free(c->talos, &g.spec);
  c->talos = NULL;
  gw_granted_free(&g);
  return o;
}

/* A third-party MCP server: for a front door's call (c->call->relay) on
 * its warm server (gateway/mcp_keeper.c) when one can be had, else on one
 * started for this call alone. */
static enum gw_outcome run_mcp(struct call_ctx *c, const struct cap_spec *spec,
                               struct cap_error *err)
{
  const struct gw_call *call = c->call;
  _cleanup_free_ char *params = call->mcp_method ? cap_xstrndup(call->args, call->args_len) : NULL;
  /* twice at most: a keeper whose server just exited ends without taking
   * the call (nothing reached the server), and the next one is new */
  for (int attempt = 0; attempt < 2 && call->relay && call->run_dir && !getenv("CAPSULE_MCP_COLD");
       attempt++) {
    struct cap_error kerr = {0};
    /* neither reaching the keeper, nor starting one (its server's
     * initialize), nor the exchange touches the state, and each may wait:
     * serve's other calls and pages go on meanwhile; nor does what follows
     * up to the record (gw_audit_append_shared): the lock is taken again
     * by the step that next needs it (lock_get), mostly the audit's leader */
    lock_put(c);
    /* a kept connection first (gateway/mcp_keeper_pool.c); a new one
     * when the keeper ended before it took the call */
    char kept[GW_MCP_KEEPER_PATH_MAX];
    _cleanup_close_ int ack = -1; /* the connection's take pipe */
    _cleanup_close_ int warm =
        gw_mcp_keeper_open(call, spec, c->env, c->n_env, attempt == 0, kept, &ack, &kerr);
    enum gw_outcome o = GW_OUTCOME_FAILED;
    bool reusable = false;
    if (warm >= 0)
      o = params ? mcp_client_request_warm(call, warm, &ack, call->mcp_method, params, &c->out,
                                           &reusable, err)
                 : mcp_client_call_on(call, spec, warm, &ack, c->env, c->n_env, &c->out, &reusable,
                                      err);
    int reached = warm; /* the connection's, or -errno */
    if (reusable && !call->relay->want_watch && *kept) {
      gw_mcp_keeper_keep(kept, warm, ack); /* for the next call to that keeper */
      warm = ack = -1;
    }
    if (reached == -ESTALE) /* a revoke since the call began: no server of its grants */
      return cap_error_set(err, ESTALE, "%s", kerr.message), cap_error_clear(&kerr),
             GW_OUTCOME_FAILED;
    if (reached < 0 && call->warm_only)
      return cap_error_set(err, -reached, "no warm server for %s: %s", spec->id, kerr.message),
             cap_error_clear(&kerr), GW_OUTCOME_FAILED;
    cap_error_clear(&kerr);
    if (reached < 0)
      break; /* without a warm server, the call starts its own */
    if (o == GW_OUTCOME_FAILED && err->code == ECONNABORTED) {
      cap_error_clear(err);
      continue;
    }
    if (o == GW_OUTCOME_OK && params && call->relay)
      call->relay->raw_result = cap_xstrdup(c->out);
    if (o == GW_OUTCOME_OK && call->relay->want_watch && gw_mcp_keeper_watch(warm)) {
      call->relay->watch_fd = warm; /* what the server says between calls */
      warm = -1;
      call->relay->watching = true;
    }
    return o;
  }
  if (call->warm_only)
    return cap_error_set(err, ECONNABORTED,
                         "%s's warm server ended twice before it took the call; try again",
                         spec->id),
           GW_OUTCOME_FAILED;
  if (!params)
    return mcp_client_call(call, spec, c->env, c->n_env, &c->out, err);
  enum gw_outcome o =
      mcp_client_request(call, spec, call->mcp_method, params, c->env, c->n_env, &c->out, err);
  if (o == GW_OUTCOME_OK && call->relay)
    call->relay->raw_result = cap_xstrdup(c->out);
  return o;
}

static enum gw_outcome run_granted(struct call_ctx *c, const struct cap_spec *spec,
                                   struct cap_error *err)
{
  if (c->call->warm_only && spec->runtime.kind != CAP_RUNTIME_MCP && !runs_apart(c->call, spec))
    return cap_error_set(err, ENOTSUP, "%s has no warm server to answer in this process", spec->id),
           GW_OUTCOME_FAILED;
  if (c->call->artifact_store && spec->runtime.kind != CAP_RUNTIME_GRPC &&
      gw_artifact_refs(c->args->root))
    return cap_error_set(err, ENOTSUP,
                         "%s is not a Selu capability: it takes no attachments (the arguments' "
                         "\"attachments\" name artifacts, which capsule hands to Selu "
                         "capabilities only)",
                         spec->id),
           GW_OUTCOME_FAILED;
  switch (spec->runtime.kind) {
  case CAP_RUNTIME_JSONL:
    return covenant_run(c->call, spec, c->args->root, c->env, c->n_env, &c->out, err);
  case CAP_RUNTIME_HERMES: return gw_hermes_call(c->call, c->st, spec, c->args->root, &c->out, err);
  case CAP_RUNTIME_GRPC: {
    _cleanup_free_ char *args = cap_xstrndup(c->call->args, c->call->args_len);
    return gw_selu_invoke(c->call, spec, c->tool->name, args, c->env, c->n_env, &c->out, err);
  }
  case CAP_RUNTIME_TALOS_NODE: {
    if (c->talos) /* read before a run apart's fork: the child has no state */
      return talos_run(c->call, spec, c->tool, c->args->root, &c->talos->in, &c->out, err);
    struct gw_talos_config cfg;
    if (gw_talos_config_load(c->st, spec, c->call->user, c->handler, &cfg, err) < 0)
      return GW_OUTCOME_FAILED;
    enum gw_outcome o = talos_run(c->call, spec, c->tool, c->args->root, &cfg.in, &c->out, err);
    gw_talos_config_free(&cfg, spec);
    return o;
  }
  case CAP_RUNTIME_MCP: return run_mcp(c, spec, err);
  case CAP_RUNTIME_EXEC: break;
  }
  return cap_error_set(err, ENOTSUP,
                       "capability %s is a nono command sandbox without tools; run it with "
                       "`capsule run --config`",
                       spec->id),
         GW_OUTCOME_FAILED;
}

/* ---- audit ---- */

/* Exactly one record per call; a call that cannot be audited does not
 * hand out its result (with audit_later, a call that succeeded hands it
 * out once its record is in its marker; one failed append after an
 * answer, and the next calls append first again: audit_later.c). */
static enum gw_outcome step_audit(struct call_ctx *c, enum gw_outcome o, uint64_t start,
                                  bool *ended, struct cap_error *err)
{
  c->rec.duration_ms = (int64_t)(cap_now_ms(CLOCK_MONOTONIC) - start);
  if (o != GW_OUTCOME_OK && strcmp(c->rec.outcome, "ok") == 0)
    c->rec.outcome = err->message ? err->message : "failed";
  _cleanup_free_ char *cancelled = NULL; /* a run stopped for its client: said */
  if ((o == GW_OUTCOME_FAILED || o == GW_OUTCOME_KILLED_BY_LIMIT) && err->code != ECANCELED &&
      cap_cancel_fired(c->call->cancel))
    c->rec.outcome = cancelled =
        cap_xasprintf("the call was cancelled by the client (%s)", c->rec.outcome);
  if (c->out)
    gw_sha256_hex(c->out, strlen(c->out), c->rec.result_hash);
  const struct gw_call *call = c->call;
  /* a shared state (PostgreSQL) never: its record would wait in a marker
   * on this host alone */
  if (call->audit_later && o == GW_OUTCOME_OK && !call->state_lock && !call->at_end &&
      !gw_state_shared(c->st) && !gw_egress_batch_pending(c->egress) &&
      (*call->audit_later = gw_audit_later_take(&c->rec, &c->inflight))) {
    *ended = true; /* appended once answered, by the caller */
    return o;
  }
  struct cap_error aerr = {0};
  /* in serve, with the records of the calls finishing together; the
   * call's at_end run under the lock right after its record, by whichever
   * call appended it; the lock not held on return */
  int r = gw_audit_append_shared(c->st, call->state_lock, c->locked, &c->rec, call->at_end,
                                 call->at_end_ctx, &c->inflight, &aerr);
  c->locked = false;
  *ended = true;
  if (r < 0 && !c->inflight.recorded) /* not in the log: the marker keeps it for the next open */
    gw_inflight_keep(&c->inflight, &c->rec);
  if (r == 0 && call->audit_later)
    gw_audit_later_resume();
  if (r == 0 && gw_egress_batch_pending(c->egress)) {
    lock_get(c);
    if (gw_egress_write(c->st, c->egress, c->rec.capability, c->rec.user, c->rec.seq, &aerr) < 0)
      r = -EIO; /* every egress decision is recorded, or the result is not handed out */
  }
  if (r < 0) {
    cap_error_clear(err);
    cap_error_set(err, EIO, "%s; the call's result is withheld", aerr.message);
    cap_error_clear(&aerr);
    free(c->out);
    c->out = NULL;
    if (c->call->relay) { /* and so is the server's own form of it */
      free(c->call->relay->raw_result);
      free(c->call->relay->raw_error);
      c->call->relay->raw_result = c->call->relay->raw_error = NULL;
    }
    return GW_OUTCOME_FAILED;
  }
  return o;
}

/* The call ended on its state: at_end run under the lock (unless the
 * audit ran it), the lock let go */
static void call_end(struct call_ctx *c, bool ended)
{
  gw_state_cache_end(c->st);
  if (c->call->at_end && !ended) {
    lock_get(c);
    c->call->at_end(c->call->at_end_ctx);
  }
  lock_put(c);
}

enum gw_outcome gw_call(const struct gw_call *call, const struct gw_registry *reg,
                        struct gw_state *st, struct gw_result *res, struct cap_error *err)
{
  *res = (struct gw_result){0};
  uint64_t start = cap_now_ms(CLOCK_MONOTONIC), cpu_ms = 0;
  struct gw_call measured = *call;
  measured.cpu_ms = &cpu_ms;
  struct gw_egress_batch *egress = cap_xmalloc(sizeof *egress);
  gw_egress_batch_init(egress);
  measured.egress_sink = &egress->sink;
  call = &measured;
  struct call_ctx c = {.call = call,
                       .reg = reg,
                       .egress = egress,
                       .st = st,
                       .rec = {.user = call->user,
                               .capability = call->capability,
                               .tool = call->mcp_method ? call->mcp_method : call->tool,
                               .decision = "error",
                               .outcome = "ok"}};
  gw_sha256_hex(call->args, call->args_len, c.rec.args_hash);
  /* in flight before anything runs, so a capsule killed mid-call still
   * leaves a record (best effort: a state that cannot take the marker
   * cannot take the record either, and step_audit says so) */
  struct cap_error ignored = {0};
  gw_inflight_begin(st, &c.rec, &c.inflight, &ignored); /* a file's: outside serve's lock */
  cap_error_clear(&ignored);                            /* (unless the caller holds it) */
  c.locked = call->state_held;
  lock_get(&c);
  gw_state_cache_begin(st); /* its reads kept while nothing changes */
  /* a warm Selu call writes nothing until its audit (but a new id
   * range): its id range, policy, credentials and grants read in one
   * transaction (serve's pooled connections) */
  if (call->selu_warm_only && !call->mcp_method)
    c.reading = gw_state_read_begin(st);
  enum gw_outcome o = step_resolve(&c, err);
  if (o == GW_OUTCOME_OK && call->mcp_method)
    c.rec.decision = "mcp-request"; /* no tool, no policy: the capability is served */
  else if (o == GW_OUTCOME_OK)
    o = call_step_policy(&c, err);
  if (o == GW_OUTCOME_OK && !call->mcp_method)
    o = step_validate(&c, err);
  bool covenant = c.spec && c.spec->format == CAP_FORMAT_COVENANT, ran = false;
  struct gw_issuer local = {0};
  if (o == GW_OUTCOME_OK && covenant && !measured.issuer) /* every front door's caller */
    if ((o = gw_covenant_local_issuer(st, call->user, &local, err)) == GW_OUTCOME_OK)
      measured.issuer = c.with_ids.issuer = &local; /* c.call is one of them */
  if (o == GW_OUTCOME_OK && covenant)               /* tokens and budget */
    o = gw_covenant_gate(st, c.call, c.spec, c.args->root, &c.rec, err);
  if (o == GW_OUTCOME_OK)
    o = step_credentials(&c, err);
  if (o == GW_OUTCOME_OK && cap_cancel_fired(call->cancel)) /* nothing run for no one */
    o = (cap_error_set(err, ECANCELED, "the call was cancelled by the client"), GW_OUTCOME_FAILED);
  if (o == GW_OUTCOME_OK) {
    gw_inflight_update(&c.inflight, &c.rec); /* an interrupted record names the decision */
    o = step_run(&c, err);
    ran = true;
  }
  reads_done(&c);
  if (ran && covenant) {
    lock_get(&c);
    gw_covenant_settle(st, c.spec, cpu_ms);
  }
  /* the registry's (at_end may let its hold go, on another thread) */
  bool terminal = c.tool && c.tool->terminal_on_success, ended = false;
  free_secrets(&c);
  if (o != GW_OUTCOME_NOT_WARM) /* else nothing ran: the caller runs it again, audited then */
    o = step_audit(&c, o, start, &ended, err);
  call_end(&c, ended);
  /* after the record (a kill in between repeats it, never loses it), and
   * outside serve's lock */
  gw_inflight_end(&c.inflight);
  res->json = c.out;
  res->terminal_on_success = c.out && terminal;
  cap_doc_free(c.args);
  gw_tools_free(&c.dynamic);
  gw_tools_unhold(c.cached_hold);
  free((char *)local.display);
  gw_egress_batch_free(egress);
  free(egress);
  return o;
}
