/* capsule run's state directory: the credential store bare-name sources
 * read, the id range's peek, and the audit marker of the run (see run.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/grants.h"
#include "gateway/state.h"
#include "sandbox/sandbox.h"

static int store_open(struct run_store *ctx, struct cap_error *err)
{
  if (ctx->st)
    return 0;
  _cleanup_free_ char *dflt = ctx->dir ? NULL : gw_state_default_dir();
  return gw_state_open(ctx->dir ? ctx->dir : dflt, &ctx->st, err);
}

int run_store_lookup(void *arg, const char *name, char **value, bool *found, struct cap_error *err)
{
  struct run_store *ctx = arg;
  int r = store_open(ctx, err);
  if (r < 0)
    return r;
  return gw_cred_get(ctx->st, NULL, name, CAP_SCOPE_SYSTEM, NULL, value, found, err);
}

int run_operator_grants(const struct cap_spec *spec, const char *state, struct gw_granted *out)
{
  *out = (struct gw_granted){.spec = *spec};
  _cleanup_free_ char *dir = state ? cap_xstrdup(state) : gw_state_default_dir();
  _cleanup_free_ char *db = cap_xasprintf("%s/state.db", dir);
  if (!spec->id || !*spec->id || access(db, F_OK) < 0)
    return 0; /* no state yet: nothing granted, and none created by a run */
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  int r = gw_state_open(dir, &st, &err);
  if (r == 0)
    r = gw_spec_with_grants(st, spec, out, &err);
  if (r < 0) {
    fprintf(stderr, "capsule run: %s; the operator's grants (capsule grant) are not applied\n",
            err.message);
    *out = (struct gw_granted){.spec = *spec};
  }
  cap_error_clear(&err);
  if (st)
    gw_state_close(st);
  return r;
}

int run_state_open(struct run_state *rs, const char *state, struct cap_error *err)
{
  rs->named = state != NULL;
  rs->dir = state ? cap_xstrdup(state) : gw_state_default_dir();
  rs->fd = gw_statedir_open(rs->dir, err);
  return rs->fd < 0 ? rs->fd : 0;
}

void run_state_close(struct run_state *rs)
{
  if (rs->fd >= 0)
    close(rs->fd);
  free(rs->dir);
  *rs = (struct run_state){.fd = -1};
}

/* As root, the host ids the tool runs under (sandbox_options.id_base):
 * the capability's own range (gw_id_range_key: its id and package),
 * shared with `capsule call` of the same package; without a manifest, the
 * range of the key "run", which no capability's key is, one for every
 * ad-hoc run (a range per run would use up the 4,094 there are).
 * Unprivileged: 0, the tool keeps the caller's ids. create false (the dry
 * run): the recorded range only, 0 when there is none yet. */
int run_id_base(const struct cap_spec *spec, const char *config, const struct run_state *rs,
                bool create, uint32_t *base, struct cap_error *err)
{
  *base = 0;
  if (geteuid() != 0)
    return 0;
  _cleanup_free_ char *key = config && spec->id && *spec->id
                                 ? gw_id_range_key(spec->id, spec->package_dir)
                                 : cap_xstrdup(RUN_ID_KEY);
  const char *state = rs->named ? rs->dir : NULL;
  /* a range recorded before is read without opening the state (no key, no
   * migrations: a root run's start-up); a new one is allocated with it */
  gw_state_id_range_peek(rs->fd, rs->dir, key, base);
  if (*base)
    return 0;
  struct run_store ctx = {.dir = state};
  int r = store_open(&ctx, err);
  if (r == 0)
    r = gw_state_id_range(ctx.st, key, create, base, err);
  gw_state_close(ctx.st);
  return r;
}

void run_store_close(struct run_store *ctx)
{
  gw_state_close(ctx->st);
  ctx->st = NULL;
}

void run_audit_begin(const struct cap_spec *spec, const struct run_args *a,
                     const struct run_state *rs, const struct cap_error *open_err,
                     struct run_audit *au)
{
  struct cap_buf line = {0};
  for (char **c = a->command; *c; c++)
    cap_buf_append(&line, *c, strlen(*c) + 1);
  const char *slash = strrchr(a->command[0], '/');
  /* "#UID": the name is looked up when the record is appended (NSS is
   * not on a run's way to the tool) */
  snprintf(au->user, sizeof au->user, "#%u", (unsigned)geteuid());
  au->rec = (struct gw_audit_record){
      .user = au->user,
      .capability = a->config && spec->id && *spec->id ? spec->id : RUN_ID_KEY,
      .tool = slash && slash[1] ? slash + 1 : a->command[0],
      .decision = "run",
  };
  gw_sha256_hex(line.data, line.len, au->rec.args_hash);
  cap_buf_free(&line);
  au->dir = rs->dir;
  struct cap_error err = {0};
  /* the default directory may be out of reach (a $HOME that is not the
   * caller's): the run goes on unaudited, silently; one that was named
   * (--state, CAPSULE_STATE, the config file) says so, and so does any
   * other failure (a full disk: a tool may have filled it to go unseen) */
  int r = rs->fd < 0 ? rs->fd : gw_inflight_begin_at(rs->fd, rs->dir, &au->rec, &au->marker, &err);
  bool out_of_reach = r == -EPERM || r == -EACCES || r == -EROFS;
  if (r < 0 && (rs->named || !out_of_reach))
    fprintf(stderr, "capsule: %swarning:%s this run is not audited: %s\n",
            cli_colour(stderr, CLI_COLOUR_WARN), cli_colour(stderr, CLI_COLOUR_RESET),
            rs->fd < 0 ? open_err->message : err.message);
  cap_error_clear(&err);
}

void run_audit_finish(struct run_audit *au, int r, const struct sandbox_result *res,
                      const struct cap_error *err)
{
  if (r < 0)
    snprintf(au->outcome, sizeof au->outcome, "failed: %.140s", err->message);
  else if (res->killed_by)
    snprintf(au->outcome, sizeof au->outcome, "killed: %s exceeded", res->killed_by);
  else
    snprintf(au->outcome, sizeof au->outcome, "exit %d", res->exit_status);
  au->rec.outcome = au->outcome;
  gw_inflight_finish(&au->marker, &au->rec, au->dir);
}
