/* A dynamic capability's cached tools (gateway/selu.h), parsed and every
 * schema compiled once per version of the cache file, shared by the calls
 * that name them: a warm call otherwise read, parsed and compiled every
 * tool's schema to find its own. A version is the file's device, inode,
 * size, modification and change times as its open descriptor says
 * (gw_tools_cache_store writes a new file and renames it over the old;
 * any edit in place moves the times), looked up with one stat; a new
 * version is what its open descriptor reads, keyed as that descriptor
 * says, so a version never keeps another's tools. An MCP
 * server's tools lose their own policy (gw_tools_drop_server_policy):
 * the runtime is part of the key. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/buf.h"
#include "gateway/selu.h"
#include "manifest/model.h"

enum { SLOTS = 32 };

struct held {
  struct gw_tools t;
  char *path;
  enum cap_runtime_kind kind;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtim, ctim;
  unsigned refs; /* the calls holding it, plus one while in a slot */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct held *slots[SLOTS];
static unsigned next_slot;

static bool same(const struct held *h, const char *path, enum cap_runtime_kind kind,
                 const struct stat *sb)
{
  return h->kind == kind && h->dev == sb->st_dev && h->ino == sb->st_ino &&
         h->size == sb->st_size && h->mtim.tv_sec == sb->st_mtim.tv_sec &&
         h->mtim.tv_nsec == sb->st_mtim.tv_nsec && h->ctim.tv_sec == sb->st_ctim.tv_sec &&
         h->ctim.tv_nsec == sb->st_ctim.tv_nsec && strcmp(h->path, path) == 0;
}

static void held_unref(struct held *h) /* under mu */
{
  if (h && --h->refs == 0) {
    gw_tools_free(&h->t);
    free(h->path);
    free(h);
  }
}

/* Under mu: the version path's descriptor has, held once more, or NULL */
static struct held *find(const char *path, enum cap_runtime_kind kind, const struct stat *sb)
{
  for (size_t i = 0; i < SLOTS; i++)
    if (slots[i] && same(slots[i], path, kind, sb)) {
      slots[i]->refs++;
      return slots[i];
    }
  return NULL;
}

/* The file's text as fd reads it, or NULL */
static char *read_all(int fd, const struct stat *sb, size_t *len)
{
  if (sb->st_size > (64 << 20))
    return NULL;
  char *text = cap_xmalloc((size_t)sb->st_size + 1);
  ssize_t n = pread(fd, text, (size_t)sb->st_size, 0);
  if (n < 0) {
    free(text);
    return NULL;
  }
  text[n] = '\0';
  *len = (size_t)n;
  return text;
}

/* A new version parsed and compiled (outside mu: it may be long), held
 * by the caller and by a slot, or NULL */
static struct held *load(const char *path, enum cap_runtime_kind kind, int fd,
                         const struct stat *sb)
{
  size_t len = 0;
  _cleanup_free_ char *text = read_all(fd, sb, &len);
  struct gw_tools t;
  struct cap_error ignored = {0};
  int r = text ? gw_tools_parse(text, len, path, &t, &ignored) : -ENOENT;
  cap_error_clear(&ignored);
  if (r < 0)
    return NULL;
  if (kind == CAP_RUNTIME_MCP)
    gw_tools_drop_server_policy(&t);
  struct held *h = cap_xcalloc(1, sizeof *h);
  *h = (struct held){.t = t,
                     .path = cap_xstrdup(path),
                     .kind = kind,
                     .dev = sb->st_dev,
                     .ino = sb->st_ino,
                     .size = sb->st_size,
                     .mtim = sb->st_mtim,
                     .ctim = sb->st_ctim,
                     .refs = 2};
  pthread_mutex_lock(&mu);
  struct held *had = find(path, kind, sb); /* another thread's, meanwhile */
  if (had) {
    pthread_mutex_unlock(&mu);
    h->refs = 1;
    held_unref(h); /* never shared: mu not needed */
    return had;
  }
  size_t at = SLOTS;
  for (size_t i = 0; i < SLOTS && at == SLOTS; i++) /* an older version of the same file's */
    if (slots[i] && slots[i]->kind == kind && strcmp(slots[i]->path, path) == 0)
      at = i;
  for (size_t i = 0; i < SLOTS && at == SLOTS; i++)
    if (!slots[i])
      at = i;
  if (at == SLOTS)
    at = next_slot++ % SLOTS;
  held_unref(slots[at]);
  slots[at] = h;
  pthread_mutex_unlock(&mu);
  return h;
}

const struct gw_tools *gw_tools_cached_hold(const char *cache_dir, const struct cap_spec *spec,
                                            void **hold)
{
  *hold = NULL;
  if (!cache_dir)
    return NULL;
  _cleanup_free_ char *path = cap_xasprintf("%s/%s.tools.json", cache_dir, spec->id);
  struct stat sb;
  if (stat(path, &sb) < 0)
    return NULL;
  pthread_mutex_lock(&mu);
  struct held *h = find(path, spec->runtime.kind, &sb);
  pthread_mutex_unlock(&mu);
  if (!h) { /* a version of its own: what its descriptor reads */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) < 0)
      return NULL;
    h = load(path, spec->runtime.kind, fd, &sb);
  }
  *hold = h;
  return h ? &h->t : NULL;
}

void gw_tools_unhold(void *hold)
{
  if (!hold)
    return;
  pthread_mutex_lock(&mu);
  held_unref(hold);
  pthread_mutex_unlock(&mu);
}
