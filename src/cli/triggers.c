/* `capsule triggers poll|enable|disable|on|run` and `capsule events`: a
 * Talos trigger polled in its sandbox (runtime/talos.h) with the stored
 * config and its persisted state; the new state stored with the event in
 * one transaction (gateway/plugin_state.h), the event audited and, when
 * the operator named one, a tool called with it through the normal call
 * pipeline. `run` is the long-running poller: each enabled trigger at the
 * interval Talos's poller chooses (the first setting whose name holds
 * "poll_interval", in minutes; else 5 minutes), the first poll 5 s after
 * start, a lease in the state so two pollers never poll one trigger at
 * once, failures logged and retried at the next interval, SIGTERM or
 * SIGINT ending it after the poll in progress; push triggers (a module's
 * subscribe) are subscribed to instead (triggers_push.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "cli/plugin.h"
#include "cli/triggers.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/escape.h"
#include "core/json.h"
#include "gateway/call.h"
#include "gateway/egress_store.h"
#include "gateway/grants.h"
#include "gateway/plugin_state.h"
#include "runtime/talos.h"

#define FIRST_POLL_MS 5000
#define DEFAULT_INTERVAL_MS (5 * 60 * 1000)

volatile sig_atomic_t triggers_stopping;
#define stopping triggers_stopping
static void on_stop(int sig) { stopping = sig; }

static void catch_stop(void)
{
  struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

static const struct cap_trigger *find_trigger(const struct cap_spec *spec, const char *id)
{
  for (size_t i = 0; i < spec->n_triggers; i++)
    if (strcmp(spec->triggers[i].local_id, id) == 0 || strcmp(spec->triggers[i].id, id) == 0)
      return &spec->triggers[i];
  return NULL;
}

static void poll_env_init(struct poll_env *e, const struct common *o, const struct gw_registry *reg,
                          struct gw_state *st)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  const char *dir = o->state ? o->state : dflt;
  *e = (struct poll_env){.o = o, .reg = reg, .st = st};
  e->logs = cap_xasprintf("%s/logs", dir);
  e->cache = cap_xasprintf("%s/cache", dir);
  e->run = cap_xasprintf("%s/run", dir);
  e->n_hidden = gw_state_private_paths(dir, &e->hidden);
}

static void poll_env_free(struct poll_env *e)
{
  free(e->logs);
  free(e->cache);
  free(e->run);
  gw_state_private_paths_free(e->hidden, e->n_hidden);
}

/* The tool the operator attached to the trigger, called with {"event": E}. */
void triggers_call_on_event(const struct poll_env *e, const char *cap, const char *tool,
                            const char *event)
{
  _cleanup_free_ char *args = cap_xasprintf("{\"event\":%s}", event);
  struct gw_call call = {
      .capability = cap,
      .tool = tool,
      .args = args,
      .args_len = strlen(args),
      .user = e->o->user,
      .deadline_ms = e->o->timeout_s * 1000,
      .log_dir = e->logs,
      .run_dir = e->run,
      .cache_dir = e->cache,
      .hidden = (const char *const *)e->hidden,
      .n_hidden = e->n_hidden,
  };
  struct gw_result res = {0};
  struct cap_error err = {0};
  enum gw_outcome o = gw_call(&call, e->reg, e->st, &res, &err);
  fprintf(stderr, "capsule triggers: %s.%s on the event: ", cap, tool);
  if (o == GW_OUTCOME_OK)
    fputs("ok\n", stderr);
  else {
    cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
    fputc('\n', stderr);
  }
  cap_error_clear(&err);
  free(res.json);
}

/* The event's own audit record: who, which trigger, the event's hash. */
int triggers_audit_event(struct gw_state *st, const char *user, const struct cap_spec *spec,
                         const struct cap_trigger *t, const char *event, int64_t seq,
                         int64_t *audit_seq, struct cap_error *err)
{
  _cleanup_free_ char *tool = cap_xasprintf("trigger:%s", t->local_id);
  _cleanup_free_ char *outcome = cap_xasprintf("event %lld", (long long)seq);
  struct gw_audit_record rec = {.user = user,
                                .capability = spec->id,
                                .tool = tool,
                                .decision = "trigger",
                                .outcome = outcome};
  gw_sha256_hex("", 0, rec.args_hash);
  gw_sha256_hex(event, strlen(event), rec.result_hash);
  int r = gw_audit_append(st, &rec, err);
  if (r == 0 && audit_seq)
    *audit_seq = rec.seq;
  return r;
}

/* One poll: state in, {event, newState} out, stored together; the event
 * printed (one JSON line), audited (*audit_seq), and handed to the
 * attached call. The poll's egress decisions go to egress. */
static enum gw_outcome poll_run(const struct poll_env *e, const struct cap_spec *spec,
                                const struct cap_trigger *t, struct gw_egress_batch *egress,
                                int64_t *audit_seq, struct cap_error *err)
{
  const char *user = e->o->user;
  char **secrets = NULL;
  struct gw_talos_config cfg = {0};
  _cleanup_free_ char *state = NULL, *event = NULL, *new_state = NULL;
  bool enabled, pass = true;
  _cleanup_free_ char *call_cap = NULL, *call_tool = NULL, *params = NULL;
  if (gw_trigger_config(e->st, spec->id, t->local_id, false, &enabled, &call_cap, &call_tool,
                        &params, err) < 0)
    return GW_OUTCOME_FAILED;
  if (gw_talos_secrets_load(e->st, spec, user, &secrets, err) < 0 ||
      gw_talos_config_load(e->st, spec, user, secrets, &cfg, err) < 0 ||
      gw_trigger_state_get(e->st, spec->id, t->local_id, user, &state, err) < 0) {
    gw_talos_secrets_free(secrets, spec);
    return GW_OUTCOME_FAILED;
  }
  struct gw_call call = {
      .capability = spec->id,
      .tool = t->local_id,
      .user = user,
      .deadline_ms = e->o->timeout_s * 1000,
      .log_dir = e->logs,
      .cache_dir = e->cache,
      .hidden = (const char *const *)e->hidden,
      .n_hidden = e->n_hidden,
      .egress_sink = &egress->sink,
  };
  struct gw_granted g;
  enum gw_outcome o = GW_OUTCOME_FAILED;
  if (gw_spec_with_grants(e->st, spec, &g, err) == 0) {
    o = talos_poll(&call, &g.spec, t->local_id, &cfg.in, state,
                   call_cap ? (params ? params : "{}") : NULL, &event, &new_state, &pass, err);
    gw_granted_free(&g);
  }
  gw_talos_config_free(&cfg, spec);
  gw_talos_secrets_free(secrets, spec);
  if (o != GW_OUTCOME_OK)
    return o;
  int64_t seq = 0;
  if (gw_trigger_commit(e->st, spec->id, t->local_id, user, new_state, event, &seq, err) < 0)
    return GW_OUTCOME_FAILED;
  if (!event)
    return GW_OUTCOME_OK;
  _cleanup_free_ char *shown = cap_json_canonical(event, strlen(event));
  printf("%s\n", shown ? shown : event);
  fflush(stdout);
  if (triggers_audit_event(e->st, user, spec, t, event, seq, audit_seq, err) < 0)
    return GW_OUTCOME_FAILED;
  if (call_cap && call_tool && pass)
    triggers_call_on_event(e, call_cap, call_tool, event);
  else if (call_cap && call_tool)
    fprintf(stderr, "capsule triggers: %s.%s not called: the trigger's filter declined the event\n",
            call_cap, call_tool);
  return GW_OUTCOME_OK;
}

/* A poll, and its egress decisions stored after it (docs/state.md): with
 * its event's audit record, or with none when it found no event. */
static enum gw_outcome poll_once(const struct poll_env *e, const struct cap_spec *spec,
                                 const struct cap_trigger *t, struct cap_error *err)
{
  struct gw_egress_batch egress;
  gw_egress_batch_init(&egress);
  int64_t audit_seq = 0;
  enum gw_outcome o = poll_run(e, spec, t, &egress, &audit_seq, err);
  struct cap_error werr = {0};
  if (gw_egress_write(e->st, &egress, spec->id, e->o->user, audit_seq, &werr) < 0) {
    fprintf(stderr, "capsule triggers: %s: the poll's egress log was not stored: ", t->id);
    cap_escape_fput(stderr, werr.message ? werr.message : "failed", 4096);
    fputc('\n', stderr);
  }
  cap_error_clear(&werr);
  gw_egress_batch_free(&egress);
  return o;
}

static int outcome_exit(enum gw_outcome o)
{
  return o == GW_OUTCOME_OK                    ? CLI_EXIT_OK
         : o == GW_OUTCOME_HOST_CANNOT_ENFORCE ? CLI_EXIT_HOST
                                               : CLI_EXIT_INVALID;
}

static int not_a_trigger(const struct cap_spec *spec, const char *id)
{
  fprintf(stderr, "capsule triggers: capability %s declares no trigger '", spec->id);
  cap_escape_fput(stderr, id, 200);
  fputs("'; its triggers:", stderr);
  for (size_t i = 0; i < spec->n_triggers; i++)
    fprintf(stderr, " %s", spec->triggers[i].local_id);
  fputs(spec->n_triggers ? "\n" : " none\n", stderr);
  return CLI_EXIT_INVALID;
}

static int triggers_poll(const struct poll_env *e, const struct cap_spec *spec,
                         const struct cap_trigger *t)
{
  struct cap_error err = {0};
  enum gw_outcome o = poll_once(e, spec, t, &err);
  if (o != GW_OUTCOME_OK) {
    fprintf(stderr, "capsule triggers poll: %s:%s: ", spec->id, t->local_id);
    cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
    fputs("; nothing was stored\n", stderr);
  }
  cap_error_clear(&err);
  return outcome_exit(o);
}

/* ---- the poller ---- */

/* Talos's choice: the first setting whose name holds "poll_interval"
 * (stored, else its default), in minutes, when above 0. */
static uint64_t interval_ms(struct gw_state *st, const struct cap_spec *spec, const char *user)
{
  for (size_t i = 0; i < spec->n_settings; i++) {
    const struct cap_setting *s = &spec->settings[i];
    if (!strstr(s->name, "poll_interval"))
      continue;
    _cleanup_free_ char *v = NULL;
    struct cap_error err = {0};
    gw_setting_get(st, spec->id, user, s->name, &v, &err);
    cap_error_clear(&err);
    if (!v && s->default_value && cap_node_is_number(s->default_value)) {
      struct cap_buf b = {0};
      struct cap_jw w;
      cap_jw_init(&w, &b, false);
      cap_jw_node(&w, s->default_value);
      v = cap_buf_steal(&b);
    }
    double minutes = v ? strtod(v, NULL) : 0;
    if (minutes >= 525600.0) /* at most a year */
      return 525600ull * 60000;
    if (minutes > 0) /* at least a millisecond */
      return (uint64_t)(minutes * 60000.0) ? (uint64_t)(minutes * 60000.0) : 1;
    break;
  }
  return DEFAULT_INTERVAL_MS;
}

struct schedule {
  const struct cap_spec *spec;
  const struct cap_trigger *trigger;
  uint64_t next_ms, every_ms;
};

/* One poll in a child process with its own handle on the state: the
 * sandbox's supervisor forwards SIGTERM to the tool it waits for, so the
 * poller itself must not be the one waiting when the operator stops it. */
static void poll_in_child(const struct poll_env *e, const struct schedule *s)
{
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    struct gw_state *st = NULL;
    if (open_state(e->o, &st))
      _exit(CLI_EXIT_INVALID);
    struct poll_env mine = *e;
    mine.st = st;
    struct cap_error err = {0};
    enum gw_outcome o = poll_once(&mine, s->spec, s->trigger, &err);
    if (o != GW_OUTCOME_OK) {
      fprintf(stderr, "capsule triggers run: %s: the poll failed: ", s->trigger->id);
      cap_escape_fput(stderr, err.message ? err.message : "failed", 4096);
      fprintf(stderr, "; retried in %.3g min\n", (double)s->every_ms / 60000.0);
    }
    gw_state_close(st);
    fflush(stdout);
    fflush(stderr);
    _exit(outcome_exit(o));
  }
  if (pid < 0) {
    fprintf(stderr, "capsule triggers run: %s: cannot fork: %s; retried at the next interval\n",
            s->trigger->id, strerror(errno));
    return;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

static void poller_tick(const struct poll_env *e, struct schedule *s, const char *holder)
{
  struct cap_error err = {0};
  bool taken = false;
  uint64_t ttl = (e->o->timeout_s ? e->o->timeout_s * 1000 : GW_DEFAULT_DEADLINE_MS) + 60000;
  if (gw_trigger_lease(e->st, s->spec->id, s->trigger->local_id, e->o->user, holder, (int64_t)ttl,
                       &taken, &err) < 0 ||
      !taken) {
    fprintf(stderr, "capsule triggers run: %s: %s; skipped this round\n", s->trigger->id,
            taken ? err.message : "another poller holds it");
    cap_error_clear(&err);
    return;
  }
  poll_in_child(e, s);
  gw_trigger_release(e->st, s->spec->id, s->trigger->local_id, e->o->user, holder, &err);
  cap_error_clear(&err);
}

static size_t poller_plan(const struct poll_env *e, struct schedule **out, struct push_set *push)
{
  struct schedule *v = NULL;
  size_t n = 0;
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  for (size_t i = 0; i < e->reg->n; i++) {
    const struct cap_spec *spec = e->reg->caps[i];
    bool *pushes = NULL, probed = false; /* loaded once, for an enabled trigger */
    for (size_t k = 0; spec->runtime.kind == CAP_RUNTIME_TALOS_NODE && k < spec->n_triggers; k++) {
      bool enabled = false;
      _cleanup_free_ char *cc = NULL, *ct = NULL;
      struct cap_error err = {0};
      gw_trigger_config(e->st, spec->id, spec->triggers[k].local_id, spec->talos.default_enabled,
                        &enabled, &cc, &ct, NULL, &err);
      cap_error_clear(&err);
      if (!enabled)
        continue;
      if (!probed) {
        pushes = triggers_push_kinds(e, spec);
        probed = true;
      }
      if (pushes && pushes[k]) { /* Talos subscribes to it instead of polling */
        triggers_push_add(push, spec, &spec->triggers[k]);
        continue;
      }
      v = cap_xrealloc(v, (n + 1) * sizeof *v);
      v[n] = (struct schedule){spec, &spec->triggers[k], now + FIRST_POLL_MS,
                               interval_ms(e->st, spec, e->o->user)};
      fprintf(stderr, "capsule triggers run: polling %s every %.3g min (first in 5 s)\n",
              spec->triggers[k].id, (double)v[n].every_ms / 60000.0);
      n++;
    }
    free(pushes);
  }
  *out = v;
  return n;
}

static int triggers_run(const struct poll_env *e)
{
  catch_stop();
  struct schedule *plan = NULL;
  struct push_set push = {0};
  size_t n = poller_plan(e, &plan, &push);
  if (!n && !push.n)
    fprintf(stderr, "capsule triggers run: no enabled trigger (enable one with `capsule "
                    "triggers enable CAPABILITY TRIGGER`); waiting for SIGTERM\n");
  char holder[96];
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  snprintf(holder, sizeof holder, "%s:%d", host, (int)getpid());
  while (!stopping) {
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    for (size_t i = 0; i < n && !stopping; i++)
      if (now >= plan[i].next_ms) {
        poller_tick(e, &plan[i], holder);
        plan[i].next_ms = cap_now_ms(CLOCK_MONOTONIC) + plan[i].every_ms;
      }
    if (!stopping)
      triggers_push_tick(e, &push);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  triggers_push_stop(&push);
  fprintf(stderr, "capsule triggers run: stopped (%s)\n",
          stopping == SIGTERM ? "SIGTERM" : "SIGINT");
  free(plan);
  return CLI_EXIT_OK;
}

/* ---- the verb ---- */

/* Takes `--call CAP TOOL` and each `--param NAME=VALUE` out of argv (the
 * common parser does not know them). */
static int take_call(int *argc, char **argv, const char **cap, const char **tool,
                     struct cap_strv *params)
{
  for (int i = 1; i < *argc;) {
    bool call = strcmp(argv[i], "--call") == 0, param = strcmp(argv[i], "--param") == 0;
    if (!call && !param) {
      i++;
      continue;
    }
    int n = call ? 3 : 2;
    if (i + n - 1 >= *argc)
      return cli_usage_error("triggers", call ? "--call needs a CAPABILITY and a TOOL"
                                              : "--param needs NAME=VALUE");
    if (call) {
      *cap = argv[i + 1];
      *tool = argv[i + 2];
    } else {
      cap_strv_push(params, argv[i + 1]);
    }
    memmove(&argv[i], &argv[i + n], (size_t)(*argc - i - n + 1) * sizeof *argv);
    *argc -= n;
  }
  return 0;
}

/* The declared param named name (t->params: [{key, type, default}...]). */
static const struct cap_node *find_param(const struct cap_trigger *t, const char *name, size_t len)
{
  for (size_t i = 0; t->params && t->params->kind == CAP_NODE_ARRAY && i < t->params->u.arr.len;
       i++) {
    const struct cap_node *key = cap_node_get(t->params->u.arr.items[i], "key");
    if (key && key->kind == CAP_NODE_STRING && key->u.str.len == len &&
        memcmp(key->u.str.ptr, name, len) == 0)
      return t->params->u.arr.items[i];
  }
  return NULL;
}

static void param_value(struct cap_jw *w, const struct cap_node *p, const char *value)
{
  const struct cap_node *type = cap_node_get(p, "type");
  const char *ty = type && type->kind == CAP_NODE_STRING ? type->u.str.ptr : "string";
  char *end;
  double num = strtod(value, &end);
  if (strcmp(ty, "number") == 0 && *value && !*end) {
    if (num == (double)(int64_t)num && num > -9e15 && num < 9e15)
      cap_jw_int(w, (int64_t)num); /* 2, not 2.0: as JSON.parse gives it */
    else
      cap_jw_double(w, num);
  } else if (strcmp(ty, "multi-select") == 0) { /* "a,b" -> ["a", "b"] */
    cap_jw_begin_array(w);
    for (const char *q = value; *value;) {
      const char *comma = strchr(q, ',');
      cap_jw_string_n(w, q, comma ? (size_t)(comma - q) : strlen(q));
      if (!comma)
        break;
      q = comma + 1;
    }
    cap_jw_end_array(w);
  } else {
    cap_jw_string(w, value);
  }
}

/* The attached call's task configuration, as Talos keeps a task's
 * triggerConfig: every declared param, the given value (typed by the
 * param's type) or its default; an unknown name or a value of the wrong
 * type is refused. Allocated JSON, or NULL (printed). */
static char *task_config(const struct cap_trigger *t, const struct cap_strv *given)
{
  for (size_t i = 0; i < given->len; i++) {
    const char *eq = strchr(given->v[i], '=');
    const struct cap_node *p = eq ? find_param(t, given->v[i], (size_t)(eq - given->v[i])) : NULL;
    const struct cap_node *type = p ? cap_node_get(p, "type") : NULL;
    char *end = NULL;
    if (p && type && type->kind == CAP_NODE_STRING && !strcmp(type->u.str.ptr, "number"))
      strtod(eq + 1, &end);
    if (!p || (end && (end == eq + 1 || *end))) {
      fprintf(stderr, "capsule triggers: --param ");
      cap_escape_fput(stderr, given->v[i], 200);
      fprintf(stderr, ": %s; %s declares:",
              !eq  ? "give NAME=VALUE"
              : !p ? "no such param"
                   : "not a number",
              t->id);
      for (size_t k = 0; t->params && t->params->kind == CAP_NODE_ARRAY && k < t->params->u.arr.len;
           k++) {
        const struct cap_node *key = cap_node_get(t->params->u.arr.items[k], "key");
        if (key && key->kind == CAP_NODE_STRING)
          fprintf(stderr, " %s", key->u.str.ptr);
      }
      fputc('\n', stderr);
      return NULL;
    }
  }
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  for (size_t k = 0; t->params && t->params->kind == CAP_NODE_ARRAY && k < t->params->u.arr.len;
       k++) {
    const struct cap_node *p = t->params->u.arr.items[k], *key = cap_node_get(p, "key");
    if (!key || key->kind != CAP_NODE_STRING)
      continue;
    const char *value = NULL;
    for (size_t i = 0; i < given->len; i++)
      if (!strncmp(given->v[i], key->u.str.ptr, key->u.str.len) &&
          given->v[i][key->u.str.len] == '=')
        value = given->v[i] + key->u.str.len + 1;
    const struct cap_node *dflt = cap_node_get(p, "default");
    if (!value && !dflt)
      continue;
    cap_jw_key(&w, key->u.str.ptr);
    if (value)
      param_value(&w, p, value);
    else
      cap_jw_node(&w, dflt);
  }
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

static int triggers_change(const struct common *o, struct gw_state *st, const struct cap_spec *spec,
                           const struct cap_trigger *t, const char *sub, const char *call_cap,
                           const char *call_tool, const struct cap_strv *params)
{
  struct cap_error err = {0};
  bool on = strcmp(sub, "on") == 0;
  int enabled = on ? -1 : strcmp(sub, "enable") == 0;
  _cleanup_free_ char *config = on ? task_config(t, params) : NULL;
  if (on && !config)
    return CLI_EXIT_INVALID;
  int r = gw_trigger_configure(st, spec->id, t->local_id, enabled, on ? call_cap : NULL, call_tool,
                               config, &err);
  if (r < 0) {
    cli_error("triggers", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  _cleanup_free_ char *what =
      on ? cap_xasprintf("on each event: call %s.%s%s%s", call_cap, call_tool,
                         strcmp(config, "{}") ? " with params " : "",
                         strcmp(config, "{}") ? config : "")
         : cap_xstrdup(enabled ? "enabled" : "disabled");
  _cleanup_free_ char *line = cap_xasprintf("triggers: %s %s", t->id, what);
  cap_escape_fput(stdout, line, 8192);
  putchar('\n');
  return audit_change(st, o,
                      on        ? "trigger-on"
                      : enabled ? "trigger-enable"
                                : "trigger-disable",
                      spec->id, t->local_id, what);
}

int cmd_triggers(int argc, char **argv)
{
  const char *call_cap = NULL, *call_tool = NULL;
  _cleanup_(cap_strv_free) struct cap_strv params = {0};
  int r = take_call(&argc, argv, &call_cap, &call_tool, &params);
  struct common o = {0};
  if (r || (r = parse_common("triggers", argc, argv, &o)))
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - optind;
  const char *sub = rest ? argv[optind] : "";
  bool run = strcmp(sub, "run") == 0;
  static const char *const subs[] = {"poll", "enable", "disable", "on"};
  bool known = run;
  for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
    known = known || strcmp(sub, subs[i]) == 0;
  if (!known || (run && rest != 1) || (!run && rest != 3))
    return cli_usage_error("triggers", "give poll|enable|disable|on CAPABILITY TRIGGER, or run");
  if (strcmp(sub, "on") == 0 && !call_cap)
    r = cli_usage_error("triggers", "on needs --call CAPABILITY TOOL");
  else if (params.len && strcmp(sub, "on") != 0)
    r = cli_usage_error("triggers", "--param goes with on --call");
  if (r)
    return r;
  if (strcmp(sub, "enable") == 0 || strcmp(sub, "disable") == 0 || strcmp(sub, "on") == 0)
    if ((r = require_operator("triggers", "changing triggers")))
      return r;
  struct gw_registry reg;
  struct gw_state *st = NULL;
  const struct cap_spec *spec = NULL;
  if ((r = plugin_open("triggers", &o, run ? NULL : argv[optind + 1], &reg, &st, &spec)))
    return r;
  struct poll_env e;
  poll_env_init(&e, &o, &reg, st);
  const struct cap_trigger *t = spec ? find_trigger(spec, argv[optind + 2]) : NULL;
  if (run)
    r = triggers_run(&e);
  else if (!t)
    r = not_a_trigger(spec, argv[optind + 2]);
  else if (strcmp(sub, "poll") == 0)
    r = triggers_poll(&e, spec, t);
  else
    r = triggers_change(&o, st, spec, t, sub, call_cap, call_tool, &params);
  poll_env_free(&e);
  gw_state_close(st);
  gw_registry_free(&reg);
  return r;
}

/* ---- events ---- */

static const struct cli_column event_cols[] = {
    {"seq", 6, NULL},      {"time", 25, NULL}, {"capability", 16, NULL},
    {"trigger", 20, NULL}, {"user", 10, NULL}, {"event", 0, NULL},
};

struct events_out {
  struct cli_listing *l;
  bool jsonl; /* --follow --json: one object a line */
  int64_t last;
};

static void event_json(struct cap_jw *w, const struct gw_event *ev)
{
  cap_jw_begin_object(w);
  cap_jw_key(w, "seq");
  cap_jw_int(w, ev->seq);
  const char *keys[] = {"time", "capability", "trigger", "user"};
  const char *vals[] = {ev->time, ev->capability, ev->trigger, ev->user};
  for (size_t i = 0; i < 4; i++) {
    cap_jw_key(w, keys[i]);
    cap_jw_string(w, vals[i]);
  }
  cap_jw_key(w, "event");
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, ev->event, strlen(ev->event), "event", 0, &d) == 0)
    cap_jw_node(w, doc->root);
  else
    cap_jw_string(w, ev->event);
  cap_diags_free(&d);
  cap_doc_free(doc);
  cap_jw_end_object(w);
}

static void event_row(void *arg, const struct gw_event *ev)
{
  struct events_out *out = arg;
  char seq[24];
  snprintf(seq, sizeof seq, "%lld", (long long)ev->seq);
  out->last = ev->seq;
  if (out->jsonl) {
    struct cap_buf b = {0};
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    event_json(&w, ev);
    printf("%s\n", b.data);
    fflush(stdout);
    cap_buf_free(&b);
    return;
  }
  if (out->l->json) {
    event_json(&out->l->w, ev);
    out->l->n++;
    return;
  }
  const char *v[] = {seq, ev->time, ev->capability, ev->trigger, ev->user, ev->event};
  cli_listing_row(out->l, event_cols, v, ARRAY_SIZE(v));
  fflush(stdout);
}

int cmd_events(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("events", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (argc != optind)
    return cli_usage_error("events", "takes no arguments");
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cli_listing l;
  cli_listing_begin(&l, o.json && !o.follow);
  struct events_out out = {.l = &l, .jsonl = o.json && o.follow};
  struct cap_error err = {0};
  r = gw_events_each(st, 0, event_row, &out, &err);
  if (o.follow && r == 0) {
    catch_stop();
    while (!stopping && r == 0) {
      struct timespec ts = {0, 250 * 1000 * 1000};
      nanosleep(&ts, NULL);
      r = gw_events_each(st, out.last, event_row, &out, &err);
    }
  }
  cli_listing_end(&l, r == 0);
  if (r < 0)
    cli_error("events", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}
