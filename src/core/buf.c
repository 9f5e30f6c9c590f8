#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(void)
{
  fputs("capsule: out of memory\n", stderr);
  abort();
}

void *cap_xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (!p)
    oom();
  return p;
}

void *cap_xcalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    oom();
  return p;
}

void *cap_xrealloc(void *p, size_t n)
{
  p = realloc(p, n ? n : 1);
  if (!p)
    oom();
  return p;
}

char *cap_xstrdup(const char *s) { return cap_xstrndup(s, strlen(s)); }

char *cap_xstrndup(const char *s, size_t n)
{
  char *p = cap_xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *cap_xasprintf(const char *fmt, ...)
{
  struct cap_buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  cap_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  return cap_buf_steal(&b);
}

void cap_buf_reserve(struct cap_buf *b, size_t extra)
{
  if (b->len + extra + 1 <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1)
    cap *= 2;
  b->data = cap_xrealloc(b->data, cap);
  b->cap = cap;
}

void cap_buf_append(struct cap_buf *b, const char *s, size_t n)
{
  cap_buf_reserve(b, n);
  if (n) /* an empty piece may come as NULL (protobuf's empty bytes) */
    memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void cap_buf_puts(struct cap_buf *b, const char *s) { cap_buf_append(b, s, strlen(s)); }

void cap_buf_putc(struct cap_buf *b, char c) { cap_buf_append(b, &c, 1); }

void cap_buf_vprintf(struct cap_buf *b, const char *fmt, va_list ap)
{
  /* printed once into the room there is (most text fits 64 bytes or
   * what the buffer has spare), a second time only when it did not fit */
  cap_buf_reserve(b, 63);
  size_t room = b->cap - b->len;
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(b->data + b->len, room, fmt, copy);
  va_end(copy);
  if (n >= 0 && (size_t)n < room) {
    b->len += (size_t)n;
    return;
  }
  b->data[b->len] = '\0'; /* a failed or cut print leaves nothing */
  if (n < 0)
    return;
  cap_buf_reserve(b, (size_t)n);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

void cap_buf_printf(struct cap_buf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cap_buf_vprintf(b, fmt, ap);
  va_end(ap);
}

char *cap_buf_steal(struct cap_buf *b)
{
  char *s = b->data ? b->data : cap_xstrdup("");
  b->data = NULL;
  b->len = b->cap = 0;
  return s;
}

void cap_buf_free(struct cap_buf *b)
{
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

size_t cap_fmt_i64(char out[20], int64_t v)
{
  char tmp[20];
  size_t n = 0, k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do
    tmp[n++] = (char)('0' + u % 10);
  while ((u /= 10) != 0);
  if (v < 0)
    out[k++] = '-';
  while (n)
    out[k++] = tmp[--n];
  return k;
}

void cap_buf_put_i64(struct cap_buf *b, int64_t v)
{
  char num[20];
  cap_buf_append(b, num, cap_fmt_i64(num, v));
}

#define NO_TEXT UINT32_MAX

void cap_buf_put_text(struct cap_buf *b, const char *s)
{
  uint32_t n = s ? (uint32_t)strlen(s) : NO_TEXT;
  cap_buf_append(b, (const char *)&n, sizeof n);
  if (s)
    cap_buf_append(b, s, n);
}

bool cap_buf_get_text(const char **p, const char *end, char **out)
{
  uint32_t n;
  *out = NULL;
  if ((size_t)(end - *p) < sizeof n)
    return false;
  memcpy(&n, *p, sizeof n);
  *p += sizeof n;
  if (n == NO_TEXT)
    return true;
  if ((size_t)(end - *p) < n || memchr(*p, '\0', n))
    return false;
  *out = cap_xstrndup(*p, n);
  *p += n;
  return true;
}
