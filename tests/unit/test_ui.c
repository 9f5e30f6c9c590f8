/* Unit tests for the dashboard's pieces that need no server: the form
 * reader (front/ui_form.c) and the audit search with each record's chain
 * status (gateway/state_query.h), against a real state: filters, newest
 * first, keyset pages, an edited record and a dropped one found. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/buf.h"
#include "front/ui.h"
#include "gateway/db.h"
#include "gateway/state.h"
#include "gateway/state_query.h"
#include "unit.h"

static void join(void *arg, const char *name, const char *value)
{
  cap_buf_printf(arg, "[%s=%s]", name, value);
}

static void test_form(void)
{
  static const char *const cases[][2] = {
      {"a=1&b=two+words", "[a=1][b=two words]"},  {"csrf=ab%2Fcd&user=", "[csrf=ab/cd][user=]"},
      {"x=%zz&y=%4&z=%41", "[x=%zz][y=%4][z=A]"}, {"=v&novalue&n=%00&ok=1", "[ok=1]"},
      {"t=%3Cscript%3E&&", "[t=<script>]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct cap_buf b = {0};
    ui_form_parse(cases[i][0], strlen(cases[i][0]), join, &b);
    cap_buf_putc(&b, '\0');
    CHECK_STR(b.data, cases[i][1]);
    cap_buf_free(&b);
  }
  struct cap_buf many = {0}, out = {0};
  for (int i = 0; i < 100; i++)
    cap_buf_printf(&many, "f%d=%d&", i, i);
  CHECK(ui_form_parse(many.data, many.len, join, &out) == UI_MAX_FIELDS);
  cap_buf_free(&many);
  cap_buf_free(&out);
}

struct seen {
  int64_t seq[300];
  enum gw_chain_status chain[300];
  size_t n;
};

static void collect(void *arg, const struct gw_audit_record *r, enum gw_chain_status chain)
{
  struct seen *s = arg;
  s->seq[s->n] = r->seq;
  s->chain[s->n++] = chain;
}

static size_t query(struct gw_state *st, struct gw_audit_filter f, struct seen *s, bool *more)
{
  struct cap_error err = {0};
  s->n = 0;
  CHECK(gw_audit_query(st, &f, collect, s, more, &err) == 0);
  cap_error_clear(&err);
  return s->n;
}

static void test_audit_query(void)
{
  char dir[] = "/tmp/capsule-unit-ui.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  CHECK(gw_state_open(dir, &st, &err) == 0);
  if (!st)
    return;
  const char *caps[] = {"alpha", "beta", "gamma"}, *users[] = {"ann", "bob"};
  const char *decisions[] = {"allow", "block", "ask-approved", "approval-pending"};
  for (int i = 0; i < 240; i++) {
    char outcome[32];
    snprintf(outcome, sizeof outcome, i == 77 ? "needle %d" : "ok %d", i);
    struct gw_audit_record r = {.user = users[i % 2],
                                .capability = caps[i % 3],
                                .tool = "t",
                                .decision = decisions[i % 4],
                                .outcome = outcome};
    CHECK(gw_audit_append(st, &r, &err) == 0);
  }
  struct seen s;
  bool more;
  CHECK(query(st, (struct gw_audit_filter){0}, &s, &more) == 100 && more);
  CHECK(s.seq[0] == 240 && s.seq[99] == 141 && s.chain[0] == GW_CHAIN_OK);
  CHECK(query(st, (struct gw_audit_filter){.before = 41}, &s, &more) == 40 && !more);
  CHECK(s.seq[0] == 40 && s.seq[39] == 1 && s.chain[39] == GW_CHAIN_OK);
  /* seq i+1 holds record i: capability caps[i%3], user users[i%2], decision decisions[i%4] */
  CHECK(query(st,
              (struct gw_audit_filter){.capability = "beta", .user = "bob", .decision = "block"},
              &s, &more) == 20);
  for (size_t i = 0; i < s.n; i++)
    CHECK((s.seq[i] - 1) % 3 == 1 && (s.seq[i] - 1) % 2 == 1 && (s.seq[i] - 1) % 4 == 1);
  CHECK(query(st, (struct gw_audit_filter){.text = "needle"}, &s, &more) == 1 && s.seq[0] == 78);
  CHECK(query(st, (struct gw_audit_filter){.capability = "nothing"}, &s, &more) == 0);
  /* an edited record, and the one after a dropped record */
  struct gw_db *db = gw_state_db(st);
  CHECK(gw_db_exec(db, "UPDATE audit SET outcome = 'forged' WHERE seq = 10") == GW_DB_OK);
  CHECK(gw_db_exec(db, "DELETE FROM audit WHERE seq = 20") == GW_DB_OK);
  CHECK(query(st, (struct gw_audit_filter){.before = 25}, &s, &more) == 23);
  for (size_t i = 0; i < s.n; i++)
    CHECK(s.chain[i] == (s.seq[i] == 10   ? GW_CHAIN_EDITED
                         : s.seq[i] == 21 ? GW_CHAIN_UNLINKED
                                          : GW_CHAIN_OK));
  size_t n;
  CHECK(gw_audit_verify(st, &n, &err) == -EBADMSG);
  cap_error_clear(&err);
  gw_state_close(st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

UNIT_MAIN(test_form, test_audit_query)
