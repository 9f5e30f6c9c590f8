#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"

bool cap_utf8_valid(const char *str, size_t len, size_t *bad_offset)
{
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t need;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      cp = c & 0x07;
    } else {
      goto bad;
    }
    for (size_t k = 1; k <= need; k++) {
      if (i + k >= len || (s[i + k] & 0xC0) != 0x80)
        goto bad;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      goto bad;
    i += need + 1;
  }
  return true;
bad:
  if (bad_offset)
    *bad_offset = i;
  return false;
}

size_t cap_utf8_decode(const char *str, size_t len, uint32_t *cp)
{
  const unsigned char *s = (const unsigned char *)str;
  if (!len) {
    *cp = 0;
    return 0;
  }
  unsigned char c = s[0];
  size_t need = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
  if (need >= len) {
    *cp = 0xFFFD;
    return 1;
  }
  uint32_t v = need == 0 ? c : need == 1 ? (c & 0x1Fu) : need == 2 ? (c & 0x0Fu) : (c & 0x07u);
  for (size_t k = 1; k <= need; k++)
    v = (v << 6) | (s[k] & 0x3Fu);
  *cp = v;
  return need + 1;
}

size_t cap_utf8_encode(uint32_t cp, char *out)
{
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

int cap_hex_digit(int c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

size_t cap_utf8_length(const char *s, size_t len)
{
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80)
      n++;
  return n;
}

void cap_textpos_init(struct cap_textpos *tp, const char *data, size_t len)
{
  *tp = (struct cap_textpos){.data = data, .len = len, .off = 0, .line = 1, .col = 1};
}

void cap_textpos_at(struct cap_textpos *tp, size_t off, uint32_t *line, uint32_t *col)
{
  if (off > tp->len)
    off = tp->len;
  if (off < tp->off) /* not monotonic: rescan from the start */
    cap_textpos_init(tp, tp->data, tp->len);
  /* eight bytes at a time when they hold no newline: each byte but a
   * UTF-8 continuation (10xxxxxx) is a column (every parse scans its
   * whole text here) */
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  for (size_t i = tp->off; i < off;) {
    size_t end = off - i >= 8 ? i + 8 : off;
    if (end - i == 8) {
      uint64_t x, nl;
      memcpy(&x, tp->data + i, 8);
      nl = x ^ (ones * '\n');
      if (!((nl - ones) & ~nl & highs)) {
        tp->col += 8 - (uint32_t)__builtin_popcountll(x & ~(x << 1) & highs);
        i = end;
        continue;
      }
    }
    for (; i < end; i++) {
      unsigned char c = (unsigned char)tp->data[i];
      if (c == '\n') {
        tp->line++;
        tp->col = 1;
      } else if ((c & 0xC0) != 0x80) {
        tp->col++;
      }
    }
  }
  tp->off = off;
  *line = tp->line;
  *col = tp->col;
}

int cap_read_file(const char *path, size_t max_bytes, char **ret_data, size_t *ret_len,
                  struct cap_error *err)
{
  _cleanup_close_ int fd = -1;
  if (strcmp(path, "-") == 0) {
    fd = dup(STDIN_FILENO);
  } else {
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  }
  if (fd < 0)
    return cap_error_errno(err, errno, "%s: cannot open", path);
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cap_error_errno(err, errno, "%s: cannot stat", path);
  if (S_ISDIR(st.st_mode))
    return cap_error_set(err, EISDIR, "%s: is a directory, not a file", path);
  if (S_ISREG(st.st_mode) && (size_t)st.st_size > max_bytes)
    return cap_error_set(err, EFBIG, "%s: file is %lld bytes; capsule reads at most %zu bytes here",
                         path, (long long)st.st_size, max_bytes);
  struct cap_buf b = {0};
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      cap_buf_free(&b);
      return cap_error_errno(err, e, "%s: cannot read", path);
    }
    if (n == 0)
      break;
    if (b.len + (size_t)n > max_bytes) {
      cap_buf_free(&b);
      return cap_error_set(err, EFBIG, "%s: input is larger than the %zu bytes capsule reads here",
                           path, max_bytes);
    }
    cap_buf_append(&b, chunk, (size_t)n);
  }
  *ret_len = b.len;
  *ret_data = cap_buf_steal(&b);
  return 0;
}

int cap_write_text(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = strlen(text);
  ssize_t n = write(fd, text, len);
  int r = n == (ssize_t)len ? 0 : -(errno ? errno : EIO);
  close(fd);
  return r;
}
