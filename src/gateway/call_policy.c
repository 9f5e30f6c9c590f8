/* The call's policy step (gateway/call_int.h): a tool's policy read, and
 * for ask the human asked: through the client (gw_call.ask), on the
 * terminal, or through the approval queue. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "core/json.h"
#include "gateway/approval.h"
#include "gateway/call_int.h"

static const char *const policy_names[] = {"allow", "ask", "block"};

/* s[0..len) escaped for a terminal (core/escape.h), at most max bytes of
 * it, then "..." */
static void escape_at_most(struct cap_buf *b, const char *s, size_t len, size_t max)
{
  cap_escape_text(b, s, len > max ? max : len);
  if (len > max)
    cap_buf_puts(b, "...");
}

/* Asks on the controlling terminal; false when there is none (*asked
 * false) or the answer is not yes. */
static bool prompt_tty(const struct gw_call *call, bool *asked)
{
  *asked = false;
  _cleanup_close_ int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0 || !isatty(fd))
    return false;
  *asked = true;
  struct cap_buf b = {0}; /* what a caller wrote must not drive the terminal */
  cap_buf_printf(&b, "capsule: ");
  escape_at_most(&b, call->user, strlen(call->user), 200);
  cap_buf_puts(&b, " wants to call ");
  escape_at_most(&b, call->capability, strlen(call->capability), 200);
  cap_buf_putc(&b, '.');
  escape_at_most(&b, call->tool, strlen(call->tool), 200);
  cap_buf_puts(&b, " with ");
  char *args = cap_json_canonical(call->args, call->args_len); /* all of it, compact */
  if (args)
    cap_escape_text(&b, args, strlen(args));
  else
    escape_at_most(&b, call->args, call->args_len, 4000);
  free(args);
  cap_buf_puts(&b, "\nAllow this call? [y/N] ");
  ssize_t w = write(fd, b.data, b.len);
  cap_buf_free(&b);
  if (w < 0)
    return false;
  char answer[16] = "";
  ssize_t n = read(fd, answer, sizeof answer - 1);
  return n > 0 && (answer[0] == 'y' || answer[0] == 'Y');
}

/* What an approval is bound to: the tool's package (code, manifest,
 * grants), the tool and the policy that asked; when any of them changes
 * before the call runs, the approval is void. */
static int approval_binding(const struct call_ctx *c, const char *policy_source, char out[65],
                            struct cap_error *err)
{
  unsigned char digest[32];
  int r = gw_spec_digest(c->spec, digest, err);
  if (r < 0)
    return r;
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  _cleanup_free_ char *text = cap_xasprintf("%s\n%s\n%s\n%s", hex, c->tool->name,
                                            policy_names[CAP_POLICY_ASK], policy_source);
  gw_sha256_hex(text, strlen(text), out);
  return 0;
}

/* A denied approval or a denial at the prompt. */
static enum gw_outcome ask_denied(struct call_ctx *c, const char *id, struct cap_error *err)
{
  c->rec.decision = "ask-denied";
  if (id)
    cap_error_set(err, EPERM, "approval %s for this call was denied", id);
  else if (c->call->answer == GW_ANSWER_NO)
    cap_error_set(err, EPERM, "the call was not approved: the user declined it in the client");
  else
    cap_error_set(err, EPERM, "the call was not approved at the prompt");
  return GW_OUTCOME_DENIED;
}

/* Policy says ask: an approval decided for exactly this call, the
 * answer a front door got through its client (call->answer), the
 * terminal, or a pending approval the operator resolves. */
static enum gw_outcome ask(struct call_ctx *c, const char *source, struct cap_error *err)
{
  const struct gw_call *call = c->call;
  char binding[65];
  if (approval_binding(c, source, binding, err) < 0)
    return GW_OUTCOME_FAILED;
  struct gw_approval_call req = {.capability = c->spec->id,
                                 .tool = c->tool->name,
                                 .user = call->user,
                                 .args = call->args,
                                 .args_hash = c->rec.args_hash,
                                 .binding = binding,
                                 .ttl_ms = call->approval_ttl_ms};
  enum gw_approval_status status, lapsed;
  char id[9], lapsed_id[9];
  if (gw_approval_take(c->st, &req, &status, id, &lapsed, lapsed_id, err) < 0)
    return GW_OUTCOME_FAILED;
  bool asked = false;
  if (status == GW_APPROVAL_DENIED)
    return ask_denied(c, id, err);
  if (status == GW_APPROVAL_APPROVED || call->answer == GW_ANSWER_YES ||
      (call->answer == GW_ANSWER_NONE && call->may_prompt && prompt_tty(call, &asked))) {
    c->rec.decision = "ask-approved";
    return GW_OUTCOME_OK;
  }
  if (asked || call->answer == GW_ANSWER_NO)
    return ask_denied(c, NULL, err);
  if (status != GW_APPROVAL_PENDING && gw_approval_create(c->st, &req, id, err) < 0)
    return GW_OUTCOME_FAILED;
  if (call->approval_wait_ms > 0) { /* the operator decides while the call waits */
    enum gw_approval_status now;
    if (gw_approval_wait(c->st, id, call->approval_wait_ms, &now, err) < 0)
      return GW_OUTCOME_FAILED;
    if (now == GW_APPROVAL_APPROVED || now == GW_APPROVAL_DENIED) {
      if (gw_approval_take(c->st, &req, &status, id, &lapsed, lapsed_id, err) < 0)
        return GW_OUTCOME_FAILED;
      if (status == GW_APPROVAL_DENIED)
        return ask_denied(c, id, err);
      if (status == GW_APPROVAL_APPROVED) {
        c->rec.decision = "ask-approved";
        return GW_OUTCOME_OK;
      }
    }
  }
  c->rec.decision = "approval-pending";
  _cleanup_free_ char *was =
      lapsed == GW_APPROVAL_EXPIRED ? cap_xasprintf(" (approval %s expired)", lapsed_id)
      : lapsed == GW_APPROVAL_VOID
          ? cap_xasprintf(" (approval %s is void: the tool's code, grants or policy changed)",
                          lapsed_id)
          : cap_xstrdup("");
  cap_error_set(err, EAGAIN,
                "approval required: %s.%s asks before running and there is no terminal to "
                "ask on; approval %s is pending%s: `capsule approvals` shows it, `capsule "
                "approve %s` (or `capsule deny %s`) decides it, then repeat the call",
                c->spec->id, c->tool->name, id, was, id, id);
  return GW_OUTCOME_AWAITING_APPROVAL;
}

enum gw_outcome call_step_policy(struct call_ctx *c, struct cap_error *err)
{
  enum cap_policy policy;
  const char *source;
  if (gw_effective_policy(c->st, c->spec->id, c->tool, c->call->user, &policy, &source, err) < 0)
    return GW_OUTCOME_FAILED;
  c->rec.decision = policy_names[policy];
  if (policy == CAP_POLICY_BLOCK)
    return cap_error_set(err, EPERM,
                         "%s.%s is blocked by policy (%s); allow it with `capsule policy set %s "
                         "%s allow`",
                         c->spec->id, c->tool->name, source, c->spec->id, c->tool->name),
           GW_OUTCOME_DENIED;
  if (policy == CAP_POLICY_ASK && c->call->selu_warm_only)
    return GW_OUTCOME_NOT_WARM; /* before an approval is taken or made */
  return policy == CAP_POLICY_ASK ? ask(c, source, err) : GW_OUTCOME_OK;
}
