/* `capsule run` of a manifest with exec_strategy "supervised": the
 * operator's side of capability expansion (sandbox/supervise_open.c asks).
 * On a terminal capsule owns (not --tty, where the tool reads it), the
 * question is asked there; otherwise a pending approval goes into the
 * state's queue, as for a call whose policy is `ask`, and the operator
 * answers it with `capsule approve ID` or `capsule deny ID` before the
 * time runs out (--approval-timeout, 60 s), after which it is denied.
 * The tool cannot answer: the terminal's input is not its (TIOCSTI is
 * refused by seccomp), the state directory is masked in every sandbox,
 * and `approve` refuses to run inside one (gw_require_operator). Every
 * decision becomes an audit record of the state (decision
 * "expand-VERDICT", outcome "ACCESS PATH"); past 64 rate-limited ones in
 * a run, the rest are counted in one record at the end. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/escape.h"
#include "core/json.h"
#include "gateway/approval.h"

#define RATE_LIMITED_RECORDS 64
#define POLL_MS 200

static const char *access_word(enum cap_access a)
{
  return a == CAP_ACCESS_READ ? "read" : a == CAP_ACCESS_WRITE ? "write" : "read and write";
}

/* The question as the operator reads it: the tool's name and path escaped. */
static char *question(const struct sandbox_expansion *req)
{
  struct cap_buf b = {0};
  cap_buf_puts(&b, "capsule: ");
  cap_escape_text(&b, req->comm, strlen(req->comm));
  cap_buf_printf(&b, " (pid %d) in the sandbox wants to %s ", req->pid, access_word(req->access));
  cap_escape_text(&b, req->path, strlen(req->path));
  if (strcmp(req->asked, req->path) != 0) {
    cap_buf_puts(&b, " (asked as ");
    cap_escape_text(&b, req->asked, strlen(req->asked));
    cap_buf_putc(&b, ')');
  }
  cap_buf_putc(&b, '\0');
  return b.data;
}

/* The caller's login name (looked up once the tool runs: NSS is not on
 * the way to it), else "#UID". */
static const char *user_of(struct run_expand *x)
{
  if (x->user_name[0])
    return x->user_name;
  struct passwd pw, *found = NULL;
  char buf[2048];
  uid_t uid = (uid_t)strtoul(x->user + 1, NULL, 10);
  if (x->user[0] == '#' && getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found)
    snprintf(x->user_name, sizeof x->user_name, "%s", pw.pw_name);
  else
    snprintf(x->user_name, sizeof x->user_name, "%s", x->user);
  return x->user_name;
}

/* Under x->lock. */
static bool state_ready(struct run_expand *x)
{
  if (x->st)
    return true;
  if (x->closing)
    return false;
  struct cap_error err = {0};
  _cleanup_free_ char *dflt = x->state ? NULL : gw_state_default_dir();
  if (gw_state_open(x->state ? x->state : dflt, &x->st, &err) < 0) {
    fprintf(stderr, "capsule: cannot ask for approval: %s\n", err.message);
    cap_error_clear(&err);
    return false;
  }
  return true;
}

static enum sandbox_expand_verdict ask_tty(const struct run_expand *x, int tty,
                                           const struct sandbox_expansion *req)
{
  _cleanup_free_ char *q = question(req);
  tcflush(tty, TCIFLUSH); /* nothing typed before the question answers it */
  dprintf(tty, "%s\nAllow? [y/N] (denied in %llu s) ", q,
          (unsigned long long)(x->timeout_ms / 1000));
  struct pollfd p = {.fd = tty, .events = POLLIN};
  if (poll(&p, 1, (int)x->timeout_ms) <= 0) {
    dprintf(tty, "\ncapsule: no answer: denied\n");
    return SANDBOX_EXPAND_TIMED_OUT;
  }
  char answer[16] = "";
  ssize_t n = read(tty, answer, sizeof answer - 1);
  return n > 0 && (answer[0] == 'y' || answer[0] == 'Y') ? SANDBOX_EXPAND_APPROVED
                                                         : SANDBOX_EXPAND_DENIED;
}

/* A pending approval in the state's queue, polled until decided. */
static enum sandbox_expand_verdict ask_queue(struct run_expand *x,
                                             const struct sandbox_expansion *req)
{
  pthread_mutex_lock(&x->lock); /* user_of fills x->user_name once */
  const char *user = user_of(x);
  pthread_mutex_unlock(&x->lock);
  struct cap_buf args = {0};
  cap_buf_puts(&args, "{\"path\":");
  cap_json_quote(&args, req->path, strlen(req->path));
  cap_buf_printf(&args, ",\"access\":\"%s\",\"pid\":%d}", cap_access_name(req->access), req->pid);
  cap_buf_putc(&args, '\0');
  char hash[65], binding[65];
  gw_sha256_hex(args.data, strlen(args.data), hash);
  _cleanup_free_ char *bound = cap_xasprintf("expand\n%s\n%d", args.data, (int)getpid());
  gw_sha256_hex(bound, strlen(bound), binding);
  struct gw_approval_call call = {.capability = x->capability,
                                  .tool = "expand",
                                  .user = user,
                                  .args = args.data,
                                  .args_hash = hash,
                                  .binding = binding,
                                  .ttl_ms = x->timeout_ms};
  struct cap_error err = {0};
  char id[9], lapsed_id[9];
  enum gw_approval_status status = GW_APPROVAL_NONE, lapsed;
  enum sandbox_expand_verdict v = SANDBOX_EXPAND_UNASKED;
  pthread_mutex_lock(&x->lock); /* x->st is shared with record's thread */
  int r = state_ready(x) ? gw_approval_create(x->st, &call, id, &err) : -EIO;
  pthread_mutex_unlock(&x->lock);
  if (r == 0) {
    _cleanup_free_ char *q = question(req);
    fprintf(stderr,
            "%s: approval %s is pending: `capsule approve %s` allows it, `capsule deny %s` "
            "refuses it (denied in %llu s)\n",
            q, id, id, id, (unsigned long long)(x->timeout_ms / 1000));
    uint64_t end = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)x->timeout_ms;
    v = SANDBOX_EXPAND_TIMED_OUT;
    do {
      nanosleep(&(struct timespec){.tv_nsec = POLL_MS * 1000000L}, NULL);
      pthread_mutex_lock(&x->lock);
      r = x->st ? gw_approval_take(x->st, &call, &status, id, &lapsed, lapsed_id, &err)
                : -ECANCELED;
      pthread_mutex_unlock(&x->lock);
    } while (r == 0 && status == GW_APPROVAL_PENDING && cap_now_ms(CLOCK_MONOTONIC) < end);
    if (status == GW_APPROVAL_APPROVED || status == GW_APPROVAL_DENIED)
      v = status == GW_APPROVAL_APPROVED ? SANDBOX_EXPAND_APPROVED : SANDBOX_EXPAND_DENIED;
  }
  if (err.message)
    fprintf(stderr, "capsule: approval: %s\n", err.message);
  cap_error_clear(&err);
  cap_buf_free(&args);
  return v;
}

static enum sandbox_expand_verdict ask(void *ctx, const struct sandbox_expansion *req)
{
  struct run_expand *x = ctx;
  _cleanup_close_ int tty = x->may_prompt ? open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY) : -1;
  if (tty >= 0 && isatty(tty))
    return ask_tty(x, tty, req);
  return ask_queue(x, req);
}

static void append(struct run_expand *x, const char *decision, const char *outcome,
                   const char *path)
{
  struct gw_audit_record rec = {.user = user_of(x),
                                .capability = x->capability,
                                .tool = x->tool,
                                .decision = decision,
                                .outcome = outcome};
  gw_sha256_hex(path, strlen(path), rec.args_hash);
  struct cap_error err = {0};
  if (state_ready(x) && gw_audit_append(x->st, &rec, &err) < 0)
    fprintf(stderr, "capsule: warning: an expansion is not audited: %s\n", err.message);
  cap_error_clear(&err);
}

static void record(void *ctx, const struct sandbox_expansion *req,
                   enum sandbox_expand_verdict verdict)
{
  struct run_expand *x = ctx;
  pthread_mutex_lock(&x->lock);
  if (x->closing ||
      (verdict == SANDBOX_EXPAND_RATE_LIMITED && x->rate_limited++ >= RATE_LIMITED_RECORDS)) {
    pthread_mutex_unlock(&x->lock);
    return;
  }
  _cleanup_free_ char *decision = cap_xasprintf("expand-%s", sandbox_expand_verdict_name(verdict));
  _cleanup_free_ char *outcome = cap_xasprintf("%s %s", cap_access_name(req->access), req->path);
  append(x, decision, outcome, req->path);
  if (verdict != SANDBOX_EXPAND_APPROVED && verdict != SANDBOX_EXPAND_DENIED &&
      verdict != SANDBOX_EXPAND_TIMED_OUT) {
    _cleanup_free_ char *q = question(req);
    fprintf(stderr, "%s: refused (%s)\n", q, sandbox_expand_verdict_name(verdict));
  }
  pthread_mutex_unlock(&x->lock);
}

void run_expand_setup(struct run_expand *x, struct sandbox_options *opt,
                      const struct cap_spec *spec, const struct run_args *a,
                      const struct run_audit *au)
{
  *x = (struct run_expand){
      .state = a->state,
      .capability = au->rec.capability,
      .tool = au->rec.tool,
      .user = au->user,
      .may_prompt = !a->tty,
      .timeout_ms = (int64_t)(a->approval_timeout_s ? a->approval_timeout_s : 60) * 1000};
  pthread_mutex_init(&x->lock, NULL);
  if (!spec->process.expand_opens)
    return;
  opt->expand_ask = ask;
  opt->expand_record = record;
  opt->expand_ctx = x;
}

void run_expand_finish(struct run_expand *x)
{
  /* a question may still be open in a supervisor's thread (the tool was
   * killed meanwhile): it sees `closing` at its next look and gives up;
   * x itself outlives it (static storage in run.c) */
  pthread_mutex_lock(&x->lock);
  if (x->rate_limited > RATE_LIMITED_RECORDS) {
    _cleanup_free_ char *outcome = cap_xasprintf("%zu more expansions refused by the rate limit",
                                                 x->rate_limited - RATE_LIMITED_RECORDS);
    append(x, "expand-rate-limited", outcome, "");
  }
  x->closing = true;
  gw_state_close(x->st);
  x->st = NULL;
  pthread_mutex_unlock(&x->lock);
}
