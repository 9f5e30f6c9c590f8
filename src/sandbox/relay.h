/* Copying a tool's output on the tool's behalf. A tool given a log file
 * holds the file and can truncate or rewrite it; a tool given the caller's
 * terminal can write escape sequences to it. So the sandbox gives the tool
 * a pipe instead, and the supervisor copies the pipe to the file (raw, up
 * to a cap) or to the terminal (escaped: terminal_escape). Single-threaded:
 * the supervisor's loop pumps the relays. */
#ifndef CAPSULE_SANDBOX_RELAY_H
#define CAPSULE_SANDBOX_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

struct relay {
  int from;      /* the read end of the tool's pipe (nonblocking); -1: unused or done */
  int to;        /* a log file or the caller's terminal; not owned */
  bool terminal; /* escape what a terminal would act on */
  uint64_t cap;  /* bytes to copy at most (0: no cap); the rest is read and dropped */
  uint64_t copied;
  bool cut;               /* the cap was reached (and said so in the output) */
  unsigned char carry[4]; /* an unfinished UTF-8 sequence (terminal only) */
  size_t n_carry;
};

/* Copies what is waiting on the pipe. Returns 1 at its end (from is closed
 * and set to -1), 0 while more may come. */
int relay_pump(struct relay *r);
/* After the tool ended: copies what is left, for at most timeout_ms (a
 * writer that escaped to a host process cannot hold capsule), and closes. */
void relay_finish(struct relay *r, int timeout_ms);

/* Appends in[0..n) to out with what a terminal would act on made visible:
 * C0 controls but tab and newline, DEL, C1 controls, malformed UTF-8 as
 * \xNN, and Unicode direction overrides/isolates as \u{XXXX}. A multi-byte
 * sequence cut at the end is kept in carry (*n_carry bytes, at most 4)
 * for the next call; pass carry NULL to escape it as malformed instead. */
void terminal_escape(struct cap_buf *out, const unsigned char *in, size_t n, unsigned char *carry,
                     size_t *n_carry);

#endif
