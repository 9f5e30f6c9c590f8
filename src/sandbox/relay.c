/* The supervisor's copies of a tool's output (relay.h). */
#include "sandbox/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define RELAY_CHUNK 65536

/* The length of the UTF-8 sequence lead byte c starts, 0 if none. */
static size_t utf8_length(unsigned char c)
{
  return c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

/* The code point of a well-formed sequence s[0..len), or -1. */
static long utf8_decode(const unsigned char *s, size_t len)
{
  long cp = s[0] & (0x7f >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return -1;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  static const long least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return -1;
  return cp;
}

/* Code points a terminal or a reader's eye acts on: C1 controls (0x9b is
 * CSI on many terminals) and the direction overrides and isolates. */
static bool is_hidden_control(long cp)
{
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f;
}

/* Escapes in[0..n), keeping a sequence cut at the end in carry when there
 * is one (returns how many bytes it kept there). */
static size_t escape_span(struct cap_buf *out, const unsigned char *in, size_t n,
                          unsigned char *carry)
{
  for (size_t i = 0; i < n;) {
    unsigned char c = in[i];
    if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t') {
      size_t j = i + 1; /* the plain run in one append */
      while (j < n && ((in[j] >= 0x20 && in[j] < 0x7f) || in[j] == '\n' || in[j] == '\t'))
        j++;
      cap_buf_append(out, (const char *)in + i, j - i);
      i = j;
      continue;
    }
    size_t len = utf8_length(c);
    if (len && i + len > n && carry) { /* cut: finish it next time */
      memcpy(carry, in + i, n - i);
      return n - i;
    }
    long cp = len && i + len <= n ? utf8_decode(in + i, len) : -1;
    if (cp < 0) {
      cap_buf_printf(out, "\\x%02x", c);
      i++;
    } else if (is_hidden_control(cp)) {
      cap_buf_printf(out, "\\u{%04lx}", (unsigned long)cp);
      i += len;
    } else {
      cap_buf_append(out, (const char *)in + i, len);
      i += len;
    }
  }
  return 0;
}

void terminal_escape(struct cap_buf *out, const unsigned char *in, size_t n, unsigned char *carry,
                     size_t *n_carry)
{
  if (carry && *n_carry) { /* the sequence the last call cut, completed from in */
    size_t need = utf8_length(carry[0]) - *n_carry;
    if (n < need) {
      memcpy(carry + *n_carry, in, n);
      *n_carry += n;
      return;
    }
    unsigned char seq[4];
    size_t len = *n_carry;
    memcpy(seq, carry, len);
    memcpy(seq + len, in, need);
    escape_span(out, seq, len + need, NULL);
    in += need;
    n -= need;
  }
  size_t kept = escape_span(out, in, n, carry);
  if (carry)
    *n_carry = kept;
}

/* Writes all of buf to fd, waiting when fd is nonblocking and full. */
static void write_all(int fd, const char *buf, size_t len)
{
  while (len) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      if (poll(&p, 1, 1000) <= 0)
        return; /* a terminal that takes nothing for a second loses the rest */
      continue;
    }
    if (w <= 0)
      return; /* the destination is gone: the tool's output goes nowhere */
    buf += w;
    len -= (size_t)w;
  }
}

/* Writes what the tool sent, escaped for a terminal or up to the cap. */
static void relay_deliver(struct relay *r, const unsigned char *data, size_t n)
{
  if (r->terminal) {
    struct cap_buf esc = {0};
    terminal_escape(&esc, data, n, r->carry, &r->n_carry);
    write_all(r->to, esc.data, esc.len);
    cap_buf_free(&esc);
    return;
  }
  size_t take = n;
  if (r->cap && r->copied + n > r->cap)
    take = r->copied < r->cap ? (size_t)(r->cap - r->copied) : 0;
  write_all(r->to, (const char *)data, take);
  r->copied += take;
  if (take < n && !r->cut) {
    static const char note[] = "\n[capsule: the rest of this output was dropped at its size cap]\n";
    write_all(r->to, note, sizeof note - 1);
    r->cut = true;
  }
}

int relay_pump(struct relay *r)
{
  if (r->from < 0)
    return 1;
  unsigned char buf[RELAY_CHUNK];
  ssize_t n = read(r->from, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n <= 0) {
    if (r->terminal && r->n_carry) { /* a sequence the tool never finished */
      struct cap_buf esc = {0};
      terminal_escape(&esc, r->carry, r->n_carry, NULL, NULL);
      write_all(r->to, esc.data, esc.len);
      cap_buf_free(&esc);
      r->n_carry = 0;
    }
    close(r->from);
    r->from = -1;
    return 1;
  }
  relay_deliver(r, buf, (size_t)n);
  return 0;
}

void relay_finish(struct relay *r, int timeout_ms)
{
  uint64_t end = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)timeout_ms;
  while (r->from >= 0) {
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    struct pollfd p = {.fd = r->from, .events = POLLIN};
    if (now >= end || poll(&p, 1, (int)(end - now)) <= 0) {
      close(r->from);
      r->from = -1;
      return;
    }
    relay_pump(r);
  }
}
