/* The artifact store of serve --grpc (gateway/artifact_store.h): ids,
 * the user's scope, the bounds, expiry, a write abandoned. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "gateway/artifact_store.h"
#include "unit.h"

static char root[] = "/tmp/capsule-artifacts-XXXXXX";
static char store[sizeof root + 32];

static int put(const char *user, const char *data, size_t len, struct gw_artifact_meta *m)
{
  struct gw_artifact_writer *w = NULL;
  struct cap_error err = {0};
  int r = gw_artifact_begin(store, user, "f.txt", "text/plain", &w, &err);
  if (r == 0 && (r = gw_artifact_write(w, data, len, &err)) < 0)
    gw_artifact_abort(w);
  if (r == 0)
    r = gw_artifact_commit(w, "upload", NULL, m, &err);
  cap_error_clear(&err);
  return r;
}

static void test_ids(void)
{
  CHECK(gw_artifact_id_valid(GW_ARTIFACT_ID_PREFIX "0123456789abcdef0123456789abcdef"));
  CHECK(!gw_artifact_id_valid(GW_ARTIFACT_ID_PREFIX "0123456789abcdef0123456789abcdeF"));
  CHECK(!gw_artifact_id_valid(GW_ARTIFACT_ID_PREFIX "0123456789abcdef0123456789abcde"));
  CHECK(!gw_artifact_id_valid("../" GW_ARTIFACT_ID_PREFIX "0123456789abcdef0123456789abcd"));
  CHECK(!gw_artifact_id_valid(NULL));
}

static void test_round_trip(void)
{
  struct gw_artifact_meta a = {0}, b = {0}, got = {0};
  CHECK(put("alice", "hello", 5, &a) == 0);
  CHECK(put("alice", "hello", 5, &b) == 0);
  CHECK(gw_artifact_id_valid(a.id) && strcmp(a.id, b.id) != 0);
  char *data = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  CHECK(gw_artifact_read(store, "alice", a.id, &got, &data, &len, &err) == 0);
  CHECK(len == 5 && data && memcmp(data, "hello", 5) == 0);
  CHECK_STR(got.filename, "f.txt");
  CHECK_STR(got.mime_type, "text/plain");
  CHECK_STR(got.origin, "upload");
  free(data);
  gw_artifact_meta_free(&got);
  /* another user's: not found, as an unknown id is */
  CHECK(gw_artifact_read(store, "bob", a.id, &got, &data, &len, &err) == -ENOENT);
  CHECK(err.message && strstr(err.message, "not found or expired"));
  cap_error_clear(&err);
  CHECK(gw_artifact_read(store, "alice", "../x", &got, &data, &len, &err) == -ENOENT);
  cap_error_clear(&err);
  /* expired: refused, and removed */
  char path[512];
  snprintf(path, sizeof path, "%s", store);
  DIR *d = opendir(store);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.')
      snprintf(path, sizeof path, "%s/%s/%s.meta", store, e->d_name, b.id);
  if (d)
    closedir(d);
  FILE *f = fopen(path, "we");
  CHECK(f != NULL);
  if (f) {
    fprintf(f,
            "{\"user\":\"alice\",\"filename\":\"f\",\"mime_type\":\"t/p\",\"origin\":\"upload\","
            "\"source_id\":null,\"size\":5,\"created\":%lld}",
            (long long)time(NULL) - GW_ARTIFACT_TTL_S - 10);
    fclose(f);
  }
  CHECK(gw_artifact_read(store, "alice", b.id, &got, &data, &len, &err) == -ENOENT);
  cap_error_clear(&err);
  CHECK(access(path, F_OK) < 0);
  gw_artifact_meta_free(&a);
  gw_artifact_meta_free(&b);
}

static void test_bounds(void)
{
  /* one artifact past GW_ARTIFACT_MAX_BYTES: refused, nothing left */
  struct gw_artifact_writer *w = NULL;
  struct cap_error err = {0};
  CHECK(gw_artifact_begin(store, "carol", "big", NULL, &w, &err) == 0);
  static char mib[1 << 20];
  int r = 0;
  for (uint64_t n = 0; r == 0 && n <= GW_ARTIFACT_MAX_BYTES; n += sizeof mib)
    r = gw_artifact_write(w, mib, sizeof mib, &err);
  CHECK(r == -EFBIG && strstr(err.message, "larger than"));
  cap_error_clear(&err);
  gw_artifact_abort(w);
  /* the count a user may hold */
  struct gw_artifact_meta m;
  int stored = 0;
  for (int i = 0; i < GW_ARTIFACT_USER_COUNT + 1; i++) {
    memset(&m, 0, sizeof m);
    if (put("dave", "x", 1, &m) == 0)
      stored++;
    gw_artifact_meta_free(&m);
  }
  CHECK(stored == GW_ARTIFACT_USER_COUNT);
  CHECK(gw_artifact_begin(store, "dave", "x", NULL, &w, &err) == -EDQUOT);
  CHECK(err.message && strstr(err.message, "the most capsule keeps"));
  cap_error_clear(&err);
  /* another user is not bounded by dave's */
  CHECK(put("erin", "y", 1, &m) == 0);
  gw_artifact_meta_free(&m);
}

/* Another user's expired artifact goes with a sweep of the whole store. */
static void test_sweep_all(void)
{
  struct gw_artifact_meta m = {0};
  CHECK(put("frank", "old", 3, &m) == 0);
  char path[600] = "";
  DIR *d = opendir(store);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s/%s.meta", store, e->d_name, m.id);
    if (e->d_name[0] != '.' && access(p, F_OK) == 0)
      snprintf(path, sizeof path, "%s", p);
  }
  if (d)
    closedir(d);
  struct gw_artifact_sweep_report rep;
  gw_artifact_sweep_all(store, &rep);
  CHECK(path[0] && access(path, F_OK) == 0); /* alive: kept */
  FILE *f = fopen(path, "we");
  if (f) {
    fprintf(f, "{\"user\":\"frank\",\"filename\":\"f\",\"mime_type\":\"t/p\",\"origin\":"
               "\"upload\",\"source_id\":null,\"size\":3,\"created\":1}");
    fclose(f);
  }
  gw_artifact_sweep_all(store, &rep);
  CHECK(access(path, F_OK) < 0);
  path[strlen(path) - 4] = '\0';
  strcat(path, "data");
  CHECK(access(path, F_OK) < 0);
  gw_artifact_meta_free(&m);
}

/* The path of id's file ID.SUFFIX in the store (its user's directory). */
static void artifact_path(const char *id, const char *suffix, char *out, size_t size)
{
  out[0] = '\0';
  DIR *d = opendir(store);
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s/%s.meta", store, e->d_name, id);
    if (e->d_name[0] != '.' && access(p, F_OK) == 0)
      snprintf(out, size, "%s/%s/%s.%s", store, e->d_name, id, suffix);
  }
  if (d)
    closedir(d);
}

/* The sweep removes a record known expired or malformed, and keeps one it
 * cannot read (an EACCES or EIO may pass: here a read that fails, a
 * directory in the record's place), saying so in its report. */
static void test_sweep_keeps_unreadable(void)
{
  struct gw_artifact_meta live = {0}, blind = {0}, bad = {0};
  CHECK(put("gina", "live", 4, &live) == 0);
  CHECK(put("gina", "blind", 5, &blind) == 0);
  CHECK(put("gina", "bad", 3, &bad) == 0);
  char blind_meta[700], blind_data[700], bad_meta[700], bad_data[700], text[4096] = "";
  artifact_path(blind.id, "meta", blind_meta, sizeof blind_meta);
  artifact_path(blind.id, "data", blind_data, sizeof blind_data);
  artifact_path(bad.id, "meta", bad_meta, sizeof bad_meta);
  artifact_path(bad.id, "data", bad_data, sizeof bad_data);
  FILE *f = fopen(blind_meta, "re");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f)
    fclose(f);
  text[n] = '\0';
  CHECK(n > 0 && unlink(blind_meta) == 0 && mkdir(blind_meta, 0700) == 0);
  f = fopen(bad_meta, "we");
  if (f) {
    fputs("{\"user\":\"gina\",\"size\":\"not a number\"}", f);
    fclose(f);
  }
  struct gw_artifact_sweep_report rep;
  gw_artifact_sweep_all(store, &rep);
  CHECK(rep.unreadable == 1 && rep.error == EISDIR && strcmp(rep.id, blind.id) == 0);
  CHECK(access(blind_data, F_OK) == 0);                            /* kept */
  CHECK(access(bad_meta, F_OK) < 0 && access(bad_data, F_OK) < 0); /* malformed: gone */
  /* readable again: the artifact is there as it was */
  CHECK(rmdir(blind_meta) == 0);
  f = fopen(blind_meta, "we");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  struct gw_artifact_meta got = {0};
  char *data = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  CHECK(gw_artifact_read(store, "gina", blind.id, &got, &data, &len, &err) == 0);
  CHECK(len == 5 && data && memcmp(data, "blind", 5) == 0);
  free(data);
  gw_artifact_meta_free(&got);
  CHECK(gw_artifact_read(store, "gina", live.id, &got, &data, &len, &err) == 0);
  free(data);
  gw_artifact_meta_free(&got);
  gw_artifact_sweep_all(store, &rep);
  CHECK(rep.unreadable == 0);
  cap_error_clear(&err);
  gw_artifact_meta_free(&live);
  gw_artifact_meta_free(&blind);
  gw_artifact_meta_free(&bad);
}

/* The directory holding a part file being written (the writer's user's). */
static void writing_dir(char *out, size_t size)
{
  out[0] = '\0';
  DIR *d = opendir(store);
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", store, e->d_name);
    DIR *u = e->d_name[0] != '.' ? opendir(p) : NULL;
    for (struct dirent *f; u && (f = readdir(u));)
      if (strlen(f->d_name) > 5 && strcmp(f->d_name + strlen(f->d_name) - 5, ".part") == 0)
        snprintf(out, size, "%s", p);
    if (u)
      closedir(u);
  }
  if (d)
    closedir(d);
}

/* Writers begun at once share the user's bounds (hostile review 9,
 * tests/review9/store_quota_race.sh): each counts from its start and
 * reserves its room before it writes. */
static void test_writers_at_once(void)
{
  struct gw_artifact_writer *w0 = NULL, *a = NULL, *b = NULL;
  struct cap_error err = {0};
  CHECK(gw_artifact_begin(store, "gina", "x", NULL, &w0, &err) == 0);
  char dir[600], path[700];
  writing_dir(dir, sizeof dir);
  CHECK(dir[0] != '\0');
  gw_artifact_abort(w0);
  /* gina holds 250 MiB (one artifact, sparse) */
  const char *id = GW_ARTIFACT_ID_PREFIX "00000000000000000000000000000001";
  snprintf(path, sizeof path, "%s/%s.data", dir, id);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  CHECK(fd >= 0 && ftruncate(fd, (off_t)250 << 20) == 0);
  if (fd >= 0)
    close(fd);
  snprintf(path, sizeof path, "%s/%s.meta", dir, id);
  FILE *f = fopen(path, "we");
  if (f) {
    fprintf(f,
            "{\"user\":\"gina\",\"filename\":\"f\",\"mime_type\":\"t/p\",\"origin\":"
            "\"upload\",\"source_id\":null,\"size\":%d,\"created\":%lld}",
            250 << 20, (long long)time(NULL));
    fclose(f);
  }
  CHECK(gw_artifact_begin(store, "gina", "a", NULL, &a, &err) == 0);
  CHECK(gw_artifact_begin(store, "gina", "b", NULL, &b, &err) == 0);
  static char four[4 << 20];
  CHECK(gw_artifact_write(a, four, sizeof four, &err) == 0);
  CHECK(gw_artifact_write(b, four, sizeof four, &err) == -EFBIG); /* 258 MiB */
  cap_error_clear(&err);
  gw_artifact_abort(a);
  gw_artifact_abort(b);
  /* the count: a part file is an artifact from its start */
  struct gw_artifact_meta m;
  for (int i = 0; i < GW_ARTIFACT_USER_COUNT - 1; i++) {
    memset(&m, 0, sizeof m);
    CHECK(put("hank", "x", 1, &m) == 0);
    gw_artifact_meta_free(&m);
  }
  CHECK(gw_artifact_begin(store, "hank", "a", NULL, &a, &err) == 0);
  CHECK(gw_artifact_begin(store, "hank", "b", NULL, &b, &err) == -EDQUOT);
  cap_error_clear(&err);
  gw_artifact_abort(a);
}

static void cleanup(void)
{
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0);
}

static void setup(void)
{
  CHECK(mkdtemp(root) != NULL);
  snprintf(store, sizeof store, "%s/run/artifacts", root);
}

UNIT_MAIN(setup, test_ids, test_round_trip, test_bounds, test_sweep_all,
          test_sweep_keeps_unreadable, test_writers_at_once, cleanup)
