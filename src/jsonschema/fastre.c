/* A small exact matcher for the patterns JSON Schemas use most, beside
 * PCRE2 (regex.c): anchored sequences of character sets with greedy
 * quantifiers run as a bit-parallel NFA, and such sets in groups with
 * alternatives as a DFA made at compile time; the rest stays with PCRE2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "jsonschema/internal.h"

/* ---- a small exact matcher for simple anchored patterns ----
 *
 * "^" atom* "$", where an atom is a character set (a literal, a class, or
 * \d \D \w \W \s \S) with an optional greedy quantifier, is matched here
 * without PCRE2, and so are such sets in groups with alternatives (a DFA,
 * below); everything else (".", lookarounds, backreferences, \u escapes,
 * non-ASCII literals, lazy quantifiers...) keeps PCRE2. A set is
 * 128 ASCII bits plus what it does with non-ASCII code points: none, all,
 * ECMA's white space only (\s) or everything but it (\S, [^\s]). That is
 * exactly what the translation above hands PCRE2 (UTF mode, no UCP: \d and
 * \w are ASCII; \s is ECMA's list), except "\S" inside a class, which the
 * translation leaves to PCRE2's own ASCII reading: such classes stay with
 * PCRE2. Quantifiers count code points, as PCRE2 in UTF mode does. */

enum { NA_NONE, NA_ALL, NA_SPACE, NA_NOTSPACE };

static void set_add(struct fre_set *s, unsigned ch) { s->bits[ch >> 6] |= 1ULL << (ch & 63); }

static void set_range(struct fre_set *s, unsigned lo, unsigned hi)
{
  for (unsigned ch = lo; ch <= hi; ch++)
    set_add(s, ch);
}

static uint8_t na_union(uint8_t a, uint8_t b)
{
  if (a == NA_NONE)
    return b;
  if (b == NA_NONE || a == b)
    return a;
  return NA_ALL; /* ALL with anything, SPACE with NOTSPACE */
}

static uint8_t na_negate(uint8_t a)
{
  static const uint8_t neg[] = {NA_ALL, NA_NONE, NA_NOTSPACE, NA_SPACE};
  return neg[a];
}

static void set_union(struct fre_set *s, const struct fre_set *t)
{
  s->bits[0] |= t->bits[0];
  s->bits[1] |= t->bits[1];
  s->na = na_union(s->na, t->na);
}

static void set_negate(struct fre_set *s)
{
  s->bits[0] = ~s->bits[0];
  s->bits[1] = ~s->bits[1];
  s->na = na_negate(s->na);
}

static bool set_disjoint(const struct fre_set *a, const struct fre_set *b)
{
  if ((a->bits[0] & b->bits[0]) || (a->bits[1] & b->bits[1]))
    return false;
  if (a->na == NA_NONE || b->na == NA_NONE)
    return true;
  return (a->na == NA_SPACE && b->na == NA_NOTSPACE) || (a->na == NA_NOTSPACE && b->na == NA_SPACE);
}

/* ECMA-262 WhiteSpace and LineTerminator above ASCII */
static bool ecma_space_cp(uint32_t cp)
{
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

static void set_ascii_space(struct fre_set *s)
{
  set_range(s, '\t', '\r'); /* \t \n \v \f \r */
  set_add(s, ' ');
}

/* \d \D \w \W \s \S as a set; false for other letters */
static bool class_escape(char c, bool in_class, struct fre_set *s)
{
  memset(s, 0, sizeof(*s));
  switch (c) {
  case 'd':
  case 'D': set_range(s, '0', '9'); break;
  case 'w':
  case 'W':
    set_range(s, '0', '9');
    set_range(s, 'a', 'z');
    set_range(s, 'A', 'Z');
    set_add(s, '_');
    break;
  case 's':
    set_ascii_space(s);
    s->na = NA_SPACE;
    break;
  case 'S':
    if (in_class)
      return false; /* translated to PCRE2's ASCII \S: left to PCRE2 */
    set_ascii_space(s);
    s->na = NA_SPACE;
    break;
  default: return false;
  }
  if (c == 'D' || c == 'W' || c == 'S')
    set_negate(s);
  return true;
}

/* One character of an escape that stands for itself (or a control
 * character); -1 when this matcher does not take it. */
static int char_escape(const char *src, size_t len, size_t i, bool in_class, size_t *used)
{
  char c = src[i + 1];
  *used = 2;
  switch (c) {
  case 't': return '\t';
  case 'n': return '\n';
  case 'r': return '\r';
  case 'f': return '\f';
  case 'v': return '\v';
  case '0':
    if (i + 2 < len && src[i + 2] >= '0' && src[i + 2] <= '9')
      return -1;
    return 0;
  case 'x': {
    uint32_t cp;
    if (!js_hexn(src + i + 2, len - i - 2, 2, &cp) || cp >= 0x80)
      return -1;
    *used = 4;
    return (int)cp;
  }
  case '-': return in_class ? '-' : -1;
  default:
    if (strchr("^$\\.*+?()[]{}|/", c) && c != '\0')
      return (unsigned char)c;
    return -1;
  }
}

/* a bracketed class at src[i] == '['; bytes consumed, 0 when not taken */
static size_t parse_class(const char *src, size_t len, size_t i, struct fre_set *out)
{
  size_t j = i + 1;
  bool negate = false;
  memset(out, 0, sizeof(*out));
  if (j < len && src[j] == '^') {
    negate = true;
    j++;
  }
  if (j < len && src[j] == ']')
    return 0; /* "[]" / "[^]": rare, left to PCRE2 */
  for (;;) {
    if (j >= len)
      return 0;
    char c = src[j];
    if (c == ']')
      break;
    if (c == '[' || (unsigned char)c >= 0x80)
      return 0;
    int lo;
    if (c == '\\') {
      if (j + 1 >= len)
        return 0;
      struct fre_set cls;
      if (class_escape(src[j + 1], true, &cls)) {
        if (j + 2 < len && src[j + 2] == '-' && j + 3 < len && src[j + 3] != ']')
          return 0; /* a class escape as a range end */
        set_union(out, &cls);
        j += 2;
        continue;
      }
      size_t used;
      lo = char_escape(src, len, j, true, &used);
      if (lo < 0)
        return 0;
      j += used;
    } else {
      lo = (unsigned char)c;
      j++;
    }
    if (j + 1 < len && src[j] == '-' && src[j + 1] != ']') {
      int hi;
      char d = src[j + 1];
      if (d == '\\') {
        size_t used;
        if (j + 2 >= len)
          return 0;
        hi = char_escape(src, len, j + 1, true, &used);
        if (hi < 0)
          return 0;
        j += 1 + used;
      } else {
        if (d == '[' || (unsigned char)d >= 0x80)
          return 0;
        hi = (unsigned char)d;
        j += 2;
      }
      if (hi < lo)
        return 0;
      set_range(out, (unsigned)lo, (unsigned)hi);
    } else {
      set_add(out, (unsigned)lo);
    }
  }
  if (negate)
    set_negate(out);
  return j + 1 - i;
}

static size_t parse_quantifier(const char *src, size_t len, size_t i, uint32_t *min, uint32_t *max)
{
  *min = *max = 1;
  if (i >= len)
    return 0;
  size_t j = i;
  switch (src[i]) {
  case '*': *min = 0, *max = FRE_INF, j++; break;
  case '+': *min = 1, *max = FRE_INF, j++; break;
  case '?': *min = 0, *max = 1, j++; break;
  case '{': {
    uint64_t a = 0, b;
    size_t k = i + 1;
    if (k >= len || src[k] < '0' || src[k] > '9')
      return SIZE_MAX;
    while (k < len && src[k] >= '0' && src[k] <= '9' && a <= 100000)
      a = a * 10 + (uint64_t)(src[k++] - '0');
    b = a;
    if (k < len && src[k] == ',') {
      k++;
      if (k < len && src[k] == '}') {
        b = FRE_INF;
      } else {
        if (k >= len || src[k] < '0' || src[k] > '9')
          return SIZE_MAX;
        b = 0;
        while (k < len && src[k] >= '0' && src[k] <= '9' && b <= 100000)
          b = b * 10 + (uint64_t)(src[k++] - '0');
      }
    }
    if (k >= len || src[k] != '}' || a > 65535 || (b != FRE_INF && (b > 65535 || b < a)))
      return SIZE_MAX;
    *min = (uint32_t)a;
    *max = (uint32_t)b;
    j = k + 1;
    break;
  }
  default: return 0;
  }
  if (j < len && (src[j] == '?' || src[j] == '*' || src[j] == '+' || src[j] == '{'))
    return SIZE_MAX; /* lazy or doubled quantifiers: PCRE2 */
  return j - i;
}

static void nfa_state(struct js_fastre *f, const struct fre_set *s, bool loop, bool opt)
{
  uint64_t bit = 1ULL << ++f->n_states;
  for (unsigned ch = 0; ch < 128; ch++)
    if (s->bits[ch >> 6] & (1ULL << (ch & 63)))
      f->ascii[ch] |= bit;
  if (s->na == NA_ALL || s->na == NA_SPACE)
    f->na_space |= bit;
  if (s->na == NA_ALL || s->na == NA_NOTSPACE)
    f->na_other |= bit;
  if (loop)
    f->loop |= bit;
  if (opt)
    f->opt |= bit;
}

/* ---- patterns with groups: a Glushkov automaton made deterministic ----
 *
 * "^" body "$" where the body is made of the same character sets, groups
 * "(...)" and "(?:...)" with alternatives "|" inside, and greedy
 * quantifiers on either. With no backreference or lookaround, whether the
 * whole string matches depends only on the language of the body, which is
 * what a backtracking engine (PCRE2, ECMA) explores too; each position of
 * the automaton takes one code point. Counted quantifiers are written out
 * as copies (at most FRE_MAX_POS positions in all), and the subset
 * construction gives up beyond FRE_MAX_DFA states: PCRE2 then. */

struct glushkov {
  const char *src;
  size_t end;
  unsigned npos, depth, work;
  struct fre_set sets[FRE_MAX_POS + 1]; /* by position, from 1 */
  uint64_t follow[FRE_MAX_POS + 1];     /* positions that may come next; [0]: the start */
};

/* a sub-expression: its first and last positions, and whether it may match "" */
struct frag {
  uint64_t first, last;
  bool nullable;
};

static void frag_loop(struct glushkov *g, const struct frag *a)
{
  for (uint64_t l = a->last; l; l &= l - 1)
    g->follow[__builtin_ctzll(l)] |= a->first;
}

static void frag_concat(struct glushkov *g, struct frag *a, const struct frag *b)
{
  for (uint64_t l = a->last; l; l &= l - 1)
    g->follow[__builtin_ctzll(l)] |= b->first;
  a->first |= a->nullable ? b->first : 0;
  a->last = b->last | (b->nullable ? a->last : 0);
  a->nullable = a->nullable && b->nullable;
}

static size_t gl_seq(struct glushkov *g, size_t i, struct frag *out);

/* one set or group at src[i], without its quantifier: where it ends, or 0 */
static size_t gl_atom(struct glushkov *g, size_t i, struct frag *out)
{
  const char *src = g->src;
  size_t end = g->end;
  if (++g->work > 4096) /* copies of copies of empty groups */
    return 0;
  char c = src[i];
  if (c == '(') {
    size_t j = i + 1;
    if (j < end && src[j] == '?') {
      if (j + 1 >= end || src[j + 1] != ':')
        return 0; /* lookarounds and named groups: PCRE2 */
      j += 2;
    }
    if (++g->depth > 32)
      return 0;
    size_t k = gl_seq(g, j, out);
    while (k && k < end && src[k] == '|') {
      struct frag b;
      k = gl_seq(g, k + 1, &b);
      out->first |= b.first;
      out->last |= b.last;
      out->nullable |= b.nullable;
    }
    g->depth--;
    if (!k || k >= end || src[k] != ')')
      return 0;
    return k + 1;
  }
  struct fre_set set;
  size_t n;
  if (c == '[') {
    n = parse_class(src, end, i, &set);
    if (!n)
      return 0;
  } else if (c == '\\') {
    if (i + 1 >= end)
      return 0;
    if (class_escape(src[i + 1], false, &set)) {
      n = 2;
    } else {
      int ch = char_escape(src, end, i, false, &n);
      if (ch < 0)
        return 0;
      memset(&set, 0, sizeof(set));
      set_add(&set, (unsigned)ch);
    }
  } else {
    if ((unsigned char)c >= 0x80 || strchr("^$.*+?()[]{}|", c))
      return 0;
    memset(&set, 0, sizeof(set));
    set_add(&set, (unsigned char)c);
    n = 1;
  }
  if (g->npos == FRE_MAX_POS)
    return 0;
  unsigned pos = ++g->npos;
  g->sets[pos] = set;
  g->follow[pos] = 0;
  out->first = out->last = 1ULL << pos;
  out->nullable = false;
  return i + n;
}

/* a sequence of quantified atoms up to "|", ")" or the end: where it stops, or 0 */
static size_t gl_seq(struct glushkov *g, size_t i, struct frag *out)
{
  *out = (struct frag){0, 0, true};
  while (i < g->end && g->src[i] != '|' && g->src[i] != ')') {
    unsigned save = g->npos;
    struct frag a;
    size_t j = gl_atom(g, i, &a);
    if (!j)
      return 0;
    uint32_t min, max;
    size_t q = parse_quantifier(g->src, g->end, j, &min, &max);
    if (q == SIZE_MAX)
      return 0;
    if (min == 1 && max == 1) {
      frag_concat(g, out, &a);
      i = j + q;
      continue;
    }
    /* min copies, then max - min optional ones, or one more repeated */
    uint32_t copies = max == FRE_INF ? (min ? min : 1) : max;
    if (copies > FRE_MAX_POS)
      return 0;
    g->npos = save; /* each copy parsed again, with positions of its own */
    for (uint32_t r = 0; r < copies; r++) {
      struct frag b;
      if (!gl_atom(g, i, &b))
        return 0;
      if (max == FRE_INF && r + 1 == copies)
        frag_loop(g, &b);
      if (r >= min)
        b.nullable = true;
      frag_concat(g, out, &b);
    }
    i = j + q;
  }
  return i;
}

/* f->dfa for the whole pattern, or false */
static bool build_dfa(struct cap_js_validator *v, struct js_fastre *f, const char *src, size_t len)
{
  struct glushkov *g = cap_xcalloc(1, sizeof(*g));
  uint8_t *tbl = NULL;
  bool ok = false;
  g->src = src;
  g->end = len - 1;
  struct frag body;
  if (gl_seq(g, 1, &body) != g->end)
    goto done; /* "|" at the top ("^a|b$" is not anchored twice) or a stray ")" */
  g->follow[0] = body.first;
  uint64_t accept = body.last | (body.nullable ? 1 : 0);
  uint64_t sym[FRE_SYMS] = {0};
  for (unsigned pos = 1; pos <= g->npos; pos++) {
    const struct fre_set *st = &g->sets[pos];
    for (unsigned ch = 0; ch < 128; ch++)
      if (st->bits[ch >> 6] & (1ULL << (ch & 63)))
        sym[ch] |= 1ULL << pos;
    if (st->na == NA_ALL || st->na == NA_SPACE)
      sym[FRE_SYM_SPACE] |= 1ULL << pos;
    if (st->na == NA_ALL || st->na == NA_NOTSPACE)
      sym[FRE_SYM_OTHER] |= 1ULL << pos;
  }
  /* subset construction; state 0 is the empty set (dead), 1 the start */
  uint64_t states[FRE_MAX_DFA] = {0, 1};
  unsigned n = 2;
  tbl = cap_xcalloc(FRE_MAX_DFA, FRE_SYMS);
  f->dfa_accept = 0;
  for (unsigned k = 1; k < n; k++) {
    uint64_t next = 0;
    for (uint64_t d = states[k]; d; d &= d - 1)
      next |= g->follow[__builtin_ctzll(d)];
    for (unsigned y = 0; y < FRE_SYMS; y++) {
      uint64_t d = next & sym[y];
      unsigned t = 0;
      while (t < n && states[t] != d)
        t++;
      if (t == n) {
        if (n == FRE_MAX_DFA)
          goto done;
        states[n++] = d;
      }
      tbl[k * FRE_SYMS + y] = (uint8_t)t;
    }
    if (states[k] & accept)
      f->dfa_accept |= 1ULL << k;
  }
  uint8_t *dfa = js_alloc(v, (size_t)n * FRE_SYMS);
  memcpy(dfa, tbl, (size_t)n * FRE_SYMS);
  f->dfa = dfa;
  f->ascii_only = !(sym[FRE_SYM_SPACE] | sym[FRE_SYM_OTHER]);
  ok = true;
done:
  free(tbl);
  free(g);
  return ok;
}

/* the set-and-quantifier atoms of "^...$" into f->atoms; false when the
 * pattern has anything else */
static bool parse_atoms(struct js_fastre *f, const char *src, size_t len)
{
  size_t i = 1, end = len - 1;
  while (i < end) {
    if (f->n_atoms == FRE_MAX_ATOMS)
      return false;
    struct fre_atom *a = &f->atoms[f->n_atoms];
    char c = src[i];
    if (c == '[') {
      size_t n = parse_class(src, end, i, &a->set);
      if (!n)
        return false;
      i += n;
    } else if (c == '\\') {
      if (i + 1 >= end)
        return false;
      if (class_escape(src[i + 1], false, &a->set)) {
        i += 2;
      } else {
        size_t used;
        int ch = char_escape(src, end, i, false, &used);
        if (ch < 0)
          return false;
        memset(&a->set, 0, sizeof(a->set));
        set_add(&a->set, (unsigned)ch);
        i += used;
      }
    } else {
      if ((unsigned char)c >= 0x80 || strchr("^$.*+?()[]{}|", c))
        return false;
      memset(&a->set, 0, sizeof(a->set));
      set_add(&a->set, (unsigned char)c);
      i++;
    }
    size_t q = parse_quantifier(src, end, i, &a->min, &a->max);
    if (q == SIZE_MAX)
      return false;
    i += q;
    f->n_atoms++;
  }
  return i == end;
}

#define FRE_MAX_PATTERN 4096 /* bytes of pattern the small matcher takes at most */

struct js_fastre *js_fastre_compile(struct cap_js_validator *v, const char *src, size_t len)
{
  return js_fastre_compile_with(v, src, len, true);
}

struct js_fastre *js_fastre_compile_with(struct cap_js_validator *v, const char *src, size_t len,
                                         bool use_dfa)
{
  /* long patterns go to PCRE2: building the small matcher re-reads the
   * classes of quantified groups, which a huge pattern would make costly */
  if (len < 2 || len > FRE_MAX_PATTERN || src[0] != '^' || src[len - 1] != '$')
    return NULL;
  /* built at full size, then copied into the arena at its own */
  struct js_fastre *f = cap_xcalloc(1, sizeof(*f) + FRE_MAX_ATOMS * sizeof(f->atoms[0]));
  struct js_fastre *out = NULL;
  bool atoms = parse_atoms(f, src, len);
  /* greedy is exact when no variable atom can give a character to the next */
  f->greedy = atoms;
  for (size_t k = 0; k < f->n_atoms && f->greedy; k++) {
    const struct fre_atom *a = &f->atoms[k];
    if (a->min == a->max || k + 1 == f->n_atoms)
      continue;
    f->greedy = f->atoms[k + 1].min >= 1 && set_disjoint(&a->set, &f->atoms[k + 1].set);
  }
  /* an ASCII pattern of three or more atoms the greedy scan could take is
   * faster on a DFA (one table lookup per character, no per-atom loop) */
  bool ascii = atoms && f->n_atoms >= 3;
  for (size_t k = 0; k < f->n_atoms && ascii; k++)
    ascii = f->atoms[k].set.na == NA_NONE;
  if ((!f->greedy || ascii) && use_dfa && build_dfa(v, f, src, len)) {
    f->greedy = false;
    out = js_alloc(v, sizeof(*out));
    memcpy(out, f, sizeof(*out));
    goto done;
  }
  if (!atoms)
    goto done;
  if (!f->greedy) {
    for (size_t k = 0; k < f->n_atoms; k++) {
      const struct fre_atom *a = &f->atoms[k];
      size_t need = a->max == FRE_INF ? (a->min ? a->min : 1) : a->max;
      if (f->n_states + need > 63)
        goto done;
      if (a->max == FRE_INF) {
        for (uint32_t r = 1; r < a->min; r++)
          nfa_state(f, &a->set, false, false);
        nfa_state(f, &a->set, true, a->min == 0);
      } else {
        for (uint32_t r = 0; r < a->max; r++)
          nfa_state(f, &a->set, false, r >= a->min);
      }
    }
    /* skipping optional states: bit j reaches j+2^k when the 2^k states
     * j+1..j+2^k are all optional */
    uint64_t m = f->opt;
    for (int k = 0; k < 6; k++) {
      f->opt_masks[k] = m;
      m &= m << (1u << k);
    }
  }
  f->ascii_only = true;
  for (size_t k = 0; k < f->n_atoms; k++) {
    struct fre_atom *a = &f->atoms[k];
    f->ascii_only &= a->set.na == NA_NONE;
    for (unsigned ch = 0; ch < 128; ch++)
      a->table[ch] = (a->set.bits[ch >> 6] >> (ch & 63)) & 1;
    for (unsigned ch = 0xC0; ch < 256 && a->set.na != NA_NONE; ch++)
      a->table[ch] = 2;
  }
  size_t n_atoms = f->greedy ? f->n_atoms : 0;
  out = js_alloc(v, sizeof(*out) + n_atoms * sizeof(out->atoms[0]));
  memcpy(out, f, sizeof(*out) + n_atoms * sizeof(out->atoms[0]));
done:
  free(f);
  return out;
}

static inline uint64_t nfa_close(const struct js_fastre *f, uint64_t d)
{
  if (f->opt)
    for (int k = 0; k < 6; k++)
      d |= (d << (1u << k)) & f->opt_masks[k];
  return d;
}

/* the code point at s[*i] (valid UTF-8, non-ASCII lead byte); advances *i */
static inline uint32_t decode_cp(const unsigned char *s, size_t *i)
{
  unsigned char b = s[*i];
  uint32_t cp;
  if (b < 0xE0) {
    cp = ((uint32_t)(b & 0x1F) << 6) | (s[*i + 1] & 0x3F);
    *i += 2;
  } else if (b < 0xF0) {
    cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[*i + 1] & 0x3F) << 6) | (s[*i + 2] & 0x3F);
    *i += 3;
  } else {
    cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[*i + 1] & 0x3F) << 12) |
         ((uint32_t)(s[*i + 2] & 0x3F) << 6) | (s[*i + 3] & 0x3F);
    *i += 4;
  }
  return cp;
}

static inline bool na_has(uint8_t na, uint32_t cp)
{
  switch (na) {
  case NA_ALL: return true;
  case NA_SPACE: return ecma_space_cp(cp);
  case NA_NOTSPACE: return !ecma_space_cp(cp);
  default: return false;
  }
}

static __attribute__((noinline)) bool dfa_match(const struct js_fastre *f, const unsigned char *s,
                                                size_t n)
{
  const uint8_t *t = f->dfa;
  unsigned st = 1;
  size_t i = 0;
  while (i < n) {
    unsigned char b = s[i];
    if (b < 0x80) {
      st = t[st * FRE_SYMS + b];
      i++;
    } else {
      if (f->ascii_only)
        return false;
      st = t[st * FRE_SYMS + (ecma_space_cp(decode_cp(s, &i)) ? FRE_SYM_SPACE : FRE_SYM_OTHER)];
    }
    if (!st)
      return false;
  }
  return (f->dfa_accept >> st) & 1;
}

int js_fastre_match_ascii(const struct js_fastre *f, const char *str, size_t n)
{
  const unsigned char *s = (const unsigned char *)str;
  const uint8_t *t = f->dfa;
  unsigned st = 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char b = s[i];
    if (b >= 0x80)
      return -1;
    st = t[st * FRE_SYMS + b];
    if (!st) { /* rejected: the answer stands if the rest is ASCII too */
      for (i++; i < n; i++)
        if (s[i] >= 0x80)
          return -1;
      return 0;
    }
  }
  return (f->dfa_accept >> st) & 1;
}

bool js_fastre_match(const struct js_fastre *f, const char *str, size_t n)
{
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  if (f->greedy) {
    for (size_t k = 0; k < f->n_atoms; k++) {
      const struct fre_atom *a = &f->atoms[k];
      const uint8_t *tbl = a->table;
      size_t start = i;
      if (a->set.na == NA_NONE) { /* one byte per code point */
        size_t lim = n - i > a->max ? i + a->max : n;
        while (i < lim && tbl[s[i]])
          i++;
        if (i - start < a->min)
          return false;
        continue;
      }
      uint32_t count = 0;
      while (count < a->max && i < n && tbl[s[i]]) {
        if (tbl[s[i]] == 2) {
          size_t j = i;
          if (!na_has(a->set.na, decode_cp(s, &j)))
            break;
          i = j;
        } else {
          i++;
        }
        count++;
      }
      if (count < a->min)
        return false;
    }
    return i == n;
  }
  if (f->dfa)
    return dfa_match(f, s, n);
  uint64_t d = 1; /* before the first state */
  while (i < n) {
    unsigned char b = s[i];
    uint64_t in;
    if (b < 0x80) {
      in = f->ascii[b];
      i++;
    } else {
      if (f->ascii_only)
        return false;
      in = ecma_space_cp(decode_cp(s, &i)) ? f->na_space : f->na_other;
    }
    uint64_t e = nfa_close(f, d);
    d = ((e << 1) | (e & f->loop)) & in;
    if (!d)
      return false;
  }
  return (nfa_close(f, d) >> f->n_states) & 1;
}
