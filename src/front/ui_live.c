/* When the dashboard's live stream looks at the state (ui_wait, a hook
 * the stream calls between its events), and which session checks serve
 * may skip (ui_live_vouched). On a PostgreSQL state a thread with a
 * connection of its own LISTENs on the approvals' channel (a new
 * approval, a decision: gateway/approval.h), the audit log's (each
 * record appended: gateway/state.h) and the access channel's (a token
 * revoked, a dashboard session ended: gateway/access.h) and counts what
 * it hears; a stream waits for the count to move, so it reads the state
 * when something changed, on whichever gateway, not every second. A
 * listener whose connection fails moves the count once a second (the
 * streams look, as on SQLite) and connects again at its next wait. On
 * SQLite, which notifies no other process, the count moves once a
 * second.
 *
 * Verified sessions: a session found standing in the state (not signed
 * out, its token still an operator's) is vouched for during
 * UI_SESSION_VOUCH_MS (CAPSULE_UI_VOUCH_MS: 0 to an hour, 0 never)
 * without asking the state again, as long as the
 * listener has heard nothing on the access channel since the check
 * began (an epoch every notification there moves) and its LISTEN stood
 * throughout (a failed connection moves the epoch too, and nothing is
 * vouched for until it listens again). A sign-out through this serve
 * moves the epoch at once; a sign-out or revocation elsewhere when its
 * notification arrives (at the other's commit), and at the latest
 * that long after if the notification were lost (a connection gone
 * silently). SQLite: nothing is vouched for, every request asks the
 * state (a local read). */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/sha256.h"
#include "front/serve_core.h"
#include "front/ui.h"
#include "gateway/access.h"
#include "gateway/approval.h"
#include "gateway/db.h"
#include "gateway/state.h"

/* A session checked in the state: the SHA-256 of its id and token, when
 * (CLOCK_MONOTONIC ms) and under which epoch the check began. */
struct vouch {
  unsigned char key[32];
  uint64_t at_ms, epoch;
};

struct ui_live {
  pthread_mutex_t mu;
  pthread_cond_t moved; /* CLOCK_MONOTONIC */
  uint64_t count;       /* under mu */
  bool stop;            /* under mu */
  struct gw_db *db;     /* the listener's own connection */
  pthread_t thread;
  /* under mu: moved by the access channel, a failed connection, a
   * sign-out here; hearing: the LISTEN stands */
  uint64_t epoch;
  bool hearing;
  uint64_t vouch_ms;                     /* UI_SESSION_VOUCH_MS, or CAPSULE_UI_VOUCH_MS's */
  struct vouch vouched[UI_MAX_SESSIONS]; /* by the key's first bytes; at_ms 0: empty */
};

static uint64_t mono_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void deadline_in(struct timespec *t, int ms)
{
  clock_gettime(CLOCK_MONOTONIC, t);
  t->tv_sec += ms / 1000;
  t->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec++;
    t->tv_nsec -= 1000000000L;
  }
}

static void *listen_main(void *arg)
{
  struct ui_live *l = arg;
  enum { APPROVALS, AUDIT, ACCESS, N_CHANNELS }; /* a bit each in what the wait returns */
  static const char *const channels[N_CHANNELS] = {
      [APPROVALS] = GW_APPROVAL_CHANNEL, [AUDIT] = GW_AUDIT_CHANNEL, [ACCESS] = GW_ACCESS_CHANNEL};
  for (;;) {
    pthread_mutex_lock(&l->mu);
    bool stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    if (stop)
      return NULL;
    /* a second at a time: the stop is seen within one */
    int r = gw_db_wait_notify_any(l->db, channels, N_CHANNELS, 1000);
    pthread_mutex_lock(&l->mu);
    /* r >= 0: the LISTENs stood from the wait's start (made again there
     * after a failure, whose epoch moved before) */
    l->hearing = r >= 0;
    if (r < 0 || (r & 1 << ACCESS))
      l->epoch++; /* every session is checked again */
    if (r == 0) {
      pthread_mutex_unlock(&l->mu);
      continue;
    }
    l->count++; /* heard, or deaf for now: the streams look either way */
    pthread_cond_broadcast(&l->moved);
    if (r < 0 && !l->stop) { /* the connection is gone: a second before the next try */
      struct timespec t;
      deadline_in(&t, 1000);
      pthread_cond_timedwait(&l->moved, &l->mu, &t);
    }
    pthread_mutex_unlock(&l->mu);
  }
}

/* CAPSULE_UI_VOUCH_MS: 0 (every request checked in the state) to an
 * hour; otherwise, or unset, UI_SESSION_VOUCH_MS. */
static uint64_t vouch_ms(void)
{
  const char *v = getenv("CAPSULE_UI_VOUCH_MS");
  char *end = NULL;
  unsigned long long ms = v && *v ? strtoull(v, &end, 10) : UI_SESSION_VOUCH_MS;
  return end && *end == '\0' && ms <= 3600000 ? ms : UI_SESSION_VOUCH_MS;
}

int ui_live_start(struct serve *sv, struct cap_error *err)
{
  struct gw_db *db = NULL;
  int r = gw_state_listener(sv->opt->st, &db, err);
  if (r == -ENOTSUP)
    return 0; /* SQLite: the streams look once a second */
  if (r < 0)
    return r;
  struct ui_live *l = cap_xcalloc(1, sizeof *l);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&l->moved, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&l->mu, NULL);
  l->db = db;
  l->epoch = 1; /* 0: not hearing (ui_live_epoch) */
  l->vouch_ms = vouch_ms();
  if ((r = pthread_create(&l->thread, NULL, listen_main, l)) != 0) {
    gw_db_close(db);
    free(l);
    return cap_error_errno(err, r, "cannot start the dashboard's listener");
  }
  sv->live = l;
  return 0;
}

void ui_live_stop(struct serve *sv)
{
  struct ui_live *l = sv->live;
  if (!l)
    return;
  pthread_mutex_lock(&l->mu);
  l->stop = true;
  pthread_cond_broadcast(&l->moved);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  gw_db_close(l->db);
  pthread_cond_destroy(&l->moved);
  pthread_mutex_destroy(&l->mu);
  free(l);
  sv->live = NULL;
}

uint64_t ui_wait(struct serve *sv, uint64_t seen, int timeout_ms)
{
  struct ui_live *l = sv->live;
  if (!l) { /* SQLite: a look each time, once a second at most */
    struct timespec t = {.tv_sec = timeout_ms / 1000, .tv_nsec = (timeout_ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    return seen + 1;
  }
  struct timespec t;
  deadline_in(&t, timeout_ms);
  pthread_mutex_lock(&l->mu);
  while (l->count == seen && !l->stop)
    if (pthread_cond_timedwait(&l->moved, &l->mu, &t) == ETIMEDOUT)
      break;
  uint64_t now = l->count;
  pthread_mutex_unlock(&l->mu);
  return now;
}

/* ---- sessions vouched for (ui_store.c) ---- */

static void vouch_key(const char *id, const char *token, unsigned char key[32])
{
  struct cap_sha256 h;
  cap_sha256_init(&h);
  cap_sha256_update(&h, id, strlen(id) + 1);
  cap_sha256_update(&h, token ? token : "", token ? strlen(token) : 0);
  cap_sha256_final(&h, key);
}

static struct vouch *vouch_slot(struct ui_live *l, const unsigned char key[32])
{
  return &l->vouched[(key[0] | (unsigned)key[1] << 8) % UI_MAX_SESSIONS];
}

bool ui_live_vouched(struct serve *sv, const char *id, const char *token)
{
  struct ui_live *l = sv->live;
  if (!l)
    return false;
  unsigned char key[32];
  vouch_key(id, token, key);
  uint64_t now = mono_ms();
  pthread_mutex_lock(&l->mu);
  const struct vouch *v = vouch_slot(l, key);
  bool ok = l->hearing && v->at_ms && v->epoch == l->epoch && now - v->at_ms < l->vouch_ms &&
            sodium_memcmp(v->key, key, sizeof key) == 0;
  pthread_mutex_unlock(&l->mu);
  return ok;
}

uint64_t ui_live_epoch(struct serve *sv, uint64_t *at_ms)
{
  struct ui_live *l = sv->live;
  *at_ms = mono_ms();
  if (!l)
    return 0;
  pthread_mutex_lock(&l->mu);
  uint64_t e = l->hearing ? l->epoch : 0;
  pthread_mutex_unlock(&l->mu);
  return e;
}

void ui_live_vouch(struct serve *sv, const char *id, const char *token, uint64_t epoch,
                   uint64_t at_ms)
{
  struct ui_live *l = sv->live;
  if (!l || !epoch)
    return;
  unsigned char key[32];
  vouch_key(id, token, key);
  pthread_mutex_lock(&l->mu);
  struct vouch *v = vouch_slot(l, key);
  memcpy(v->key, key, sizeof key);
  v->epoch = epoch;
  v->at_ms = at_ms ? at_ms : 1;
  pthread_mutex_unlock(&l->mu);
}

void ui_live_revoked(struct serve *sv)
{
  struct ui_live *l = sv->live;
  if (!l)
    return;
  pthread_mutex_lock(&l->mu);
  l->epoch++;
  pthread_mutex_unlock(&l->mu);
}
