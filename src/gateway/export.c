/* `capsule export oci`: a capability as an OCI runtime bundle (DIR/config.json
 * and DIR/rootfs) that runc runs with the grants capsule's sandbox gives
 * (sandbox_oci_config says what carries over and what cannot). A Selu
 * image: its root (hard-linked from the store where possible), Entrypoint
 * and Cmd, Env, WorkingDir, Selu's runner conventions; x-capsule.command:
 * an empty root with the host's system directories and the package bound
 * read-only, as the sandbox binds them. Credentials are never written:
 * capsule injects them per call. */
#include "gateway/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/selu.h"
#include "image/image.h"
#include "sandbox/sandbox.h"

struct bundle {
  struct cap_spec run_spec;
  struct cap_fs_grant *grants; /* run_spec's own, when replaced */
  struct image_info info;
  char **argv;
  struct cap_strv env;
  const char *workdir;
};

static void bundle_free(struct bundle *b)
{
  free(b->grants);
  image_info_free(&b->info);
  image_strv_free(b->argv);
  cap_strv_free(&b->env);
}

/* ./PROGRAM is the package's own, as the keeper runs it. */
static char **command_argv(const struct cap_spec *spec)
{
  char **argv = cap_xcalloc(spec->runtime.command.len + 1, sizeof *argv);
  for (size_t i = 0; i < spec->runtime.command.len; i++) {
    const char *a = spec->runtime.command.v[i];
    argv[i] = i == 0 && strncmp(a, "./", 2) == 0 ? cap_xasprintf("%s/%s", spec->package_dir, a + 2)
                                                 : cap_xstrdup(a);
  }
  return argv;
}

/* The root's top, made by the bundle's writer (a copy's directories are
 * its own, never the store's): the container's root (id_base) creates the
 * mount points, and /tmp exists as sticky 1777, since runc gives a tmpfs
 * the mode of the directory it covers. */
static int own_root_top(const char *rootfs, uint32_t id_base, struct cap_error *err)
{
  _cleanup_free_ char *tmp = cap_xasprintf("%s/tmp", rootfs);
  if ((mkdir(tmp, 01777) < 0 && errno != EEXIST) || chmod(tmp, 01777) < 0)
    return cap_error_errno(err, errno, "cannot prepare %s", tmp);
  if (id_base && chown(rootfs, id_base, id_base) < 0)
    return cap_error_errno(err, errno, "cannot hand %s to the capability's ids", rootfs);
  return 0;
}

static int prepare(const char *image_dir, uint32_t id_base, const struct cap_spec *spec,
                   const char *dir, struct bundle *b, struct cap_error *err)
{
  b->run_spec = *spec;
  b->run_spec.limits.wall_ms = 0; /* a server: no wall clock of its own */
  b->run_spec.limits.cpu_ms_per_task = 0;
  _cleanup_free_ char *rootfs = cap_xasprintf("%s/rootfs", dir);
  if (spec->runtime.command.len) {
    b->argv = command_argv(spec);
    b->workdir = spec->package_dir;
    if (mkdir(rootfs, 0755) < 0)
      return cap_error_errno(err, errno, "cannot create %s", rootfs);
    return own_root_top(rootfs, id_base, err);
  }
  if (spec->runtime.kind != CAP_RUNTIME_GRPC)
    return cap_error_set(err, ENOTSUP,
                         "capability %s has no command to export (x-capsule.command) and is not "
                         "a Selu image",
                         spec->id);
  int r = gw_selu_image_resolve(image_dir, spec, &b->info, err);
  if (r < 0)
    return r;
  b->argv = image_command(&b->info, err);
  if (!b->argv)
    return -ENOENT;
  gw_selu_image_env(spec, &b->info, &b->env);
  b->workdir = b->info.config.working_dir ? b->info.config.working_dir : "/";
  gw_selu_image_spec(&b->run_spec);
  b->grants = b->run_spec.grants;
  r = image_rootfs_copy(&b->info, rootfs, err);
  return r < 0 ? r : own_root_top(rootfs, id_base, err);
}

int gw_export_oci(const char *image_dir, uint32_t id_base, const struct cap_spec *spec,
                  const char *dir, const char *netns, struct cap_error *err)
{
  if (netns && netns[0] != '/')
    return cap_error_set(err, EINVAL,
                         "--netns %s is not an absolute path (such as "
                         "/run/netns/NAME or /proc/PID/ns/net)",
                         netns);
  if (mkdir(dir, 0755) < 0)
    return errno == EEXIST
               ? cap_error_set(err, EEXIST, "%s exists; give a new directory for the bundle", dir)
               : cap_error_errno(err, errno, "cannot create %s", dir);
  struct bundle b = {0};
  int r = prepare(image_dir, id_base, spec, dir, &b, err);
  struct cap_buf config = {0};
  if (r == 0) {
    struct sandbox_options opt = {.argv = b.argv,
                                  .workdir = b.workdir,
                                  .extra_env = b.env.v,
                                  .n_extra_env = b.env.len,
                                  .id_base = id_base,
                                  .rootfs = b.info.rootfs,
                                  .inside_id = b.info.rootfs ? SELU_IMAGE_ID : 0};
    r = sandbox_oci_config(&b.run_spec, &opt, netns, &config, err);
  }
  if (r == 0) {
    _cleanup_free_ char *path = cap_xasprintf("%s/config.json", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write(fd, config.data, config.len) == (ssize_t)config.len;
    if (fd >= 0 && close(fd) < 0)
      ok = false;
    if (!ok)
      r = cap_error_errno(err, errno, "cannot write %s", path);
  }
  cap_buf_free(&config);
  bundle_free(&b);
  if (r < 0) {
    image_rmtree(dir); /* made here: nothing half-written stays */
    cap_error_prefix(err, "exporting %s", spec->id);
  }
  return r;
}
