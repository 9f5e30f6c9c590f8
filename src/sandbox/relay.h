/* Copying a tool's output on the tool's behalf. A tool given a log file
 * holds the file and can truncate or rewrite it; a tool given the caller's
 * terminal can write escape sequences to it. So the sandbox gives the tool
 * a pipe instead, and the supervisor copies the pipe to the file (raw, up
 * to a cap) or to the terminal (escaped: cap_escape_output). Single-threaded:
 * the supervisor's loop pumps the relays. */
#ifndef CAPSULE_SANDBOX_RELAY_H
#define CAPSULE_SANDBOX_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/escape.h"

struct relay {
  int from;      /* the read end of the tool's pipe (nonblocking); -1: unused or done */
  int to;        /* a log file or the caller's terminal; not owned */
  bool terminal; /* escape what a terminal would act on */
  uint64_t cap;  /* bytes to copy at most (0: no cap); the rest is read and dropped */
  uint64_t copied;
  bool cut;                        /* the cap was reached (and said so in the output) */
  struct cap_escape_stream escape; /* terminal only: a UTF-8 sequence a read cut */
};

/* A command's stdio as the sandbox gives it (relay_stdio_prepare). */
#define RELAY_MAX 2 /* stdout and stderr */
struct relay_stdio {
  int stdio[3]; /* the command's stdio */
  int own[3];   /* those of them opened here: closed once the command has them */
  struct relay relays[RELAY_MAX];
  size_t n;
};
#define RELAY_STDIO_INIT                                                                           \
  {                                                                                                \
    .own = { -1, -1, -1 }                                                                          \
  }

/* The command's stdio: given (or capsule's own 0-2 when NULL), except
 * that a terminal reaches the tool only when tty, and a log file never
 * does. stdin from a terminal becomes /dev/null; a terminal on
 * stdout/stderr, and stderr on a regular file, become pipes the supervisor
 * copies (escaped for the terminal; up to log_cap bytes for the file, 0:
 * no cap), so the tool can neither type into the terminal nor truncate the
 * log. stdout shares stderr's pipe when both are the same file (their
 * order kept). 0, or -errno with err set. */
int relay_stdio_prepare(struct relay_stdio *io, const int *given, bool tty, uint64_t log_cap,
                        struct cap_error *err);
/* Closes io->own (the command holds its copies). */
void relay_stdio_close_own(struct relay_stdio *io);
/* Closes everything still open (own and the relays' read ends). */
void relay_stdio_release(struct relay_stdio *io);

/* Copies what is waiting on the pipe. Returns 1 at its end (from is closed
 * and set to -1), 0 while more may come. */
int relay_pump(struct relay *r);
/* After the tool ended: copies what is left, for at most timeout_ms (a
 * writer that escaped to a host process cannot hold capsule), and closes. */
void relay_finish(struct relay *r, int timeout_ms);

#endif
