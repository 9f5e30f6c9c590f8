/* A layer's tar stream as entries (layer_internal.h): 512-byte headers,
 * GNU long names and link names, pax records (path, linkpath, size,
 * mtime; others ignored), each entry's path cleaned and refused when it
 * or a hard link's target climbs out of the root, then handed to the
 * applier, which reads the entry's data or leaves it to be skipped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "image/layer_internal.h"

#define META_MAX 65536

/* path's components without "", "." and leading slashes, joined by '/';
 * *climbs when a ".." goes above the root. */
char *layer_clean_path(const char *path, bool *climbs)
{
  struct cap_buf b = {0};
  long depth = 0;
  *climbs = false;
  for (const char *p = path; *p;) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    bool dotdot = len == 2 && p[0] == '.' && p[1] == '.';
    if (dotdot && --depth < 0)
      *climbs = true;
    if (len && !(len == 1 && p[0] == '.')) {
      depth += dotdot ? 0 : 1;
      if (b.len)
        cap_buf_append(&b, "/", 1);
      cap_buf_append(&b, p, len);
    }
    p += len + (end ? 1 : 0);
  }
  cap_buf_append(&b, "", 1);
  return cap_buf_steal(&b);
}

static int64_t tar_number(const unsigned char *p, size_t n)
{
  if (p[0] & 0x80) { /* base-256 */
    uint64_t v = p[0] & 0x3f;
    for (size_t i = 1; i < n; i++) {
      if (v >> 55)
        return -1;
      v = (v << 8) | p[i];
    }
    return (int64_t)v;
  }
  int64_t v = 0;
  size_t i = 0;
  while (i < n && p[i] == ' ')
    i++;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
    if (v > (INT64_MAX >> 3))
      return -1;
    v = v * 8 + (p[i] - '0');
  }
  return v;
}

/* What a pax header says for the next entry. */
struct pax {
  char *path, *link;
  int64_t size; /* -1: not given */
  struct timespec mtime;
  bool has_mtime;
};

static void pax_free(struct pax *x)
{
  free(x->path);
  free(x->link);
  *x = (struct pax){.size = -1};
}

static void pax_time(const char *v, size_t len, struct pax *x)
{
  _cleanup_free_ char *s = cap_xstrndup(v, len);
  char *end;
  long long sec = strtoll(s, &end, 10);
  long nsec = 0;
  if (*end == '.') {
    long scale = 100000000;
    for (char *d = end + 1; *d >= '0' && *d <= '9' && scale; d++, scale /= 10)
      nsec += (*d - '0') * scale;
  }
  x->mtime = (struct timespec){.tv_sec = (time_t)sec, .tv_nsec = nsec};
  x->has_mtime = true;
}

/* "LEN key=value\n" records. */
static void pax_records(const char *data, size_t len, struct pax *x)
{
  size_t off = 0;
  while (off < len) {
    char *end;
    unsigned long rec = strtoul(data + off, &end, 10);
    if (end == data + off || *end != ' ' || rec == 0 || rec > len - off)
      return;
    const char *kv = end + 1, *stop = data + off + rec - 1; /* the '\n' */
    const char *eq = kv < stop ? memchr(kv, '=', (size_t)(stop - kv)) : NULL;
    if (eq) {
      size_t klen = (size_t)(eq - kv), vlen = (size_t)(stop - eq - 1);
      if (klen == 4 && memcmp(kv, "path", 4) == 0) {
        free(x->path);
        x->path = cap_xstrndup(eq + 1, vlen);
      } else if (klen == 8 && memcmp(kv, "linkpath", 8) == 0) {
        free(x->link);
        x->link = cap_xstrndup(eq + 1, vlen);
      } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
        _cleanup_free_ char *v = cap_xstrndup(eq + 1, vlen);
        char *e2;
        long long n = strtoll(v, &e2, 10);
        x->size = *e2 || n < 0 ? -1 : n;
      } else if (klen == 5 && memcmp(kv, "mtime", 5) == 0) {
        pax_time(eq + 1, vlen, x);
      }
    }
    off += rec;
  }
}

/* The data of a long-name or pax entry, NUL-terminated. */
static char *read_meta(struct layer_reader *r, int64_t size)
{
  if (size < 0 || size > META_MAX)
    return NULL;
  char *data = cap_xmalloc((size_t)size + 1);
  uint64_t padded = ((uint64_t)size + 511) / 512 * 512;
  if (layer_read_exact(r, data, (size_t)size) < 0 || layer_skip(r, padded - (uint64_t)size) < 0) {
    free(data);
    return NULL;
  }
  data[size] = '\0';
  return data;
}

static int refuse(size_t index, const char *what, const char *path, struct cap_error *err)
{
  return cap_error_set(err, EXDEV,
                       "layer %zu: %s \"%s\" climbs out of the image's root (a hostile or broken "
                       "layer; nothing was stored)",
                       index, what, path);
}

static int bad_tar(size_t index, const char *why, struct cap_error *err)
{
  return cap_error_set(err, EBADMSG, "layer %zu is not a valid tar stream: %s", index, why);
}

/* The entry the header h (and the pax or long names before it) describes. */
static int read_entry(const unsigned char *h, struct pax *x, struct layer_entry *e, size_t index,
                      struct cap_error *err)
{
  char name[260], link[101];
  size_t plen = strnlen((const char *)h + 345, 155), nlen = strnlen((const char *)h, 100);
  if (plen && memcmp(h + 257, "ustar", 5) == 0)
    snprintf(name, sizeof name, "%.*s/%.*s", (int)plen, h + 345, (int)nlen, h);
  else
    snprintf(name, sizeof name, "%.*s", (int)nlen, h);
  snprintf(link, sizeof link, "%.*s", (int)strnlen((const char *)h + 157, 100), h + 157);
  int64_t size = x->size >= 0 ? x->size : tar_number(h + 124, 12);
  int64_t mode = tar_number(h + 100, 8), mtime = tar_number(h + 136, 12);
  if (size < 0 || mode < 0)
    return bad_tar(index, "a header's size or mode is not a number", err);
  e->type = (char)h[156];
  e->size = (uint64_t)size;
  e->mode = (mode_t)mode & 01777; /* no setuid, no setgid */
  e->mtime = x->has_mtime ? x->mtime : (struct timespec){.tv_sec = mtime > 0 ? mtime : 0};
  bool climbs;
  e->path = layer_clean_path(x->path ? x->path : name, &climbs);
  if (climbs)
    return refuse(index, "the entry", x->path ? x->path : name, err);
  if (e->type == '1') {
    e->link = layer_clean_path(x->link ? x->link : link, &climbs);
    if (climbs || !*e->link)
      return refuse(index, "the hard link's target", x->link ? x->link : link, err);
  } else {
    e->link = cap_xstrdup(x->link ? x->link : link);
  }
  if (!strchr("01234567", e->type) && e->type != '\0')
    return cap_error_set(err, ENOTSUP,
                         "layer %zu: \"%s\" is a tar entry of type '%c', which capsule does not "
                         "apply (sparse files and vendor types are not in OCI layers)",
                         index, e->path, e->type >= 0x20 && e->type < 0x7f ? e->type : '?');
  return 0;
}

int layer_walk(struct layer_reader *r, size_t index, layer_entry_fn *apply, void *arg,
               struct cap_error *err)
{
  struct pax x = {.size = -1};
  unsigned char h[512];
  int k = 0;
  for (;;) {
    const unsigned char *first;
    ssize_t got = layer_get(r, 512, &first);
    if (got <= 0) { /* the end without the two zero blocks is tolerated, as tar does */
      k = (int)got;
      break;
    }
    memcpy(h, first, (size_t)got);
    k = layer_read_exact(r, h + got, 512 - (size_t)got);
    if (k < 0)
      break;
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
      zero = h[i] == 0;
    if (zero)
      break;
    char type = (char)h[156];
    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
      _cleanup_free_ char *meta = read_meta(r, tar_number(h + 124, 12));
      if (!meta) {
        k = r->fault ? r->fault : bad_tar(index, "a long name or pax header is too long", err);
        break;
      }
      int64_t len = tar_number(h + 124, 12);
      if (type == 'L') {
        free(x.path);
        x.path = steal_pointer(&meta);
      } else if (type == 'K') {
        free(x.link);
        x.link = steal_pointer(&meta);
      } else if (type == 'x') {
        pax_records(meta, (size_t)len, &x);
      }
      continue;
    }
    struct layer_entry e = {0};
    k = read_entry(h, &x, &e, index, err);
    if (k == 0)
      k = apply(arg, &e, r, index, err);
    if (k == 0 && !e.consumed)
      k = layer_skip(r, e.size);
    if (k == 0)
      k = layer_skip(r, (512 - e.size % 512) % 512);
    free(e.path);
    free(e.link);
    pax_free(&x);
    if (k < 0)
      break;
  }
  pax_free(&x);
  return k;
}
