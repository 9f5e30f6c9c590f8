/* `capsule call` through a running `capsule serve` on the same state
 * (docs/serve.md, "The CLI and a running serve"): the status file
 * STATE/serve.json names serve's process, its unix socket and its
 * capabilities directory; when that process lives and serves the
 * directory this call names, the call is made on the socket (serve's
 * capsule/call, answered with the pipeline's outcome), where serve knows
 * the caller as SO_PEERCRED says. Policy `ask` is put to the human here,
 * on the terminal, through serve's elicitation. Without a serve, or for
 * what only a call alone does (--user for someone else, Selu sessions,
 * threads, attachments, artifacts, --approval-ttl), or with
 * CAPSULE_SERVE=off, the caller runs the call itself. `approve`/`deny`
 * and `list` go through serve the same way (capsule/approve,
 * capsule/list). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "core/io.h"
#include "core/json.h"
#include "core/text.h"

#define STATUS_MAX (64u << 10)
#define ANSWER_MAX (64u << 20) /* a result past the output cap cannot come */

static bool parse_json(struct cap_doc *doc, const char *text, size_t len, const char *what)
{
  struct cap_diags d = {0};
  bool ok = cap_json_parse(doc, text, len, what, 64, &d) == 0;
  cap_diags_free(&d);
  return ok;
}

/* Who serves: the process serve.json names, run by the user who wrote it */
struct server_id {
  pid_t pid;
  uid_t uid;
};

/* The socket of a serve that lives on this state and serves o->caps
 * (with_caps: else any); NULL when there is none. */
static char *served_socket(const struct common *o, bool with_caps, struct server_id *who)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *path = cap_xasprintf("%s/serve.json", o->state ? o->state : dflt);
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *caps = with_caps && o->caps ? realpath(o->caps, NULL) : NULL;
  size_t len = 0;
  struct cap_error err = {0};
  struct stat sb;
  if ((with_caps && !caps) || lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode) ||
      cap_read_file(path, STATUS_MAX, &text, &len, &err) < 0) {
    cap_error_clear(&err);
    return NULL;
  }
  who->uid = sb.st_uid; /* serve writes it, 0600, in a state only its owner writes */
  struct cap_doc *doc = cap_doc_new();
  char *socket = NULL;
  if (parse_json(doc, text, len, "serve.json")) {
    const struct cap_node *pid = cap_node_get(doc->root, "pid");
    const struct cap_node *sock = cap_node_get(doc->root, "socket");
    const struct cap_node *served = cap_node_get(doc->root, "caps");
    bool lives = pid && pid->kind == CAP_NODE_INT && pid->u.num.i > 0 &&
                 (kill((pid_t)pid->u.num.i, 0) == 0 || errno == EPERM);
    if (lives && sock && sock->kind == CAP_NODE_STRING && served &&
        served->kind == CAP_NODE_STRING && (!caps || strcmp(served->u.str.ptr, caps) == 0)) {
      socket = cap_xstrdup(sock->u.str.ptr);
      who->pid = (pid_t)pid->u.num.i;
    }
  }
  cap_doc_free(doc);
  return socket;
}

/* A connection to serve: the listener must be the process serve.json
 * names, run by the user who wrote serve.json (SO_PEERCRED). A serve
 * killed leaves its status behind; its socket path (--socket may be in
 * /tmp) and its pid can then be another user's, who would read the call
 * and forge its answer. */
static int connect_to(const char *path, const struct server_id *who)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    return -1;
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct ucred peer = {0};
  socklen_t len = sizeof peer;
  if (fd >= 0 && (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
                  getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 ||
                  peer.pid != who->pid || peer.uid != who->uid)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static bool send_line(int fd, struct cap_buf *b)
{
  cap_buf_putc(b, '\n');
  bool ok = cap_write_all(fd, b->data, b->len, CAP_IO_NOSIGPIPE) == 0;
  cap_buf_free(b);
  return ok;
}

/* The next line serve sent (allocated), NULL when it is gone */
static char *next_line(int fd, struct cap_buf *pending)
{
  for (;;) {
    char *nl = pending->len ? memchr(pending->data, '\n', pending->len) : NULL;
    if (nl) {
      size_t k = (size_t)(nl - pending->data);
      char *line = cap_xstrndup(pending->data, k);
      memmove(pending->data, nl + 1, pending->len - k - 1);
      pending->len -= k + 1;
      return line;
    }
    if (pending->len > ANSWER_MAX)
      return NULL;
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return NULL;
    cap_buf_append(pending, buf, (size_t)n);
  }
}

/* serve's elicitation for policy ask, put to the human on the terminal */
static bool ask_terminal(const struct cap_node *params)
{
  _cleanup_close_ int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  const struct cap_node *m = cap_node_get(params, "message");
  if (tty < 0 || !m || m->kind != CAP_NODE_STRING)
    return false;
  struct cap_buf b = {0}; /* the arguments are the caller's text: escaped, line by line */
  for (const char *p = m->u.str.ptr, *end = p + m->u.str.len; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    cap_escape_text(&b, p, (size_t)((nl ? nl : end) - p));
    if (nl)
      cap_buf_putc(&b, '\n');
    p = nl ? nl + 1 : end;
  }
  cap_buf_puts(&b, " [y/N] ");
  ssize_t w = write(tty, b.data, b.len);
  cap_buf_free(&b);
  char answer[16] = "";
  return w > 0 && read(tty, answer, sizeof answer - 1) > 0 &&
         (answer[0] == 'y' || answer[0] == 'Y');
}

static void answer_elicitation(int fd, const struct cap_node *msg)
{
  struct cap_buf id = {0};
  struct cap_jw w;
  cap_jw_init(&w, &id, false);
  cap_jw_node(&w, cap_node_get(msg, "id"));
  struct cap_buf b = {0};
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"%s\"}}", id.data,
                 ask_terminal(cap_node_get(msg, "params")) ? "accept" : "decline");
  cap_buf_free(&id);
  send_line(fd, &b);
}

/* The answer to capsule/call, printed; the exit status */
static int print_answer(const struct common *o, const char *cap, const struct cap_node *msg,
                        const char *log, off_t log_before)
{
  const struct cap_node *res = cap_node_get(msg, "result");
  const struct cap_node *outcome = cap_node_get(res, "outcome");
  const struct cap_node *error = cap_node_get(res, "error");
  const struct cap_node *json = cap_node_get(res, "result");
  const struct cap_node *terminal = cap_node_get(res, "terminal_on_success");
  if (!outcome || outcome->kind != CAP_NODE_INT || outcome->u.num.i < GW_OUTCOME_OK ||
      outcome->u.num.i > GW_OUTCOME_KILLED_BY_LIMIT) {
    const struct cap_node *m = cap_node_get(cap_node_get(msg, "error"), "message");
    cli_error("call", m && m->kind == CAP_NODE_STRING ? m->u.str.ptr
                                                      : "capsule serve's answer is not a call's");
    return CLI_EXIT_INVALID;
  }
  (void)cap;
  return cli_call_print("call", o, (enum gw_outcome)outcome->u.num.i,
                        json && json->kind == CAP_NODE_STRING ? json->u.str.ptr : NULL,
                        terminal && terminal->kind == CAP_NODE_BOOL && terminal->u.boolean,
                        error && error->kind == CAP_NODE_STRING ? error->u.str.ptr : NULL, log,
                        log_before);
}

/* Whether there is a terminal to ask on, as a call alone asks (else
 * policy ask leaves a pending approval, the same either way) */
static bool has_terminal(void)
{
  _cleanup_close_ int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  return fd >= 0 && isatty(fd);
}

static char *operator_key(const struct common *o, const struct server_id *who);

/* initialize, then capsule/call: the messages this call sends; with key
 * (STATE/serve.key, read when there is a terminal to ask on), elicitation
 * declared, which serve honours on its socket only with the key */
static bool send_call(int fd, const struct common *o, const char *cap, const char *tool,
                      const struct cap_node *args, const char *key)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{%s},\"clientInfo\":{"
                 "\"name\":\"capsule call\",\"version\":\"%s\"}",
                 key ? "\"elicitation\":{}" : "", CAPSULE_VERSION);
  if (key)
    cap_buf_printf(&b, ",\"_meta\":{\"dev.capsule/key\":\"%s\"}", key);
  cap_buf_puts(&b, "}}");
  if (!send_line(fd, &b))
    return false;
  cap_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  if (!send_line(fd, &b))
    return false;
  struct cap_jw w;
  cap_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"capsule/call\",\"params\":{"
                   "\"capability\":");
  cap_json_quote(&b, cap, strlen(cap));
  cap_buf_puts(&b, ",\"tool\":");
  cap_json_quote(&b, tool, strlen(tool));
  cap_buf_puts(&b, ",\"arguments\":");
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, args);
  if (o->timeout_s)
    cap_buf_printf(&b, ",\"timeout_ms\":%llu", (unsigned long long)o->timeout_s * 1000);
  cap_buf_puts(&b, "}}");
  return send_line(fd, &b);
}

/* Reads serve's messages until the call's answer; the exit status */
static int await_answer(int fd, const struct common *o, const char *cap, const char *log,
                        off_t log_before)
{
  struct cap_buf pending = {0};
  int code = -1;
  while (code < 0) {
    _cleanup_free_ char *line = next_line(fd, &pending);
    if (!line)
      break;
    struct cap_doc *doc = cap_doc_new();
    if (parse_json(doc, line, strlen(line), "serve's message")) {
      const struct cap_node *id = cap_node_get(doc->root, "id");
      const struct cap_node *method = cap_node_get(doc->root, "method");
      if (method && method->kind == CAP_NODE_STRING && id &&
          strcmp(method->u.str.ptr, "elicitation/create") == 0)
        answer_elicitation(fd, doc->root);
      else if (!method && id && id->kind == CAP_NODE_INT && id->u.num.i == 1 &&
               cap_node_get(doc->root, "error"))
        code = print_answer(o, cap, doc->root, log, log_before);
      else if (!method && id && id->kind == CAP_NODE_INT && id->u.num.i == 2)
        code = print_answer(o, cap, doc->root, log, log_before);
    }
    cap_doc_free(doc);
  }
  cap_buf_free(&pending);
  if (code < 0) {
    cli_error("call", "the connection to capsule serve ended before the call's answer; `capsule "
                      "audit` shows whether it ran");
    code = CLI_EXIT_INVALID;
  }
  return code;
}

bool cli_call_via_serve(const struct common *o, const char *cap, const char *tool, const char *args,
                        int *code)
{
  const char *mode = getenv("CAPSULE_SERVE");
  if ((mode && strcmp(mode, "off") == 0) || (o->user_given && strcmp(o->user, o->login) != 0) ||
      o->session || o->thread || o->n_attach || o->artifacts || o->approval_ttl_s ||
      o->wait_approval_s)
    return false;
  struct cap_doc *doc = cap_doc_new();
  bool object = parse_json(doc, args, strlen(args), "arguments") &&
                doc->root->kind == CAP_NODE_OBJECT; /* else the call alone says what is wrong */
  struct server_id who = {0};
  _cleanup_free_ char *socket = object ? served_socket(o, true, &who) : NULL;
  _cleanup_close_ int fd = socket ? connect_to(socket, &who) : -1;
  if (fd < 0) {
    cap_doc_free(doc);
    return false;
  }
  off_t log_before = 0;
  _cleanup_free_ char *log = cli_tool_log(o, cap, &log_before);
  _cleanup_free_ char *key = has_terminal() ? operator_key(o, &who) : NULL;
  if (!send_call(fd, o, cap, tool, doc->root, key)) {
    cli_error("call", "capsule serve closed its socket before the call was sent; try again");
    *code = CLI_EXIT_INVALID;
  } else
    *code = await_answer(fd, o, cap, log, log_before);
  cap_doc_free(doc);
  return true;
}

/* initialize, then one request (id 2) of method with params (JSON text);
 * serve's answer to it (a document the caller frees), NULL when the
 * connection ended before it */
static struct cap_doc *request(int fd, const char *method, const char *params)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
                 "\"name\":\"capsule\",\"version\":\"%s\"}}}",
                 CAPSULE_VERSION);
  if (!send_line(fd, &b))
    return NULL;
  cap_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  if (!send_line(fd, &b))
    return NULL;
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"%s\",\"params\":%s}", method,
                 params);
  if (!send_line(fd, &b))
    return NULL;
  struct cap_buf pending = {0};
  struct cap_doc *answer = NULL;
  while (!answer) {
    _cleanup_free_ char *line = next_line(fd, &pending);
    if (!line)
      break;
    struct cap_doc *doc = cap_doc_new();
    const struct cap_node *id = parse_json(doc, line, strlen(line), "serve's message")
                                    ? cap_node_get(doc->root, "id")
                                    : NULL;
    if (id && id->kind == CAP_NODE_INT && !cap_node_get(doc->root, "method") &&
        (id->u.num.i == 2 || (id->u.num.i == 1 && cap_node_get(doc->root, "error"))))
      answer = doc;
    else
      cap_doc_free(doc);
  }
  cap_buf_free(&pending);
  return answer;
}

static char *string_of(const struct cap_node *obj, const char *key)
{
  const struct cap_node *n = cap_node_get(obj, key);
  return cap_xstrdup(n && n->kind == CAP_NODE_STRING ? n->u.str.ptr : "");
}

static int64_t int_of(const struct cap_node *obj, const char *key)
{
  const struct cap_node *n = cap_node_get(obj, key);
  return n && n->kind == CAP_NODE_INT ? n->u.num.i : 0;
}

/* STATE/serve.key, which serve wrote (its owner's, a regular file of 64
 * hex digits): what capsule/approve presents, proof that the caller can
 * read the state directory as a decision alone must; NULL when it cannot
 * be read */
static char *operator_key(const struct common *o, const struct server_id *who)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *path = cap_xasprintf("%s/serve.key", o->state ? o->state : dflt);
  struct stat sb;
  char *text = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != who->uid ||
      cap_read_file(path, 64, &text, &len, &err) < 0 || len != 64 ||
      strspn(text, "0123456789abcdef") != 64) {
    cap_error_clear(&err);
    free(text);
    return NULL;
  }
  return text;
}

int cli_approve_via_serve(const struct common *o, const char *verb, const char *id, bool approve,
                          enum gw_approval_status *was, struct gw_approval *a, char **audit_error)
{
  const char *mode = getenv("CAPSULE_SERVE");
  if ((mode && strcmp(mode, "off") == 0) || (o->user_given && strcmp(o->user, o->login) != 0))
    return 0;
  struct server_id who = {0};
  _cleanup_free_ char *socket = served_socket(o, false, &who);
  _cleanup_close_ int fd = socket ? connect_to(socket, &who) : -1;
  if (fd < 0)
    return 0;
  _cleanup_free_ char *key = operator_key(o, &who);
  if (!key)
    return 0; /* no key to read: alone, which says why the state cannot be used */
  _cleanup_free_ char *params = cap_xasprintf("{\"approval\":\"%s\",\"approve\":%s,\"key\":\"%s\"}",
                                              id, approve ? "true" : "false", key);
  struct cap_doc *doc = request(fd, "capsule/approve", params);
  const struct cap_node *res = doc ? cap_node_get(doc->root, "result") : NULL;
  const struct cap_node *status = cap_node_get(res, "was");
  if (!status || status->kind != CAP_NODE_INT || status->u.num.i < GW_APPROVAL_NONE ||
      status->u.num.i > GW_APPROVAL_VOID) {
    const struct cap_node *m =
        doc ? cap_node_get(cap_node_get(doc->root, "error"), "message") : NULL;
    cli_error(verb, m && m->kind == CAP_NODE_STRING
                        ? m->u.str.ptr
                        : "the connection to capsule serve ended before its answer; `capsule "
                          "approvals` shows whether the approval was decided");
    cap_doc_free(doc);
    return -EIO;
  }
  *was = (enum gw_approval_status)status->u.num.i;
  const struct cap_node *ap = cap_node_get(res, "approval");
  if (ap) {
    snprintf(a->id, sizeof a->id, "%s", id);
    a->capability = string_of(ap, "capability");
    a->tool = string_of(ap, "tool");
    a->user = string_of(ap, "user");
    a->asked_by = string_of(ap, "asked_by");
    a->args = string_of(ap, "arguments");
    a->created_ms = int_of(ap, "created_ms");
    a->expires_ms = int_of(ap, "expires_ms");
  }
  const struct cap_node *audit = cap_node_get(res, "audit_error");
  *audit_error = audit && audit->kind == CAP_NODE_STRING ? cap_xstrdup(audit->u.str.ptr) : NULL;
  cap_doc_free(doc);
  return 1;
}

bool cli_list_via_serve(const struct common *o, struct cap_buf *out, bool *bad, int *code)
{
  const char *mode = getenv("CAPSULE_SERVE");
  if ((mode && strcmp(mode, "off") == 0) || (o->user_given && strcmp(o->user, o->login) != 0))
    return false;
  struct server_id who = {0};
  _cleanup_free_ char *socket = served_socket(o, true, &who);
  _cleanup_close_ int fd = socket ? connect_to(socket, &who) : -1;
  if (fd < 0)
    return false;
  struct gw_registry reg; /* its problems printed, as alone (serve lists what loaded) */
  if ((*code = load_registry(o, &reg, bad)))
    return true;
  gw_registry_free(&reg);
  struct cap_doc *doc = request(fd, "capsule/list", "{}");
  const struct cap_node *list =
      doc ? cap_node_get(cap_node_get(doc->root, "result"), "capabilities") : NULL;
  if (list && list->kind == CAP_NODE_ARRAY) {
    struct cap_jw w;
    cap_jw_init(&w, out, false);
    cap_jw_node(&w, list);
  } else {
    const struct cap_node *m =
        doc ? cap_node_get(cap_node_get(doc->root, "error"), "message") : NULL;
    cli_error("list", m && m->kind == CAP_NODE_STRING
                          ? m->u.str.ptr
                          : "the connection to capsule serve ended before its answer; try again, "
                            "or CAPSULE_SERVE=off to list alone");
    *code = CLI_EXIT_INVALID;
  }
  cap_doc_free(doc);
  return true;
}
