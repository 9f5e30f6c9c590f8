/* Unit tests for src/sandbox/relay.c: what reaches a terminal from a tool
 * (terminal_escape), whole and cut at every byte. */
#include <stdlib.h>

#include "core/buf.h"
#include "sandbox/relay.h"
#include "unit.h"

/* text escaped in one call. */
static char *escape_whole(const char *text)
{
  struct cap_buf out = {0};
  terminal_escape(&out, (const unsigned char *)text, strlen(text), NULL, NULL);
  cap_buf_append(&out, "", 1);
  return out.data;
}

/* text escaped in two calls, cut after `cut` bytes, as a pipe may cut it. */
static char *escape_cut(const char *text, size_t cut)
{
  struct cap_buf out = {0};
  unsigned char carry[4];
  size_t n_carry = 0;
  const unsigned char *t = (const unsigned char *)text;
  terminal_escape(&out, t, cut, carry, &n_carry);
  terminal_escape(&out, t + cut, strlen(text) - cut, carry, &n_carry);
  terminal_escape(&out, carry, n_carry, NULL, NULL); /* the end: what is left is malformed */
  cap_buf_append(&out, "", 1);
  return out.data;
}

static const struct {
  const char *in, *want;
} cases[] = {
    {"plain text\tand a tab\n", "plain text\tand a tab\n"},
    {"title:\033]0;x\007", "title:\\x1b]0;x\\x07"},
    {"clear:\033[2J\r", "clear:\\x1b[2J\\x0d"},
    {"del:\x7f", "del:\\x7f"},
    {"csi8:\xc2\x9b"
     "2J",
     "csi8:\\u{009b}2J"},
    {"bidi:\xe2\x80\xae"
     "x\xe2\x81\xa6"
     "y",
     "bidi:\\u{202e}x\\u{2066}y"},
    {"utf8: h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
     "utf8: h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"bad:\xff\xc0\xaf\xed\xa0\x80", "bad:\\xff\\xc0\\xaf\\xed\\xa0\\x80"},
    {"short:\xe2\x82", "short:\\xe2\\x82"},
    {"lead then ascii:\xe2"
     "A",
     "lead then ascii:\\xe2A"},
};

static void test_whole(void)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = escape_whole(cases[i].in);
    CHECK_STR(got, cases[i].want);
    free(got);
  }
}

static void test_cut_everywhere(void)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (size_t cut = 0; cut <= strlen(cases[i].in); cut++) {
      char *got = escape_cut(cases[i].in, cut);
      CHECK_STR(got, cases[i].want);
      free(got);
    }
}

UNIT_MAIN(test_whole, test_cut_everywhere)
