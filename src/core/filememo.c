#include "core/filememo.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/buf.h"

#define MEMO_SLOTS 32

struct memo {
  char *path;
  bool nofollow;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
  char *data;
  size_t len;
  uint64_t used; /* the table's clock at its last use: the oldest is replaced */
};

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct memo memos[MEMO_SLOTS];
static uint64_t memo_clock;

static bool same_file(const struct memo *m, const struct stat *sb)
{
  return m->dev == sb->st_dev && m->ino == sb->st_ino && m->size == sb->st_size &&
         m->mtime.tv_sec == sb->st_mtim.tv_sec && m->mtime.tv_nsec == sb->st_mtim.tv_nsec &&
         m->ctime.tv_sec == sb->st_ctim.tv_sec && m->ctime.tv_nsec == sb->st_ctim.tv_nsec;
}

static void memo_drop(struct memo *m)
{
  free(m->path);
  if (m->data)
    explicit_bzero(m->data, m->len);
  free(m->data);
  *m = (struct memo){0};
}

/* The file read through one descriptor, with the identity that descriptor
 * had before the read (a change during it shows in the next stat). */
static int read_fd(const char *path, bool nofollow, size_t max, char **data, size_t *len,
                   struct stat *sb)
{
  _cleanup_close_ int fd =
      open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0)
    return -errno;
  if (fstat(fd, sb) < 0)
    return -errno;
  if (S_ISDIR(sb->st_mode))
    return -EISDIR;
  if (!S_ISREG(sb->st_mode))
    return -EINVAL;
  if ((size_t)sb->st_size > max)
    return -EFBIG;
  char *buf = cap_xmalloc((size_t)sb->st_size + 1);
  size_t got = 0;
  while (got <= (size_t)sb->st_size) { /* one more byte: a file that grew is read again later */
    ssize_t n = read(fd, buf + got, (size_t)sb->st_size + 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      free(buf);
      return -e;
    }
    if (n == 0)
      break;
    got += (size_t)n;
  }
  if (got > (size_t)sb->st_size) { /* it grew while read: not kept, not trusted */
    free(buf);
    return -EAGAIN;
  }
  buf[got] = '\0';
  *data = buf;
  *len = got;
  return 0;
}

static struct memo *memo_find(const char *path, bool nofollow)
{
  for (size_t i = 0; i < MEMO_SLOTS; i++)
    if (memos[i].path && memos[i].nofollow == nofollow && strcmp(memos[i].path, path) == 0)
      return &memos[i];
  return NULL;
}

static struct memo *memo_slot(void)
{
  struct memo *oldest = &memos[0];
  for (size_t i = 0; i < MEMO_SLOTS; i++) {
    if (!memos[i].path)
      return &memos[i];
    if (memos[i].used < oldest->used)
      oldest = &memos[i];
  }
  memo_drop(oldest);
  return oldest;
}

/* Under the lock: a kept copy while stat says the file is the same. */
static bool memo_hit(const char *path, bool nofollow, size_t max, char **data, size_t *len)
{
  struct memo *m = memo_find(path, nofollow);
  if (!m)
    return false;
  struct stat sb;
  if (fstatat(AT_FDCWD, path, &sb, nofollow ? AT_SYMLINK_NOFOLLOW : 0) < 0 ||
      !S_ISREG(sb.st_mode) || !same_file(m, &sb) || m->len > max) {
    memo_drop(m);
    return false;
  }
  m->used = ++memo_clock;
  *data = cap_xmalloc(m->len + 1);
  memcpy(*data, m->data, m->len + 1);
  *len = m->len;
  return true;
}

static void memo_keep(const char *path, bool nofollow, const struct stat *sb, const char *data,
                      size_t len)
{
  struct memo *m = memo_find(path, nofollow);
  if (m)
    memo_drop(m);
  m = memo_slot();
  *m = (struct memo){.path = cap_xstrdup(path),
                     .nofollow = nofollow,
                     .dev = sb->st_dev,
                     .ino = sb->st_ino,
                     .size = sb->st_size,
                     .mtime = sb->st_mtim,
                     .ctime = sb->st_ctim,
                     .data = cap_xmalloc(len + 1),
                     .len = len,
                     .used = ++memo_clock};
  memcpy(m->data, data, len + 1);
}

int cap_filememo_read(const char *path, bool nofollow, size_t max_bytes, char **ret_data,
                      size_t *ret_len)
{
  size_t max = max_bytes < CAP_FILEMEMO_MAX ? max_bytes : CAP_FILEMEMO_MAX;
  bool locked = pthread_mutex_trylock(&memo_lock) == 0;
  if (locked && memo_hit(path, nofollow, max, ret_data, ret_len)) {
    pthread_mutex_unlock(&memo_lock);
    return 0;
  }
  struct stat sb;
  char *data = NULL;
  size_t len = 0;
  int r = read_fd(path, nofollow, max_bytes, &data, &len, &sb);
  if (r == 0 && locked && len <= max)
    memo_keep(path, nofollow, &sb, data, len);
  if (locked)
    pthread_mutex_unlock(&memo_lock);
  if (r < 0)
    return r;
  *ret_data = data;
  *ret_len = len;
  return 0;
}

void cap_filememo_clear(void)
{
  pthread_mutex_lock(&memo_lock);
  for (size_t i = 0; i < MEMO_SLOTS; i++)
    memo_drop(&memos[i]);
  pthread_mutex_unlock(&memo_lock);
}
