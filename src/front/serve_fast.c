/* serve's fast path (serve_core.h, mcp.h's mcp_fast_*): a tools/call
 * that a warm third-party MCP server answers, with nothing to tell the
 * client before its answer, runs on the HTTP thread that received it:
 * the session's checks and the call's copy taken under the state lock,
 * then the pipeline (which goes on holding that lock, no hand-over, and
 * takes it around its later uses of the state, as the warm path's
 * threads do) and the answer, with no hop through the main loop, no
 * thread and no socket per call. Cancellation: the call's
 * entry in its session names its thread's eventfd (one per HTTP thread,
 * made on its first call, kept for the next: no descriptor made per
 * call); notifications/cancelled naming it, or the session's end,
 * signals it, which stops the call (the warm server is told, the call
 * audited as cancelled) and leaves it without an answer. The call drains
 * a signal it got before its thread's next call. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/clock.h"
#include "core/json.h"
#include "front/serve_core.h"

/* The calling thread's eventfd (made once; closed when the thread ends),
 * or -1 */
static pthread_key_t cancel_key;
static pthread_once_t cancel_once = PTHREAD_ONCE_INIT;
static bool cancel_key_made;

static void cancel_fd_close(void *v) { close((int)((intptr_t)v - 1)); }
static void cancel_key_make(void)
{
  cancel_key_made = pthread_key_create(&cancel_key, cancel_fd_close) == 0;
}

static int thread_cancel_fd(void)
{
  pthread_once(&cancel_once, cancel_key_make);
  if (!cancel_key_made)
    return -1;
  intptr_t v = (intptr_t)pthread_getspecific(cancel_key);
  if (v)
    return (int)(v - 1);
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd >= 0 && pthread_setspecific(cancel_key, (void *)(intptr_t)(fd + 1)) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Under the state lock: the entry's call told to stop (once) */
static void entry_stop(struct fast_entry *e)
{
  if (e->cancel >= 0)
    eventfd_write(e->cancel, 1);
  e->cancel = -1;
}

/* Under the state lock: the entry gone (stop: its call stopped first) */
static void entry_drop(struct sess *x, size_t i, bool stop)
{
  if (stop)
    entry_stop(&x->fast[i]);
  free(x->fast[i].id);
  x->fast[i] = x->fast[--x->n_fast];
}

/* Under the state lock: the call registered with its session */
static void entry_add(struct sess *x, const struct mcp_fast *f, int cancel)
{
  x->fast = cap_xrealloc(x->fast, (x->n_fast + 1) * sizeof *x->fast);
  x->fast[x->n_fast++] =
      (struct fast_entry){.key = f, .id = cap_xstrdup(mcp_fast_id(f)), .cancel = cancel};
}

/* A call's end, under the state lock right after its record (the lock
 * its pipeline holds then: not taken again): its entry gone (whether it
 * was told to stop: its eventfd is drained then), the registry let go */
struct fast_end {
  struct serve *sv;
  const char *session;
  struct mcp_fast *f;
  bool told;
  bool quiet; /* ended, its entry found never signalled: its eventfd holds nothing */
};

static void fast_end(void *ctx)
{
  struct fast_end *e = ctx;
  e->told = true; /* its entry gone: the session's end signalled it */
  struct sess *x = serve_find_sess(e->sv, e->session); /* it may have ended meanwhile */
  for (size_t i = 0; x && i < x->n_fast; i++)
    if (x->fast[i].key == e->f) {
      e->told = x->fast[i].cancel < 0;
      e->quiet = !e->told; /* and, the entry gone, nothing signals it now */
      entry_drop(x, i, false);
      break;
    }
  mcp_fast_end_hold(e->f);
}

bool serve_fast_call(struct serve *sv, const char *session, const char *user, const char *body,
                     size_t len, char **answer)
{
  *answer = NULL;
  if (serve_stopping(sv))
    return false;
  int cancel = thread_cancel_fd();
  if (cancel < 0)
    return false;
  /* read before the lock: every call's parse is out of the others' way */
  struct mcp_fast_msg *msg = mcp_fast_parse(body, len);
  if (!msg)
    return false;
  pthread_mutex_lock(&sv->state_mu);
  struct sess *x = serve_find_sess(sv, session);
  struct mcp_fast *f = x && !x->sessionless && strcmp(x->user, user) == 0 && !sv->stopping
                           ? mcp_fast_take(x->s, msg)
                           : NULL;
  mcp_fast_msg_free(msg);
  if (!f) {
    pthread_mutex_unlock(&sv->state_mu);
    return false;
  }
  entry_add(x, f, cancel);
  x->last_ms = cap_now_ms(CLOCK_MONOTONIC);
  __atomic_fetch_add(&sv->fast_in_flight, 1, __ATOMIC_SEQ_CST);
  struct fast_end end = {.sv = sv, .session = session, .f = f};
  /* the lock goes on to its pipeline, which lets it go after fast_end */
  mcp_fast_run(f, cancel, &end.quiet, fast_end, &end, answer);
  mcp_fast_free(f);
  eventfd_t seen;
  if (end.told) /* nothing signals it now: drained for the thread's next call */
    eventfd_read(cancel, &seen);
  __atomic_fetch_sub(&sv->fast_in_flight, 1, __ATOMIC_SEQ_CST);
  return true;
}

bool serve_fast_cancel(struct sess *x, const char *body, size_t len)
{
  static const char method[] = "notifications/cancelled";
  if (!memmem(body, len, method, sizeof method - 1))
    return false;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *m =
      cap_json_parse(doc, body, len, "message", 64, &d) == 0 && doc->root->kind == CAP_NODE_OBJECT
          ? doc->root
          : NULL;
  cap_diags_free(&d);
  const struct cap_node *name = m ? cap_node_get(m, "method") : NULL;
  const struct cap_node *rid = cap_node_get(cap_node_get(m, "params"), "requestId");
  bool taken = false;
  if (name && name->kind == CAP_NODE_STRING && strcmp(name->u.str.ptr, method) == 0 && rid) {
    struct cap_buf b = {0};
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    cap_jw_node(&w, rid);
    for (size_t i = 0; i < x->n_fast && !taken; i++)
      if (x->fast[i].id && b.data && strcmp(x->fast[i].id, b.data) == 0) {
        entry_stop(&x->fast[i]); /* its call sees its eventfd readable */
        taken = true;
      }
    cap_buf_free(&b);
  }
  cap_doc_free(doc);
  return taken;
}

void serve_fast_end(struct sess *x)
{
  while (x->n_fast) /* each call sees its eventfd signalled: stopped, audited */
    entry_drop(x, x->n_fast - 1, true);
  free(x->fast);
  x->fast = NULL;
}
