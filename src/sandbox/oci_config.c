/* The sandbox as an OCI runtime-spec config.json (`capsule export oci`):
 * the same grants sandbox_run gives, in the terms runc reads. Carried:
 * the mounts (grants bound read-only or read-write, nosuid and nodev;
 * a private /tmp; the sandbox's own /dev and /proc), the namespaces (user
 * with the same ids, mount, pid, ipc, uts, cgroup, and network unless the
 * capability's network is unrestricted), the seccomp deny-list (generated
 * from the same tables as the BPF program, seccomp_gen.c), no capabilities,
 * no_new_privs, rlimits, and the memory, CPU and pids limits as cgroup
 * resources. Not carried (no OCI field): Landlock, capsule's egress proxy
 * and credential injection, the masks of capsule's state (its state is
 * not bound in the first place). sandbox_oci_config_for writes the
 * variant gvisor.c hands to runsc. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "net/proxy.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox.h"
#include "sandbox/spawn_internal.h"

static void string_array(struct cap_jw *w, const char *const *v, size_t n)
{
  cap_jw_begin_array(w);
  for (size_t i = 0; i < n; i++)
    cap_jw_string(w, v[i]);
  cap_jw_end_array(w);
}

static void mount_entry(struct cap_jw *w, const char *dest, const char *type, const char *source,
                        const char *const *options, size_t n)
{
  cap_jw_begin_object(w);
  cap_jw_key(w, "destination");
  cap_jw_string(w, dest);
  cap_jw_key(w, "type");
  cap_jw_string(w, type);
  cap_jw_key(w, "source");
  cap_jw_string(w, source);
  cap_jw_key(w, "options");
  string_array(w, options, n);
  cap_jw_end_object(w);
}

/* runsc: the proxy's variables and trust, as exec.c gives them */
static void write_proxy_env(struct cap_jw *w, const struct sandbox_oci_runsc *runsc)
{
  static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                     "http_proxy", "https_proxy", "all_proxy"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    _cleanup_free_ char *v = cap_xasprintf("%s=http://127.0.0.1:%d", vars[i], PROXY_PORT);
    cap_jw_string(w, v);
  }
  cap_jw_string(w, "NO_PROXY=localhost,127.0.0.1");
  cap_jw_string(w, "no_proxy=localhost,127.0.0.1");
  static const char *const ca_vars[] = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
                                        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"};
  for (size_t i = 0; runsc->ca_file && i < sizeof ca_vars / sizeof ca_vars[0]; i++) {
    _cleanup_free_ char *v = cap_xasprintf("%s=%s", ca_vars[i], PROXY_CA_FILE);
    cap_jw_string(w, v);
  }
  size_t n = 0;
  char *const *phantoms = proxy_tool_env(runsc->proxy, &n);
  for (size_t i = 0; i < n; i++)
    cap_jw_string(w, phantoms[i]);
}

/* process.rlimits: no core files, the open files limit, and for runsc the
 * per-process backstops limits.c sets, which the Sentry enforces for its
 * tasks (the CPU budget, the pids limit; memory and file size where no
 * cgroup is made, unprivileged) */
static void write_rlimits(struct cap_jw *w, const struct cap_spec *spec,
                          const struct sandbox_oci_runsc *runsc)
{
  cap_jw_key(w, "rlimits");
  cap_jw_begin_array(w);
  bool backstops = runsc != NULL;
  bool no_cgroup = runsc && !runsc->cgroups_path;
  struct {
    const char *type;
    uint64_t value;
  } limits[] = {
      {"RLIMIT_NOFILE", spec->limits.nofile},
      {"RLIMIT_CORE", 0},
      {"RLIMIT_CPU", backstops && spec->limits.cpu_ms_per_task
                         ? (spec->limits.cpu_ms_per_task + 999) / 1000 + 1
                         : 0},
      {"RLIMIT_DATA", no_cgroup ? spec->limits.memory_bytes : 0},
      {"RLIMIT_FSIZE", backstops ? spec->limits.disk_bytes : 0},
      /* the pids limit: the Sentry counts the tool's tasks (a pids cgroup
       * would count the Sentry's own threads) */
      {"RLIMIT_NPROC", backstops ? spec->limits.pids : 0},
  };
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    if (i != 1 && !limits[i].value)
      continue;
    cap_jw_begin_object(w);
    cap_jw_key(w, "type");
    cap_jw_string(w, limits[i].type);
    cap_jw_key(w, "hard");
    cap_jw_int(w, (int64_t)limits[i].value);
    cap_jw_key(w, "soft");
    cap_jw_int(w, (int64_t)limits[i].value);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void write_process(struct cap_jw *w, const struct cap_spec *spec,
                          const struct sandbox_options *opt, const struct sandbox_oci_runsc *runsc)
{
  cap_jw_key(w, "process");
  cap_jw_begin_object(w);
  cap_jw_key(w, "terminal");
  cap_jw_bool(w, false);
  uint32_t id = opt->inside_id ? opt->inside_id : geteuid() == 0 ? 65534 : 0;
  if (geteuid() != 0 && !runsc)
    id = 0; /* rootless runc maps the caller alone, as 0 */
  cap_jw_key(w, "user");
  cap_jw_begin_object(w);
  cap_jw_key(w, "uid");
  cap_jw_int(w, id);
  cap_jw_key(w, "gid");
  cap_jw_int(w, id);
  cap_jw_end_object(w);
  cap_jw_key(w, "args");
  cap_jw_begin_array(w);
  for (size_t i = 0; opt->argv[i]; i++)
    cap_jw_string(w, opt->argv[i]);
  cap_jw_end_array(w);
  cap_jw_key(w, "env");
  cap_jw_begin_array(w);
  cap_jw_string(w, "PATH=/usr/local/bin:/usr/bin:/bin");
  cap_jw_string(w, spec->sandbox.private_tmp ? "HOME=/tmp" : "HOME=/");
  cap_jw_string(w, "TMPDIR=/tmp");
  cap_jw_string(w, "LANG=C.UTF-8");
  cap_jw_string(w, "CAPSULE_SANDBOX=1");
  if (runsc && runsc->proxy)
    write_proxy_env(w, runsc);
  for (size_t i = 0; i < opt->n_extra_env; i++)
    cap_jw_string(w, opt->extra_env[i]);
  cap_jw_end_array(w);
  cap_jw_key(w, "cwd");
  cap_jw_string(w, opt->workdir ? opt->workdir : "/");
  cap_jw_key(w, "noNewPrivileges");
  cap_jw_bool(w, true);
  static const char *const sets[] = {"bounding", "effective", "inheritable", "permitted",
                                     "ambient"};
  cap_jw_key(w, "capabilities");
  cap_jw_begin_object(w);
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
    cap_jw_key(w, sets[i]);
    string_array(w, NULL, 0);
  }
  cap_jw_end_object(w);
  write_rlimits(w, spec, runsc);
  cap_jw_end_object(w);
}

/* The grants as bind mounts (what exists on the host: a missing path is
 * left out, as the sandbox leaves it out); a path that is not absolute
 * yet (a session workspace) cannot be, and is refused. */
static int write_grants(struct cap_jw *w, const struct cap_spec *spec, struct cap_error *err)
{
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    _cleanup_free_ char *path = sandbox_expand_path(g->path);
    if (path[0] != '/')
      return cap_error_set(err, EINVAL,
                           "the grant %s is not an absolute path (a session workspace is made "
                           "per call); a bundle cannot carry it",
                           g->path);
    char real[PATH_MAX];
    if (!realpath(path, real))
      continue;
    const char *ro = g->access == CAP_ACCESS_READ ? "ro" : "rw";
    const char *options[] = {"rbind", ro, "nosuid", "nodev"};
    mount_entry(w, path, "bind", real, options, 4);
  }
  return 0;
}

/* runsc: what capsule's sandbox masks inside the grants (its state, the
 * manifest's deny entries) covered by an empty read-only tmpfs, a file by
 * /dev/null; the proxy's trust bundle where exec.c's variables point; the
 * resolver's resolv.conf and hosts over /etc's, as mount.c covers them. */
static void write_runsc_mounts(struct cap_jw *w, const struct sandbox_oci_runsc *runsc)
{
  static const char *const dir_mask[] = {"ro", "nosuid", "nodev", "noexec", "mode=000"};
  static const char *const file_mask[] = {"bind", "ro"};
  for (size_t i = 0; i < runsc->n_masks; i++) {
    struct stat sb;
    if (stat(runsc->masks[i], &sb) < 0)
      continue; /* nothing there to hide */
    if (S_ISDIR(sb.st_mode))
      mount_entry(w, runsc->masks[i], "tmpfs", "tmpfs", dir_mask, 5);
    else
      mount_entry(w, runsc->masks[i], "bind", "/dev/null", file_mask, 2);
  }
  static const char *const ca[] = {"bind", "ro", "nosuid", "nodev"};
  if (runsc->ca_file)
    mount_entry(w, PROXY_CA_FILE, "bind", runsc->ca_file, ca, 4);
  static const char *const etc[] = {"resolv.conf", "hosts"};
  for (size_t i = 0; runsc->etc_dir && i < 2; i++) {
    _cleanup_free_ char *dest = cap_xasprintf("/etc/%s", etc[i]);
    _cleanup_free_ char *src = cap_xasprintf("%s/%s", runsc->etc_dir, etc[i]);
    mount_entry(w, dest, "bind", src, ca, 4);
  }
}

static int write_mounts(struct cap_jw *w, const struct cap_spec *spec,
                        const struct sandbox_options *opt, const struct sandbox_oci_runsc *runsc,
                        struct cap_error *err)
{
  cap_jw_key(w, "mounts");
  cap_jw_begin_array(w);
  static const char *const proc[] = {"nosuid", "noexec", "nodev"};
  mount_entry(w, "/proc", "proc", "proc", proc, 3);
  static const char *const dev[] = {"nosuid", "noexec", "strictatime", "mode=755", "size=64k"};
  mount_entry(w, "/dev", "tmpfs", "tmpfs", dev, 5);
  static const char *const pts[] = {"nosuid", "noexec", "newinstance", "ptmxmode=0666",
                                    "mode=0620"};
  mount_entry(w, "/dev/pts", "devpts", "devpts", pts, 5);
  static const char *const shm[] = {"nosuid", "noexec", "nodev", "mode=1777", "size=16m"};
  mount_entry(w, "/dev/shm", "tmpfs", "shm", shm, 5);
  if (spec->sandbox.private_tmp) {
    char size[48];
    snprintf(size, sizeof size, "size=%llu",
             (unsigned long long)(spec->limits.disk_bytes ? spec->limits.disk_bytes
                                                          : SANDBOX_TMP_DEFAULT_BYTES));
    const char *tmp[] = {"nosuid", "nodev", "mode=1777", size, "noexec"};
    /* Selu's image /tmp is noexec, as a command list's is */
    bool noexec =
        opt->rootfs || spec->process.allowed_commands.len || spec->process.blocked_commands.len;
    mount_entry(w, "/tmp", "tmpfs", "tmpfs", tmp, noexec ? 5 : 4);
  }
  int r = write_grants(w, spec, err);
  if (r == 0 && runsc)
    write_runsc_mounts(w, runsc);
  cap_jw_end_array(w);
  return r;
}

static void id_mappings(struct cap_jw *w, const char *key, uint32_t host, uint32_t size)
{
  cap_jw_key(w, key);
  cap_jw_begin_array(w);
  cap_jw_begin_object(w);
  cap_jw_key(w, "containerID");
  cap_jw_int(w, 0);
  cap_jw_key(w, "hostID");
  cap_jw_int(w, host);
  cap_jw_key(w, "size");
  cap_jw_int(w, size);
  cap_jw_end_object(w);
  cap_jw_end_array(w);
}

static void write_namespaces(struct cap_jw *w, const struct cap_spec *spec, const char *netns,
                             const struct sandbox_oci_runsc *runsc)
{
  cap_jw_key(w, "namespaces");
  cap_jw_begin_array(w);
  static const char *const types[] = {"user", "mount", "pid", "ipc", "uts", "cgroup", "network"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    bool net = strcmp(types[i], "network") == 0;
    if (net && spec->network.mode == CAP_NET_UNRESTRICTED)
      continue;
    /* runsc: its Sentry is the kernel the tool sees, with no user ids of
     * the host's; in proxy mode it joins the namespace it is started in
     * (the one holding the proxy's listeners) */
    if (runsc && (i == 0 || (net && spec->network.mode == CAP_NET_PROXY)))
      continue;
    cap_jw_begin_object(w);
    cap_jw_key(w, "type");
    cap_jw_string(w, types[i]);
    if (net && netns) {
      cap_jw_key(w, "path");
      cap_jw_string(w, netns);
    }
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void write_resources(struct cap_jw *w, const struct cap_spec *spec, bool runsc)
{
  cap_jw_key(w, "resources");
  cap_jw_begin_object(w);
  if (spec->limits.memory_bytes) {
    cap_jw_key(w, "memory");
    cap_jw_begin_object(w);
    cap_jw_key(w, "limit");
    cap_jw_int(w, (int64_t)spec->limits.memory_bytes);
    cap_jw_end_object(w);
  }
  if (spec->limits.cpu_fraction > 0) {
    cap_jw_key(w, "cpu");
    cap_jw_begin_object(w);
    cap_jw_key(w, "period");
    cap_jw_int(w, 100000);
    cap_jw_key(w, "quota");
    cap_jw_int(w, (int64_t)(spec->limits.cpu_fraction * 100000));
    cap_jw_end_object(w);
  }
  if (spec->limits.pids && !runsc) { /* under runsc the Sentry's threads would count */
    cap_jw_key(w, "pids");
    cap_jw_begin_object(w);
    cap_jw_key(w, "limit");
    cap_jw_int(w, (int64_t)spec->limits.pids);
    cap_jw_end_object(w);
  }
  cap_jw_end_object(w);
}

/* Does a generated rule name clone3? */
static bool names_clone3(const struct cap_node *rule)
{
  const struct cap_node *names = cap_node_get(rule, "names");
  for (size_t i = 0; names && names->kind == CAP_NODE_ARRAY && i < names->u.arr.len; i++) {
    const struct cap_node *n = names->u.arr.items[i];
    if (n->kind == CAP_NODE_STRING && strcmp(n->u.str.ptr, "clone3") == 0)
      return true;
  }
  return false;
}

/* The deny-list, spliced in as generated (seccomp_gen.c). For runsc
 * without the clone3 rule: runsc (20221219) ignores errnoRet, so its
 * ENOSYS (libc's cue to fall back to clone) reached the tool as EPERM and
 * no thread started (node, python); the Sentry answers clone3 with ENOSYS
 * itself, so nothing is lost. */
static void write_seccomp(struct cap_jw *w, const struct cap_spec *spec, bool runsc)
{
  cap_jw_key(w, "seccomp");
  cap_jw_begin_object(w);
  cap_jw_key(w, "defaultAction");
  cap_jw_string(w, "SCMP_ACT_ALLOW");
  cap_jw_key(w, "architectures");
  static const char *const arch[] = {SANDBOX_SECCOMP_OCI_ARCH};
  string_array(w, arch, 1);
  cap_jw_key(w, "syscalls");
  _cleanup_free_ char *rules = sandbox_seccomp_oci_rules(!spec->process.ipc_full);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, rules, strlen(rules), "seccomp", 0, &diags) < 0 ||
      doc->root->kind != CAP_NODE_ARRAY)
    abort(); /* generated at build time: never malformed */
  cap_jw_begin_array(w);
  for (size_t i = 0; i < doc->root->u.arr.len; i++)
    if (!runsc || !names_clone3(doc->root->u.arr.items[i]))
      cap_jw_node(w, doc->root->u.arr.items[i]);
  cap_jw_end_array(w);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  cap_jw_end_object(w);
}

static void write_linux(struct cap_jw *w, const struct cap_spec *spec,
                        const struct sandbox_options *opt, const char *netns,
                        const struct sandbox_oci_runsc *runsc)
{
  cap_jw_key(w, "linux");
  cap_jw_begin_object(w);
  /* as root the capability's own range of host ids (opt->id_base), the
   * caller alone unprivileged */
  bool root = geteuid() == 0;
  if (!runsc) {
    id_mappings(w, "uidMappings", root ? opt->id_base : getuid(), root ? 65536 : 1);
    id_mappings(w, "gidMappings", root ? opt->id_base : getgid(), root ? 65536 : 1);
  } else if (runsc->cgroups_path) {
    cap_jw_key(w, "cgroupsPath");
    cap_jw_string(w, runsc->cgroups_path);
  }
  write_namespaces(w, spec, netns, runsc);
  write_resources(w, spec, runsc != NULL);
  static const char *const masked[] = {
      "/proc/acpi",          "/proc/kcore",      "/proc/keys",
      "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
      "/proc/sched_debug",   "/proc/scsi",       "/sys/firmware"};
  cap_jw_key(w, "maskedPaths");
  string_array(w, masked, sizeof masked / sizeof masked[0]);
  static const char *const readonly[] = {"/proc/asound", "/proc/bus", "/proc/fs",
                                         "/proc/irq",    "/proc/sys", "/proc/sysrq-trigger"};
  cap_jw_key(w, "readonlyPaths");
  string_array(w, readonly, sizeof readonly / sizeof readonly[0]);
  write_seccomp(w, spec, runsc != NULL);
  cap_jw_end_object(w);
}

int sandbox_oci_config(const struct cap_spec *spec, const struct sandbox_options *opt,
                       const char *netns, struct cap_buf *out, struct cap_error *err)
{
  return sandbox_oci_config_for(spec, opt, netns, NULL, out, err);
}

int sandbox_oci_config_for(const struct cap_spec *spec, const struct sandbox_options *opt,
                           const char *netns, const struct sandbox_oci_runsc *runsc,
                           struct cap_buf *out, struct cap_error *err)
{
  struct cap_jw w;
  cap_jw_init(&w, out, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "ociVersion");
  cap_jw_string(&w, "1.0.2");
  write_process(&w, spec, opt, runsc);
  cap_jw_key(&w, "root");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "path");
  cap_jw_string(&w, "rootfs");
  cap_jw_key(&w, "readonly");
  cap_jw_bool(&w, true);
  cap_jw_end_object(&w);
  cap_jw_key(&w, "hostname");
  cap_jw_string(&w, "capsule");
  if (geteuid() == 0 && !opt->id_base && !runsc)
    return cap_error_set(err, EINVAL, "as root a bundle needs the capability's host id range");
  int r = write_mounts(&w, spec, opt, runsc, err);
  if (r < 0)
    return r;
  write_linux(&w, spec, opt, netns, runsc);
  cap_jw_end_object(&w);
  cap_buf_putc(out, '\n');
  return 0;
}
