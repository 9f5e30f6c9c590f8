/* A hostile review of the egress spool's recovery (src/gateway/egress_spool.c):
 * what a state open finds in STATE/run/egress that no keeper wrote. A
 * FIFO, a directory, a socket or a symlink under a spool's name is not
 * read nor followed, and the open does not wait on it; a file locked for
 * good is left, not waited for; garbage is removed, nothing stored; a
 * huge (sparse) file is read only to the bound; counts at the edges of
 * int64 (a head's, rows' past the bound, negative ones) are stored
 * saturated and never negative; an ID with a NUL is not a spool's; a run
 * directory that is a symlink, or an egress directory that is not
 * private, is not recovered from; threads of one process opening the
 * state at once store a file once. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/egress_spool.h"
#include "gateway/state.h"
#include "gateway/state_query.h"
#include "unit.h"

static char dir[] = "/tmp/capsule-unit-spool-hostile.XXXXXX";
static char run[80], spool_dir[96];

struct counted {
  size_t rows;
  long long min_count, max_count;
};

static void count_row(void *arg, const struct gw_egress_record *r)
{
  struct counted *c = arg;
  if (!c->rows || r->count < c->min_count)
    c->min_count = r->count;
  if (!c->rows || r->count > c->max_count)
    c->max_count = r->count;
  c->rows++;
}

static struct counted open_and_count(const char *cap)
{
  struct counted c = {0};
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  CHECK(gw_state_open(dir, &st, &err) == 0);
  if (!st)
    return cap_error_clear(&err), c;
  struct gw_egress_filter f = {.capability = cap, .limit = 100000};
  bool more = false;
  CHECK(gw_egress_query(st, &f, count_row, &c, &more, &err) == 0);
  gw_state_close(st);
  cap_error_clear(&err);
  return c;
}

/* A spool's bytes as a keeper writes them: head over, n rows of count */
static void spool_bytes(struct cap_buf *out, const char *id, const char *cap, int64_t over,
                        size_t n, int64_t count)
{
  char fixed[56] = "capsule-egress-spool-v1";
  memcpy(fixed + 24, &over, sizeof over);
  memcpy(fixed + 32, id, 24);
  cap_buf_append(out, fixed, sizeof fixed);
  cap_buf_put_text(out, cap);
  cap_buf_put_text(out, "mallory");
  for (size_t i = 0; i < n; i++) {
    struct gw_egress_row r = {.time_ms = 1700000000000,
                              .decision = PROXY_DENY,
                              .kind = "connect",
                              .host = "forged.invalid",
                              .port = 1,
                              .count = count};
    gw_egress_row_encode(&r, out);
  }
}

static void put_file(const char *path, const struct cap_buf *b)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0 && write(fd, b->data, b->len) == (ssize_t)b->len);
  if (fd >= 0)
    close(fd);
}

static void put_spool(const char *name, const char *cap, int64_t over, size_t n, int64_t count)
{
  struct cap_buf b = {0};
  spool_bytes(&b, "0123456789abcdef01234567", cap, over, n, count);
  _cleanup_free_ char *path = cap_xasprintf("%s/%s", spool_dir, name);
  put_file(path, &b);
  cap_buf_free(&b);
}

static bool exists(const char *name)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/%s", spool_dir, name);
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* Not regular files under a spool's name: the open neither reads, follows
 * nor waits on them (a FIFO opened for reading would block) */
static void test_not_files(void)
{
  _cleanup_free_ char *fifo = cap_xasprintf("%s/aaaaaaaaaaaaaaaaaaaaaaaa", spool_dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  _cleanup_free_ char *sub = cap_xasprintf("%s/bbbbbbbbbbbbbbbbbbbbbbbb", spool_dir);
  CHECK(mkdir(sub, 0700) == 0);
  _cleanup_free_ char *inner = cap_xasprintf("%s/cccccccccccccccccccccccc", sub);
  struct cap_buf b = {0};
  spool_bytes(&b, "0123456789abcdef01234567", "n", 0, 1, 1);
  put_file(inner, &b); /* a spool one level down: not the recovery's */
  /* a symlink to a spool outside: not followed, its target kept */
  _cleanup_free_ char *outside = cap_xasprintf("%s/outside-spool", dir);
  put_file(outside, &b);
  cap_buf_free(&b);
  _cleanup_free_ char *link = cap_xasprintf("%s/dddddddddddddddddddddddd", spool_dir);
  CHECK(symlink(outside, link) == 0);
  /* a socket */
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  _cleanup_free_ char *sock = cap_xasprintf("%s/eeeeeeeeeeeeeeeeeeeeeeee", spool_dir);
  CHECK(strlen(sock) < sizeof sa.sun_path);
  memcpy(sa.sun_path, sock, strlen(sock) + 1);
  CHECK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
  alarm(60); /* a hang fails the test (SIGALRM) */
  CHECK(open_and_count("n").rows == 0);
  alarm(0);
  struct stat sb;
  CHECK(stat(outside, &sb) == 0 && sb.st_size > 0);
  CHECK(stat(inner, &sb) == 0);
  close(s);
  unlink(fifo);
  unlink(inner);
  rmdir(sub);
  unlink(link);
  unlink(sa.sun_path);
  unlink(outside);
}

/* Garbage, a truncated head, a bad ID: removed, nothing stored */
static void test_garbage(void)
{
  struct cap_buf b = {0};
  cap_buf_append(&b, "garbage", 7);
  _cleanup_free_ char *p1 = cap_xasprintf("%s/111111111111111111111111", spool_dir);
  put_file(p1, &b);
  cap_buf_free(&b);
  spool_bytes(&b, "0123456789abcdef01234567", "g", 0, 1, 1);
  b.len = 40; /* the head cut */
  _cleanup_free_ char *p2 = cap_xasprintf("%s/222222222222222222222222", spool_dir);
  put_file(p2, &b);
  cap_buf_free(&b);
  spool_bytes(&b, "../../../../etc/passwd\0\0", "g", 0, 1, 1);
  _cleanup_free_ char *p3 = cap_xasprintf("%s/333333333333333333333333", spool_dir);
  put_file(p3, &b);
  cap_buf_free(&b);
  /* an ID of NULs (strchr finds the NUL in its set: it passed for hex) */
  static const char nuls[24] = {0};
  spool_bytes(&b, nuls, "g", 0, 1, 1);
  _cleanup_free_ char *p4 = cap_xasprintf("%s/444444444444444444444440", spool_dir);
  put_file(p4, &b);
  cap_buf_free(&b);
  CHECK(open_and_count("g").rows == 0);
  CHECK(!exists("111111111111111111111111") && !exists("222222222222222222222222") &&
        !exists("333333333333333333333333") && !exists("444444444444444444444440"));
}

/* A file locked by another process for good: left, the open not held */
static void test_locked_forever(void)
{
  put_spool("444444444444444444444444", "l", 0, 1, 1);
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    _cleanup_free_ char *p = cap_xasprintf("%s/444444444444444444444444", spool_dir);
    int fd = open(p, O_RDWR);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    char c = 1;
    if (fd < 0 || fcntl(fd, F_SETLK, &l) < 0 || write(ready[1], &c, 1) != 1)
      _exit(1);
    pause();
    _exit(0);
  }
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  alarm(60);
  CHECK(open_and_count("l").rows == 0);
  alarm(0);
  CHECK(exists("444444444444444444444444"));
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  CHECK(open_and_count("l").rows == 1);
  close(ready[0]);
  close(ready[1]);
}

/* A file of 1 GiB (sparse): read to the bound only, its head's rows kept */
static void test_huge(void)
{
  put_spool("555555555555555555555555", "h", 0, 3, 1);
  _cleanup_free_ char *p = cap_xasprintf("%s/555555555555555555555555", spool_dir);
  CHECK(truncate(p, 1LL << 30) == 0);
  struct counted c = open_and_count("h");
  CHECK(c.rows == 3); /* the zeros past them: a torn row */
  CHECK(!exists("555555555555555555555555"));
}

/* Counts at int64's edges: the sums saturate (no overflow) and a count
 * is never stored negative */
static void test_counts(void)
{
  put_spool("666666666666666666666666", "k", INT64_MAX, GW_EGRESS_BATCH_MAX + 3, INT64_MAX);
  struct counted c = open_and_count("k");
  CHECK(c.rows == GW_EGRESS_BATCH_MAX + 1);
  CHECK(c.min_count >= 1);
  put_spool("777777777777777777777777", "m", -5, 2, -7);
  c = open_and_count("m");
  CHECK(c.rows == 2 && c.min_count >= 1);
}

/* STATE/run a symlink to another directory with a spool in its egress: not
 * recovered from (a keeper refuses such a run directory too) */
static void test_run_symlink(void)
{
  _cleanup_free_ char *other = cap_xasprintf("%s/other", dir);
  _cleanup_free_ char *other_egress = cap_xasprintf("%s/other/egress", dir);
  _cleanup_free_ char *moved = cap_xasprintf("%s/run.real", dir);
  CHECK(mkdir(other, 0700) == 0 && mkdir(other_egress, 0700) == 0);
  struct cap_buf b = {0};
  spool_bytes(&b, "0123456789abcdef01234567", "s", 0, 1, 1);
  _cleanup_free_ char *victim = cap_xasprintf("%s/888888888888888888888888", other_egress);
  put_file(victim, &b);
  _cleanup_free_ char *junk = cap_xasprintf("%s/notaspool", other_egress);
  struct cap_buf j = {0};
  cap_buf_append(&j, "precious", 8);
  put_file(junk, &j);
  cap_buf_free(&j);
  cap_buf_free(&b);
  CHECK(rename(run, moved) == 0 && symlink(other, run) == 0);
  CHECK(open_and_count("s").rows == 0);
  struct stat sb;
  CHECK(stat(victim, &sb) == 0 && stat(junk, &sb) == 0); /* neither stored nor removed */
  CHECK(unlink(run) == 0 && rename(moved, run) == 0);
  /* an egress directory others can write: left */
  put_spool("999999999999999999999999", "w", 0, 1, 1);
  CHECK(chmod(spool_dir, 0733) == 0);
  CHECK(open_and_count("w").rows == 0);
  CHECK(chmod(spool_dir, 0700) == 0);
  CHECK(open_and_count("w").rows == 1);
}

/* Threads of one process opening the state at once (the warm Selu
 * process's pooled connections): a file's lock is the process's, so each
 * could take it; the rows must be stored once all the same */
static void *opener(void *arg)
{
  (void)arg;
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (gw_state_open(dir, &st, &err) == 0)
    gw_state_close(st);
  cap_error_clear(&err);
  return NULL;
}

static void test_threads(void)
{
  size_t stored = 0;
  for (int round = 0; round < 20; round++) {
    char name[25];
    snprintf(name, sizeof name, "%024x", 0xabc000 + round);
    put_spool(name, "t", 0, 2000, 1);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
      CHECK(pthread_create(&t[i], NULL, opener, NULL) == 0);
    for (int i = 0; i < 4; i++)
      pthread_join(t[i], NULL);
    stored = open_and_count("t").rows;
    if (stored != (size_t)(round + 1) * 2000)
      break;
  }
  if (stored % 2000 || stored > 20 * 2000)
    fprintf(stderr, "threads stored %zu rows\n", stored);
  CHECK(stored == 20 * 2000);
}

static void setup(void)
{
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  snprintf(run, sizeof run, "%s/run", dir);
  snprintf(spool_dir, sizeof spool_dir, "%s/egress", run);
  CHECK(mkdir(run, 0700) == 0 && mkdir(spool_dir, 0700) == 0);
  CHECK(open_and_count("x").rows == 0); /* the database made */
}

static void cleanup(void)
{
  _cleanup_free_ char *cmd = cap_xasprintf("rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

UNIT_MAIN(setup, test_not_files, test_garbage, test_locked_forever, test_huge, test_counts,
          test_run_symlink, test_threads, cleanup)
