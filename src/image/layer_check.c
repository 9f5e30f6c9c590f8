/* A layer's entries checked before the store takes the image (image.h):
 * the tar stream (gzip or plain) read header by header, with GNU long
 * names and pax paths, and an entry refused when its path, its hard
 * link's target or its whiteout's target climbs out of the image's root
 * (`../x`, `a/../../x`, `.wh...`). umoci, which applies the layers,
 * contains such paths inside the root; capsule refuses the image instead,
 * so a hostile layer is an error the operator sees. Symlink targets are
 * not refused: inside the sandbox an absolute or climbing link resolves
 * within the image's root, and umoci never writes through one. zstd
 * layers are left to umoci. Malformed tar is left to umoci too, which
 * fails on it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "image/image.h"

#define IN_CHUNK (64u << 10)
#define NAME_MAX_LEN 65536

struct layer_src {
  const unsigned char *mem; /* in memory (the fuzz target), else fd */
  size_t mem_len, mem_off;
  int fd;
  bool gz, eof, done;
  z_stream z;
  unsigned char *in;
};

static ssize_t raw_read(struct layer_src *s, unsigned char *buf, size_t n)
{
  if (s->mem) {
    size_t k = s->mem_len - s->mem_off < n ? s->mem_len - s->mem_off : n;
    memcpy(buf, s->mem + s->mem_off, k);
    s->mem_off += k;
    return (ssize_t)k;
  }
  for (;;) {
    ssize_t k = read(s->fd, buf, n);
    if (k >= 0 || errno != EINTR)
      return k;
  }
}

/* Up to n bytes of the tar stream; fewer only at its end. -1: a read or
 * gzip error (left to umoci to report). */
static ssize_t src_read(struct layer_src *s, unsigned char *buf, size_t n)
{
  if (!s->gz)
    return raw_read(s, buf, n);
  s->z.next_out = buf;
  s->z.avail_out = (uInt)n;
  while (s->z.avail_out && !s->done) {
    if (s->z.avail_in == 0 && !s->eof) {
      ssize_t k = raw_read(s, s->in, IN_CHUNK);
      if (k < 0)
        return -1;
      s->eof = k == 0;
      s->z.next_in = s->in;
      s->z.avail_in = (uInt)k;
    }
    int r = inflate(&s->z, Z_NO_FLUSH);
    if (r == Z_STREAM_END) { /* another gzip member may follow */
      if (s->z.avail_in == 0 && s->eof)
        s->done = true;
      else if (inflateReset(&s->z) != Z_OK)
        return -1;
    } else if (r == Z_BUF_ERROR && s->eof && s->z.avail_in == 0) {
      s->done = true; /* truncated: umoci says so */
    } else if (r != Z_OK) {
      return -1;
    }
  }
  return (ssize_t)(n - s->z.avail_out);
}

static bool skip(struct layer_src *s, uint64_t n)
{
  unsigned char buf[8192];
  while (n) {
    size_t want = n < sizeof buf ? (size_t)n : sizeof buf;
    if (src_read(s, buf, want) != (ssize_t)want)
      return false;
    n -= want;
  }
  return true;
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

/* Whether path, taken from the root, ever goes above it. */
static bool climbs_out(const char *path)
{
  long depth = 0;
  for (const char *p = path; *p;) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.') {
      if (--depth < 0)
        return true;
    } else if (len && !(len == 1 && p[0] == '.')) {
      depth++;
    }
    p += len + (end ? 1 : 0);
  }
  return false;
}

/* A whiteout's target (".wh.NAME" removes NAME beside it), or NULL. */
static char *whiteout_target(const char *path)
{
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, ".wh.", 4) != 0 || strcmp(base, ".wh..wh..opq") == 0)
    return NULL;
  return cap_xasprintf("%.*s%s", (int)(base - path), path, base + 4);
}

static int refuse(size_t index, const char *what, const char *path, struct cap_error *err)
{
  return cap_error_set(err, EXDEV,
                       "layer %zu: %s \"%s\" climbs out of the image's root (a hostile or broken "
                       "layer; nothing was stored)",
                       index, what, path);
}

static int check_entry(size_t index, char type, const char *name, const char *link,
                       struct cap_error *err)
{
  if (climbs_out(name))
    return refuse(index, "the entry", name, err);
  if (type == '1' && climbs_out(link))
    return refuse(index, "the hard link's target", link, err);
  _cleanup_free_ char *target = whiteout_target(name);
  const char *base = target ? strrchr(target, '/') : NULL;
  base = base ? base + 1 : target;
  if (target && (climbs_out(target) || strcmp(base, "..") == 0 || strcmp(base, ".") == 0))
    return refuse(index, "the whiteout", name, err);
  return 0;
}

/* "LEN key=value\n" records: path and linkpath for the next entry. */
static void pax_records(const char *data, size_t len, char **path, char **link)
{
  size_t off = 0;
  while (off < len) {
    char *end;
    unsigned long rec = strtoul(data + off, &end, 10);
    if (end == data + off || *end != ' ' || rec == 0 || rec > len - off)
      return;
    const char *kv = end + 1, *stop = data + off + rec - 1; /* the '\n' */
    const char *eq = memchr(kv, '=', (size_t)(stop - kv));
    if (eq && (size_t)(eq - kv) == 4 && memcmp(kv, "path", 4) == 0) {
      free(*path);
      *path = cap_xstrndup(eq + 1, (size_t)(stop - eq - 1));
    } else if (eq && (size_t)(eq - kv) == 8 && memcmp(kv, "linkpath", 8) == 0) {
      free(*link);
      *link = cap_xstrndup(eq + 1, (size_t)(stop - eq - 1));
    }
    off += rec;
  }
}

/* The data of a long-name or pax header entry, NUL-terminated. */
static char *read_meta(struct layer_src *s, int64_t size)
{
  if (size < 0 || size > NAME_MAX_LEN)
    return NULL;
  char *data = cap_xmalloc((size_t)size + 1);
  size_t padded = ((size_t)size + 511) / 512 * 512;
  if (src_read(s, (unsigned char *)data, (size_t)size) != size || !skip(s, padded - (size_t)size)) {
    free(data);
    return NULL;
  }
  data[size] = '\0';
  return data;
}

static int walk(struct layer_src *s, size_t index, struct cap_error *err)
{
  _cleanup_free_ char *long_name = NULL, *long_link = NULL;
  unsigned char h[512];
  for (;;) {
    if (src_read(s, h, 512) != 512)
      return 0; /* the end, or a fault umoci reports */
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
      zero = h[i] == 0;
    if (zero)
      return 0;
    int64_t size = tar_number(h + 124, 12);
    char type = (char)h[156];
    if (size < 0)
      return 0;
    if (type == 'L' || type == 'K' || type == 'x') {
      _cleanup_free_ char *meta = read_meta(s, size);
      if (!meta)
        return 0;
      if (type == 'L') {
        free(long_name);
        long_name = steal_pointer(&meta);
      } else if (type == 'K') {
        free(long_link);
        long_link = steal_pointer(&meta);
      } else {
        pax_records(meta, (size_t)size, &long_name, &long_link);
      }
      continue;
    }
    char name[260], link[101];
    size_t plen = strnlen((const char *)h + 345, 155), nlen = strnlen((const char *)h, 100);
    if (plen && memcmp(h + 257, "ustar", 5) == 0)
      snprintf(name, sizeof name, "%.*s/%.*s", (int)plen, h + 345, (int)nlen, h);
    else
      snprintf(name, sizeof name, "%.*s", (int)nlen, h);
    snprintf(link, sizeof link, "%.*s", (int)strnlen((const char *)h + 157, 100), h + 157);
    int r = type == 'g' ? 0
                        : check_entry(index, type, long_name ? long_name : name,
                                      long_link ? long_link : link, err);
    if (r < 0)
      return r;
    free(long_name);
    free(long_link);
    long_name = long_link = NULL;
    if (!skip(s, ((uint64_t)size + 511) / 512 * 512))
      return 0;
  }
}

static int check(struct layer_src *s, const char *media_type, size_t index, struct cap_error *err)
{
  if (strstr(media_type, "zstd"))
    return 0;
  s->gz = strstr(media_type, "gzip") != NULL;
  if (s->gz) {
    s->in = cap_xmalloc(IN_CHUNK);
    if (inflateInit2(&s->z, 15 + 32) != Z_OK) {
      free(s->in);
      return cap_error_set(err, ENOMEM, "cannot start zlib");
    }
  }
  int r = walk(s, index, err);
  if (s->gz) {
    inflateEnd(&s->z);
    free(s->in);
  }
  return r;
}

int image_layer_check(int fd, const char *media_type, size_t index, struct cap_error *err)
{
  struct layer_src s = {.fd = fd};
  return check(&s, media_type, index, err);
}

int image_layer_check_mem(const unsigned char *data, size_t len, const char *media_type,
                          size_t index, struct cap_error *err)
{
  struct layer_src s = {.mem = data, .mem_len = len, .fd = -1};
  return check(&s, media_type, index, err);
}
