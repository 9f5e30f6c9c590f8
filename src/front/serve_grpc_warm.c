/* serve --grpc's warm path (serve_internal.h): a Selu tool whose instance
 * runs already is called in the gRPC process itself, on the call's worker
 * thread, through gw_call with selu_warm_only (policy, validation, credentials,
 * the warm instance, audit: the pipeline `capsule call` runs). No fork,
 * no state opened per call: a pool of state connections (one per call in
 * flight, kept for the next), a gRPC channel per warm instance kept
 * between calls (gateway/selu.h), the registry kept and swapped when serve
 * reloads (a call holds the one it started with), the state's private
 * paths resolved once. gRPC does not survive a fork, and this process
 * serves gRPC: whatever would fork a child that speaks it (starting an
 * instance, discovering dynamic tools) or asks a human (policy ask)
 * comes back GW_OUTCOME_NOT_WARM, unaudited, and goes to the call process
 * as before. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "front/grpc_serve.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "gateway/access.h"
#include "gateway/artifact_store.h"
#include "gateway/call.h"
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "gateway/state.h"
#include "image/image.h"

#define WARM_IDLE_STATES 16 /* connections kept idle; more calls at once open more */

struct warm_registry {
  struct gw_registry reg;
  unsigned refs; /* the warm path's own, and one per call holding it */
};

struct serve_grpc_warm {
  const struct serve_options *opt;
  pthread_mutex_t mu; /* around reg, idle */
  struct warm_registry *reg;
  int reload_fd; /* a byte: serve reloaded, so does this */
  struct gw_state *idle[WARM_IDLE_STATES];
  size_t n_idle;
  char **hidden;
  size_t n_hidden;
  struct gw_channels *channels; /* to the warm instances, kept between calls */
  char *logs, *run, *cache, *volumes, *images, *artifacts;
  unsigned record_pause_ms; /* tests: a wait before a record after its answer */
};

static struct warm_registry *registry_load(const char *dir)
{
  struct warm_registry *w = cap_xcalloc(1, sizeof *w);
  struct cap_diags diags = {0};
  gw_registry_load(dir, &w->reg, &diags); /* what loads is served, as serve does */
  cap_diags_free(&diags);
  w->refs = 1;
  return w;
}

static void registry_unref(struct serve_grpc_warm *w, struct warm_registry *r)
{
  pthread_mutex_lock(&w->mu);
  bool last = --r->refs == 0;
  pthread_mutex_unlock(&w->mu);
  if (last) {
    gw_registry_free(&r->reg);
    free(r);
  }
}

/* The registry for one call, reloaded first when serve has reloaded. */
static struct warm_registry *registry_take(struct serve_grpc_warm *w)
{
  char drain[64];
  bool reload = false;
  while (read(w->reload_fd, drain, sizeof drain) > 0)
    reload = true;
  struct warm_registry *fresh = reload ? registry_load(w->opt->caps_dir) : NULL;
  pthread_mutex_lock(&w->mu);
  struct warm_registry *old = fresh ? w->reg : NULL;
  if (fresh)
    w->reg = fresh;
  struct warm_registry *r = w->reg;
  r->refs++;
  pthread_mutex_unlock(&w->mu);
  if (old)
    registry_unref(w, old);
  return r;
}

static struct gw_state *state_take(struct serve_grpc_warm *w, struct cap_error *err)
{
  pthread_mutex_lock(&w->mu);
  struct gw_state *st = w->n_idle ? w->idle[--w->n_idle] : NULL;
  pthread_mutex_unlock(&w->mu);
  if (!st && gw_state_open(w->opt->state_dir, &st, err) < 0)
    return NULL;
  return st;
}

static void state_give(struct serve_grpc_warm *w, struct gw_state *st)
{
  pthread_mutex_lock(&w->mu);
  bool kept = w->n_idle < WARM_IDLE_STATES;
  if (kept)
    w->idle[w->n_idle++] = st;
  pthread_mutex_unlock(&w->mu);
  if (!kept)
    gw_state_close(st);
}

struct serve_grpc_warm *serve_grpc_warm_new(const struct serve_options *opt, int reload_fd)
{
  struct serve_grpc_warm *w = cap_xcalloc(1, sizeof *w);
  w->opt = opt;
  pthread_mutex_init(&w->mu, NULL);
  w->reload_fd = reload_fd;
  w->reg = registry_load(opt->caps_dir);
  w->n_hidden = gw_state_private_paths(opt->state_dir, &w->hidden);
  w->logs = cap_xasprintf("%s/logs", opt->state_dir);
  w->run = cap_xasprintf("%s/run", opt->state_dir);
  w->cache = cap_xasprintf("%s/cache", opt->state_dir);
  w->volumes = cap_xasprintf("%s/volumes", opt->state_dir);
  w->images = image_store_dir(opt->state_dir);
  w->artifacts = gw_artifact_store_dir(opt->state_dir);
  w->channels = gw_channels_new_deferred();                   /* flushed once each answer went */
  const char *pause = getenv("CAPSULE_TEST_RECORD_PAUSE_MS"); /* tests/front/serve_grpc_record.sh */
  unsigned long ms = pause ? strtoul(pause, NULL, 10) : 0;
  w->record_pause_ms = ms < 60000 ? (unsigned)ms : 60000; /* a minute at most */
  return w;
}

/* The call on spec (of r's registry) with selu_warm_only, on a pooled
 * state connection. */
static enum gw_outcome warm_run(struct serve_grpc_warm *w, struct warm_registry *r,
                                const struct cap_spec *spec, const struct serve_warm_call *in,
                                struct gw_result *res, struct cap_error *err)
{
  struct gw_state *st = state_take(w, err);
  if (!st) /* a process of its own says why, opening its own */
    return GW_OUTCOME_NOT_WARM;
  struct gw_call c = {
      .capability = spec->id,
      .tool = in->tool,
      .args = in->args,
      .args_len = in->args_len,
      .user = in->user,
      .deadline_ms = in->deadline_ms ? in->deadline_ms : w->opt->deadline_ms,
      .log_dir = w->logs,
      .run_dir = w->run,
      .cache_dir = w->cache,
      .volumes_dir = w->volumes,
      .image_dir = w->images,
      .artifact_store = w->artifacts,
      .session_id = in->session_id,
      .thread_id = in->thread_id,
      .hidden = (const char *const *)w->hidden,
      .n_hidden = w->n_hidden,
      .selu_warm_only = true,
      .channels = w->channels,
      .cancel = in->cancel,
      .wait = in->wait,
      .audit_later = in->later,
      .warn = serve_call_warn,
      .warn_ctx = (void *)w->opt,
  };
  enum gw_outcome o = gw_call(&c, &r->reg, st, res, err);
  state_give(w, st);
  return o;
}

enum gw_outcome serve_grpc_warm_run(struct serve_grpc_warm *w, const struct serve_warm_call *in,
                                    struct gw_result *res, struct cap_error *err)
{
  *res = (struct gw_result){0};
  struct warm_registry *r = registry_take(w);
  const struct cap_spec *spec = gw_registry_find(&r->reg, in->capability);
  enum gw_outcome o = GW_OUTCOME_NOT_WARM; /* not found here: its message, or its sandbox: cold */
  if (spec && spec->runtime.kind == CAP_RUNTIME_GRPC)
    o = warm_run(w, r, spec, in, res, err);
  registry_unref(w, r);
  return o;
}

bool serve_grpc_warm_call(struct serve_grpc_warm *w, const struct grpc_serve_call *call,
                          const char *user, struct serve_grpc_head *h, char **text,
                          struct gw_audit_later **later)
{
  *later = NULL;
  struct warm_registry *r = registry_take(w);
  const char *tool = NULL;
  const struct cap_spec *spec = serve_grpc_resolve(&r->reg, w->opt->only, call->tool_name, &tool);
  if (!spec || spec->runtime.kind != CAP_RUNTIME_GRPC) { /* its message, or its sandbox: cold */
    registry_unref(w, r);
    return false;
  }
  const char *args = call->parameters && *call->parameters ? call->parameters : "{}";
  struct serve_warm_call in = {
      .tool = tool,
      .args = args,
      .args_len = strlen(args),
      .user = user,
      .session_id = call->session_id && *call->session_id ? call->session_id : NULL,
      .thread_id = call->thread_id && *call->thread_id ? call->thread_id : NULL,
      .deadline_ms = serve_grpc_deadline(w->opt->deadline_ms, call->deadline_ms),
      .cancel = call->cancel,
      .wait = call->wait,
      .later = later};
  struct gw_result res = {0};
  struct cap_error err = {0};
  enum gw_outcome o = warm_run(w, r, spec, &in, &res, &err);
  registry_unref(w, r);
  if (o == GW_OUTCOME_NOT_WARM) {
    cap_error_clear(&err);
    return false;
  }
  /* a result naming output artifacts: their records (serve_grpc_artifacts_out)
   * follow the call's in the log */
  if (*later && res.json && strstr(res.json, GW_ARTIFACT_ID_PREFIX)) {
    serve_grpc_warm_commit(w, *later);
    *later = NULL;
  }
  *h = (struct serve_grpc_head){.outcome = (int32_t)o, .code = err.code};
  if (o == GW_OUTCOME_OK && res.json)
    *text = res.json;
  else {
    *text = cap_xstrdup(o == GW_OUTCOME_OK ? "null" : err.message ? err.message : "failed");
    free(res.json);
  }
  cap_error_clear(&err);
  return true;
}

void serve_grpc_warm_flush(struct serve_grpc_warm *w) { gw_channels_flush(w->channels); }

void serve_grpc_warm_commit(struct serve_grpc_warm *w, struct gw_audit_later *l)
{
  if (!l)
    return;
  if (w->record_pause_ms)
    usleep(w->record_pause_ms * 1000u);
  struct cap_error err = {0};
  struct gw_state *st = state_take(w, &err);
  /* not in: the marker keeps the record for the next open (its error
   * was the call's to say, and the call is answered) */
  if (gw_audit_later_commit(l, st, &err) < 0 && err.message)
    serve_call_warn((void *)w->opt, err.message);
  if (st)
    state_give(w, st);
  cap_error_clear(&err);
}

int serve_grpc_warm_access(struct serve_grpc_warm *w, const char *token, char **user)
{
  struct cap_error err = {0};
  struct gw_state *st = state_take(w, &err);
  bool op = false;
  int r = st ? gw_access_check(st, token, user, &op, &err) : -EIO;
  if (st)
    state_give(w, st);
  cap_error_clear(&err);
  return r;
}

void serve_grpc_warm_trim_states(struct serve_grpc_warm *w, size_t keep)
{
  struct gw_state *gone[WARM_IDLE_STATES];
  pthread_mutex_lock(&w->mu);
  size_t n = 0;
  while (w->n_idle > keep)
    gone[n++] = w->idle[--w->n_idle];
  pthread_mutex_unlock(&w->mu);
  for (size_t i = 0; i < n; i++)
    gw_state_close(gone[i]);
}

void serve_grpc_warm_close_states(struct serve_grpc_warm *w) { serve_grpc_warm_trim_states(w, 0); }

void serve_grpc_warm_free(struct serve_grpc_warm *w)
{
  if (!w)
    return;
  for (size_t i = 0; i < w->n_idle; i++)
    gw_state_close(w->idle[i]);
  registry_unref(w, w->reg);
  gw_channels_free(w->channels);
  gw_state_private_paths_free(w->hidden, w->n_hidden);
  free(w->logs);
  free(w->run);
  free(w->cache);
  free(w->volumes);
  free(w->images);
  free(w->artifacts);
  close(w->reload_fd);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
