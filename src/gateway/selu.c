#include "gateway/selu.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/filememo.h"
#include "core/json.h"
#include "gateway/egress_store.h"
#include "gateway/instance.h"
#include "gateway/registry.h"
#include "gateway/selu_int.h"
#include "gateway/volumes.h"
#include "image/image.h"
#include "jsonschema/jsonschema.h"
#include "runtime/selu_rpc.h"

#define SELU_IMAGE_NOFILE 256            /* Selu's runner: ulimit nofile 256 (soft and hard) */
#define SELU_IMAGE_TMP_BYTES (64u << 20) /* Selu's runner: tmpfs /tmp size=64m,noexec */

static char *read_small_file(const char *path, size_t *len)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) < 0 || sb.st_size > (64 << 20))
    return NULL;
  char *data = cap_xmalloc((size_t)sb.st_size + 1);
  ssize_t n = read(fd, data, (size_t)sb.st_size);
  if (n < 0) {
    free(data);
    return NULL;
  }
  data[n] = '\0';
  *len = (size_t)n;
  return data;
}

/* A random salt of the state directory's, so the instance names built from
 * credentials reveal nothing about them; a missing or damaged one is
 * replaced. */
static void run_salt(const char *run_dir, unsigned char salt[32])
{
  _cleanup_free_ char *path = cap_xasprintf("%s/salt", run_dir);
  char *kept = NULL; /* kept while the file is the same (core/filememo.h) */
  size_t len = 0;
  int r = cap_filememo_read(path, true, 64, &kept, &len);
  ssize_t got = r == 0 ? (ssize_t)len : r == -EFBIG ? 0 : -1; /* -1: none to replace */
  if (got == 32)
    memcpy(salt, kept, 32);
  if (kept)
    sodium_memzero(kept, len);
  free(kept);
  if (got == 32)
    return;
  int fd;
  randombytes_buf(salt, 32);
  _cleanup_free_ char *tmp = cap_xasprintf("%s/salt.%d", run_dir, (int)getpid());
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0 && write(fd, salt, 32) == 32 && close(fd) == 0) {
    if (got < 0 ? link(tmp, path) < 0 : rename(tmp, path) < 0) { /* another process won: its salt */
      int rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (rfd >= 0 && read(rfd, salt, 32) != 32)
        randombytes_buf(salt, 32);
      if (rfd >= 0)
        close(rfd);
    }
  } else if (fd >= 0) {
    close(fd);
  }
  unlink(tmp);
}

/* The instance's name: the capability, what it runs as it is now (its
 * manifest, its package tree and grants: gw_spec_digest; what it may
 * reach, the operator's grants' network included: gw_spec_rights_digest;
 * and the server
 * program when it lies outside the package) and the credentials it starts
 * with; a change to any of them starts a new instance (the old one idles
 * out). */
int gw_instance_key(const struct gw_call *call, const struct cap_spec *spec,
                    const char *image_digest, bool tree, char *const *env, size_t n_env,
                    char out[33], struct cap_error *err)
{
  /* exclusive (Selu's default): an instance per user and session (calls
   * without a session share the user's); shared: one for everyone */
  const char *user = spec->runtime.shared ? "" : call->user ? call->user : "";
  const char *session = spec->runtime.shared ? "" : call->session_id ? call->session_id : "";
  unsigned char digest[32];
  int r = gw_spec_digest_opts(spec, tree, digest, err);
  if (r < 0)
    return r;
  r = gw_instance_check_run_dir(call->run_dir, err); /* before its salt is trusted */
  if (r < 0)
    return r;
  unsigned char salt[32];
  run_salt(call->run_dir, salt);
  crypto_generichash_state st;
  crypto_generichash_init(&st, salt, sizeof salt, 16);
  sodium_memzero(salt, sizeof salt);
  crypto_generichash_update(&st, (const unsigned char *)spec->id, strlen(spec->id) + 1);
  crypto_generichash_update(&st, (const unsigned char *)spec->source_path,
                            strlen(spec->source_path) + 1);
  crypto_generichash_update(&st, digest, sizeof digest);
  gw_spec_rights_digest(spec, digest); /* the operator's grants: its network too */
  crypto_generichash_update(&st, digest, sizeof digest);
  if (image_digest) /* a re-imported image is a new instance */
    crypto_generichash_update(&st, (const unsigned char *)image_digest, strlen(image_digest) + 1);
  /* a program outside the package (an interpreter, say): an upgraded one
   * is a new instance too */
  const char *prog = spec->runtime.command.len ? spec->runtime.command.v[0] : "";
  struct stat sb;
  if (prog[0] == '/' && stat(prog, &sb) == 0) {
    int64_t id[4] = {(int64_t)sb.st_ino, (int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec,
                     (int64_t)sb.st_mtim.tv_nsec};
    crypto_generichash_update(&st, (const unsigned char *)id, sizeof id);
  }
  for (size_t i = 0; i < n_env; i++)
    crypto_generichash_update(&st, (const unsigned char *)env[i], strlen(env[i]) + 1);
  crypto_generichash_update(&st, (const unsigned char *)user, strlen(user) + 1);
  crypto_generichash_update(&st, (const unsigned char *)session, strlen(session) + 1);
  unsigned char h[16];
  crypto_generichash_final(&st, h, sizeof h);
  sodium_bin2hex(out, 33, h, sizeof h);
  return 0;
}

/* What one call's instance runs with, as Selu's runner starts a container:
 * the spec with its volumes bound (a session's /workspace, a /cache), the
 * environment (SELU_CAPABILITY_ID; SELU_SESSION_ID for an exclusive
 * instance of a session, SELU_SHARED=true for a shared one; the declared
 * credentials, except on a shared instance, which gets them per call in
 * config_json only, as Selu's servers always do), and what names the
 * instance. */
struct selu_run {
  struct cap_spec spec; /* shallow copy: grants replaced */
  struct cap_fs_grant *grants;
  size_t n_grants;
  struct cap_strv dirs; /* the volumes' directories */
  struct cap_strv env;
  char *config_json;
  const char *session; /* what the server sees as session_id */
  char session_buf[37];
  bool unbounded; /* its workspace bound only checked: warned once leased */
};

static void selu_run_free(struct selu_run *run)
{
  gw_volumes_free(run->grants, run->n_grants);
  cap_strv_free(&run->dirs);
  cap_strv_free(&run->env);
  free(run->config_json);
}

/* The declared credentials (env's NAME=value) as Capability's config_json. */
static char *config_json(char *const *env, size_t n_env)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < n_env; i++) {
    const char *eq = strchr(env[i], '=');
    if (!eq)
      continue;
    _cleanup_free_ char *name = cap_xstrndup(env[i], (size_t)(eq - env[i]));
    cap_jw_key(&w, name);
    cap_jw_string(&w, eq + 1);
  }
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

/* What this host cannot enforce of the run, said once the call is its:
 * not by a warm-only attempt that hands the call on (it would say it twice). */
static void selu_run_warn(const struct gw_call *call, const struct selu_run *run)
{
  if (!run->unbounded || !call->warn)
    return;
  _cleanup_free_ char *w = cap_xasprintf(
      "%s's workspace bound of %llu bytes is checked before each call, not enforced while it "
      "runs (a quota needs root: capsule doctor, \"Selu workspace bound\")",
      run->spec.id, (unsigned long long)run->spec.limits.workspace_bytes);
  call->warn(call->warn_ctx, w);
}

static int selu_run_prepare(const struct gw_call *call, const struct cap_spec *spec,
                            char *const *env, size_t n_env, struct selu_run *run,
                            struct cap_error *err)
{
  *run = (struct selu_run){.spec = *spec};
  run->session = call->session_id;
  if (!run->session) { /* a call without a session is a session of its own */
    gw_uuid4(run->session_buf);
    run->session = run->session_buf;
  }
  int r = gw_volumes_bind(spec, call->volumes_dir, call->user, call->session_id, &run->grants,
                          &run->n_grants, &run->dirs, &run->unbounded, err);
  if (r < 0)
    return r;
  run->spec.grants = run->grants;
  run->spec.n_grants = run->n_grants;
  _cleanup_free_ char *id = cap_xasprintf("SELU_CAPABILITY_ID=%s", spec->id);
  cap_strv_push(&run->env, id);
  if (spec->runtime.shared) {
    cap_strv_push(&run->env, "SELU_SHARED=true");
  } else {
    if (call->session_id) {
      _cleanup_free_ char *sid = cap_xasprintf("SELU_SESSION_ID=%s", call->session_id);
      cap_strv_push(&run->env, sid);
    }
    for (size_t i = 0; i < n_env; i++)
      cap_strv_push(&run->env, env[i]);
  }
  run->config_json = config_json(env, n_env);
  return 0;
}

/* A volume past its bound refuses the call (checked before each call: a
 * call may overshoot it by what it writes; see docs/gateway.md). */
static int volumes_within_bound(const struct cap_spec *spec, const struct selu_run *run,
                                struct cap_error *err)
{
  for (size_t i = 0; i < run->dirs.len && spec->limits.workspace_bytes; i++) {
    uint64_t used;
    int r = gw_volume_usage(run->dirs.v[i], &used);
    if (r < 0) /* what cannot be measured could be over the bound */
      return cap_error_errno(err, -r,
                             "%s's volume %s cannot be measured against its bound of %llu "
                             "bytes (an entry in it cannot be read; the tool may hide data "
                             "there): make it readable again (chmod -R u+rwX %s) or remove it "
                             "(`capsule workspace rm`)",
                             spec->id, run->dirs.v[i],
                             (unsigned long long)spec->limits.workspace_bytes, run->dirs.v[i]);
    if (used > spec->limits.workspace_bytes)
      return cap_error_set(err, ENOSPC,
                           "%s's volume %s holds %llu bytes, over its bound of %llu bytes: free "
                           "space in it, remove it (`capsule workspace rm`), or raise "
                           "x-capsule.workspace_max_mb",
                           spec->id, run->dirs.v[i], (unsigned long long)used,
                           (unsigned long long)spec->limits.workspace_bytes);
  }
  return 0;
}

/* Milliseconds left of the call's deadline (at least 1). */
static int time_left(uint64_t start, uint64_t deadline_ms)
{
  uint64_t spent = cap_now_ms(CLOCK_MONOTONIC) - start;
  uint64_t rest = spent >= deadline_ms ? 1 : deadline_ms - spent;
  return rest > INT32_MAX ? INT32_MAX : (int)rest;
}

/* On the leased server: the attachments up, the call, its artifacts down. */
static int call_on_lease(const struct gw_call *call, const struct cap_spec *spec,
                         struct selu_channel *ch, int protocol, struct selu_invoke_args *a,
                         uint64_t start, uint64_t deadline_ms, size_t cap,
                         struct selu_response *resp, struct cap_error *err)
{
  bool artifacts = call->n_attach || call->artifacts_dir;
  if (artifacts || (call->artifact_store && strstr(a->args_json, "capability_artifact_id")))
    cap_wait_hook_run(call->wait); /* streams to move: they last */
  if (artifacts && protocol != SELU_PROTOCOL_CAPABILITY)
    return cap_error_set(err, ENOTSUP,
                         "%s speaks the seed's CapabilityService, which has no artifacts: "
                         "--attach and --artifacts need the orchestrator's Capability service",
                         spec->id);
  _cleanup_free_ char *args = NULL, *stored = NULL;
  int r = 0;
  if (call->artifact_store && strstr(a->args_json, "capability_artifact_id")) {
    r = protocol == SELU_PROTOCOL_CAPABILITY
            ? gw_selu_attach_stored(ch, call, a->args_json, time_left(start, deadline_ms), &stored,
                                    err)
            : gw_selu_attach_refused(spec, a->args_json, err);
    if (stored)
      a->args_json = stored;
  }
  if (r == 0 && call->n_attach) {
    r = gw_selu_attach(ch, call, a->args_json, time_left(start, deadline_ms), cap, &args, err);
    a->args_json = args;
  }
  if (r == 0)
    r = selu_invoke(ch, (enum selu_protocol)protocol, spec->runtime.stream_invoke, a,
                    time_left(start, deadline_ms), resp, err);
  if (r == 0 && resp->success && call->artifact_store && protocol == SELU_PROTOCOL_CAPABILITY) {
    char *captured = NULL;
    r = gw_selu_capture_stored(ch, call, resp->result, time_left(start, deadline_ms), &captured,
                               err);
    if (captured) {
      free(resp->result);
      resp->result = captured;
    }
  }
  if (r == 0 && resp->success && call->artifacts_dir) {
    char *captured = NULL;
    r = gw_selu_capture(ch, call, resp->result, time_left(start, deadline_ms), &captured, err);
    if (captured) {
      free(resp->result);
      resp->result = captured;
    }
  }
  return r;
}

/* What an image capability runs: its stored root, its command, and the
 * image's Env (selu_run's variables and credentials follow it, so an
 * image cannot shadow them). */
struct image_run {
  struct image_info info;
  char **argv;
  struct cap_strv env;
};

static void image_run_free(struct image_run *run)
{
  image_info_free(&run->info);
  image_strv_free(run->argv);
  cap_strv_free(&run->env);
}

static enum gw_outcome image_run_prepare(const struct gw_call *call, const struct cap_spec *spec,
                                         struct image_run *run, struct cap_error *err)
{
  *run = (struct image_run){0};
  if (!call->image_dir)
    return cap_error_set(err, ENOTSUP, "capability %s names an image and no image store is open",
                         spec->id),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  int r = gw_selu_image_resolve(call->image_dir, spec, &run->info, err);
  if (r < 0)
    return r == -ENOENT ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
  run->argv = image_command(&run->info, err);
  if (!run->argv)
    return cap_error_prefix(err, "capability %s", spec->id), GW_OUTCOME_FAILED;
  gw_selu_image_env(spec, &run->info, &run->env);
  return GW_OUTCOME_OK;
}

void gw_selu_image_env(const struct cap_spec *spec, const struct image_info *info,
                       struct cap_strv *env)
{
  bool path = false;
  for (size_t i = 0; info->config.env && info->config.env[i]; i++) {
    path |= strncmp(info->config.env[i], "PATH=", 5) == 0;
    cap_strv_push(env, info->config.env[i]);
  }
  if (!path) { /* the PATH its entrypoint was looked up on */
    _cleanup_free_ char *p = cap_xasprintf("PATH=%s", image_config_path(&info->config));
    cap_strv_push(env, p);
  }
  _cleanup_free_ char *id = cap_xasprintf("SELU_CAPABILITY_ID=%s", spec->id);
  cap_strv_push(env, id);
}

int gw_selu_image_resolve(const char *image_dir, const struct cap_spec *spec,
                          struct image_info *info, struct cap_error *err)
{
  int r = image_store_resolve(image_dir, spec->runtime.image, info, err);
  if (r < 0) {
    cap_error_prefix(err, "capability %s", spec->id);
    if (r == -ENOENT)
      cap_error_outcome(err, CAP_OUTCOME_HOST);
  }
  return r;
}

/* The call's run (selu_run_prepare) with an image's Env put first, so
 * capsule's variables win; checked against the volumes' bound; its
 * instance's key. 0, or -errno with err set and nothing to free. */
static int selu_run_with_image(const struct gw_call *call, const struct cap_spec *spec,
                               char *const *env, size_t n_env, struct image_run *image,
                               struct selu_run *run, char key[33], struct cap_error *err)
{
  int r = selu_run_prepare(call, spec, env, n_env, run, err);
  if (r < 0)
    return r;
  if (image->argv) {
    struct cap_strv all = image->env;
    image->env = (struct cap_strv){0};
    for (size_t i = 0; i < run->env.len; i++)
      cap_strv_push(&all, run->env.v[i]);
    cap_strv_free(&run->env);
    run->env = all;
  }
  r = volumes_within_bound(spec, run, err);
  if (r == 0)
    r = gw_instance_key(call, &run->spec, image->argv ? image->info.digest : NULL, false,
                        run->env.v, run->env.len, key, err); /* its keeper watches the tree */
  if (r < 0)
    selu_run_free(run);
  return r;
}

/* An image is its own system: the host's system directories and the
 * package directory are not granted, and Selu's runner conventions hold
 * (docs/images.md): a private 64 MiB /tmp (noexec, sandbox.h), 256 open files. */
void gw_selu_image_spec(struct cap_spec *run_spec)
{
  struct cap_fs_grant *grants = cap_xcalloc(run_spec->n_grants + 1, sizeof *grants);
  size_t n = 0;
  for (size_t i = 0; i < run_spec->n_grants; i++)
    if (run_spec->grants[i].origin != CAP_ORIGIN_SYSTEM &&
        run_spec->grants[i].origin != CAP_ORIGIN_PACKAGE)
      grants[n++] = run_spec->grants[i];
  run_spec->grants = grants; /* the keeper's until it exits */
  run_spec->n_grants = n;
  run_spec->sandbox.private_tmp = true;
  run_spec->limits.nofile = SELU_IMAGE_NOFILE;
  run_spec->limits.disk_bytes = SELU_IMAGE_TMP_BYTES;
}

/* The channel a call goes on: kept between calls (gw_call.channels, for
 * the default output cap it is sized for), or its own. */
struct call_channel {
  struct gw_channels *keep; /* NULL: a channel of the call's own */
  struct gw_channel *kept;  /* the kept one it holds a reference to */
  struct selu_channel *ch;
};

/* Before the lease: the channel kept for the instance, and which instance
 * it reaches (0: none). */
static uint64_t channel_before(const struct gw_call *call, const char *key, struct call_channel *c)
{
  uint64_t instance = 0;
  *c = (struct call_channel){.keep = call->output_cap ? NULL : call->channels};
  c->kept = c->keep ? gw_channels_take(c->keep, key) : NULL;
  if (c->kept)
    c->ch = gw_channel_get(c->kept, &instance);
  return instance;
}

/* After the lease: a new connection is a new channel (kept, when the call
 * keeps them); without one, the kept channel reaches the leased server. */
static int channel_after(struct call_channel *c, const char *key, struct gw_lease *lease,
                         size_t cap, struct cap_error *err)
{
  if (lease->fd < 0)
    return 0;
  if (c->kept) /* it reaches another instance */
    gw_channels_give(c->keep, c->kept);
  c->kept = NULL;
  int r = selu_channel_open(lease->fd, cap + 1024, &c->ch, err);
  lease->fd = -1; /* the channel's now */
  if (r == 0 && c->keep && lease->instance)
    c->kept = gw_channels_keep(c->keep, key, lease->instance, c->ch);
  return r;
}

static void channel_done(struct call_channel *c, int r)
{
  if (c->kept && r == -ECONNRESET) /* its server went away: the next call leases anew */
    gw_channels_forget(c->keep, c->kept);
  if (c->kept)
    gw_channels_give(c->keep, c->kept);
  else
    selu_channel_close(c->ch);
  *c = (struct call_channel){0};
}

/* Invoke with the raw answer; the caller judges it. */
/* No lease (r): a warm-only call with no instance running is handed on,
 * nothing sent and nothing said; otherwise the call failed here. */
static enum gw_outcome lease_refused(const struct gw_call *call, struct selu_run *run, int r,
                                     struct cap_error *err)
{
  bool declined = r == -EWOULDBLOCK && call->selu_warm_only;
  if (!declined)
    selu_run_warn(call, run);
  selu_run_free(run);
  if (declined) {
    cap_error_clear(err);
    return GW_OUTCOME_NOT_WARM;
  }
  return r == -ENOTSUP ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
}

/* A call's lease ended: the server's egress decisions during the call
 * taken for its audit record; with call->channels and the call answered,
 * the keeper's connection kept for the next call, its next lease asked
 * now (ask_ahead: the call's channel was kept too) or, when the table
 * defers it, once the answer went, else released. */
static void lease_end(const struct gw_call *call, const char *key, struct gw_lease *lease,
                      bool ask_ahead, bool answered)
{
  gw_lease_egress(lease, gw_egress_batch_of(call->egress_sink), 5000);
  if (call->channels && ask_ahead && gw_channels_park_control(call->channels, key, lease)) {
    /* ended, and the next asked, once the answer went (gw_channels_flush) */
  } else if (call->channels && ask_ahead) {
    bool ahead = false;
    int fd = gw_lease_release_ahead(lease, &ahead);
    gw_channels_keep_control(call->channels, key, fd, ahead);
  } else if (call->channels && answered) {
    gw_channels_keep_control(call->channels, key, gw_lease_release_keep(lease), false);
  } else {
    gw_lease_release(lease);
  }
}

static enum gw_outcome invoke_raw(const struct gw_call *call, const struct cap_spec *spec,
                                  const char *tool, const char *args, char *const *env,
                                  size_t n_env, struct selu_response *resp, struct cap_error *err)
{
  /* x-capsule.command runs from the package directory; otherwise the image */
  _cleanup_(image_run_free) struct image_run image = {0};
  if (!spec->runtime.command.len) {
    enum gw_outcome o = image_run_prepare(call, spec, &image, err);
    if (o != GW_OUTCOME_OK)
      return o;
  }
  uint64_t deadline_ms = call->deadline_ms ? call->deadline_ms : GW_DEFAULT_DEADLINE_MS;
  uint64_t start = cap_now_ms(CLOCK_MONOTONIC);
  struct selu_run run;
  char key[33];
  if (selu_run_with_image(call, spec, env, n_env, &image, &run, key, err) < 0)
    return GW_OUTCOME_FAILED;
  _cleanup_free_ char *log_path = gw_tool_log_prepare(call->log_dir, spec);
  bool ahead = false; /* the kept connection's next lease was asked ahead */
  int control = call->channels ? gw_channels_take_control(call->channels, key, &ahead) : -1;
  struct gw_instance_request req = {
      .spec = &run.spec,
      .run_dir = call->run_dir,
      .key = key,
      .user = call->user,
      .env = run.env.v,
      .n_env = run.env.len,
      .log_path = log_path ? log_path : "/dev/null",
      .wait_ms = deadline_ms,
      .hidden = call->hidden,
      .n_hidden = call->n_hidden,
      .id_base = call->id_base,
      .rootfs = image.argv ? image.info.rootfs : NULL,
      .argv = image.argv,
      .workdir = image.info.config.working_dir ? image.info.config.working_dir : "/",
      .inside_id = image.argv ? SELU_IMAGE_ID : 0,
      .warm_only = call->selu_warm_only,
      .control = control,
      .control_ahead = ahead,
      .wait = call->wait,
      .grants_epoch = call->grants_epoch_read ? &call->grants_epoch : NULL};
  size_t cap = call->output_cap ? call->output_cap : GW_DEFAULT_OUTPUT_CAP;
  struct call_channel cc;
  req.have_instance = channel_before(call, key, &cc);
  struct gw_lease lease;
  int r = gw_instance_lease(&req, &lease, err);
  if (r < 0) {
    channel_done(&cc, 0);
    return lease_refused(call, &run, r, err);
  }
  selu_run_warn(call, &run);
  r = channel_after(&cc, key, &lease, cap, err);
  if (r == 0) {
    struct selu_invoke_args a = {.tool = tool,
                                 .args_json = args,
                                 .config_json = run.config_json,
                                 .session_id = run.session,
                                 .user_id = call->user ? call->user : "",
                                 .thread_id = call->thread_id ? call->thread_id : "",
                                 .capability_id = spec->id,
                                 .cancel = call->cancel,
                                 .wait = call->wait};
    r = call_on_lease(call, spec, cc.ch, lease.protocol, &a, start, deadline_ms, cap, resp, err);
    char reason[480];
    if (r == -ECONNRESET && gw_lease_reason(&lease, reason, sizeof reason)) {
      cap_error_clear(err); /* the keeper stopped the server, and says why */
      r = cap_error_set(err, ETIMEDOUT, "the server was stopped: %s", reason);
    }
  }
  bool on_kept = cc.kept != NULL; /* a channel kept for the next call */
  channel_done(&cc, r);
  lease_end(call, key, &lease, r == 0 && on_kept, r == 0);
  selu_run_free(&run);
  if (r < 0) {
    if (log_path)
      cap_error_prefix(err, "%s.%s (its server's log: %s)", spec->id, tool, log_path);
    return r == -ETIMEDOUT ? GW_OUTCOME_KILLED_BY_LIMIT : GW_OUTCOME_FAILED;
  }
  return GW_OUTCOME_OK;
}

/* The result must be JSON: it goes into the agent's conversation as is. */
static enum gw_outcome judge(const struct cap_spec *spec, const char *tool,
                             const struct selu_response *resp, size_t output_cap, char **result,
                             struct cap_error *err)
{
  if (!resp->success)
    return cap_error_set(err, EIO, "the tool failed: %s",
                         resp->error && *resp->error ? resp->error : "(no message)"),
           GW_OUTCOME_FAILED;
  size_t len = strlen(resp->result);
  if (len > output_cap)
    return cap_error_set(err, EFBIG, "%s.%s returned %zu bytes, more than the output cap (%zu)",
                         spec->id, tool, len, output_cap),
           GW_OUTCOME_FAILED;
  if (len == 0) {
    *result = cap_xstrdup("null");
    return GW_OUTCOME_OK;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, resp->result, len, "result", 0, &diags);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  if (r < 0)
    return cap_error_set(err, EPROTO,
                         "%s.%s answered success with a result that is not JSON (%zu bytes): a "
                         "runtime failure",
                         spec->id, tool, len),
           GW_OUTCOME_FAILED;
  *result = cap_xstrdup(resp->result);
  return GW_OUTCOME_OK;
}

enum gw_outcome gw_selu_invoke(const struct gw_call *call, const struct cap_spec *spec,
                               const char *tool, const char *args, char *const *env, size_t n_env,
                               char **result, struct cap_error *err)
{
  struct selu_response resp = {0};
  enum gw_outcome code = invoke_raw(call, spec, tool, args, env, n_env, &resp, err);
  if (code == GW_OUTCOME_OK)
    code = judge(spec, tool, &resp, call->output_cap ? call->output_cap : GW_DEFAULT_OUTPUT_CAP,
                 result, err);
  selu_response_free(&resp);
  return code;
}

/* ---- dynamic tools ---- */

void gw_tools_free(struct gw_tools *t)
{
  cap_tools_free(t->tools, t->n);
  cap_doc_free(t->doc);
  *t = (struct gw_tools){0};
}

const struct cap_tool *gw_tools_find(const struct gw_tools *t, const char *name)
{
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->tools[i].name, name) == 0)
      return &t->tools[i];
  return NULL;
}

static char *cache_path(const char *cache_dir, const struct cap_spec *spec)
{
  return cap_xasprintf("%s/%s.tools.json", cache_dir, spec->id);
}

/* Reads a discovery answer: a JSON array of tools, or {"tools": [...]};
 * each {name, description?, input_schema (or inputSchema), recommended_policy?,
 * terminal_on_success?}. */
int gw_tools_parse(const char *text, size_t len, const char *what, struct gw_tools *out,
                   struct cap_error *err)
{
  *out = (struct gw_tools){.doc = cap_doc_new()};
  struct cap_diags diags = {0};
  int r = cap_json_parse(out->doc, text, len, what, 0, &diags);
  cap_diags_free(&diags);
  const struct cap_node *list = r == 0 ? out->doc->root : NULL;
  if (list && list->kind == CAP_NODE_OBJECT)
    list = cap_node_get(list, "tools");
  if (!list || list->kind != CAP_NODE_ARRAY) {
    gw_tools_free(out);
    return cap_error_set(err, EPROTO,
                         "%s is not a JSON array of tools nor an object with \"tools\"", what);
  }
  out->tools = cap_xcalloc(list->u.arr.len + 1, sizeof *out->tools);
  for (size_t i = 0; i < list->u.arr.len; i++) {
    const struct cap_node *t = list->u.arr.items[i];
    const struct cap_node *name = cap_node_get(t, "name");
    const struct cap_node *desc = cap_node_get(t, "description");
    const struct cap_node *schema = cap_node_get(t, "input_schema");
    if (!schema)
      schema = cap_node_get(t, "inputSchema");
    const struct cap_node *policy = cap_node_get(t, "recommended_policy");
    const struct cap_node *terminal = cap_node_get(t, "terminal_on_success");
    if (!name || name->kind != CAP_NODE_STRING || !name->u.str.len ||
        gw_tools_find(out, name->u.str.ptr)) {
      gw_tools_free(out);
      return cap_error_set(err, EPROTO, "%s: tools[%zu] has no name of its own", what, i);
    }
    struct cap_tool *tool = &out->tools[out->n];
    tool->name = cap_xstrdup(name->u.str.ptr);
    out->n++;
    tool->description = cap_xstrdup(desc && desc->kind == CAP_NODE_STRING ? desc->u.str.ptr : "");
    tool->policy = CAP_POLICY_BLOCK;
    tool->policy_source = CAP_POLICY_SOURCE_DEFAULT;
    if (policy && policy->kind == CAP_NODE_STRING) {
      static const char *const names[] = {"allow", "ask", "block"};
      for (int p = 0; p < 3; p++)
        if (strcmp(policy->u.str.ptr, names[p]) == 0) {
          tool->policy = (enum cap_policy)p;
          tool->policy_source = CAP_POLICY_SOURCE_RECOMMENDED_POLICY;
        }
    }
    tool->terminal_on_success = terminal && terminal->kind == CAP_NODE_BOOL && terminal->u.boolean;
    if (!schema || (schema->kind != CAP_NODE_OBJECT && schema->kind != CAP_NODE_BOOL)) {
      /* the message first: name lives in the document freed next */
      r = cap_error_set(err, EPROTO, "%s: tool %s has no input_schema object", what, tool->name);
      gw_tools_free(out);
      return r;
    }
    tool->input_schema = schema;
    struct cap_diags sd = {0};
    _cleanup_free_ char *path = cap_xasprintf("tools[%zu].input_schema", i);
    tool->validator = cap_js_compile(schema, NULL, NULL, what, path, &sd);
    if (!tool->validator) {
      const struct cap_diag *d = sd.len ? &sd.items[0] : NULL;
      r = cap_error_set(err, EPROTO, "%s: %s: %s", what, d && d->path ? d->path : path,
                        d ? d->message : "not a valid JSON Schema");
      cap_diags_free(&sd);
      gw_tools_free(out);
      return r;
    }
    cap_diags_free(&sd);
  }
  return 0;
}

void gw_tools_drop_server_policy(struct gw_tools *t)
{
  for (size_t i = 0; i < t->n; i++) {
    t->tools[i].policy = CAP_POLICY_BLOCK;
    t->tools[i].policy_source = CAP_POLICY_SOURCE_DEFAULT;
    t->tools[i].terminal_on_success = false;
  }
}

int gw_selu_cached_tools(const char *cache_dir, const struct cap_spec *spec, struct gw_tools *out,
                         struct cap_error *err)
{
  *out = (struct gw_tools){0};
  if (!cache_dir)
    return 0;
  _cleanup_free_ char *path = cache_path(cache_dir, spec);
  size_t len = 0;
  _cleanup_free_ char *text = read_small_file(path, &len);
  if (!text)
    return 0;
  int r = gw_tools_parse(text, len, path, out, err);
  if (r == 0 && spec->runtime.kind == CAP_RUNTIME_MCP)
    gw_tools_drop_server_policy(out);
  return r;
}

enum gw_outcome gw_selu_discover(const struct gw_call *call, const struct cap_spec *spec,
                                 char *const *env, size_t n_env, struct gw_tools *out,
                                 struct cap_error *err)
{
  *out = (struct gw_tools){0};
  struct selu_response resp = {0};
  const char *tool = spec->discovery_tool_name ? spec->discovery_tool_name : "list_tools";
  struct gw_call discovery = *call; /* the call's files are for its tool, not for discovery */
  discovery.n_attach = 0;
  discovery.artifacts_dir = NULL;
  enum gw_outcome code = invoke_raw(&discovery, spec, tool, "{}", env, n_env, &resp, err);
  if (code != GW_OUTCOME_OK)
    return cap_error_prefix(err, "discovering %s's tools", spec->id), code;
  if (!resp.success) {
    cap_error_set(err, EIO, "discovering %s's tools: %s failed: %s", spec->id, tool,
                  resp.error && *resp.error ? resp.error : "(no message)");
    selu_response_free(&resp);
    return GW_OUTCOME_FAILED;
  }
  _cleanup_free_ char *what = cap_xasprintf("%s's %s answer", spec->id, tool);
  if (gw_tools_parse(resp.result, strlen(resp.result), what, out, err) < 0) {
    selu_response_free(&resp);
    return GW_OUTCOME_FAILED;
  }
  gw_tools_cache_store(call->cache_dir, spec, resp.result);
  selu_response_free(&resp);
  return GW_OUTCOME_OK;
}

void gw_tools_cache_store(const char *cache_dir, const struct cap_spec *spec, const char *text)
{
  if (!cache_dir || (mkdir(cache_dir, 0700) < 0 && errno != EEXIST))
    return;
  _cleanup_free_ char *path = cache_path(cache_dir, spec);
  _cleanup_free_ char *tmp = cap_xasprintf("%s.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  size_t len = strlen(text);
  if (fd >= 0 && write(fd, text, len) == (ssize_t)len && close(fd) == 0)
    rename(tmp, path); /* a cache: a failure only costs a later discovery */
  else if (fd >= 0)
    close(fd);
  unlink(tmp);
}
