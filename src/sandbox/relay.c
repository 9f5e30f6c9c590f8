/* The supervisor's copies of a tool's output (relay.h). */
#include "sandbox/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/io.h"

#define RELAY_CHUNK 65536

/* Writes all of buf to fd, waiting when fd is nonblocking and full. A
 * terminal that takes nothing for a second loses the rest; a destination
 * that is gone, all of it: the tool's output goes nowhere. */
static void write_all(int fd, const char *buf, size_t len)
{
  cap_write_all_wait(fd, buf, len, 0, 1000);
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

/* Gives the command's stdout or stderr (fd `to`) a pipe the supervisor
 * copies to `to`; returns the pipe's write end (io's), or -errno. */
static int add_relay(struct relay_stdio *io, int to, bool terminal, uint64_t cap)
{
  int p[2];
  if (io->n == RELAY_MAX || pipe2(p, O_CLOEXEC) < 0)
    return -(errno ? errno : EMFILE);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  io->relays[io->n++] = (struct relay){.from = p[0], .to = to, .terminal = terminal, .cap = cap};
  return p[1];
}

static bool same_file(int a, int b)
{
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

int relay_stdio_prepare(struct relay_stdio *io, const int *given, bool tty, uint64_t log_cap,
                        struct cap_error *err)
{
  for (int i = 0; i < 3; i++)
    io->stdio[i] = given ? given[i] : i;
  if (!tty && isatty(io->stdio[0])) {
    if ((io->own[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
      return cap_error_errno(err, errno, "cannot open /dev/null for the command's stdin");
    io->stdio[0] = io->own[0];
  }
  int caller_stderr = io->stdio[2];
  for (int i = 2; i >= 1; i--) {
    int fd = io->stdio[i];
    struct stat st;
    if (fstat(fd, &st) < 0)
      continue; /* closed: the command's dup2 says so */
    if (i == 1 && io->own[2] >= 0 && same_file(fd, caller_stderr)) {
      io->stdio[1] = io->own[2];
      continue;
    }
    bool terminal = !tty && isatty(fd);
    if (!terminal && !(i == 2 && S_ISREG(st.st_mode)))
      continue;
    int w = add_relay(io, fd, terminal, terminal ? 0 : log_cap);
    if (w < 0)
      return cap_error_errno(err, -w, "cannot make the pipe for the command's %s",
                             i == 1 ? "stdout" : "stderr");
    io->stdio[i] = io->own[i] = w;
  }
  return 0;
}

void relay_stdio_close_own(struct relay_stdio *io)
{
  for (int i = 0; i < 3; i++) {
    if (io->own[i] >= 0)
      close(io->own[i]);
    io->own[i] = -1;
  }
}

void relay_stdio_release(struct relay_stdio *io)
{
  relay_stdio_close_own(io);
  for (size_t i = 0; i < io->n; i++) {
    if (io->relays[i].from >= 0)
      close(io->relays[i].from);
    io->relays[i].from = -1;
  }
}
