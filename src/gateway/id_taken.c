/* The host ids a new range must not overlap (id_taken.h): /etc/subuid
 * and /etc/subgid entries, and every user's and group's id. */
#include "gateway/id_taken.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/subid.h"

void taken_add(struct taken *t, uint64_t start, uint64_t count)
{
  if (start + count <= RANGE_FIRST || start >= RANGE_END || count == 0)
    return;
  t->v = cap_xrealloc(t->v, (t->n + 1) * sizeof *t->v);
  t->v[t->n][0] = start;
  t->v[t->n][1] = start + count;
  t->n++;
}

bool taken_overlaps(const struct taken *t, uint64_t start, uint64_t end)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i][0] < end && start < t->v[i][1])
      return true;
  return false;
}

static const char *subid_file(const char *env, const char *dflt)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/ids.sh: a subordinate-id file of the test's */
  const char *test = getenv(env);
  if (test && *test)
    return test;
#else
  (void)env;
#endif
  return dflt;
}

/* "name:start:count" lines (core/subid.h); anything else is skipped, as
 * shadow's newuidmap skips it. */
static void read_subids(struct taken *t, const char *path)
{
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  char line[512];
  size_t name_len;
  uint64_t start, count;
  while (f && fgets(line, sizeof line, f))
    if (cap_subid_line(line, strlen(line), &name_len, &start, &count) == 0)
      taken_add(t, start, count);
}

/* Everything a range must not overlap: subordinate ids, users, groups. */
void host_ids(struct taken *t)
{
  read_subids(t, subid_file("CAPSULE_TEST_SUBUID", "/etc/subuid"));
  read_subids(t, subid_file("CAPSULE_TEST_SUBGID", "/etc/subgid"));
  setpwent();
  for (struct passwd *pw; (pw = getpwent());)
    taken_add(t, pw->pw_uid, 1);
  endpwent();
  setgrent();
  for (struct group *gr; (gr = getgrent());)
    taken_add(t, gr->gr_gid, 1);
  endgrent();
}

/* Only a range capsule hands out: a row edited to name any other (one whose
 * ids end at the host's root, say) is not taken. */
