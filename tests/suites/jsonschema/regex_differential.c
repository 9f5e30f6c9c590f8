/* Differential test of src/jsonschema/regex.c's small matcher (greedy scan,
 * bit-parallel automaton, DFA for groups) against the PCRE2 translation of
 * the same ECMA-262 pattern: random anchored patterns of character sets,
 * groups, alternatives and quantifiers, random subjects (ASCII, NUL,
 * non-ASCII and ECMA white space), seeded so every run is the same. Every
 * subject the small matcher is asked about must get PCRE2's answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"
#include "jsonschema/internal.h"

static unsigned long long rng_state = 88172645463325252ULL;

static unsigned rnd(unsigned n)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state % n);
}

#define PICK(a) (a)[rnd(sizeof(a) / sizeof((a)[0]))]

static const char *const sets[] = {
    "a",          "b",       "-",       "\\.",      "\\d",           "\\D",
    "\\w",        "\\W",     "\\s",     "\\S",      "[a-z]",         "[^a-z]",
    "[a-c0-9_-]", "[^@\\s]", "[^/\\0]", "[\\s]",    "[^\\s]",        "[A-Z]",
    "@",          "[\\d.]",  "[^\\d]",  "[\\w-]",   "[^\\w]",        "\\/",
    "[.]",        "\\t",     "[\\t ]",  "\\x41",    "[\\x20-\\x2f]", "[\\-a]",
    "[a\\-z]",    "[^-]",    "/",       "[\\s\\S]", "[\\S]",         "[+*?]",
    "\\+",        "[^\\D]",  "\\n",     "[\\d-]",   "\\0",           "\\(",
    "\\|",        "[()|]",   ".",       "\\b",      "\\1",           "[]",
};
static const char *const quants[] = {
    "",      "",      "",     "",    "*",      "+",  "?",  "{2}",    "{0,3}", "{1,}",
    "{2,5}", "{0,1}", "{3,}", "{0}", "{1,70}", "*?", "+?", "{1,2}?", "{1}",   "{4}",
};
static const char *const pieces[] = {
    "a",
    "b",
    "z",
    "-",
    ".",
    " ",
    "\t",
    "\n",
    "\r",
    "@",
    "/",
    "0",
    "5",
    "_",
    "A",
    "Q",
    "(",
    "|",
    "\xc3\xa9",
    "\xc2\xa0",
    "\xe2\x80\xa8",
    "\xe3\x80\x80",
    "\xf0\x9f\x98\x80",
    "\x0b",
    "+",
    "\\",
    "\xef\xbb\xbf",
    "\xe2\x80\x80",
    "\xe1\x9a\x80",
    "\xe2\x80\x85", /* the rest of ECMA's white space: U+2005, U+200A, U+2029, U+202F, U+205F */
    "\xe2\x80\x8a",
    "\xe2\x80\xa9",
    "\xe2\x80\xaf",
    "\xe2\x81\x9f",
    "\xe2\x80\x8b", /* U+200B: not white space */
    "\0",
};

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
  size_t n = strlen(s);
  if (at + n < cap) {
    memcpy(buf + at, s, n);
    at += n;
  }
  return at;
}

/* a sequence of quantified sets and groups, groups nested up to depth */
static size_t gen_seq(char *buf, size_t at, size_t cap, int depth)
{
  int n = (int)rnd(4);
  for (int k = 0; k < n; k++) {
    if (depth > 0 && rnd(3) == 0) {
      static const char *const opens[] = {"(", "(", "(?:", "(?=", "(?<n>"};
      at = put(buf, at, cap, PICK(opens));
      int alts = 1 + (rnd(3) == 0) + (rnd(4) == 0);
      for (int a = 0; a < alts; a++) {
        if (a)
          at = put(buf, at, cap, "|");
        at = gen_seq(buf, at, cap, depth - 1);
      }
      at = put(buf, at, cap, ")");
    } else {
      at = put(buf, at, cap, PICK(sets));
    }
    at = put(buf, at, cap, PICK(quants));
  }
  return at;
}

/* patterns the bench and real tool schemas use, and their expected path */
static const struct {
  const char *pattern;
  int kind; /* 1 greedy, 2 automaton, 3 DFA */
} fixed[] = {
    {"^[A-Z]{3}-[0-9]{4}$", 3}, /* three ASCII atoms: the DFA rather than greedy */
    {"^[a-z0-9][a-z0-9-]{0,49}$", 1},
    {"^[A-Za-z0-9-]{1,39}$", 1},
    {"^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", 3},
    {"^[a-z]*a[a-z]{7}$", 2}, /* too many DFA states: the automaton */
    {"^(/[^/\\0]+)*/?$", 3},
    {"^[0-9]{5}(-[0-9]{4})?$", 3},
    {"^(?:[a-z]+|[0-9]+)(,(?:[a-z]+|[0-9]+))*$", 3},
};

static int kind_of(const struct js_fastre *f) { return !f ? 0 : f->dfa ? 3 : f->greedy ? 1 : 2; }

int main(void)
{
  struct cap_js_validator v = {0};
  v.arena = cap_doc_new();
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  pcre2_match_context *mctx = pcre2_match_context_create(NULL);
  pcre2_set_match_limit(mctx, 1000000);
  unsigned long patterns = 0, taken[4] = {0}, subjects = 0, matches = 0, failures = 0;
  char err[200];

  for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++) {
    const char *pat = fixed[k].pattern;
    struct js_fastre *f = js_fastre_compile(&v, pat, strlen(pat));
    if (kind_of(f) != fixed[k].kind) {
      printf("FAIL %s: matcher kind %d, expected %d\n", pat, kind_of(f), fixed[k].kind);
      failures++;
    }
  }

  for (int it = 0; it < 40000; it++) {
    char pat[1024];
    size_t pl = 0;
    pat[pl++] = '^';
    pl = gen_seq(pat, pl, sizeof(pat) - 8, 2);
    if (rnd(10) == 0) { /* a top-level alternative: "^a|b$" is not anchored twice */
      pl = put(pat, pl, sizeof(pat) - 8, "|");
      pl = gen_seq(pat, pl, sizeof(pat) - 8, 1);
    }
    pat[pl++] = '$';
    pat[pl] = '\0';
    if (it % 11 == 0)
      pat[0] = 'x';
    pcre2_code *re = js_regex_compile(pat, pl, err, sizeof(err));
    if (!re)
      continue;
    patterns++;
    struct js_fastre *f = js_fastre_compile(&v, pat, pl);
    /* without the DFA, a pattern of sets alone takes the automaton (or the
     * greedy scan, for ASCII patterns the DFA was preferred to) */
    struct js_fastre *nfa = f && f->dfa ? js_fastre_compile_with(&v, pat, pl, false) : NULL;
    taken[kind_of(f)]++;
    if (nfa)
      taken[kind_of(nfa)]++;
    if (!f) {
      pcre2_code_free(re);
      continue;
    }
    for (int t = 0; t < 40; t++) {
      char s[512];
      size_t sl = 0;
      int np = (int)rnd(t < 20 ? 6 : 16);
      for (int q = 0; q < np; q++) {
        const char *pc = PICK(pieces);
        size_t l = pc[0] ? strlen(pc) : 1;
        memcpy(s + sl, pc, l);
        sl += l;
      }
      int rc = pcre2_match(re, (PCRE2_SPTR)s, sl, 0, 0, md, mctx);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
        continue; /* a match limit: the small matcher has none to hit */
      bool want = rc >= 0, got = js_fastre_match(f, s, sl);
      if (nfa && got == want)
        got = js_fastre_match(nfa, s, sl);
      if (f->dfa && got == want) { /* the validator's path for ASCII subjects */
        int a = js_fastre_match_ascii(f, s, sl);
        if (a >= 0)
          got = a == 1;
      }
      subjects++;
      matches += want;
      if (got != want && failures++ < 20) {
        printf("FAIL pattern %s (kind %d%s), subject ", pat, kind_of(f), nfa ? ", automaton" : "");
        for (size_t q = 0; q < sl; q++)
          printf("%02x", (unsigned char)s[q]);
        printf(": PCRE2 %s, small matcher %s\n", want ? "matches" : "does not match",
               got ? "matches" : "does not");
      }
    }
    pcre2_code_free(re);
  }
  printf("%lu patterns: %lu PCRE2 only, %lu greedy (also), %lu automaton (also), %lu DFA; "
         "%lu subjects, %lu matches, %lu failures\n",
         patterns, taken[0], taken[1], taken[2], taken[3], subjects, matches, failures);
  /* the generator must keep exercising every path */
  if (taken[1] < 100 || taken[2] < 100 || taken[3] < 100 || matches < 1000) {
    printf("FAIL: too few patterns on some path\n");
    failures++;
  }
  pcre2_match_context_free(mctx);
  pcre2_match_data_free(md);
  cap_doc_free(v.arena);
  return failures ? 1 : 0;
}
