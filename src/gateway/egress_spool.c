/* A warm server's pending egress batch on disk, and its recovery
 * (egress_spool.h). The file: a 24-byte tag, the count of decisions past
 * the bounds (8 bytes, rewritten in place), the ID (24 hex digits), the
 * capability and the user (cap_buf_put_text), then the rows, each as
 * gw_egress_row_encode writes it, appended one write at a time: a keeper
 * killed mid-write leaves a torn last row, which the recovery drops. */
#include "gateway/egress_spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/state_int.h"

#define SPOOL_DIR "run/egress" /* under the state directory: RUN/egress */
#define SPOOL_TAG "capsule-egress-spool-v1"
#define SPOOL_OVER_AT 24
#define SPOOL_ID_AT 32
#define SPOOL_TEXTS_AT 56
#define SPOOL_CLAIM "egress-spool:"
#define SPOOL_UNNAMED_AGE_S 600 /* a dot name: a file being made, or its keeper killed then */

static int lock_file(int fd)
{
  struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  return fcntl(fd, F_SETLK, &l) < 0 ? -errno : 0;
}

void gw_egress_spool_init(struct gw_egress_spool *s, const char *run_dir, const char *capability,
                          const char *user)
{
  *s = (struct gw_egress_spool){.fd = -1,
                                .dir = cap_xasprintf("%s/egress", run_dir),
                                .capability = cap_xstrdup(capability),
                                .user = cap_xstrdup(user ? user : "")};
}

/* The directory, made 0700 when missing: this user's, not a link, private */
static int spool_dir(const char *path)
{
  mkdir(path, 0700);
  int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  struct stat sb;
  if (dir >= 0 && (fstat(dir, &sb) < 0 || sb.st_uid != geteuid() || (sb.st_mode & 077))) {
    close(dir);
    return -1;
  }
  return dir;
}

/* The file, made under a dot name, locked and given its head before it
 * has its name: a file under its name is either its keeper's (locked) or
 * left for the recovery */
static bool spool_create(struct gw_egress_spool *s)
{
  _cleanup_close_ int dir = spool_dir(s->dir);
  if (dir < 0)
    return false;
  unsigned char rnd[12];
  randombytes_buf(rnd, sizeof rnd);
  sodium_bin2hex(s->name, sizeof s->name, rnd, sizeof rnd);
  char tmp[32];
  snprintf(tmp, sizeof tmp, ".%s", s->name);
  int fd = openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return false;
  struct cap_buf head = {0};
  char fixed[SPOOL_TEXTS_AT] = SPOOL_TAG; /* the rest zero: the count past the bounds */
  memcpy(fixed + SPOOL_ID_AT, s->name, 24);
  cap_buf_append(&head, fixed, sizeof fixed);
  cap_buf_put_text(&head, s->capability);
  cap_buf_put_text(&head, s->user);
  bool ok = lock_file(fd) == 0 && pwrite(fd, head.data, head.len, 0) == (ssize_t)head.len &&
            renameat(dir, tmp, dir, s->name) == 0;
  s->rows_at = s->end = (off_t)head.len;
  cap_buf_free(&head);
  if (!ok) {
    unlinkat(dir, tmp, 0);
    close(fd);
    return false;
  }
  s->fd = fd;
  return true;
}

static bool spool_ready(struct gw_egress_spool *s)
{
  if (s->fd < 0 && !s->failed)
    s->failed = !spool_create(s);
  return s->fd >= 0;
}

static void spool_count(struct gw_egress_spool *s, int64_t n)
{
  s->over += n;
  if (pwrite(s->fd, &s->over, sizeof s->over, SPOOL_OVER_AT) != sizeof s->over) {
    /* a full disk: the rows already there are kept */
  }
}

static void spool_row(struct gw_egress_spool *s, const struct gw_egress_row *r)
{
  if (!spool_ready(s))
    return;
  struct cap_buf row = {0};
  gw_egress_row_encode(r, &row);
  bool room = s->rows < GW_EGRESS_BATCH_MAX && s->end + (off_t)row.len <= GW_EGRESS_SPOOL_MAX_BYTES;
  if (room && pwrite(s->fd, row.data, row.len, s->end) == (ssize_t)row.len) {
    s->end += (off_t)row.len;
    s->rows++;
  } else {
    if (room && ftruncate(s->fd, s->end) < 0) {
      /* a torn row past end: the recovery drops it */
    }
    spool_count(s, r->count ? r->count : 1);
  }
  cap_buf_free(&row);
}

void gw_egress_spool_event(struct gw_egress_spool *s, const struct proxy_egress_event *ev)
{
  /* the event's strings, read only */
  struct gw_egress_row r = {.time_ms = ev->time_ms,
                            .decision = ev->decision,
                            .kind = (char *)ev->kind,
                            .host = (char *)ev->host,
                            .method = (char *)ev->method,
                            .path = (char *)ev->path,
                            .credential = (char *)ev->credential,
                            .reason = (char *)ev->reason,
                            .port = ev->port,
                            .count = ev->count,
                            .bytes_up = ev->bytes_up,
                            .bytes_down = ev->bytes_down};
  spool_row(s, &r);
}

void gw_egress_spool_batch(struct gw_egress_spool *s, struct gw_egress_batch *b)
{
  pthread_mutex_lock(&b->lock);
  for (size_t i = 0; i < b->n; i++)
    spool_row(s, &b->rows[i]);
  if (b->over && spool_ready(s))
    spool_count(s, b->over);
  pthread_mutex_unlock(&b->lock);
}

void gw_egress_spool_clear(struct gw_egress_spool *s)
{
  if (s->fd < 0 || (!s->rows && !s->over))
    return; /* the usual call: nothing was kept */
  if (ftruncate(s->fd, s->rows_at) < 0) {
    /* left: stored again by the recovery only if the keeper then dies */
  }
  s->end = s->rows_at;
  s->rows = 0;
  s->over = 0;
  spool_count(s, 0);
}

void gw_egress_spool_close(struct gw_egress_spool *s)
{
  if (s->fd >= 0 && !s->rows && !s->over) {
    _cleanup_close_ int dir = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dir >= 0)
      unlinkat(dir, s->name, 0); /* before the lock goes: no one takes it */
  }
  if (s->fd >= 0)
    close(s->fd); /* the lock goes: the recovery stores what it holds */
  free(s->dir);
  free(s->capability);
  free(s->user);
  *s = (struct gw_egress_spool){.fd = -1, .failed = true}; /* later decisions: none kept */
}

/* ---- the recovery ---- */

/* The file's content, at most the bound and a row past it */
static char *read_spool(int fd, size_t *len)
{
  size_t cap = GW_EGRESS_SPOOL_MAX_BYTES + 65536, got = 0;
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return NULL;
  size_t want = (size_t)sb.st_size < cap ? (size_t)sb.st_size : cap;
  char *buf = cap_xmalloc(want + 1);
  while (got < want) {
    ssize_t n = pread(fd, buf + got, want - got, (off_t)got);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  *len = got;
  return buf;
}

static bool all_zero(const char *p, const char *end)
{
  while (p < end && !*p)
    p++;
  return p == end;
}

bool gw_egress_spool_parse(const char *data, size_t len, struct gw_egress_batch *b, char id[25],
                           char **capability, char **user)
{
  *capability = *user = NULL;
  if (len < SPOOL_TEXTS_AT || memcmp(data, SPOOL_TAG, sizeof SPOOL_TAG) != 0)
    return false;
  int64_t over;
  memcpy(&over, data + SPOOL_OVER_AT, sizeof over);
  memcpy(id, data + SPOOL_ID_AT, 24);
  id[24] = '\0';
  for (size_t i = 0; i < 24; i++)
    if (!id[i] || !strchr("0123456789abcdef", id[i])) /* strchr finds the NUL too */
      return false;
  const char *p = data + SPOOL_TEXTS_AT, *end = data + len;
  if (!cap_buf_get_text(&p, end, capability) || !cap_buf_get_text(&p, end, user) || !*capability ||
      !*user)
    return false;
  int64_t past = over > 0 ? over : 0;
  struct gw_egress_row r;
  const char *at = p;
  while (p < end && gw_egress_row_decode(&r, &p, end)) { /* a torn last row: dropped */
    if (all_zero(at, p)) { /* a file extended, never written (a sparse tail): its end */
      gw_egress_row_free(&r);
      break;
    }
    at = p;
    if (r.count < 0)
      r.count = 1; /* a keeper never counts below none */
    if (b->n < GW_EGRESS_BATCH_MAX) {
      gw_egress_batch_add(b, &r, 0);
      continue;
    }
    int64_t one = r.count ? r.count : 1; /* the sum saturates: the file is not trusted */
    past = past > INT64_MAX - one ? INT64_MAX : past + one;
    gw_egress_row_free(&r);
  }
  if (past)
    gw_egress_batch_add(b, NULL, past);
  return true;
}

static void forget_claim(struct gw_state *st, const char *claim)
{
  struct gw_stmt *s = gw_state_prep(st, "DELETE FROM meta WHERE key = ?", claim, NULL);
  if (s)
    gw_stmt_step(s);
  gw_stmt_finalize(s);
}

/* One file: when its lock is free and it is still the file under its
 * name (another process may have stored and removed it), its rows */
static int recover_one(struct gw_state *st, int dir, const char *name, size_t *n,
                       struct cap_error *err)
{
  _cleanup_close_ int fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 || lock_file(fd) < 0)
    return 0; /* gone, or its keeper lives */
  struct stat a, b;
  if (fstat(fd, &a) < 0 || fstatat(dir, name, &b, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(a.st_mode) ||
      a.st_ino != b.st_ino || a.st_dev != b.st_dev)
    return 0;
  size_t len = 0;
  _cleanup_free_ char *data = read_spool(fd, &len);
  struct gw_egress_batch batch;
  gw_egress_batch_init(&batch);
  char id[25];
  _cleanup_free_ char *capability = NULL, *user = NULL;
  int r = 0;
  if (data && gw_egress_spool_parse(data, len, &batch, id, &capability, &user)) {
    _cleanup_free_ char *claim = cap_xasprintf(SPOOL_CLAIM "%s", id);
    r = gw_egress_write_claimed(st, &batch, capability, user, claim, err);
    if (r >= 0) {
      unlinkat(dir, name, 0);
      forget_claim(st, claim); /* the file is gone: its claim has nothing left to guard */
      (*n)++;
    }
  } else if (data) {
    unlinkat(dir, name, 0); /* not a spool's: nothing to store */
  }
  gw_egress_batch_free(&batch);
  return r < 0 ? r : 0;
}

static void drop_unnamed(int dir, const char *name)
{
  _cleanup_close_ int fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat sb;
  if (fd >= 0 && lock_file(fd) == 0 && fstat(fd, &sb) == 0 &&
      sb.st_mtime + SPOOL_UNNAMED_AGE_S < time(NULL))
    unlinkat(dir, name, 0);
}

/* RUN/egress as its keepers make it (spool_dir, gw_instance_check_run_dir):
 * neither it nor RUN a symlink, it this user's and private; else -1 with
 * errno (ENOENT: none yet) */
static int private_spool_dir(int statefd)
{
  _cleanup_close_ int rfd = openat(statefd, "run", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (rfd < 0)
    return -1;
  int dfd = openat(rfd, "egress", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  struct stat sb;
  if (dfd >= 0 && (fstat(dfd, &sb) < 0 || sb.st_uid != geteuid() || (sb.st_mode & 077))) {
    close(dfd);
    errno = EPERM;
    return -1;
  }
  return dfd;
}

/* A process's threads call it in turn (gw_state_open's recovery mutex):
 * a file's lock is the process's, so two threads at once could each take
 * the same file, and the second store its rows again after the first
 * removed it and its claim */
int gw_egress_spool_recover(struct gw_state *st, size_t *n, struct cap_error *err)
{
  *n = 0;
  int dfd = private_spool_dir(st->dirfd);
  if (dfd < 0)
    return errno == ENOENT ? 0 : cap_error_errno(err, errno, "cannot read %s/" SPOOL_DIR, st->dir);
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return cap_error_errno(err, errno, "cannot read %s/" SPOOL_DIR, st->dir);
  }
  int r = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (e->d_name[0] == '.')
      drop_unnamed(dirfd(d), e->d_name);
    else if (r == 0)
      r = recover_one(st, dirfd(d), e->d_name, n, err);
  }
  closedir(d);
  return r;
}
