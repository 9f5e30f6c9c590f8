/* capsule run [--config M] [flags] -- CMD: a command in the sandbox M
 * grants. Without --config, the secure default: the system set read-only,
 * a private /tmp, no network. Flags widen or narrow it, nono style. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/state.h"
#include "manifest/load.h"
#include "sandbox/limits.h"
#include "sandbox/sandbox.h"

#define RUN_EXIT_LIMIT 125 /* killed by a limit capsule enforces */

/* Bare-name credential sources come from capsule's credential store
 * (system scope), opened only when a route asks. */
struct store_ctx {
  const char *dir; /* NULL: the default state directory */
  struct gw_state *st;
};

static int store_lookup(void *arg, const char *name, char **value, bool *found,
                        struct cap_error *err)
{
  struct store_ctx *ctx = arg;
  if (!ctx->st) {
    _cleanup_free_ char *dflt = ctx->dir ? NULL : gw_state_default_dir();
    int r = gw_state_open(ctx->dir ? ctx->dir : dflt, &ctx->st, err);
    if (r < 0)
      return r;
  }
  return gw_cred_get(ctx->st, name, CAP_SCOPE_SYSTEM, NULL, value, found, err);
}

static const char run_help[] =
    "usage: capsule run [--config MANIFEST] [OPTIONS] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with exactly the rights the manifest grants (any of the four\n"
    "formats), or without --config the secure default: system directories\n"
    "read-only, a private /tmp, no network.\n"
    "\n"
    "      --config M         the capability manifest (file or directory)\n"
    "      --allow-read P     grant P read-only (repeatable)\n"
    "      --allow-write P    grant P write-only\n"
    "      --allow-rw P       grant P read-write\n"
    "      --net MODE         blocked or unrestricted\n"
    "      --memory SIZE      memory limit, e.g. 256M, 2G\n"
    "      --pids N           process/thread limit\n"
    "      --cpu-ms N         CPU budget in milliseconds\n"
    "      --timeout S        wall-clock limit in seconds\n"
    "      --workdir P        working directory inside the sandbox (default /tmp)\n"
    "      --env NAME[=VAL]   pass a variable (the environment is cleared otherwise)\n"
    "      --dry-run          print the resolved manifest and what enforces each right\n"
    "      --proxy-allow-private  let the egress proxy reach loopback and private\n"
    "                         addresses (local development; metadata stays refused)\n"
    "      --egress-log FILE  append every egress decision to FILE as JSON lines\n"
    "      --state DIR        capsule's state, for credentials named without a scheme\n"
    "  -v, --verbose          print egress denials as they happen\n"
    "  -h, --help             this text\n"
    "\n"
    "exit status: the command's; 125 killed by a limit; 127 command not found;\n"
    "1 setup failed; 2 usage; 3 the host cannot enforce what is required\n";

enum {
  OPT_CONFIG = 256, OPT_READ, OPT_WRITE, OPT_RW, OPT_NET, OPT_MEMORY, OPT_PIDS, OPT_CPU,
  OPT_TIMEOUT, OPT_WORKDIR, OPT_ENV, OPT_DRY_RUN, OPT_PROXY_PRIVATE, OPT_EGRESS_LOG, OPT_STATE,
};

/* "256M" -> bytes; 0 on a bad size */
static uint64_t parse_size(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s)
    return 0;
  uint64_t mult = 1;
  switch (*end) {
  case 'K': case 'k': mult = 1ull << 10; end++; break;
  case 'M': case 'm': mult = 1ull << 20; end++; break;
  case 'G': case 'g': mult = 1ull << 30; end++; break;
  case '\0': break;
  default: return 0;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  return *end || v > UINT64_MAX / mult ? 0 : v * mult;
}

static uint64_t parse_count(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  return errno || end == s || *end || s[0] == '-' ? 0 : v;
}

static struct cap_spec *default_spec(void)
{
  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_NONO);
  spec->id = cap_xstrdup("run");
  spec->source_path = cap_xstrdup("(command line)");
  spec->package_dir = cap_xstrdup("/");
  spec->tool_source = cap_xstrdup("manifest");
  spec->sandbox.backend = cap_xstrdup("capsule");
  spec->sandbox.private_tmp = true;
  spec->runtime.kind = CAP_RUNTIME_EXEC;
  spec->network.mode = CAP_NET_BLOCKED;
  spec->limits.pids = 4096;
  spec->limits.nofile = 1024;
  cap_spec_add_system_grants(spec);
  return spec;
}

/* --dry-run: which mechanism enforces each right on this host. */
static void print_enforcement(const struct cap_spec *spec)
{
  int abi = landlock_abi();
  char landlock[32] = "no Landlock on this host";
  if (abi > 0)
    snprintf(landlock, sizeof landlock, "Landlock ABI %d", abi);
  fprintf(stderr, "# how each right is enforced on this host\n");
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    fprintf(stderr, "grant %-10s %s %s: bind mount %s, nosuid, nodev + %s\n",
            cap_access_name(g->access), g->type == CAP_FS_FILE ? "file" : "dir ", g->path,
            g->access == CAP_ACCESS_READ ? "read-only (recursive)" : "read-write", landlock);
  }
  for (size_t i = 0; i < spec->deny.len; i++)
    fprintf(stderr, "deny %s: resolved on the host (symlinks followed) and masked by an empty "
                    "mount in every grant that shows it; the run fails if it cannot be\n",
            spec->deny.v[i]);
  fprintf(stderr, "network %s: %s\n", cap_net_mode_name(spec->network.mode),
          spec->network.mode == CAP_NET_UNRESTRICTED
              ? "the host's network"
              : spec->network.mode == CAP_NET_PROXY
                  ? "a network namespace with only loopback; the only way out is capsule's "
                    "proxy at 127.0.0.1:3128 (CONNECT, allowlist checked, names resolved by "
                    "capsule); Landlock allows TCP connect to that port alone"
                  : "a network namespace with only loopback + Landlock TCP rules");
  fprintf(stderr, "processes: pid namespace, reaping init, seccomp filter, no_new_privs, no "
                  "capabilities%s\n",
          spec->process.blocked_commands.len || spec->process.allowed_commands.len
              ? ", command lists by masking + Landlock EXECUTE"
              : "");
  struct sandbox_limits lim;
  struct cap_error err = {0};
  if (limits_prepare(&lim, spec, &err) == 0) {
    const char *kind = lim.kind == LIMITS_CGROUP2   ? "cgroup v2"
                       : lim.kind == LIMITS_CGROUP1 ? "cgroup v1"
                                                    : "rlimit";
    if (spec->limits.memory_bytes)
      fprintf(stderr, "memory %llu bytes: %s\n", (unsigned long long)spec->limits.memory_bytes,
              lim.memory_enforced ? kind : "RLIMIT_DATA per process");
    if (spec->limits.pids)
      fprintf(stderr, "pids %llu: %s\n", (unsigned long long)spec->limits.pids,
              lim.pids_by_rlimit ? "RLIMIT_NPROC in the user namespace" : kind);
    if (spec->limits.cpu_fraction > 0)
      fprintf(stderr, "cpu %.2f cores: %s\n", spec->limits.cpu_fraction,
              lim.cpu_enforced ? kind : "NOT ENFORCED (no writable cgroup)");
    if (spec->limits.cpu_ms_per_task)
      fprintf(stderr, "cpu budget %llu ms: supervisor projection tick + RLIMIT_CPU\n",
              (unsigned long long)spec->limits.cpu_ms_per_task);
    if (spec->limits.wall_ms)
      fprintf(stderr, "wall clock %llu ms: supervisor\n", (unsigned long long)spec->limits.wall_ms);
    limits_release(&lim);
  } else {
    fprintf(stderr, "limits: %s\n", err.message);
    cap_error_clear(&err);
  }
}

int cmd_run(int argc, char **argv)
{
  static const struct option options[] = {
      {"config", required_argument, NULL, OPT_CONFIG},
      {"allow-read", required_argument, NULL, OPT_READ},
      {"allow-write", required_argument, NULL, OPT_WRITE},
      {"allow-rw", required_argument, NULL, OPT_RW},
      {"net", required_argument, NULL, OPT_NET},
      {"memory", required_argument, NULL, OPT_MEMORY},
      {"pids", required_argument, NULL, OPT_PIDS},
      {"cpu-ms", required_argument, NULL, OPT_CPU},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"workdir", required_argument, NULL, OPT_WORKDIR},
      {"env", required_argument, NULL, OPT_ENV},
      {"dry-run", no_argument, NULL, OPT_DRY_RUN},
      {"proxy-allow-private", no_argument, NULL, OPT_PROXY_PRIVATE},
      {"egress-log", required_argument, NULL, OPT_EGRESS_LOG},
      {"state", required_argument, NULL, OPT_STATE},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *config = NULL, *workdir = NULL, *net = NULL, *egress_log = NULL;
  bool verbose = false;
  FILE *log = NULL;
  struct store_ctx store_ctx = {0};
  struct proxy_store store = {.lookup = store_lookup, .arg = &store_ctx};
  struct cap_strv grants[3] = {{0}}; /* read, write, rw */
  struct cap_strv env = {0};
  uint64_t memory = 0, pids = 0, cpu_ms = 0, timeout_s = 0;
  bool dry_run = false, proxy_private = false;
  int status = CLI_EXIT_USAGE;
  int c;
  while ((c = getopt_long(argc, argv, "+hv", options, NULL)) != -1) {
    switch (c) {
    case OPT_CONFIG: config = optarg; break;
    case OPT_READ: cap_strv_push(&grants[0], optarg); break;
    case OPT_WRITE: cap_strv_push(&grants[1], optarg); break;
    case OPT_RW: cap_strv_push(&grants[2], optarg); break;
    case OPT_NET:
      if (strcmp(optarg, "blocked") && strcmp(optarg, "unrestricted")) {
        cli_usage_error("run", "--net takes blocked or unrestricted, not '%s'", optarg);
        goto out;
      }
      net = optarg;
      break;
    case OPT_MEMORY:
      if (!(memory = parse_size(optarg))) {
        cli_usage_error("run", "--memory '%s' is not a size such as 256M or 2G", optarg);
        goto out;
      }
      break;
    case OPT_PIDS:
    case OPT_CPU:
    case OPT_TIMEOUT: {
      uint64_t v = parse_count(optarg);
      if (!v) {
        cli_usage_error("run", "%s takes a positive integer, not '%s'", argv[optind - 1], optarg);
        goto out;
      }
      *(c == OPT_PIDS ? &pids : c == OPT_CPU ? &cpu_ms : &timeout_s) = v;
      break;
    }
    case OPT_WORKDIR: workdir = optarg; break;
    case OPT_ENV:
      if (strchr(optarg, '=')) {
        cap_strv_push(&env, optarg);
      } else if (getenv(optarg)) {
        char *kv = cap_xasprintf("%s=%s", optarg, getenv(optarg));
        cap_strv_push(&env, kv);
        free(kv);
      }
      break;
    case OPT_DRY_RUN: dry_run = true; break;
    case OPT_PROXY_PRIVATE: proxy_private = true; break;
    case OPT_EGRESS_LOG: egress_log = optarg; break;
    case OPT_STATE: store_ctx.dir = optarg; break;
    case 'v': verbose = true; break;
    case 'h': fputs(run_help, stdout); status = CLI_EXIT_OK; goto out;
    default: cli_usage_error("run", "unknown option"); goto out;
    }
  }
  if (optind >= argc && !dry_run) {
    cli_usage_error("run", "name the command to run after --");
    goto out;
  }

  struct cap_spec *spec = NULL;
  if (config) {
    struct cap_diags diags = {0};
    struct cap_strv files = {0};
    if (cap_manifest_discover(config, &files, &diags) == 0 && files.len == 1)
      cap_manifest_load(files.v[0], &spec, &diags);
    else if (files.len > 1)
      cap_diags_add(&diags, CAP_SEV_ERROR, config, 0, 0, "",
                    "holds %zu capabilities; name one directory or file", files.len);
    cap_diags_sort(&diags);
    cap_diags_print(&diags, stderr);
    cap_diags_free(&diags);
    cap_strv_free(&files);
    if (!spec) {
      status = CLI_EXIT_INVALID;
      goto out;
    }
  } else {
    spec = default_spec();
  }
  static const enum cap_access access[] = {CAP_ACCESS_READ, CAP_ACCESS_WRITE,
                                           CAP_ACCESS_READWRITE};
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < grants[k].len; i++) {
      char resolved[4096];
      if (!realpath(grants[k].v[i], resolved)) {
        fprintf(stderr, "capsule run: cannot grant %s: %s\n", grants[k].v[i], strerror(errno));
        cap_spec_free(spec);
        status = CLI_EXIT_INVALID;
        goto out;
      }
      cap_spec_add_grant(spec, resolved, access[k], CAP_FS_DIRECTORY, CAP_ORIGIN_MANIFEST);
    }
  if (net)
    spec->network.mode = strcmp(net, "blocked") == 0 ? CAP_NET_BLOCKED : CAP_NET_UNRESTRICTED;
  if (memory)
    spec->limits.memory_bytes = memory;
  if (pids)
    spec->limits.pids = pids;
  if (cpu_ms)
    spec->limits.cpu_ms_per_task = cpu_ms;
  if (timeout_s)
    spec->limits.wall_ms = timeout_s * 1000;
  if (spec->runtime.command.len && optind >= argc && !dry_run) {
    cli_usage_error("run", "name the command to run after --");
    cap_spec_free(spec);
    goto out;
  }

  if (dry_run) {
    _cleanup_free_ char *json = cap_spec_to_json(spec, true);
    fputs(json, stdout);
    print_enforcement(spec);
    cap_spec_free(spec);
    status = CLI_EXIT_OK;
    goto out;
  }

  if (egress_log && !(log = fopen(egress_log, "ae"))) {
    fprintf(stderr, "capsule run: cannot open the egress log %s: %s\n", egress_log, strerror(errno));
    cap_spec_free(spec);
    status = CLI_EXIT_INVALID;
    goto out;
  }
  struct sandbox_options opt = {
      .argv = argv + optind,
      .workdir = workdir,
      .extra_env = env.v,
      .n_extra_env = env.len,
      .proxy = {.allow_private = proxy_private, .log = log, .verbose = verbose, .store = &store},
  };
  char **hidden = NULL; /* capsule's state stays out of sight even under a granted $HOME */
  opt.n_hidden = gw_state_private_paths(store_ctx.dir, &hidden);
  opt.hidden = (const char *const *)hidden;
  struct sandbox_result res;
  struct cap_error err = {0};
  int r = sandbox_run(spec, &opt, &res, &err);
  gw_state_private_paths_free(hidden, opt.n_hidden);
  if (res.unenforced[0])
    fprintf(stderr, "capsule: warning: this host cannot enforce: %s\n", res.unenforced);
  if (r < 0) {
    fprintf(stderr, "capsule: %s\n", err.message);
    status = r == -ENOTSUP ? CLI_EXIT_HOST
             : strstr(err.message, "cannot run ") ? 127
                                                  : CLI_EXIT_INVALID;
    cap_error_clear(&err);
  } else if (res.killed_by) {
    if (strcmp(res.killed_by, "cpu budget") == 0)
      fprintf(stderr, "capsule: killed: cpu budget %llu ms exceeded\n",
              (unsigned long long)spec->limits.cpu_ms_per_task);
    else if (strcmp(res.killed_by, "wall clock") == 0)
      fprintf(stderr, "capsule: killed: wall clock %llu ms exceeded\n",
              (unsigned long long)spec->limits.wall_ms);
    else
      fprintf(stderr, "capsule: killed: %s exceeded\n", res.killed_by);
    status = RUN_EXIT_LIMIT;
  } else {
    status = res.exit_status;
  }
  cap_spec_free(spec);
  if (log)
    fclose(log);
  gw_state_close(store_ctx.st);
out:
  for (int k = 0; k < 3; k++)
    cap_strv_free(&grants[k]);
  cap_strv_free(&env);
  return status;
}
