/* Unit tests for src/sandbox/relay.c: a tool's output copied through a
 * pipe to a terminal (escaped, with sequences cut across reads finished)
 * or to a log file (raw, up to the cap). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandbox/relay.h"
#include "unit.h"

/* What a relay delivers of the pieces written to its pipe, each pumped
 * on its own (as separate reads). */
static char *relay_pieces(bool terminal, uint64_t cap, const char *const *pieces, size_t n)
{
  int p[2], to = memfd_create("relay-out", MFD_CLOEXEC);
  if (to < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
    return NULL;
  struct relay r = {.from = p[0], .to = to, .terminal = terminal, .cap = cap};
  for (size_t i = 0; i < n; i++) {
    if (write(p[1], pieces[i], strlen(pieces[i])) < 0)
      return NULL;
    relay_pump(&r);
  }
  close(p[1]);
  relay_finish(&r, 1000);
  off_t len = lseek(to, 0, SEEK_CUR);
  char *out = calloc(1, (size_t)len + 1);
  if (pread(to, out, (size_t)len, 0) != len)
    out[0] = '\0';
  close(to);
  return out;
}

static void test_terminal_escaped_across_reads(void)
{
  /* U+202E cut after its first byte, then a malformed lead at the end */
  const char *pieces[] = {"title:\033]0;x\007 \xe2", "\x80\xaex\\y\tz\n\xc2\x9b", "2J \xf0\x9f"};
  char *got = relay_pieces(true, 0, pieces, 3);
  CHECK_STR(got, "title:\\x1b]0;x\\x07 \\u{202e}x\\y\tz\n\\u{009b}2J \\xf0\\x9f");
  free(got);
}

static void test_log_raw_up_to_cap(void)
{
  const char *pieces[] = {"raw:\033[2J", "\xff-more"};
  char *got = relay_pieces(false, 10, pieces, 2);
  CHECK_STR(got,
            "raw:\033[2J\xff-\n[capsule: the rest of this output was dropped at its size cap]\n");
  free(got);
}

UNIT_MAIN(test_terminal_escaped_across_reads, test_log_raw_up_to_cap)
