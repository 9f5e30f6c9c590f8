/* capsule run --dry-run: what would run, as a summary a person reads first
 * (who the tool runs as, where it starts, what it may touch and reach, its
 * limits), then which mechanism enforces each right on this host; the
 * resolved manifest as JSON only with --json. */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/buf.h"
#include "net/egress_plan.h"
#include "core/escape.h"
#include "core/cleanup.h"
#include "gateway/grants.h"
#include "manifest/load.h"
#include "sandbox/capture.h"
#include "sandbox/limits.h"
#include "sandbox/sandbox.h"

/* The host ids the sandbox gives the tool (spawn.c's choice): the
 * caller's own when unprivileged; as root never root, but the capability's
 * own range (id_base + 65534, sandbox_host_ids), or 65534 while no range
 * is recorded (the dry run records none: the first run does). */
static void tool_ids(uint32_t id_base, uid_t *uid, gid_t *gid)
{
  *uid = geteuid();
  *gid = getegid();
  if (*uid == 0)
    sandbox_host_ids(id_base, uid, gid);
}

/* Whether uid:gid may write to st by its mode bits (no ACLs, no
 * supplementary groups: the tool has none). */
static bool mode_writable(const struct stat *st, uid_t uid, gid_t gid)
{
  if (st->st_uid == uid)
    return st->st_mode & S_IWUSR;
  if (st->st_gid == gid)
    return st->st_mode & S_IWGRP;
  return st->st_mode & S_IWOTH;
}

static void print_identity(FILE *out, const struct cap_spec *spec, const struct run_args *a,
                           uint32_t id_base)
{
  uid_t uid;
  gid_t gid;
  tool_ids(id_base, &uid, &gid);
  if (geteuid()) {
    struct passwd *pw = getpwuid(uid);
    fprintf(out, "runs as:      uid %u (%s), gid %u (the caller's own), no capabilities\n",
            (unsigned)uid, pw ? pw->pw_name : "no name", (unsigned)gid);
    return;
  }
  const char *key = a->config && spec->id && *spec->id ? spec->id : RUN_ID_KEY;
  if (id_base && !sandbox_host_ids(id_base, &uid, &gid))
    fprintf(out,
            "runs as:      uid 65534 of capsule's user namespace, which lacks capability %s's "
            "ids %u-%u; no capabilities; capsule runs as root, the tool never does\n",
            key, id_base, id_base + 65535);
  else if (id_base)
    fprintf(out,
            "runs as:      host uid %u and gid %u (ids %u-%u of capability %s, in the state's "
            "id_ranges; 65534 inside), no capabilities; capsule runs as root, the tool never "
            "does\n",
            (unsigned)uid, (unsigned)gid, id_base, id_base + 65535, key);
  else
    fprintf(out,
            "runs as:      host uid and gid base + 65534 of 65,536 ids of capability %s's own, "
            "recorded in the state on its first run (65534 inside), no capabilities; capsule "
            "runs as root, the tool never does\n",
            key);
}

static const char *grant_note(const struct cap_fs_grant *g, uint32_t id_base, char *buf,
                              size_t size)
{
  _cleanup_free_ char *path = run_expand_home(g->path);
  struct stat st;
  if (lstat(path, &st) < 0)
    return "  MISSING: not on this host";
  uid_t uid;
  gid_t gid;
  tool_ids(id_base, &uid, &gid);
  if (g->access == CAP_ACCESS_READ)
    return "";
  /* as root a writable grant is an idmapped mount: the caller's files are
   * the tool's, what it creates is the caller's (src/sandbox/idmap.c) */
  _cleanup_free_ char *real = realpath(path, NULL);
  int idmap = geteuid() == 0 ? sandbox_idmap_probe(real ? real : path) : -1;
  struct stat seen = st;
  if (idmap == 0 && st.st_uid == getuid())
    seen.st_uid = uid;
  if (idmap == 0 && st.st_gid == getgid())
    seen.st_gid = gid;
  if (!mode_writable(&seen, uid, gid)) {
    snprintf(buf, size, "  NOT WRITABLE by the tool, uid %u (owner uid %u, mode %03o%s%s)",
             (unsigned)uid, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
             geteuid() != 0 || idmap == 0 ? ""
             : idmap == -EPERM            ? "; a grant of / is never idmapped"
                                          : "; no idmapped mount here: ",
             geteuid() == 0 && idmap < 0 && idmap != -EPERM ? strerror(-idmap) : "");
    return buf;
  }
  if (idmap == 0)
    return ": writable by the tool (an idmapped mount: what it creates is the caller's)";
  return "";
}

static void print_grants(FILE *out, const struct cap_spec *spec, uint32_t id_base)
{
  struct cap_buf system = {0};
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (g->origin == CAP_ORIGIN_SYSTEM) {
      cap_buf_printf(&system, " %s", g->path);
      continue;
    }
    char buf[256];
    const char *note = grant_note(g, id_base, buf, sizeof buf);
    fprintf(out, "grant:        %-10s %s%s%s%s%s\n", cap_access_name(g->access), g->path,
            g->origin == CAP_ORIGIN_OPERATOR ? " (the operator's: capsule grant)" : "",
            *note ? cli_colour(out, CLI_COLOUR_WARN) : "", note,
            *note ? cli_colour(out, CLI_COLOUR_RESET) : "");
  }
  if (system.len)
    fprintf(out, "system:       read%s\n", system.data);
  cap_buf_free(&system);
  for (size_t i = 0; i < spec->deny.len; i++)
    fprintf(out, "deny:         %s\n", spec->deny.v[i]);
}

#define POOL_MAX_TEXT_(n) #n
#define POOL_MAX_TEXT POOL_MAX_TEXT_(EGRESS_POOL_MAX)

/* The transparent path (net/egress_plan.h): the resolver, then each
 * name's synthetic address and the ports listened on. */
static void print_transparent(FILE *out, const struct cap_spec *spec)
{
  struct egress_plan plan;
  egress_plan_build(spec, &plan);
  fprintf(out, "resolver:     %s:%u inside (UDP, TCP): %zu allowed name%s, every other NXDOMAIN\n",
          EGRESS_DNS_ADDR, EGRESS_DNS_PORT, plan.n_names, plan.n_names == 1 ? "" : "s");
  for (size_t i = 0; i < plan.n_names; i++) {
    const struct egress_name *n = &plan.names[i];
    struct cap_buf ports = {0};
    for (size_t k = 0; k < plan.n_listeners; k++)
      if (plan.listeners[k].name == i)
        cap_buf_printf(&ports, "%s%u", ports.len ? ", " : "", plan.listeners[k].port);
    fprintf(out, "transparent:  %s -> %u.%u.%u.%u port %s%s\n", n->name, n->addr[0], n->addr[1],
            n->addr[2], n->addr[3], ports.len ? ports.data : "none",
            !n->any_port            ? ""
            : capture_planned(spec) ? " and every other (allowed on any port: nftables redirect)"
                                    : " (allowed on any port, but no nft here: only these)");
    cap_buf_free(&ports);
  }
  bool capture = capture_planned(spec);
  if (plan.n_dropped)
    fprintf(out, "transparent:  %zu more names or ports past the limit: %s\n", plan.n_dropped,
            capture ? "names on demand (below), ports through the proxy only"
                    : "through the proxy only");
  if (plan.pool)
    fprintf(out, "transparent:  names under a pattern: %s\n",
            capture ? "on demand from " EGRESS_POOL_NET " (up to " POOL_MAX_TEXT
                      " names, every allowed port: nftables redirect)"
                    : "through the proxy only (no nft here to redirect on-demand addresses)");
  egress_plan_free(&plan);
}

/* Whether host is one the operator granted (`capsule grant --host`). */
static bool operator_host(const struct run_args *a, const char *host)
{
  for (size_t i = 0; a->granted && i < a->granted->owned.len; i++)
    if (a->granted->owned.v[i] == host)
      return true;
  return false;
}

static void print_network(FILE *out, const struct cap_spec *spec, const struct run_args *a)
{
  const struct cap_network *net = &spec->network;
  fprintf(out, "network:      %s\n", cap_net_mode_name(net->mode));
  if (net->mode != CAP_NET_PROXY)
    return;
  for (size_t i = 0; i < net->allow_domains.len; i++)
    fprintf(out, "allow host:   %s (any port%s)\n", net->allow_domains.v[i],
            net->connect.len ? " in ports.connect" : "");
  for (size_t i = 0; i < net->n_endpoints; i++)
    fprintf(out, "allow host:   %s%s%s\n", net->endpoints[i].host,
            net->endpoints[i].n_rules ? " (with HTTP rules)" : "",
            operator_host(a, net->endpoints[i].host) ? " (the operator's: capsule grant)" : "");
  if (!net->allow_domains.len && !net->n_endpoints)
    fprintf(out, "allow host:   none\n");
  for (size_t i = 0; i < net->localhost.len; i++)
    fprintf(out, "forward:      127.0.0.1:%u inside -> the host's 127.0.0.1:%u\n",
            net->localhost.v[i], net->localhost.v[i]);
  for (size_t i = 0; i < spec->n_routes; i++)
    fprintf(out,
            "credential:   %s: read from %s, sent to %s (injected by the proxy; the tool never "
            "sees it)\n",
            spec->routes[i].name, spec->routes[i].source, spec->routes[i].upstream);
  print_transparent(out, spec);
}

static void print_limits(FILE *out, const struct cap_spec *spec)
{
  const struct cap_limits *l = &spec->limits;
  struct cap_buf b = {0};
  if (l->memory_bytes)
    cap_buf_printf(&b, ", memory %llu MiB", (unsigned long long)(l->memory_bytes >> 20));
  if (l->pids)
    cap_buf_printf(&b, ", pids %llu", (unsigned long long)l->pids);
  if (l->cpu_fraction > 0)
    cap_buf_printf(&b, ", cpu %.2f cores", l->cpu_fraction);
  if (l->cpu_ms_per_task)
    cap_buf_printf(&b, ", cpu budget %llu ms", (unsigned long long)l->cpu_ms_per_task);
  if (l->wall_ms)
    cap_buf_printf(&b, ", wall clock %llu s", (unsigned long long)(l->wall_ms / 1000));
  if (l->nofile)
    cap_buf_printf(&b, ", open files %llu", (unsigned long long)l->nofile);
  fprintf(out, "limits:       %s\n", b.len ? b.data + 2 : "none");
  cap_buf_free(&b);
}

/* The summary a person reads first. */
static void print_summary(FILE *out, const struct cap_spec *spec, const struct run_args *a)
{
  fprintf(out, "# capsule run --dry-run: %s\n", spec->source_path);
  if (a->command && a->command[0]) {
    fprintf(out, "command:     ");
    for (char **c = a->command; *c; c++)
      fprintf(out, " %s", *c);
    fputc('\n', out);
  }
  uint32_t id_base = 0;
  struct cap_error err = {0};
  struct run_state rs;
  run_state_open(&rs, a->state, &err);
  cap_error_clear(&err);
  if (run_id_base(spec, a->config, &rs, false, &id_base, &err) < 0) {
    fprintf(out, "# cannot read the tool's host ids: %s\n", err.message);
    cap_error_clear(&err);
  }
  run_state_close(&rs);
  print_identity(out, spec, a, id_base);
  fprintf(out, "working dir:  %s\n",
          a->workdir_inside           ? a->workdir_inside
          : spec->sandbox.private_tmp ? "/tmp"
                                      : "/");
  fprintf(out, "private /tmp: %s\n",
          spec->sandbox.private_tmp ? "yes (an empty tmpfs, gone after the run)"
                                    : "no (/tmp only as granted)");
  if (a->granted)
    fprintf(out,
            "operator:     %zu grant%s added by `capsule grant` (marked below; capsule grant "
            "list)\n",
            a->granted->n_added, a->granted->n_added == 1 ? "" : "s");
  print_grants(out, spec, id_base);
  if (spec->rollback.enabled)
    fprintf(out, "rollback:     the writable grants snapshotted before and after the run "
                 "(capsule rollback list, diff, restore)\n");
  if (spec->process.expand_opens)
    fprintf(out,
            "supervised:   an open of a file outside the grants waits for the operator "
            "(this terminal, else capsule approvals/approve/deny; denied after %llu s)\n",
            (unsigned long long)(a->approval_timeout_s ? a->approval_timeout_s : 60));
  print_network(out, spec, a);
  print_limits(out, spec);
}

/* --dry-run: which mechanism enforces each right on this host. */
static void print_enforcement(FILE *out, const struct cap_spec *spec)
{
  int abi = landlock_abi();
  char landlock[32] = "no Landlock on this host";
  if (abi > 0)
    snprintf(landlock, sizeof landlock, "Landlock ABI %d", abi);
  fprintf(out, "# how each right is enforced on this host\n");
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (abi <= 0 && g->access == CAP_ACCESS_WRITE) { /* landlock_check_needed */
      fprintf(out,
              "grant %-10s %s %s: REFUSED: write-only needs Landlock (the run fails, exit 3)\n",
              cap_access_name(g->access), g->type == CAP_FS_FILE ? "file" : "dir ", g->path);
      continue;
    }
    fprintf(out, "grant %-10s %s %s: bind mount %s, nosuid, nodev + %s\n",
            cap_access_name(g->access), g->type == CAP_FS_FILE ? "file" : "dir ", g->path,
            g->access == CAP_ACCESS_READ ? "read-only (recursive)" : "read-write", landlock);
  }
  for (size_t i = 0; i < spec->deny.len; i++)
    fprintf(out,
            "deny %s: resolved on the host (symlinks followed) and masked by an empty "
            "mount in every grant that shows it; the run fails if it cannot be\n",
            spec->deny.v[i]);
  fprintf(out, "network %s: %s\n", cap_net_mode_name(spec->network.mode),
          spec->network.mode == CAP_NET_UNRESTRICTED ? "the host's network"
          : spec->network.mode == CAP_NET_PROXY
              ? "a network namespace with only loopback; the only ways out are capsule's "
                "proxy at 127.0.0.1:3128 (CONNECT, allowlist checked, names resolved by "
                "capsule) and its transparent listeners on the allowed names' synthetic "
                "addresses (same checks; DNS answered inside by capsule); Landlock allows TCP "
                "connect to those ports alone (any port where an nftables redirect captures "
                "names allowed on any port)"
              : "a network namespace with only loopback + Landlock TCP rules");
  fprintf(out,
          "processes: pid namespace, reaping init, seccomp filter, no_new_privs, no "
          "capabilities%s\n",
          spec->process.blocked_commands.len || spec->process.allowed_commands.len
              ? ", command lists by masking + Landlock EXECUTE"
              : "");
  struct sandbox_limits lim;
  struct cap_error err = {0};
  if (limits_prepare(&lim, spec, false, &err) == 0) {
    const char *kind = lim.kind == LIMITS_CGROUP2   ? "cgroup v2"
                       : lim.kind == LIMITS_CGROUP1 ? "cgroup v1"
                                                    : "rlimit";
    if (spec->limits.memory_bytes)
      fprintf(out, "memory %llu bytes: %s\n", (unsigned long long)spec->limits.memory_bytes,
              lim.memory_enforced ? kind : "RLIMIT_DATA per process");
    if (spec->limits.pids)
      fprintf(out, "pids %llu: %s\n", (unsigned long long)spec->limits.pids,
              lim.pids_by_rlimit ? "RLIMIT_NPROC in the user namespace" : kind);
    if (spec->limits.cpu_fraction > 0)
      fprintf(out, "cpu %.2f cores: %s\n", spec->limits.cpu_fraction,
              lim.cpu_enforced ? kind : "NOT ENFORCED (no writable cgroup)");
    if (spec->limits.cpu_ms_per_task)
      fprintf(out, "cpu budget %llu ms: supervisor projection tick + RLIMIT_CPU\n",
              (unsigned long long)spec->limits.cpu_ms_per_task);
    if (spec->limits.wall_ms)
      fprintf(out, "wall clock %llu ms: supervisor\n", (unsigned long long)spec->limits.wall_ms);
    limits_release(&lim);
  } else {
    fprintf(out, "limits: %s\n", err.message);
    cap_error_clear(&err);
  }
}

/* --dry-run of a linux-gvisor manifest: what runsc enforces (gvisor.c). */
static void print_gvisor_enforcement(FILE *out, const struct cap_spec *spec)
{
  _cleanup_free_ char *runsc = sandbox_runsc_path();
  bool root = geteuid() == 0;
  fprintf(out, "# how each right is enforced on this host\n");
  if (!runsc) {
    fprintf(out, "backend gVisor: runsc is not installed; the run is refused (exit 3): "
                 "apt-get install runsc, or see `capsule doctor`\n");
    return;
  }
  fprintf(out,
          "backend gVisor: %s run%s, platform ptrace: the tool's system calls go to gVisor's "
          "Sentry, its files through runsc's gofer; an OCI bundle with an empty read-only "
          "root\n",
          runsc, root ? "" : " --rootless");
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    fprintf(out, "grant %-10s %s %s: %s\n", cap_access_name(g->access),
            g->type == CAP_FS_FILE ? "file" : "dir ", g->path,
            g->access == CAP_ACCESS_READ    ? "OCI bind mount read-only"
            : g->access == CAP_ACCESS_WRITE ? "REFUSED: write-only needs Landlock (the run fails, "
                                              "exit 3)"
                                            : "OCI bind mount read-write");
  }
  if (spec->sandbox.private_tmp)
    fprintf(out, "/tmp: a private tmpfs in the Sentry, size=%llu bytes\n",
            (unsigned long long)(spec->limits.disk_bytes ? spec->limits.disk_bytes
                                                         : SANDBOX_TMP_DEFAULT_BYTES));
  for (size_t i = 0; i < spec->deny.len; i++)
    fprintf(out, "deny %s: covered by an empty read-only tmpfs (a file: /dev/null)\n",
            spec->deny.v[i]);
  fprintf(out, "network %s: %s\n", cap_net_mode_name(spec->network.mode),
          spec->network.mode == CAP_NET_UNRESTRICTED ? "the host's network (runsc --network=host)"
          : spec->network.mode == CAP_NET_PROXY
              ? "runsc --network=host inside a network namespace of capsule's holding only "
                "loopback and capsule's proxy listeners (127.0.0.1:3128 and the transparent "
                "path's)"
              : "runsc --network=none: the Sentry's own loopback only");
  fprintf(out, "processes: the Sentry's pid namespace, capsule's seccomp deny-list inside "
               "(--oci-seccomp), no_new_privs, no capabilities; no Landlock (the Sentry is the "
               "tool's kernel)\n");
  if (spec->limits.memory_bytes)
    fprintf(out, "memory %llu bytes: %s\n", (unsigned long long)spec->limits.memory_bytes,
            root ? "the cgroup runsc makes" : "RLIMIT_DATA inside the Sentry (no cgroup rootless)");
  if (spec->limits.pids)
    fprintf(out, "pids %llu: RLIMIT_NPROC inside the Sentry (the tool's tasks)\n",
            (unsigned long long)spec->limits.pids);
  if (spec->limits.cpu_fraction > 0)
    fprintf(out, "cpu %.2f cores: %s\n", spec->limits.cpu_fraction,
            root ? "the cgroup runsc makes" : "NOT ENFORCED (no cgroup rootless)");
  if (spec->limits.cpu_ms_per_task)
    fprintf(out, "cpu budget %llu ms: %sRLIMIT_CPU inside the Sentry\n",
            (unsigned long long)spec->limits.cpu_ms_per_task,
            root ? "the cgroup's CPU read by the supervisor + "
                 : "the process tree's CPU read by the supervisor + ");
  if (spec->limits.wall_ms)
    fprintf(out, "wall clock %llu ms: supervisor\n", (unsigned long long)spec->limits.wall_ms);
}

int run_dry(const struct cap_spec *spec, const struct run_args *a)
{
  /* with --json stdout holds the manifest alone; the text goes to stderr */
  FILE *out = a->json ? stderr : stdout;
  /* paths, hosts and names come from the manifest and the host: the text
   * is written in full, then escaped for the terminal as a whole (newlines
   * and tabs pass, nothing else that moves the cursor or recolours) */
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem)
    return CLI_EXIT_INVALID;
  print_summary(mem, spec, a);
  fputc('\n', mem);
  if (spec->sandbox.backend == CAP_BACKEND_GVISOR)
    print_gvisor_enforcement(mem, spec);
  else
    print_enforcement(mem, spec);
  fclose(mem);
  struct cap_escape_stream st = {0};
  struct cap_buf b = {0};
  cap_escape_output(&st, &b, text, len);
  cap_escape_output_end(&st, &b);
  fwrite(b.data ? b.data : "", 1, b.len, out);
  cap_buf_free(&b);
  free(text);
  if (a->json) {
    _cleanup_free_ char *json = cap_spec_to_json(spec, true);
    fputs(json, stdout);
  }
  return CLI_EXIT_OK;
}
