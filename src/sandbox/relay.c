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
    cap_escape_output(&r->escape, &esc, (const char *)data, n);
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
    if (r->terminal && r->escape.n_carry) { /* a sequence the tool never finished */
      struct cap_buf esc = {0};
      cap_escape_output_end(&r->escape, &esc);
      write_all(r->to, esc.data, esc.len);
      cap_buf_free(&esc);
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
