/* Push triggers in `capsule triggers run` (cli/triggers.h), as Talos's
 * subscriber runs them (apps/server/src/triggers/subscriber.ts): a trigger
 * whose module exports subscribe is not polled; the poller keeps one
 * subscription per such enabled trigger, each in a child process with its
 * own handle on the state running the plugin's subscribe in its sandbox
 * (runtime/talos.h). Each emitted event is stored (the trigger's state
 * unchanged), printed, audited and, when the operator attached a call and
 * the trigger's filter passes the event, handed to it, at most once per
 * cooldown (the call's `cooldown_seconds` param when above 0, else 60 s,
 * as Talos's). A subscription that ends is started again a minute later;
 * SIGTERM stops each one (the plugin's unsubscribe runs) before the poller
 * exits. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/triggers.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/escape.h"
#include "core/json.h"
#include "gateway/egress_store.h"
#include "gateway/grants.h"
#include "runtime/talos.h"

#define RESTART_MS 60000
#define DEFAULT_COOLDOWN_MS 60000
#define STOP_WAIT_MS 10000

bool *triggers_push_kinds(const struct poll_env *e, const struct cap_spec *spec)
{
  if (spec->runtime.kind != CAP_RUNTIME_TALOS_NODE || !spec->n_triggers)
    return NULL;
  struct gw_talos_config cfg = {0};
  struct cap_error err = {0};
  bool *kinds = cap_xcalloc(spec->n_triggers, sizeof *kinds);
  enum gw_outcome o = GW_OUTCOME_FAILED;
  struct gw_call call = {
      .capability = spec->id,
      .user = e->o->user,
      .deadline_ms = 30000,
      .output_cap = 1u << 20,
      .cache_dir = e->cache,
      .hidden = (const char *const *)e->hidden,
      .n_hidden = e->n_hidden,
  };
  struct gw_granted g;
  if (gw_talos_config_load(e->st, spec, e->o->user, NULL, &cfg, &err) == 0 &&
      gw_spec_with_grants(e->st, spec, &g, &err) == 0) {
    o = talos_probe(&call, &g.spec, &cfg.in, kinds, &err);
    gw_granted_free(&g);
  }
  gw_talos_config_free(&cfg, spec);
  if (o != GW_OUTCOME_OK) {
    fprintf(stderr, "capsule triggers run: %s: cannot load the plugin to see which triggers push: ",
            spec->id);
    cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
    fputs("; its triggers are polled\n", stderr);
    free(kinds);
    kinds = NULL;
  }
  cap_error_clear(&err);
  return kinds;
}

void triggers_push_add(struct push_set *set, const struct cap_spec *spec,
                       const struct cap_trigger *t)
{
  set->v = cap_xrealloc(set->v, (set->n + 1) * sizeof *set->v);
  set->v[set->n++] = (struct push_sub){spec, t, 0, cap_now_ms(CLOCK_MONOTONIC)};
  fprintf(stderr, "capsule triggers run: subscribing to %s (a push trigger: not polled)\n", t->id);
}

/* ---- in the subscription's process ---- */

struct sub {
  struct poll_env e;
  const struct cap_spec *spec;
  const struct cap_trigger *t;
  char *call_cap, *call_tool;
  uint64_t cooldown_ms, last_call_ms;
  bool called;
  struct gw_egress_batch egress; /* the subscription's egress decisions since the last event */
};

/* The subscription's egress decisions so far, stored with the audit
 * record audit_seq (an event's; 0: none, at the subscription's end). */
static void store_egress(struct sub *s, int64_t audit_seq)
{
  struct gw_egress_batch now;
  gw_egress_batch_init(&now);
  gw_egress_batch_take(&s->egress, &now); /* the proxy's threads keep adding to s->egress */
  struct cap_error err = {0};
  if (gw_egress_write(s->e.st, &now, s->spec->id, s->e.o->user, audit_seq, &err) < 0) {
    fprintf(stderr, "capsule triggers run: %s: its egress log was not stored: ", s->t->id);
    cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
    fputc('\n', stderr);
  }
  cap_error_clear(&err);
  gw_egress_batch_free(&now);
}

/* Talos's getCooldownSeconds: the task config's cooldown_seconds when a
 * number above 0, else 60 s. */
static uint64_t cooldown_of(const char *params)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  uint64_t ms = DEFAULT_COOLDOWN_MS;
  if (params && cap_json_parse(doc, params, strlen(params), "params", 0, &diags) == 0 &&
      doc->root->kind == CAP_NODE_OBJECT) {
    const struct cap_node *v = cap_node_get(doc->root, "cooldown_seconds");
    if (v && cap_node_is_number(v) && v->u.num.f > 0 && v->u.num.f < 1e9)
      ms = (uint64_t)(v->u.num.f * 1000.0);
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return ms;
}

static void on_event(void *arg, const char *event, bool pass)
{
  struct sub *s = arg;
  struct cap_error err = {0};
  _cleanup_free_ char *state = NULL;
  int64_t seq = 0, audit_seq = 0;
  const char *user = s->e.o->user;
  if (gw_trigger_state_get(s->e.st, s->spec->id, s->t->local_id, user, &state, &err) < 0 ||
      gw_trigger_commit(s->e.st, s->spec->id, s->t->local_id, user, state, event, &seq, &err) < 0 ||
      triggers_audit_event(s->e.st, user, s->spec, s->t, event, seq, &audit_seq, &err) < 0) {
    fprintf(stderr, "capsule triggers run: %s: an event was not stored: ", s->t->id);
    cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
    fputc('\n', stderr);
    cap_error_clear(&err);
    return;
  }
  store_egress(s, audit_seq); /* what the subscription did leading to this event */
  _cleanup_free_ char *shown = cap_json_canonical(event, strlen(event));
  printf("%s\n", shown ? shown : event);
  fflush(stdout);
  if (!s->call_cap || !s->call_tool)
    return;
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  if (!pass)
    fprintf(stderr, "capsule triggers: %s.%s not called: the trigger's filter declined the event\n",
            s->call_cap, s->call_tool);
  else if (s->called && now - s->last_call_ms < s->cooldown_ms)
    fprintf(stderr, "capsule triggers: %s.%s not called: within its cooldown (%.3g s)\n",
            s->call_cap, s->call_tool, (double)s->cooldown_ms / 1000.0);
  else {
    s->called = true;
    s->last_call_ms = now;
    triggers_call_on_event(&s->e, s->call_cap, s->call_tool, event);
  }
}

static enum gw_outcome subscribe_here(struct sub *s, struct cap_error *err)
{
  const char *user = s->e.o->user;
  bool enabled;
  _cleanup_free_ char *params = NULL;
  if (gw_trigger_config(s->e.st, s->spec->id, s->t->local_id, false, &enabled, &s->call_cap,
                        &s->call_tool, &params, err) < 0)
    return GW_OUTCOME_FAILED;
  s->cooldown_ms = cooldown_of(params);
  char **secrets = NULL;
  struct gw_talos_config cfg = {0};
  if (gw_talos_secrets_load(s->e.st, s->spec, user, &secrets, err) < 0 ||
      gw_talos_config_load(s->e.st, s->spec, user, secrets, &cfg, err) < 0) {
    gw_talos_secrets_free(secrets, s->spec);
    return GW_OUTCOME_FAILED;
  }
  struct gw_call call = {
      .capability = s->spec->id,
      .tool = s->t->local_id,
      .user = user,
      .log_dir = s->e.logs,
      .cache_dir = s->e.cache,
      .hidden = (const char *const *)s->e.hidden,
      .n_hidden = s->e.n_hidden,
      .egress_sink = &s->egress.sink,
  };
  struct gw_granted g;
  enum gw_outcome o = GW_OUTCOME_FAILED;
  if (gw_spec_with_grants(s->e.st, s->spec, &g, err) == 0) {
    o = talos_subscribe(&call, &g.spec, s->t->local_id, &cfg.in,
                        s->call_cap ? (params ? params : "{}") : NULL, on_event, s, err);
    gw_granted_free(&g);
  }
  gw_talos_config_free(&cfg, s->spec);
  gw_talos_secrets_free(secrets, s->spec);
  return o;
}

static void subscription_main(const struct poll_env *e, const struct push_sub *p)
{
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  struct gw_state *st = NULL;
  if (open_state(e->o, &st))
    _exit(CLI_EXIT_INVALID);
  struct sub s = {.e = *e, .spec = p->spec, .t = p->trigger};
  s.e.st = st;
  gw_egress_batch_init(&s.egress);
  struct cap_error err = {0};
  enum gw_outcome o = subscribe_here(&s, &err);
  store_egress(&s, 0); /* after the last event: with no record */
  gw_egress_batch_free(&s.egress);
  if (o != GW_OUTCOME_OK) {
    fprintf(stderr, "capsule triggers run: %s: the subscription ended: ", p->trigger->id);
    cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
    fputc('\n', stderr);
  }
  cap_error_clear(&err);
  free(s.call_cap);
  free(s.call_tool);
  gw_state_close(st);
  fflush(stdout);
  fflush(stderr);
  _exit(o == GW_OUTCOME_OK ? 0 : 1);
}

/* ---- in the poller ---- */

void triggers_push_tick(const struct poll_env *e, struct push_set *set)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  for (size_t i = 0; i < set->n; i++) {
    struct push_sub *p = &set->v[i];
    int status;
    if (p->pid > 0 && waitpid(p->pid, &status, WNOHANG) == p->pid) {
      p->pid = 0;
      p->restart_ms = now + RESTART_MS;
      fprintf(stderr, "capsule triggers run: %s: the subscription ended; again in 1 min\n",
              p->trigger->id);
    }
    if (p->pid || now < p->restart_ms || triggers_stopping)
      continue;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
      subscription_main(e, p);
    if (pid < 0) {
      fprintf(stderr, "capsule triggers run: %s: cannot fork: %s; again in 1 min\n", p->trigger->id,
              strerror(errno));
      p->restart_ms = now + RESTART_MS;
      continue;
    }
    p->pid = pid;
  }
}

void triggers_push_stop(struct push_set *set)
{
  for (size_t i = 0; i < set->n; i++)
    if (set->v[i].pid > 0)
      kill(set->v[i].pid, SIGTERM);
  uint64_t until = cap_now_ms(CLOCK_MONOTONIC) + STOP_WAIT_MS;
  for (size_t i = 0; i < set->n; i++) {
    struct push_sub *p = &set->v[i];
    while (p->pid > 0) {
      int status;
      if (waitpid(p->pid, &status, WNOHANG) != 0)
        break;
      if (cap_now_ms(CLOCK_MONOTONIC) > until)
        kill(p->pid, SIGKILL); /* the sandbox dies with it */
      struct timespec ts = {0, 50 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    p->pid = 0;
  }
  free(set->v);
  *set = (struct push_set){0};
}
