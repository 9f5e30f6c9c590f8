/* The dashboard's sessions in the state (ui_session.h). */
#include "gateway/ui_session.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "gateway/access.h"
#include "gateway/state_int.h"

#define NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define MAC_BYTES crypto_aead_xchacha20poly1305_ietf_ABYTES

static int64_t wall_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The row's key (the id's SHA-256) and the sealed part's associated data
 * for user: the key and the user, so a row's user cannot be changed in
 * the database without the seal failing. */
static void row_key(const char *id, char key[65]) { gw_sha256_hex(id, strlen(id), key); }

static char *row_ad(const char *key, const char *user)
{
  return cap_xasprintf("capsule-ui-session %s %s", key, user);
}

void gw_ui_session_clear(struct gw_ui_session *s)
{
  free(s->user);
  if (s->token) {
    sodium_memzero(s->token, strlen(s->token));
    free(s->token);
  }
  sodium_memzero(s, sizeof *s);
}

int gw_ui_session_put(struct gw_state *st, const char *id, const struct gw_ui_session *s,
                      struct cap_error *err)
{
  char key[65];
  row_key(id, key);
  char *ad = row_ad(key, s->user);
  /* sealed: the CSRF token (64), the path's KEY (64), then the access token */
  struct cap_buf plain = {0};
  cap_buf_append(&plain, s->csrf, 64);
  cap_buf_append(&plain, s->path_key, 64);
  cap_buf_puts(&plain, s->token);
  unsigned char nonce[NONCE_BYTES];
  randombytes_buf(nonce, sizeof nonce);
  unsigned char *sealed = cap_xmalloc(plain.len + MAC_BYTES);
  unsigned long long slen = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &slen, (const unsigned char *)plain.data,
                                             plain.len, (const unsigned char *)ad, strlen(ad), NULL,
                                             nonce, st->keys->cred);
  sodium_memzero(plain.data, plain.len);
  cap_buf_free(&plain);
  free(ad);
  struct gw_stmt *q =
      gw_state_prep(st, "INSERT INTO ui_sessions VALUES (?, ?, ?, ?, ?, ?)", key, s->user, NULL);
  int rc = GW_DB_ERROR;
  if (q) {
    gw_stmt_bind_blob(q, 3, nonce, sizeof nonce);
    gw_stmt_bind_blob(q, 4, sealed, (size_t)slen);
    gw_stmt_bind_int64(q, 5, s->created_ms);
    gw_stmt_bind_int64(q, 6, s->last_ms);
    rc = gw_stmt_step(q);
  }
  gw_stmt_finalize(q);
  free(sealed);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot store the dashboard session");
}

static bool ended(int64_t created, int64_t last, int64_t now, int64_t idle_ms, int64_t max_ms)
{
  return now - last > idle_ms || now - created > max_ms || now < created;
}

/* The sealed part of the row at hand into out. */
static int unseal(struct gw_state *st, struct gw_stmt *q, const char *key,
                  struct gw_ui_session *out, struct cap_error *err)
{
  const char *user = gw_stmt_text(q, 0);
  char *ad = row_ad(key, user ? user : "");
  const unsigned char *nonce = gw_stmt_blob(q, 1), *sealed = gw_stmt_blob(q, 2);
  int nlen = gw_stmt_bytes(q, 1), slen = gw_stmt_bytes(q, 2);
  if (nlen != NONCE_BYTES || slen < (int)MAC_BYTES + 128) {
    free(ad);
    return cap_error_set(err, EBADMSG, "a dashboard session in the state is malformed");
  }
  char *plain = cap_xmalloc((size_t)slen + 1);
  unsigned long long plen = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(
          (unsigned char *)plain, &plen, NULL, sealed, (unsigned long long)slen,
          (const unsigned char *)ad, strlen(ad), nonce, st->keys->cred) != 0 ||
      plen < 128) {
    free(plain);
    free(ad);
    return cap_error_set(err, EBADMSG,
                         "a dashboard session in the state cannot be unsealed: the state key is "
                         "not the one it was stored with, or the row was tampered with");
  }
  plain[plen] = '\0';
  memcpy(out->csrf, plain, 64);
  out->csrf[64] = '\0';
  memcpy(out->path_key, plain + 64, 64);
  out->path_key[64] = '\0';
  out->token = cap_xstrdup(plain + 128);
  sodium_memzero(plain, (size_t)plen);
  free(plain);
  free(ad);
  return 0;
}

int gw_ui_session_get(struct gw_state *st, const char *id, int64_t idle_ms, int64_t max_ms,
                      struct gw_ui_session *out, bool *found, struct cap_error *err)
{
  *out = (struct gw_ui_session){0};
  *found = false;
  char key[65];
  row_key(id, key);
  struct gw_stmt *q = gw_state_prep(
      st, "SELECT user, nonce, sealed, created_ms, last_ms FROM ui_sessions WHERE id_sha256 = ?",
      key, NULL);
  int rc = q ? gw_stmt_step(q) : GW_DB_ERROR;
  int r = 0;
  bool gone = false;
  if (rc == GW_DB_ROW) {
    out->created_ms = gw_stmt_int64(q, 3);
    out->last_ms = gw_stmt_int64(q, 4);
    gone = ended(out->created_ms, out->last_ms, wall_ms(), idle_ms, max_ms);
    if (!gone && (r = unseal(st, q, key, out, err)) == 0) {
      const char *user = gw_stmt_text(q, 0);
      out->user = cap_xstrdup(user ? user : "");
      *found = true;
    }
  } else if (rc != GW_DB_DONE) {
    r = gw_state_db_error(st, err, "cannot read the dashboard sessions");
  }
  gw_stmt_finalize(q);
  if (r < 0 || !*found)
    gw_ui_session_clear(out);
  if (gone)
    r = gw_ui_session_rm(st, id, err);
  return r;
}

int gw_ui_session_touch(struct gw_state *st, const char *id, const char *token, int64_t idle_ms,
                        int64_t max_ms, bool *alive, struct cap_error *err)
{
  char key[65], hash[65] = "";
  row_key(id, key);
  if (token)
    gw_sha256_hex(token, strlen(token), hash);
  *alive = false;
  /* the token's access row beside the session's: an operator's, with a user */
  struct gw_stmt *q =
      gw_state_prep(st,
                    "SELECT s.created_ms, s.last_ms, a.operator, a.user FROM ui_sessions s"
                    " LEFT JOIN access a ON a.token_sha256 = ?2 WHERE s.id_sha256 = ?1",
                    key, hash, NULL);
  int rc = q ? gw_stmt_step(q) : GW_DB_ERROR;
  int64_t created = rc == GW_DB_ROW ? gw_stmt_int64(q, 0) : 0,
          last = rc == GW_DB_ROW ? gw_stmt_int64(q, 1) : 0, now = wall_ms();
  bool operator_ = rc == GW_DB_ROW && !gw_stmt_is_null(q, 3) && gw_stmt_int(q, 2) != 0;
  gw_stmt_finalize(q);
  if (rc != GW_DB_ROW && rc != GW_DB_DONE)
    return gw_state_db_error(st, err, "cannot read the dashboard sessions");
  if (rc == GW_DB_DONE || (token && !operator_))
    return 0;
  if (ended(created, last, now, idle_ms, max_ms))
    return gw_ui_session_rm(st, id, err);
  *alive = true;
  if (now - last < GW_UI_SESSION_TOUCH_MS)
    return 0;
  q = gw_state_prep(st, "UPDATE ui_sessions SET last_ms = ?2 WHERE id_sha256 = ?1", key, NULL);
  if (q)
    gw_stmt_bind_int64(q, 2, now);
  rc = q ? gw_stmt_step(q) : GW_DB_ERROR;
  gw_stmt_finalize(q);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot touch the dashboard session");
}

int gw_ui_session_rm(struct gw_state *st, const char *id, struct cap_error *err)
{
  char key[65];
  row_key(id, key);
  struct gw_stmt *q = gw_state_prep(st, "DELETE FROM ui_sessions WHERE id_sha256 = ?", key, NULL);
  int rc = q ? gw_stmt_step(q) : GW_DB_ERROR;
  gw_stmt_finalize(q);
  if (rc == GW_DB_DONE) /* every serve that took it as standing checks it again */
    gw_db_notify(st->db, GW_ACCESS_CHANNEL, key);
  /* and every other one that has ended long since (no sweeper runs) */
  q = gw_state_prep(st, "DELETE FROM ui_sessions WHERE last_ms < ?", NULL);
  if (q) {
    gw_stmt_bind_int64(q, 1, wall_ms() - 86400000);
    gw_stmt_step(q);
  }
  gw_stmt_finalize(q);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot remove the dashboard session");
}
