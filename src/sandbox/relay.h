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

/* Copies what is waiting on the pipe. Returns 1 at its end (from is closed
 * and set to -1), 0 while more may come. */
int relay_pump(struct relay *r);
/* After the tool ended: copies what is left, for at most timeout_ms (a
 * writer that escaped to a host process cannot hold capsule), and closes. */
void relay_finish(struct relay *r, int timeout_ms);

#endif
