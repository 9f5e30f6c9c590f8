/* `capsule serve` and `capsule serve status` (front/serve.h). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "front/serve.h"
#include "gateway/db.h"

static const char serve_help[] =
    "usage: capsule serve [--caps DIR] [--state DIR] [--socket PATH] [--mcp-http ADDR]\n"
    "                     [--ui ADDR] [--grpc ADDR] [--capability ID] [--tls-cert F --tls-key F]\n"
    "                     [--insecure] [--timeout S] [--rate N]\n"
    "       capsule serve status [--state DIR] [--json]\n"
    "\n"
    "A long-running gateway: MCP sessions on a unix socket (STATE/serve.sock, 0600;\n"
    "newline-delimited JSON-RPC, the caller is the socket's peer) and, with\n"
    "--mcp-http, MCP Streamable HTTP at http://ADDR/mcp, where every request needs\n"
    "`Authorization: Bearer TOKEN` (`capsule access issue`) and calls are made as the\n"
    "token's user. The registry is reloaded on SIGHUP and when --caps changes;\n"
    "SIGTERM drains calls in flight (up to 10 s). Logs are JSON lines on stderr.\n"
    "`status` says whether one runs on the state, and what it serves.\n"
    "\n"
    "      --caps DIR        the capabilities directory (default $CAPSULE_CAPS, else\n"
    "                        ./capabilities)\n"
    "      --socket PATH     the unix socket (default STATE/serve.sock)\n"
    "      --mcp-http ADDR   IP:PORT (or localhost:PORT) to serve MCP over HTTP on\n"
    "      --ui ADDR         IP:PORT (or localhost:PORT; port 0: any free one) to serve\n"
    "                        the operator dashboard on (sign in with an operator token;\n"
    "                        `serve status` shows the address)\n"
    "      --grpc ADDR       IP:PORT or unix:PATH to serve Selu's CapabilityService on\n"
    "                        (tools named CAPABILITY.TOOL; every call needs a bearer\n"
    "                        token in its `authorization` metadata)\n"
    "      --capability ID   serve this capability alone, its tools under their own names\n"
    "      --tls-cert F, --tls-key F  HTTPS with this PEM certificate and key\n"
    "      --insecure        allow a non-loopback ADDR without TLS\n"
    "      --timeout S       wall-clock limit of each call in seconds\n"
    "      --rate N          HTTP requests a second per token, bursts of 2N (default 200;\n"
    "                        past it: 429)\n"
    "      --json            status: one JSON object\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 stopped by a signal (status: one runs), 1 cannot start (status:\n"
    "none runs), 2 usage\n";

enum {
  O_CAPS = 256,
  O_STATE,
  O_SOCKET,
  O_HTTP,
  O_UI,
  O_GRPC,
  O_CAP,
  O_CERT,
  O_KEY,
  O_INSECURE,
  O_TIMEOUT,
  O_JSON,
  O_RATE
};

static const struct option options[] = {
    {"caps", required_argument, NULL, O_CAPS},
    {"state", required_argument, NULL, O_STATE},
    {"socket", required_argument, NULL, O_SOCKET},
    {"mcp-http", required_argument, NULL, O_HTTP},
    {"grpc", required_argument, NULL, O_GRPC},
    {"ui", required_argument, NULL, O_UI},
    {"capability", required_argument, NULL, O_CAP},
    {"tls-cert", required_argument, NULL, O_CERT},
    {"tls-key", required_argument, NULL, O_KEY},
    {"insecure", no_argument, NULL, O_INSECURE},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"json", no_argument, NULL, O_JSON},
    {"rate", required_argument, NULL, O_RATE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void log_line(void *ctx, const char *line)
{
  (void)ctx;
  fprintf(stderr, "%s\n", line);
}

static int status(const char *state_dir, bool json)
{
  _cleanup_free_ char *path = serve_status_path(state_dir);
  char *text = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *pid = NULL;
  if (cap_read_file(path, 65536, &text, &len, &err) == 0 &&
      cap_json_parse(doc, text, len, path, 0, &d) == 0)
    pid = cap_node_get(doc->root, "pid");
  bool alive = pid && pid->kind == CAP_NODE_INT && pid->u.num.i > 0 &&
               (kill((pid_t)pid->u.num.i, 0) == 0 || errno == EPERM);
  if (alive && json) {
    _cleanup_free_ char *c = cap_json_canonical(text, len);
    printf("%s\n", c ? c : "{}");
  } else if (alive) {
    const char *keys[] = {"state",        "pid",      "started",        "socket",
                          "mcp_http",     "ui",       "caps_watch",     "caps_watch_error",
                          "capabilities", "sessions", "calls_in_flight"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
      const struct cap_node *v = cap_node_get(doc->root, keys[i]);
      printf("%-16s ", keys[i]);
      if (v && v->kind == CAP_NODE_STRING)
        printf("%s\n", v->u.str.ptr);
      else if (v && v->kind == CAP_NODE_INT)
        printf("%lld\n", (long long)v->u.num.i);
      else
        printf("-\n");
    }
  } else if (json) {
    printf("{\"state\":\"stopped\"}\n");
  } else {
    printf("capsule serve is not running on %s\n", state_dir);
  }
  cap_error_clear(&err);
  cap_diags_free(&d);
  cap_doc_free(doc);
  free(text);
  return alive ? CLI_EXIT_OK : CLI_EXIT_INVALID;
}

int cmd_serve(int argc, char **argv)
{
  struct serve_options opt = {.version = CAPSULE_VERSION, .log = log_line};
  const char *caps = NULL, *state = NULL;
  bool json = false;
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case O_CAPS: caps = optarg; break;
    case O_STATE: state = optarg; break;
    case O_SOCKET: opt.socket_path = optarg; break;
    case O_HTTP: opt.http_addr = optarg; break;
    case O_GRPC: opt.grpc_addr = optarg; break;
    case O_UI: opt.ui_addr = optarg; break;
    case O_CAP: opt.only = optarg; break;
    case O_CERT: opt.tls_cert = optarg; break;
    case O_KEY: opt.tls_key = optarg; break;
    case O_INSECURE: opt.insecure = true; break;
    case O_JSON: json = true; break;
    case O_TIMEOUT: {
      char *end;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (*end || !v || v > 31536000)
        return cli_usage_error("serve", "--timeout takes seconds from 1 to 31536000, not '%s'",
                               optarg);
      opt.deadline_ms = v * 1000;
      break;
    }
    case O_RATE: {
      char *end;
      unsigned long v = strtoul(optarg, &end, 10);
      if (*end || !v || v > 1000000)
        return cli_usage_error(
            "serve", "--rate takes requests a second from 1 to 1000000, not '%s'", optarg);
      opt.rate = (uint32_t)v;
      break;
    }
    case 'h': fputs(serve_help, stdout); return CLI_EXIT_OK;
    default: return cli_option_error("serve", argv, "h");
    }
  }
  caps = cli_default(caps, "CAPSULE_CAPS");
  state = cli_default(state, "CAPSULE_STATE");
  _cleanup_free_ char *dflt = state ? NULL : gw_state_default_dir();
  opt.state_dir = state ? state : dflt;
  opt.caps_dir = caps ? caps : "capabilities";
  if (optind < argc && strcmp(argv[optind], "status") == 0 && optind + 1 == argc)
    return status(opt.state_dir, json);
  if (optind < argc)
    return cli_usage_error("serve", "takes no arguments but `status`, not '%s'", argv[optind]);
  struct common o = {.state = opt.state_dir, .user = ""};
  struct gw_state *st = NULL;
  gw_db_checkpoints_apart(); /* no call waits on a checkpoint under the state lock */
  int r = open_state(&o, &st);
  if (r)
    return r;
  opt.st = st;
  struct cap_error err = {0};
  r = serve_run(&opt, &err);
  if (r < 0)
    cli_error("serve", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  /* -EINVAL: the options contradict each other (an address, TLS without --insecure) */
  return r < 0 ? (r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_INVALID) : CLI_EXIT_OK;
}
