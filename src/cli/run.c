/* capsule run [--config M] [flags] -- CMD: a command in the sandbox M
 * grants. Without --config, the secure default: the system set read-only,
 * a private /tmp, no network. Flags widen or narrow it, nono style.
 * Three steps: parse the command line (struct run_args), build the
 * cap_spec and sandbox options from it, run and report (only here is an
 * outcome turned into an exit status). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/fs.h"
#include "gateway/grants.h"
#include "gateway/state.h"
#include "manifest/load.h"
#include "sandbox/rollback.h"
#include "net/rules.h"
#include "sandbox/sandbox.h"

static const char run_help[] =
    "usage: capsule run [--config MANIFEST | --profile PROFILE] [OPTIONS] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with exactly the rights the manifest grants (any of the four\n"
    "formats), or without --config the secure default: system directories\n"
    "read-only, a private /tmp, no network.\n"
    "\n"
    "      --config M         the capability manifest (file or directory)\n"
    "      --profile P        a nono profile: a file (JSONC), or a name looked up in\n"
    "                         $XDG_CONFIG_HOME/nono/profiles, then nono's built-ins\n"
    "      --allow-read P     grant P read-only (repeatable)\n"
    "      --allow-write P    grant P write-only\n"
    "      --allow-rw P       grant P read-write\n"
    "      --deny P           hide P (a file or directory) whatever the grants say\n"
    "      --net MODE         blocked, proxy or unrestricted\n"
    "      --allow-host H[:P] let the tool reach host H (on port P, else any port)\n"
    "                         through capsule's egress proxy; repeatable; implies\n"
    "                         --net proxy. H may be .suffix or *.suffix (subdomains)\n"
    "      --allow-port P     forward the host's loopback port P into the sandbox's\n"
    "                         127.0.0.1:P; repeatable; implies --net proxy\n"
    "      --memory SIZE      memory limit, e.g. 256M, 2G\n"
    "      --pids N           process/thread limit\n"
    "      --cpu-ms N         CPU budget in milliseconds\n"
    "      --timeout S        wall-clock limit in seconds\n"
    "      --approval-timeout S  exec_strategy \"supervised\": how long an open\n"
    "                         outside the grants waits for the operator (60)\n"
    "      --workdir P        working directory inside the sandbox; a relative P is\n"
    "                         the caller's (default: the caller's directory when a\n"
    "                         grant covers it, else /tmp)\n"
    "      --env NAME[=VAL]   pass a variable (the environment is cleared otherwise)\n"
    "      --dry-run          print what would run (who as, where, grants, hosts,\n"
    "                         credentials, limits) and what enforces each right\n"
    "      --json             with --dry-run: the resolved manifest as JSON on stdout\n"
    "                         (the summary then goes to stderr)\n"
    "      --tty              give COMMAND the caller's terminal (interactive use);\n"
    "                         otherwise it has no controlling terminal, stdin from a\n"
    "                         terminal is /dev/null and terminal output is escaped\n"
    "      --resolve H:ADDR[,ADDR]  the egress proxy resolves host H to these IP\n"
    "                         addresses (like curl's; still refused when one is\n"
    "                         private or loopback, unless --proxy-allow-private)\n"
    "      --proxy-allow-private  let the egress proxy reach loopback and private\n"
    "                         addresses (local development; metadata stays refused)\n"
    "      --egress-log FILE  append every egress decision to FILE as JSON lines\n"
    "      --state DIR        capsule's state, for credentials named without a scheme\n"
    "                         (default $CAPSULE_STATE)\n"
    "  -v, --verbose          print egress denials as they happen\n"
    "  -h, --help             this text\n"
    "\n"
    "exit status: the command's; 125 killed by a limit; 127 command not found;\n"
    "1 setup failed; 2 usage; 3 the host cannot enforce what is required\n";

enum {
  OPT_CONFIG = 256,
  OPT_PROFILE,
  OPT_READ,
  OPT_WRITE,
  OPT_RW,
  OPT_NET,
  OPT_MEMORY,
  OPT_PIDS,
  OPT_CPU,
  OPT_TIMEOUT,
  OPT_WORKDIR,
  OPT_ENV,
  OPT_DRY_RUN,
  OPT_PROXY_PRIVATE,
  OPT_RESOLVE,
  OPT_EGRESS_LOG,
  OPT_STATE,
  OPT_ALLOW_HOST,
  OPT_ALLOW_PORT,
  OPT_TTY,
  OPT_JSON,
  OPT_DENY,
  OPT_APPROVAL_TIMEOUT,
};

static const struct option run_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"allow-read", required_argument, NULL, OPT_READ},
    {"allow-write", required_argument, NULL, OPT_WRITE},
    {"allow-rw", required_argument, NULL, OPT_RW},
    {"deny", required_argument, NULL, OPT_DENY},
    {"net", required_argument, NULL, OPT_NET},
    {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
    {"allow-port", required_argument, NULL, OPT_ALLOW_PORT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"cpu-ms", required_argument, NULL, OPT_CPU},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"approval-timeout", required_argument, NULL, OPT_APPROVAL_TIMEOUT},
    {"workdir", required_argument, NULL, OPT_WORKDIR},
    {"env", required_argument, NULL, OPT_ENV},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"tty", no_argument, NULL, OPT_TTY},
    {"json", no_argument, NULL, OPT_JSON},
    {"proxy-allow-private", no_argument, NULL, OPT_PROXY_PRIVATE},
    {"resolve", required_argument, NULL, OPT_RESOLVE},
    {"egress-log", required_argument, NULL, OPT_EGRESS_LOG},
    {"state", required_argument, NULL, OPT_STATE},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};
/* "+": the command's own options are not capsule's */
#define RUN_OPTSTRING "+hv"

/* ---- step 1: the command line ---- */

/* The long name of option c, for messages ("--timeout"). */
static const char *option_name(int c)
{
  for (const struct option *o = run_options; o->name; o++)
    if (o->val == c)
      return o->name;
  return "?";
}

/* One option into a; 0, or the exit status of a usage error. */
static int parse_option(int c, const char *arg, struct run_args *a)
{
  uint64_t v;
  switch (c) {
  case OPT_CONFIG: a->config = arg; return 0;
  case OPT_PROFILE: a->profile = arg; return 0;
  case OPT_READ: cap_strv_push(&a->grants[CAP_ACCESS_READ], arg); return 0;
  case OPT_WRITE: cap_strv_push(&a->grants[CAP_ACCESS_WRITE], arg); return 0;
  case OPT_RW: cap_strv_push(&a->grants[CAP_ACCESS_READWRITE], arg); return 0;
  case OPT_DENY: cap_strv_push(&a->deny, arg); return 0;
  case OPT_NET:
    if (strcmp(arg, "blocked") == 0)
      a->net = CAP_NET_BLOCKED;
    else if (strcmp(arg, "proxy") == 0)
      a->net = CAP_NET_PROXY;
    else if (strcmp(arg, "unrestricted") == 0)
      a->net = CAP_NET_UNRESTRICTED;
    else
      return cli_usage_error("run", "--net takes blocked, proxy or unrestricted, not '%s'", arg);
    return 0;
  case OPT_ALLOW_HOST: return run_parse_allow_host(arg, &a->hosts);
  case OPT_ALLOW_PORT: {
    uint16_t port = run_parse_port(arg);
    if (!port)
      return cli_usage_error("run", "--allow-port takes a TCP port 1..65535, not '%s'", arg);
    cap_ports_push(&a->ports, port);
    return 0;
  }
  case OPT_MEMORY:
    if (!(a->memory = run_parse_size(arg)))
      return cli_usage_error("run", "--memory '%s' is not a size such as 256M or 2G", arg);
    return 0;
  case OPT_PIDS:
  case OPT_CPU:
  case OPT_TIMEOUT:
  case OPT_APPROVAL_TIMEOUT:
    if (!(v = run_parse_count(arg)))
      return cli_usage_error("run", "--%s takes a positive integer, not '%s'", option_name(c), arg);
    *(c == OPT_PIDS      ? &a->pids
      : c == OPT_CPU     ? &a->cpu_ms
      : c == OPT_TIMEOUT ? &a->timeout_s
                         : &a->approval_timeout_s) = v;
    return 0;
  case OPT_WORKDIR: a->workdir = arg; return 0;
  case OPT_ENV: run_push_env(&a->env, arg); return 0;
  case OPT_DRY_RUN: a->dry_run = true; return 0;
  case OPT_TTY: a->tty = true; return 0;
  case OPT_JSON: a->json = true; return 0;
  case OPT_PROXY_PRIVATE: a->proxy_private = true; return 0;
  case OPT_RESOLVE: return run_parse_resolve(arg, a);
  case OPT_EGRESS_LOG: a->egress_log = arg; return 0;
  case OPT_STATE: a->state = arg; return 0;
  case 'v': a->verbose = true; return 0;
  default: return CLI_EXIT_USAGE;
  }
}

/* Returns 0 with *a filled, -1 when --help was printed, or a usage status. */
static int run_parse(int argc, char **argv, struct run_args *a)
{
  *a = (struct run_args){.net = -1};
  int c;
  while ((c = getopt_long(argc, argv, RUN_OPTSTRING, run_options, NULL)) != -1) {
    if (c == 'h') {
      fputs(run_help, stdout);
      return -1;
    }
    if (c == '?' || c == ':')
      return cli_option_error("run", argv, RUN_OPTSTRING);
    int r = parse_option(c, optarg, a);
    if (r)
      return r;
  }
  a->state = cli_default(a->state, "CAPSULE_STATE");
  if ((a->hosts.len || a->ports.len) && a->net >= 0 && a->net != CAP_NET_PROXY)
    return cli_usage_error("run",
                           "--allow-host and --allow-port go through the egress proxy: "
                           "drop --net %s (they imply --net proxy)",
                           cap_net_mode_name((enum cap_net_mode)a->net));
  if (a->config && a->profile)
    return cli_usage_error("run", "--config and --profile each name the rights to run with: "
                                  "give one of them");
  if (a->json && !a->dry_run)
    return cli_usage_error("run",
                           "--json goes with --dry-run (the command's own output is its own)");
  a->command = argv + optind;
  if (!a->command[0] && !a->dry_run)
    return cli_usage_error("run", "name the command to run after --");
  return 0;
}

static void run_args_free(struct run_args *a)
{
  for (int k = 0; k < 3; k++)
    cap_strv_free(&a->grants[k]);
  cap_strv_free(&a->deny);
  cap_strv_free(&a->env);
  cap_strv_free(&a->hosts);
  free(a->ports.v);
  free(a->workdir_inside);
  for (size_t i = 0; i < a->n_resolve; i++) {
    free((char *)a->resolve[i].host);
    free((char *)a->resolve[i].addr);
  }
}

/* ---- step 2: the spec and the sandbox's options ---- */

static struct cap_spec *default_spec(void)
{
  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_NONO);
  spec->id = cap_xstrdup("run");
  spec->source_path = cap_xstrdup("(command line)");
  spec->package_dir = cap_xstrdup("/");
  spec->tool_source = CAP_TOOL_SOURCE_MANIFEST;
  spec->sandbox.backend = CAP_BACKEND_CAPSULE;
  spec->sandbox.private_tmp = true;
  spec->runtime.kind = CAP_RUNTIME_EXEC;
  spec->network.mode = CAP_NET_BLOCKED;
  spec->limits.pids = 4096;
  spec->limits.nofile = 1024;
  cap_spec_add_system_grants(spec);
  return spec;
}

/* The capability --config names (exactly one), or the nono profile
 * --profile names; diagnostics printed. */
static int load_config(const char *config, const char *profile, struct cap_spec **ret)
{
  struct cap_diags diags = {0};
  struct cap_strv files = {0};
  if (profile)
    cap_manifest_load_profile(profile, ret, &diags);
  else if (cap_manifest_discover(config, &files, &diags) == 0 && files.len == 1)
    cap_manifest_load(files.v[0], ret, &diags);
  else if (files.len > 1)
    cap_diags_add(&diags, CAP_SEV_ERROR, config, 0, 0, "",
                  "holds %zu capabilities; name one directory or file", files.len);
  cap_diags_sort(&diags);
  cap_diags_print(&diags, stderr);
  cap_diags_free(&diags);
  cap_strv_free(&files);
  return *ret ? 0 : CLI_EXIT_INVALID;
}

char *run_expand_home(const char *path)
{
  if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
    const char *home = getenv("HOME");
    return cap_xasprintf("%s%s", home ? home : "/", path + 1);
  }
  return cap_xstrdup(path);
}

static const char *const grant_flags[] = {"--allow-read", "--allow-write", "--allow-rw"};

/* The command line's grants and denials, as the caller's absolute paths.
 * A grant of a path the host lacks is an error (as a manifest's is). */
static int add_flag_paths(const struct run_args *a, struct cap_spec *spec)
{
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < a->grants[k].len; i++) {
      const char *given = a->grants[k].v[i];
      char resolved[4096];
      struct stat st;
      if (!realpath(given, resolved) || stat(resolved, &st) < 0) {
        fprintf(stderr, "capsule run: %s %s: %s on this host; create it first, or drop the grant\n",
                grant_flags[k], given, strerror(errno));
        return CLI_EXIT_INVALID;
      }
      struct stat link;
      if (k != CAP_ACCESS_READ && S_ISSOCK(st.st_mode) && lstat(given, &link) == 0 &&
          S_ISLNK(link.st_mode)) {
        /* a socket is granted by its own path: a link to one may have been
         * put there by a tool that could write its directory */
        fprintf(stderr,
                "capsule run: %s %s: a symlink to the socket %s; grant the socket by its own "
                "path\n",
                grant_flags[k], given, resolved);
        return CLI_EXIT_INVALID;
      }
      cap_spec_add_grant(spec, resolved, (enum cap_access)k,
                         S_ISDIR(st.st_mode) ? CAP_FS_DIRECTORY : CAP_FS_FILE, CAP_ORIGIN_MANIFEST);
    }
  char cwd[4096];
  for (size_t i = 0; i < a->deny.len; i++) {
    const char *given = a->deny.v[i];
    char resolved[4096];
    /* a path that does not exist has nothing to hide, but is kept: it may
     * be created before the sandbox starts */
    if (realpath(given, resolved))
      cap_strv_push(&spec->deny, resolved);
    else if (given[0] == '/' || !getcwd(cwd, sizeof cwd))
      cap_strv_push(&spec->deny, given);
    else {
      _cleanup_free_ char *abs = cap_xasprintf("%s/%s", cwd, given);
      cap_strv_push(&spec->deny, abs);
    }
  }
  return 0;
}

/* The manifest's own grants follow the same rule as the flags': a path
 * this host lacks is an error naming it, not a grant silently dropped.
 * Paths the sandbox fills in ($CAPSULE_ variables) and the system set
 * (which differs between distributions) are not the manifest's. */
static int check_manifest_grants(const struct cap_spec *spec)
{
  int status = 0;
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (g->origin != CAP_ORIGIN_MANIFEST || g->path[0] == '$')
      continue;
    _cleanup_free_ char *path = run_expand_home(g->path);
    struct stat st;
    if (lstat(path, &st) == 0)
      continue;
    fprintf(stderr,
            "capsule run: %s: grant %s: %s on this host; create it first, or remove it "
            "from the manifest's grants\n",
            spec->source_path, g->path, strerror(errno));
    status = CLI_EXIT_INVALID;
  }
  return status;
}

/* --net, --allow-host, --allow-port onto the spec's network: a host
 * without a port joins allow_domains, host:port is an endpoint, a port is
 * a ports.localhost forward, just as a nono manifest's network section is
 * lowered; any of them puts the sandbox in proxy mode. */
static void apply_network(const struct run_args *a, struct cap_spec *spec)
{
  struct cap_network *net = &spec->network;
  if (a->net >= 0) {
    net->mode = (enum cap_net_mode)a->net;
    net->dns = net->mode == CAP_NET_UNRESTRICTED; /* in proxy mode capsule resolves names */
  }
  if (a->hosts.len || a->ports.len)
    net->mode = CAP_NET_PROXY;
  for (size_t i = 0; i < a->hosts.len; i++) {
    const char *h = a->hosts.v[i];
    const char *colon = strchr(h, ':');
    if (colon && !strchr(colon + 1, ':'))
      cap_spec_add_endpoint(spec, h);
    else if (!cap_strv_contains(&net->allow_domains, h))
      cap_strv_push(&net->allow_domains, h);
  }
  for (size_t i = 0; i < a->ports.len; i++)
    cap_ports_push(&net->localhost, a->ports.v[i]);
}

/* Whether dir is path or below it (both absolute, canonical). */
static bool path_under(const char *dir, const char *path)
{
  size_t n = strlen(path);
  if (n == 1 && path[0] == '/')
    return true;
  return strncmp(dir, path, n) == 0 && (dir[n] == '\0' || dir[n] == '/');
}

/* Whether the sandbox shows the host's directory dir at the same path: a
 * directory grant covers it and no deny entry does. A grant through a
 * symlink is left out: the sandbox recreates the link, not its target. */
static bool dir_visible(const struct cap_spec *spec, const char *dir)
{
  for (size_t i = 0; i < spec->deny.len; i++) {
    _cleanup_free_ char *d = run_expand_home(spec->deny.v[i]);
    if (path_under(dir, d))
      return false;
  }
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (g->type != CAP_FS_DIRECTORY)
      continue;
    _cleanup_free_ char *p = run_expand_home(g->path);
    char real[4096];
    if (p[0] == '/' && realpath(p, real) && strcmp(real, p) == 0 && path_under(dir, real))
      return true;
  }
  return false;
}

/* Where the command starts: --workdir (a relative one is the caller's
 * path, as in every other flag), else the caller's directory when the
 * sandbox shows it, else NULL (the sandbox's default). */
static char *resolve_workdir(const struct run_args *a, const struct cap_spec *spec)
{
  char cwd[4096];
  bool have_cwd = getcwd(cwd, sizeof cwd) != NULL;
  if (a->workdir) {
    char real[4096];
    if (a->workdir[0] == '/' || !have_cwd)
      return cap_xstrdup(a->workdir);
    if (realpath(a->workdir, real))
      return cap_xstrdup(real);
    return cap_xasprintf("%s/%s", strcmp(cwd, "/") ? cwd : "", a->workdir);
  }
  if (have_cwd && dir_visible(spec, cwd))
    return cap_xstrdup(cwd);
  return NULL;
}

/* Returns 0 with *ret the spec to run, or an exit status (printed). */
static int run_build_spec(struct run_args *a, struct cap_spec **ret)
{
  _cleanup_(cap_spec_freep) struct cap_spec *spec = NULL;
  if (a->config || a->profile) {
    int r = load_config(a->config, a->profile, &spec);
    if (r)
      return r;
  } else {
    spec = default_spec();
  }
  int r = check_manifest_grants(spec);
  if (r == 0)
    r = add_flag_paths(a, spec);
  if (r)
    return r;
  apply_network(a, spec);
  if (a->memory)
    spec->limits.memory_bytes = a->memory;
  if (a->pids)
    spec->limits.pids = a->pids;
  if (a->cpu_ms)
    spec->limits.cpu_ms_per_task = a->cpu_ms;
  if (a->timeout_s)
    spec->limits.wall_ms = a->timeout_s * 1000;
  a->workdir_inside = resolve_workdir(a, spec);
  *ret = steal_pointer(&spec);
  return 0;
}

/* ---- step 3: run and report ---- */

/* A command that the host does not have cannot be in the sandbox either,
 * which is built from host paths (its own /tmp, /dev and /proc
 * aside): found out before any namespace is made. Names resolved against
 * a working directory are left to the sandbox. */
static bool command_surely_missing(const char *name)
{
  static const char *const synthetic[] = {"/tmp/", "/dev/", "/proc/"};
  char found[1][4096];
  if (!strchr(name, '/'))
    return sandbox_command_paths(name, found, 1) == 0;
  if (name[0] != '/')
    return false;
  for (size_t i = 0; i < sizeof synthetic / sizeof synthetic[0]; i++)
    if (strncmp(name, synthetic[i], strlen(synthetic[i])) == 0)
      return false;
  return sandbox_command_paths(name, found, 1) == 0;
}

/* How the command ended, as capsule's exit status. */
static int run_report(const struct cap_spec *spec, int r, const struct sandbox_result *res,
                      struct cap_error *err)
{
  if (res->unenforced[0])
    fprintf(stderr, "capsule: %swarning:%s this host cannot enforce: %s\n",
            cli_colour(stderr, CLI_COLOUR_WARN), cli_colour(stderr, CLI_COLOUR_RESET),
            res->unenforced);
  if (r < 0) {
    fprintf(stderr, "capsule: %s\n", err->message);
    return cli_exit_for(r, err);
  }
  if (res->killed_by) {
    /* the limits in force, so the message names the number that was hit */
    const struct cap_limits *l = &spec->limits;
    struct cap_buf set = {0};
    if (l->memory_bytes)
      cap_buf_printf(&set, ", memory %llu bytes", (unsigned long long)l->memory_bytes);
    if (l->cpu_ms_per_task)
      cap_buf_printf(&set, ", cpu budget %llu ms", (unsigned long long)l->cpu_ms_per_task);
    if (l->wall_ms)
      cap_buf_printf(&set, ", wall clock %llu ms", (unsigned long long)l->wall_ms);
    fprintf(stderr, "capsule: %skilled:%s %s exceeded (limits: %s)\n",
            cli_colour(stderr, CLI_COLOUR_ERROR), cli_colour(stderr, CLI_COLOUR_RESET),
            res->killed_by, set.len ? set.data + 2 : "the host's");
    cap_buf_free(&set);
    return CLI_EXIT_LIMIT;
  }
  return res->exit_status;
}

/* Whether path lies at or below a grant the tool may write (real paths). */
static bool under_writable_grant(const struct cap_spec *spec, const char *path)
{
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (g->access == CAP_ACCESS_READ)
      continue;
    _cleanup_free_ char *p = run_expand_home(g->path);
    char real[4096];
    if (realpath(p, real) && path_under(path, real))
      return true;
  }
  return false;
}

/* --egress-log FILE, appended to by capsule (as root, perhaps): never
 * through a symlink, only a regular file of the caller's with one link,
 * and never inside a place the tool can write, where it could have put a
 * link to another file in an earlier run. */
static FILE *open_egress_log(const char *path, const struct cap_spec *spec)
{
  _cleanup_free_ char *dir = cap_xstrdup(path);
  char *slash = strrchr(dir, '/');
  const char *d = slash == dir ? "/" : slash ? (*slash = '\0', dir) : ".";
  char real[4096];
  if (realpath(d, real) && under_writable_grant(spec, real)) {
    fprintf(stderr,
            "capsule run: the egress log %s is in a directory the tool may write; put it "
            "outside the writable grants\n",
            path);
    return NULL;
  }
  /* the file itself is looked at before it is opened for writing (a
   * device node there is never opened), then reopened through its O_PATH
   * descriptor: the same inode. A new one is made O_EXCL. O_NONBLOCK: a
   * FIFO planted there fails (ENXIO) instead of hanging. */
  int fd = -1;
  struct stat st;
  int at = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (at >= 0 && fstat(at, &st) == 0 && S_ISREG(st.st_mode)) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", at);
    fd = open(self, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
  } else if (at < 0 && errno == ENOENT) {
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
              0600);
  } else if (at >= 0) {
    errno = S_ISLNK(st.st_mode) ? ELOOP : EINVAL; /* refused below without opening it */
  }
  if (at >= 0)
    close(at);
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      st.st_nlink != 1) {
    fprintf(stderr,
            "capsule run: cannot use %s as the egress log: %s (it must be a regular file of "
            "yours with one link, not a symlink)\n",
            path, fd < 0 ? strerror(errno) : "refused");
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  (void)fcntl(fd, F_SETFL, O_APPEND); /* blocking writes again */
  FILE *f = fdopen(fd, "a");
  if (!f)
    close(fd);
  return f;
}

static int run_execute(const struct cap_spec *spec, const struct run_args *a)
{
  if (command_surely_missing(a->command[0])) {
    fprintf(stderr,
            "capsule: cannot run %s: no such command on the sandbox's PATH "
            "(/usr/local/bin:/usr/bin:/bin) or file\n",
            a->command[0]);
    return CLI_EXIT_NOT_FOUND;
  }
  FILE *log = NULL;
  if (a->egress_log && !(log = open_egress_log(a->egress_log, spec)))
    return CLI_EXIT_INVALID;
  struct run_store store_ctx = {.dir = a->state};
  struct proxy_store store = {.lookup = run_store_lookup, .arg = &store_ctx};
  struct sandbox_options opt = {
      .argv = a->command,
      .workdir = a->workdir_inside,
      .extra_env = a->env.v,
      .n_extra_env = a->env.len,
      .tty = a->tty,
      .caller_exits = true, /* cmd_run returns to main */
      .proxy = {.allow_private = a->proxy_private,
                .resolve = a->resolve,
                .n_resolve = a->n_resolve,
                .log = log,
                .verbose = a->verbose,
                .store = &store},
  };
  struct sandbox_result res = {0};
  struct cap_error err = {0}, open_err = {0};
  struct run_state rs;
  run_state_open(&rs, a->state, &open_err); /* the id range's peek and the audit marker */
  int r = run_id_base(spec, a->config, &rs, true, &opt.id_base, &err);
  if (r < 0) {
    cap_error_prefix(&err, "cannot allocate the tool's host ids");
    int status = run_report(spec, r, &res, &err);
    cap_error_clear(&err);
    cap_error_clear(&open_err);
    run_state_close(&rs);
    if (log)
      fclose(log);
    return status;
  }
  struct rb_record rollback;
  char *rollback_store = NULL;
  int rb = run_rollback_before(spec, a->state, &rollback, &rollback_store, a->command);
  if (rb) {
    cap_error_clear(&open_err);
    run_state_close(&rs);
    if (log)
      fclose(log);
    return rb;
  }
  char **hidden = NULL; /* capsule's state stays out of sight even under a granted $HOME */
  /* resolved now, for this run's mask plan a moment later: what was found
   * not to be a link is not asked again there */
  struct cap_path_cache *hidden_cache = cap_xcalloc(1, sizeof *hidden_cache);
  opt.n_hidden = gw_state_private_paths_cached(a->state, hidden_cache, &hidden);
  opt.hidden = (const char *const *)hidden;
  opt.hidden_cache = hidden_cache;
  struct run_audit audit = {.marker.fd = -1};
  run_audit_begin(spec, a, &rs, &open_err, &audit);
  static struct run_expand expand; /* see run.h */
  run_expand_setup(&expand, &opt, spec, a, &audit);
  r = sandbox_run(spec, &opt, &res, &err);
  run_expand_finish(&expand);
  run_audit_finish(&audit, r, &res, &err);
  cap_error_clear(&open_err);
  run_state_close(&rs);
  run_rollback_after(&rollback, rollback_store);
  gw_state_private_paths_free(hidden, opt.n_hidden);
  free(hidden_cache);
  int status = run_report(spec, r, &res, &err);
  cap_error_clear(&err);
  if (log)
    fclose(log);
  run_store_close(&store_ctx);
  return status;
}

int cmd_run(int argc, char **argv)
{
  struct run_args a;
  int status = run_parse(argc, argv, &a);
  if (status == 0) {
    _cleanup_(cap_spec_freep) struct cap_spec *spec = NULL;
    status = run_build_spec(&a, &spec);
    struct gw_granted granted = {0};
    /* a capability's operator grants, as `capsule call` adds them */
    if (status == 0 && a.config)
      run_operator_grants(spec, a.state, &granted);
    const struct cap_spec *eff = granted.n_added ? &granted.spec : spec;
    a.granted = granted.n_added ? &granted : NULL;
    if (status == 0)
      status = a.dry_run ? run_dry(eff, &a) : run_execute(eff, &a);
    gw_granted_free(&granted);
  }
  run_args_free(&a);
  return status < 0 ? CLI_EXIT_OK : status;
}
