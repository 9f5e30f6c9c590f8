/* Validating an instance against a compiled schema. The validator is only
 * read: per-call state (dynamic scope, instance path, annotation bitmaps)
 * lives on the C stack, so any number of threads may validate at once and
 * nothing is allocated unless an error is reported (or an instance is huge;
 * see jsonschema.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "jsonschema/internal.h"

/* instance location, one segment per level, on the stack */
struct path {
  const struct path *up;
  const char *key; /* NULL: index */
  size_t keylen;
  size_t index;
};

/* dynamic scope: the schema resources entered so far */
struct scope {
  const struct js_resource *res;
  const struct scope *up;
};

/* evaluated members/items of the current instance, for unevaluated* */
struct ev {
  uint64_t *bits;
  size_t n;
};

struct vctx {
  const struct cap_js_validator *v;
  struct cap_js_errors *errs; /* NULL: verdict only */
  bool first_only;
  int quiet;  /* > 0 inside anyOf/oneOf/not/if/contains branches */
  int rewalk; /* > 0 while members are walked in order after a failed quiet lookup */
  bool aborted;
  uint64_t steps, max_steps;
  unsigned depth, max_depth;
  pcre2_match_data *md;
};

#define EV_STACK_WORDS 8   /* 512 members/items tracked without allocating */
#define LOOKUP_PROPS_MAX 8 /* "properties" looked up one by one, not walked */

static _Thread_local pcre2_match_data *tl_match_data;

static bool stop(const struct vctx *c)
{
  return c->quiet || !c->errs || c->first_only || c->aborted;
}

static bool recording(const struct vctx *c) { return !c->quiet && c->errs && !c->aborted; }

/* decimal digits of v, written backwards ending at end; returns the start */
static char *utoa_back(char *end, unsigned long long v)
{
  do
    *--end = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  return end;
}

static size_t udigits(size_t v)
{
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    n++;
  }
  return n;
}

/* An error message as pieces of known length, so reporting formats
 * nothing: literals, texts made at compile time, numbers written on the
 * stack. A text printed with "%s" before stops at its first NUL; so do
 * these pieces. */
struct piece {
  const char *s;
  size_t n;
};

#define LIT(x) ((struct piece){(x), sizeof(x) - 1})
#define TXT(x, len) ((struct piece){(x), (len)})
#define T(text) ((struct piece){(text).s, (text).n}) /* a struct js_text */

static inline struct piece zpiece(const char *z) { return (struct piece){z, strlen(z)}; }

/* a NUL-terminated name of length n, up to its first NUL */
static inline struct piece keypiece(const char *k, size_t n)
{
  if (n >= 4 && n <= 8) { /* no NUL in two overlapping loads: all of it */
    const uint32_t ones = 0x01010101u, highs = 0x80808080u;
    uint32_t a, b;
    memcpy(&a, k, 4);
    memcpy(&b, k + n - 4, 4);
    if (!(((a - ones) & ~a & highs) | ((b - ones) & ~b & highs)))
      return (struct piece){k, n};
  }
  size_t i = 0;
  while (i < n && k[i])
    i++;
  return (struct piece){k, i};
}

/* v in decimal, written at the end of buf (24 bytes) */
static inline struct piece upiece(char *buf, unsigned long long v)
{
  char *q = utoa_back(buf + 24, v);
  return (struct piece){q, (size_t)(buf + 24 - q)};
}

/* v in decimal, written at the end of buf (25 bytes) */
static inline struct piece ipiece(char *buf, long long v)
{
  if (v >= 0)
    return upiece(buf + 1, (unsigned long long)v);
  struct piece pc = upiece(buf + 1, 0ULL - (unsigned long long)v);
  pc.s--;
  buf[pc.s - buf] = '-';
  pc.n++;
  return pc;
}

#define U(v) upiece((char[24]){0}, (v))
#define I(v) ipiece((char[25]){0}, (v))

static inline size_t key_escapes(const char *k, size_t n)
{
  size_t e = 0;
  for (size_t i = 0; i < n; i++)
    e += (k[i] == '~') + (k[i] == '/');
  return e;
}

/* n bytes from src to dst without a library call for short runs (the
 * pieces of an error are mostly a few to a few dozen bytes) */
static inline void put_bytes(char *dst, const char *src, size_t n)
{
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    memcpy(&a, src, 8);
    memcpy(&b, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + n - 8, &b, 8);
  } else if (n > 16 && n <= 32) {
    uint64_t a, b, x, y;
    memcpy(&a, src, 8);
    memcpy(&b, src + 8, 8);
    memcpy(&x, src + n - 16, 8);
    memcpy(&y, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + 8, &b, 8);
    memcpy(dst + n - 16, &x, 8);
    memcpy(dst + n - 8, &y, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    memcpy(&a, src, 4);
    memcpy(&b, src + n - 4, 4);
    memcpy(dst, &a, 4);
    memcpy(dst + n - 4, &b, 4);
  } else if (n > 0 && n < 4) {
    dst[0] = src[0];
    dst[n / 2] = src[n / 2];
    dst[n - 1] = src[n - 1];
  } else if (n > 32) {
    memcpy(dst, src, n);
  }
}

/* true when k has no '~' or '/' (a pointer segment written as it is) */
static inline bool key_plain(const char *k, size_t n)
{
  const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  if (n < 8) {
    if (n < 4) {
      bool plain = true;
      for (size_t i = 0; i < n; i++)
        plain &= k[i] != '~' && k[i] != '/';
      return plain;
    }
    /* two overlapping 4-byte loads */
    uint32_t a, b;
    memcpy(&a, k, 4);
    memcpy(&b, k + n - 4, 4);
    uint64_t w = (uint64_t)a << 32 | b, t = w ^ (ones * '~'), l = w ^ (ones * '/');
    return (((t - ones) & ~t & highs) | ((l - ones) & ~l & highs)) == 0;
  }
  uint64_t hit = 0;
  for (size_t i = 0;; i += 8) {
    if (i + 8 > n)
      i = n - 8; /* the last word overlaps the one before */
    uint64_t w, t, l;
    memcpy(&w, k + i, 8);
    t = w ^ (ones * '~');
    l = w ^ (ones * '/');
    hit |= ((t - ones) & ~t & highs) | ((l - ones) & ~l & highs);
    if (i + 8 == n)
      break;
  }
  return hit == 0;
}

#define FIRST_MAX_DEPTH 32

/* The first error of a call, written front to back into errs->first_text
 * with no allocation; false (nothing recorded) when it may not fit, and
 * push_error's general path takes it: the text is the same either way. */
static bool push_first(struct cap_js_errors *e, const struct js_schema *s, const char *kw,
                       size_t kwlen, const struct path *p, const struct piece *parts, size_t nparts)
{
  const struct path *segs[FIRST_MAX_DEPTH];
  size_t depth = 0;
  for (const struct path *q = p; q; q = q->up) {
    if (depth == FIRST_MAX_DEPTH)
      return false;
    segs[depth++] = q;
  }
  char *w = e->first_text, *lim = e->first_text + sizeof e->first_text;
  while (depth-- > 0) {
    const struct path *q = segs[depth];
    if (!q->key) {
      char buf[24], *end = buf + sizeof buf, *d = utoa_back(end, q->index);
      if ((size_t)(lim - w) < 1 + sizeof buf)
        return false;
      *w++ = '/';
      put_bytes(w, d, (size_t)(end - d));
      w += end - d;
      continue;
    }
    if ((size_t)(lim - w) <= 1 + 2 * q->keylen)
      return false;
    *w++ = '/';
    if (key_plain(q->key, q->keylen)) {
      put_bytes(w, q->key, q->keylen);
      w += q->keylen;
    } else {
      for (size_t k = 0; k < q->keylen; k++) {
        char ch = q->key[k];
        if (ch == '~' || ch == '/') {
          *w++ = '~';
          *w++ = ch == '~' ? '0' : '1';
        } else {
          *w++ = ch;
        }
      }
    }
  }
  size_t slen = s->loc_len;
  if ((size_t)(lim - w) < 1 + slen + 1 + kwlen + 1)
    return false;
  *w++ = '\0';
  char *kwloc = w;
  put_bytes(w, s->loc, slen);
  w += slen;
  if (kwlen) {
    *w++ = '/';
    put_bytes(w, kw, kwlen);
    w += kwlen;
  }
  *w++ = '\0';
  char *msg = w;
  /* room for each piece and the final NUL checked as it comes */
  for (size_t i = 0; i < nparts; i++) {
    if ((size_t)(lim - w) <= parts[i].n)
      return false;
    put_bytes(w, parts[i].s, parts[i].n);
    w += parts[i].n;
  }
  *w = '\0';
  e->items = &e->first;
  e->cap = 1;
  e->len = 1;
  e->first.instance_location = e->first_text;
  e->first.keyword_location = kwloc;
  e->first.message = msg;
  return true;
}

/* The error's three strings share one allocation, owned through
 * instance_location (cap_js_errors_free knows). kw is the keyword (kwlen
 * 0: none); the message is the concatenation of parts. */
static void push_error(struct vctx *c, const struct js_schema *s, const char *kw, size_t kwlen,
                       const struct path *p, const struct piece *parts, size_t nparts)
{
  if (c->errs->len == 0 && !c->errs->items && push_first(c->errs, s, kw, kwlen, p, parts, nparts))
    return;
  size_t mlen = 0;
  for (size_t i = 0; i < nparts; i++)
    mlen += parts[i].n;
  /* escapes of the innermost segments, counted once */
  size_t plen = 0, esc[8], depth = 0;
  for (const struct path *q = p; q; q = q->up, depth++) {
    size_t ne = q->key ? key_escapes(q->key, q->keylen) : 0;
    if (depth < 8)
      esc[depth] = ne;
    plen += 1 + (q->key ? q->keylen + ne : udigits(q->index));
  }
  size_t slen = s->loc_len, klen = kwlen ? kwlen + 1 : 0;
  size_t need = plen + 1 + slen + klen + 1 + mlen + 1;
  struct cap_js_errors *e = c->errs;
  bool inline_first = e->len == 0 && !e->items && need <= sizeof e->first_text;
  char *block = inline_first ? e->first_text : cap_xmalloc(need);
  /* the pointer is written back to front, walking up the path */
  char *end = block + plen;
  *end = '\0';
  depth = 0;
  for (const struct path *q = p; q; q = q->up, depth++) {
    if (!q->key) {
      end = utoa_back(end, q->index);
    } else if (!(depth < 8 ? esc[depth] : key_escapes(q->key, q->keylen))) {
      end -= q->keylen;
      memcpy(end, q->key, q->keylen);
    } else {
      for (size_t k = q->keylen; k-- > 0;) {
        char ch = q->key[k];
        if (ch == '~' || ch == '/') {
          *--end = ch == '~' ? '0' : '1';
          *--end = '~';
        } else {
          *--end = ch;
        }
      }
    }
    *--end = '/';
  }
  char *kwloc = block + plen + 1;
  memcpy(kwloc, s->loc, slen);
  if (klen) {
    kwloc[slen] = '/';
    memcpy(kwloc + slen + 1, kw, kwlen);
  }
  kwloc[slen + klen] = '\0';
  char *msg = kwloc + slen + klen + 1, *w = msg;
  for (size_t i = 0; i < nparts; i++) {
    memcpy(w, parts[i].s, parts[i].n);
    w += parts[i].n;
  }
  *w = '\0';

  if (inline_first) {
    e->items = &e->first;
    e->cap = 1;
  } else if (e->len == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 4;
    if (e->items == &e->first) { /* leave the inline slot: copy it out */
      e->items = cap_xmalloc(cap * sizeof(*e->items));
      e->items[0] = e->first;
    } else {
      e->items = cap_xrealloc(e->items, cap * sizeof(*e->items));
    }
    e->cap = cap;
  }
  struct cap_js_error *err = &e->items[e->len++];
  err->instance_location = block;
  err->keyword_location = kwloc;
  err->message = msg;
}

/* Records an error at instance path `at` for keyword kw (a literal, ""
 * for none) of schema s, unless in a quiet branch or verdict-only. */
#define REPORT_AT(at, kw, ...)                                                                     \
  do {                                                                                             \
    if (recording(c)) {                                                                            \
      const struct piece parts_[] = {__VA_ARGS__};                                                 \
      push_error(c, s, kw, sizeof(kw) - 1, at, parts_, sizeof(parts_) / sizeof(parts_[0]));        \
    }                                                                                              \
  } while (0)

/* Stops everything: an evaluation budget ran out. Recorded even in quiet
 * branches, since the verdict is no longer trustworthy. */
static void abort_validation(struct vctx *c, const struct js_schema *s, const struct path *p,
                             const char *why)
{
  if (c->aborted)
    return;
  c->aborted = true;
  if (c->errs) {
    struct piece pc = zpiece(why);
    push_error(c, s, "", 0, p, &pc, 1);
  }
}

#define FAIL(kw, ...)                                                                              \
  do {                                                                                             \
    REPORT_AT(p, kw, __VA_ARGS__);                                                                 \
    valid = false;                                                                                 \
    if (stop(c))                                                                                   \
      goto out;                                                                                    \
  } while (0)

static const char *kind_name(const struct cap_node *x) { return cap_node_kind_name(x->kind); }

/* ---- numbers ---- */

struct decbuf {
  char small[64];
  char *heap;
};

static bool instance_dec(const struct cap_node *x, struct decbuf *db, struct js_dec *d)
{
  char tmp[64];
  const char *text = x->u.num.raw;
  if (!text) {
    if (x->kind == CAP_NODE_INT)
      snprintf(tmp, sizeof(tmp), "%lld", (long long)x->u.num.i);
    else
      snprintf(tmp, sizeof(tmp), "%.17g", x->u.num.f);
    text = tmp;
  }
  size_t len = strlen(text);
  char *buf = db->small;
  db->heap = NULL;
  if (len >= sizeof(db->small))
    buf = db->heap = cap_xmalloc(len + 1);
  return js_dec_parse(text, len, buf, d);
}

/* exact comparison of x with a keyword operand */
static int num_cmp_slow(const struct cap_node *x, const struct js_num *n)
{
  /* rounding to double is monotonic, so different doubles order exactly */
  if (x->u.num.f != n->f && !isnan(x->u.num.f))
    return x->u.num.f < n->f ? -1 : 1;
  struct decbuf db;
  struct js_dec d;
  int r = 0;
  if (instance_dec(x, &db, &d))
    r = js_dec_cmp(&d, &n->dec);
  free(db.heap);
  return r;
}

static inline int num_cmp(const struct cap_node *x, const struct js_num *n)
{
  if (LIKELY(x->kind == CAP_NODE_INT && n->is_int))
    return x->u.num.i < n->i ? -1 : x->u.num.i > n->i;
  return num_cmp_slow(x, n);
}

static bool is_integer(const struct cap_node *x)
{
  if (x->kind == CAP_NODE_INT)
    return true;
  if (x->kind != CAP_NODE_FLOAT)
    return false;
  double f = x->u.num.f;
  if (isfinite(f) && fabs(f) < 9007199254740992.0 && f != floor(f))
    return false; /* a fraction survives rounding */
  struct decbuf db;
  struct js_dec d;
  bool r = instance_dec(x, &db, &d) && js_dec_is_integer(&d);
  free(db.heap);
  return r;
}

static bool is_multiple(const struct cap_node *x, const struct js_num *n)
{
  if (x->kind == CAP_NODE_INT && n->is_int && n->i > 0)
    return x->u.num.i % n->i == 0;
  struct decbuf db;
  struct js_dec d;
  bool r = instance_dec(x, &db, &d) && js_dec_is_multiple(&d, &n->dec);
  free(db.heap);
  return r;
}

/* ---- helpers ---- */

static size_t utf8_length(const char *s, size_t n)
{
  size_t count = 0;
  for (size_t i = 0; i < n; i++)
    count += ((unsigned char)s[i] & 0xC0) != 0x80;
  return count;
}

/* 1 match, 0 no match, -1 limit hit */
static int regex_match(struct vctx *c, pcre2_code *re, const struct js_fastre *fast, const char *s,
                       size_t n)
{
  /* an ASCII-only small matcher stops at the first non-ASCII byte, so
   * only a failed match needs the UTF-8 check below (invalid: -1) */
  if (fast && fast->ascii_only && js_fastre_match(fast, s, n))
    return 1;
  /* a DFA answers an ASCII subject by itself (no UTF-8 check needed) */
  if (fast && fast->dfa && !fast->ascii_only) {
    int r = js_fastre_match_ascii(fast, s, n);
    if (r >= 0)
      return r;
  }
  /* pcre2_jit_match skips pcre2_match's per-call checks; it needs valid
   * UTF-8, which every capsule parser guarantees and an ASCII scan or
   * cap_utf8_valid confirms here (so does the small matcher) */
  bool ascii = true;
  size_t i = 0;
  for (; i + 8 <= n && ascii; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    ascii = !(w & 0x8080808080808080ULL);
  }
  for (; i < n && ascii; i++)
    ascii = (unsigned char)s[i] < 0x80;
  size_t bad;
  if (!ascii && !cap_utf8_valid(s, n, &bad))
    return -1;
  if (fast)
    return fast->ascii_only ? 0 : js_fastre_match(fast, s, n);
  if (!c->md) {
    if (!tl_match_data)
      tl_match_data = pcre2_match_data_create(1, NULL);
    c->md = tl_match_data;
  }
  int rc = pcre2_jit_match(re, (PCRE2_SPTR)s, n, 0, 0, c->md, c->v->mctx);
  if (rc == PCRE2_ERROR_JIT_BADOPTION) /* not JIT-compiled */
    rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, c->md, c->v->mctx);
  if (rc >= 0)
    return 1;
  if (rc == PCRE2_ERROR_NOMATCH)
    return 0;
  return -1;
}

static inline bool key_eq(const char *a, const char *b, size_t n)
{
  /* two overlapping loads cover every length from 2 to 16 */
  if (n >= 4 && n <= 8) {
    uint32_t a1, b1, a2, b2;
    memcpy(&a1, a, 4);
    memcpy(&b1, b, 4);
    memcpy(&a2, a + n - 4, 4);
    memcpy(&b2, b + n - 4, 4);
    return ((a1 ^ b1) | (a2 ^ b2)) == 0;
  }
  if (n > 8 && n <= 16) {
    uint64_t a1, b1, a2, b2;
    memcpy(&a1, a, 8);
    memcpy(&b1, b, 8);
    memcpy(&a2, a + n - 8, 8);
    memcpy(&b2, b + n - 8, 8);
    return ((a1 ^ b1) | (a2 ^ b2)) == 0;
  }
  if (n < 4) {
    if (n < 2)
      return n == 0 || a[0] == b[0];
    uint16_t a1, b1, a2, b2;
    memcpy(&a1, a, 2);
    memcpy(&b1, b, 2);
    memcpy(&a2, a + n - 2, 2);
    memcpy(&b2, b + n - 2, 2);
    return ((a1 ^ b1) | (a2 ^ b2)) == 0;
  }
  return memcmp(a, b, n) == 0;
}

/* index into s->props, or -1; hint: where to look first (members usually
 * come in the order the schema lists its properties) */
static inline long find_prop(const struct js_schema *s, const char *key, size_t len, size_t hint)
{
  if (hint < s->n_props) {
    const struct js_prop *pr = &s->props[hint];
    if (pr->keylen == len && key_eq(pr->key, key, len))
      return (long)hint;
  }
  if (s->n_props <= 6) {
    for (size_t i = 0; i < s->n_props; i++)
      if (s->props[i].keylen == len && (len == 0 || s->props[i].key[0] == key[0]) &&
          key_eq(s->props[i].key, key, len))
        return (long)i;
    return -1;
  }
  uint64_t x = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++)
    x = (x ^ (unsigned char)key[i]) * 1099511628211ULL;
  uint32_t hash = (uint32_t)x;
  for (uint32_t i = hash & s->prop_mask;; i = (i + 1) & s->prop_mask) {
    int32_t idx = s->prop_table[i];
    if (idx < 0)
      return -1;
    const struct js_prop *pr = &s->props[idx];
    if (pr->hash == hash && pr->keylen == len && key_eq(pr->key, key, len))
      return idx;
  }
}

static const struct cap_node *find_member(const struct cap_node *x, const char *key, size_t len)
{
  for (size_t i = 0; i < x->u.obj.len; i++) {
    const struct cap_member *m = &x->u.obj.items[i];
    if (m->keylen == len && key_eq(m->key, key, len))
      return m->value;
  }
  return NULL;
}

/* index of the member named key, or -1 */
static long member_index(const struct cap_node *x, const char *key, size_t len)
{
  for (size_t i = 0; i < x->u.obj.len; i++) {
    const struct cap_member *m = &x->u.obj.items[i];
    if (m->keylen == len && key_eq(m->key, key, len))
      return (long)i;
  }
  return -1;
}

static inline void ev_mark(struct ev *ev, size_t i)
{
  if (ev)
    ev->bits[i >> 6] |= 1ULL << (i & 63);
}

static inline bool ev_has(const struct ev *ev, size_t i)
{
  return ev->bits[i >> 6] & (1ULL << (i & 63));
}

static void ev_merge(struct ev *into, const struct ev *from)
{
  if (!into)
    return;
  for (size_t w = 0; w < (from->n + 63) / 64; w++)
    into->bits[w] |= from->bits[w];
}

/* A zeroed bitmap for n entries: on the stack when small. */
static void ev_init(struct ev *ev, uint64_t *stack_words, size_t n)
{
  size_t words = (n + 63) / 64;
  ev->n = n;
  ev->bits = words <= EV_STACK_WORDS ? stack_words : cap_xcalloc(words, sizeof(uint64_t));
  if (words <= EV_STACK_WORDS)
    memset(stack_words, 0, words * sizeof(uint64_t));
}

static void ev_release(struct ev *ev, uint64_t *stack_words)
{
  if (ev->bits != stack_words)
    free(ev->bits);
}

static size_t instance_size(const struct cap_node *x)
{
  if (x->kind == CAP_NODE_OBJECT)
    return x->u.obj.len;
  if (x->kind == CAP_NODE_ARRAY)
    return x->u.arr.len;
  return 0;
}

/* structural hash consistent with cap_node_equal */
static uint64_t node_hash(const struct cap_node *n)
{
  switch (n->kind) {
  case CAP_NODE_NULL: return 1;
  case CAP_NODE_BOOL: return n->u.boolean ? 3 : 2;
  case CAP_NODE_INT:
  case CAP_NODE_FLOAT: {
    double f = n->u.num.f == 0 ? 0 : n->u.num.f;
    uint64_t u;
    memcpy(&u, &f, sizeof(u));
    return u * 0x9E3779B97F4A7C15ULL + 5;
  }
  case CAP_NODE_STRING:
  case CAP_NODE_DATETIME: {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n->u.str.len; i++)
      h = (h ^ (unsigned char)n->u.str.ptr[i]) * 1099511628211ULL;
    return h;
  }
  case CAP_NODE_ARRAY: {
    uint64_t h = 7;
    for (size_t i = 0; i < n->u.arr.len; i++)
      h = h * 31 + node_hash(n->u.arr.items[i]);
    return h;
  }
  case CAP_NODE_OBJECT: {
    uint64_t h = 11;
    for (size_t i = 0; i < n->u.obj.len; i++) {
      const struct cap_member *m = &n->u.obj.items[i];
      uint64_t k = 1469598103934665603ULL;
      for (size_t j = 0; j < m->keylen; j++)
        k = (k ^ (unsigned char)m->key[j]) * 1099511628211ULL;
      h += k ^ (node_hash(m->value) * 0xff51afd7ed558ccdULL); /* order-independent */
    }
    return h;
  }
  }
  return 0;
}

struct hashed {
  uint64_t h;
  size_t i;
};

static int cmp_hashed(const void *a, const void *b)
{
  const struct hashed *x = a, *y = b;
  if (x->h != y->h)
    return x->h < y->h ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* false and the first duplicate pair when items repeat */
static bool unique_items(const struct cap_node *x, size_t *di, size_t *dj)
{
  size_t n = x->u.arr.len;
  struct cap_node **it = x->u.arr.items;
  if (n <= 32) {
    for (size_t i = 1; i < n; i++)
      for (size_t j = 0; j < i; j++)
        if (cap_node_equal(it[i], it[j])) {
          *di = j;
          *dj = i;
          return false;
        }
    return true;
  }
  struct hashed *hs = cap_xmalloc(n * sizeof(*hs));
  for (size_t i = 0; i < n; i++) {
    hs[i].h = node_hash(it[i]);
    hs[i].i = i;
  }
  qsort(hs, n, sizeof(*hs), cmp_hashed);
  bool ok = true;
  for (size_t a = 0; a < n && ok; a++)
    for (size_t b = a + 1; b < n && hs[b].h == hs[a].h; b++)
      if (cap_node_equal(it[hs[a].i], it[hs[b].i])) {
        *di = hs[a].i < hs[b].i ? hs[a].i : hs[b].i;
        *dj = hs[a].i < hs[b].i ? hs[b].i : hs[a].i;
        ok = false;
        break;
      }
  free(hs);
  return ok;
}

/* ---- the evaluator ---- */

static bool validate(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                     const struct path *p, const struct scope *sc, struct ev *ev);

/* Evaluates a branch whose failure is not itself an error (anyOf, oneOf,
 * not, if, contains): quiet, annotations into `into` only on success. */
static bool branch(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                   const struct path *p, const struct scope *sc, struct ev *into)
{
  c->quiet++;
  bool ok;
  if (into && into->n <= 64) {
    /* one word: mark it directly and put it back on failure */
    uint64_t saved = into->n ? into->bits[0] : 0;
    ok = validate(c, s, x, p, sc, into);
    if (!ok && into->n)
      into->bits[0] = saved;
  } else if (into) {
    uint64_t words[EV_STACK_WORDS];
    struct ev local;
    ev_init(&local, words, into->n);
    ok = validate(c, s, x, p, sc, &local);
    if (ok)
      ev_merge(into, &local);
    ev_release(&local, words);
  } else {
    ok = validate(c, s, x, p, sc, NULL);
  }
  c->quiet--;
  return ok && !c->aborted;
}

static const struct js_schema *dynamic_target(const struct js_schema *s, const struct scope *sc)
{
  const struct js_schema *found = NULL;
  for (const struct scope *q = sc; q; q = q->up)
    for (size_t i = 0; i < q->res->n_dyn; i++)
      if (q->res->dyn[i].id == s->dynref_anchor)
        found = q->res->dyn[i].schema; /* keep going: the outermost wins */
  return found ? found : s->dynref;
}

static bool validate_string(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                            const struct path *p);
static bool validate_number(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                            const struct path *p);
static bool value_match(const struct js_schema *s, const struct cap_node *x);
static bool validate_object(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                            const struct path *p, const struct scope *sc, struct ev *ev);
static bool validate_array(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                           const struct path *p, const struct scope *sc, struct ev *ev);

/* validate() of a member's or item's schema, with the cases that need no
 * more than the type check, an enum/const or a string's or number's own
 * keywords answered here without the call (same steps, same errors:
 * everything else, and every budget or depth problem, takes validate()) */
static inline __attribute__((always_inline)) bool
validate_child(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
               const struct path *p, const struct scope *sc)
{
  unsigned bit = 1u << x->kind;
  /* type_ok is 0 for boolean schemas: they take validate() */
  if ((s->type_ok & bit) && LIKELY(c->steps < c->max_steps && c->depth < c->max_depth)) {
    if (!(s->work & bit)) {
      if (LIKELY(s->direct != 2) || value_match(s, x)) {
        c->steps++;
        return true;
      }
      if (!recording(c)) { /* validate() would only find the same */
        c->steps++;
        return false;
      }
    } else if (s->direct == 1) {
      if (x->kind == CAP_NODE_STRING) {
        c->steps++;
        return validate_string(c, s, x, p);
      }
      if (x->kind == CAP_NODE_INT || x->kind == CAP_NODE_FLOAT) {
        c->steps++;
        return validate_number(c, s, x, p);
      }
      if ((x->kind == CAP_NODE_OBJECT || x->kind == CAP_NODE_ARRAY) && !c->v->dynamic_scope) {
        c->steps++;
        c->depth++;
        bool valid = x->kind == CAP_NODE_OBJECT ? validate_object(c, s, x, p, NULL, NULL)
                                                : validate_array(c, s, x, p, NULL, NULL);
        c->depth--;
        return valid && !c->aborted;
      }
    }
  }
  return validate(c, s, x, p, sc, NULL);
}

/* "properties" by looking each one up; stops at the first failure */
static inline __attribute__((always_inline)) bool
lookup_props(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
             const struct path *p, const struct scope *sc, struct ev *ev, size_t *required_seen)
{
  for (size_t k = 0; k < s->n_props; k++) {
    const struct js_prop *pr = &s->props[k];
    long i = member_index(x, pr->key, pr->keylen);
    if (i < 0)
      continue;
    const struct cap_member *m = &x->u.obj.items[i];
    struct path cp = {p, m->key, m->keylen, 0};
    if (s->prop_required)
      *required_seen += s->prop_required[k];
    ev_mark(ev, (size_t)i);
    if (!validate_child(c, pr->schema, m->value, &cp, sc))
      return false;
  }
  return true;
}

static bool validate_object(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                            const struct path *p, const struct scope *sc, struct ev *ev)
{
  bool valid = true;
  size_t n = x->u.obj.len;
  size_t required_seen = 0, hint = 0;
  bool walk = s->members, rewalking = false;
  /* only "properties" and more members than properties: look the few
   * properties up when no error is recorded (their order does not matter);
   * when the first error is, look them up quietly and walk the members in
   * order only after a failure, for the same first error. Few: each lookup
   * scans the members, and the step budget does not count the scan. */
  if (s->members == 2 && s->n_props < n && s->n_props <= LOOKUP_PROPS_MAX) {
    if (c->quiet || !c->errs) {
      if (!lookup_props(c, s, x, p, sc, ev, &required_seen)) {
        valid = false;
        goto out; /* stop(c) holds */
      }
      walk = false;
    } else if (c->first_only && !c->aborted && !c->rewalk) {
      /* not inside a re-walk: the failure is known to lie below, and a
       * quiet pass at every level on the way down would cost quadratically */
      uint64_t steps = c->steps;
      c->quiet++;
      bool ok = lookup_props(c, s, x, p, sc, ev, &required_seen);
      c->quiet--;
      if (c->aborted)
        return false;
      walk = !ok;
      if (!ok) {
        required_seen = 0;
        c->steps = steps; /* the walk counts them again: the budget means what it did */
        rewalking = true;
        c->rewalk++;
      }
    }
  }
  if (walk) {
    for (size_t i = 0; i < n; i++) {
      const struct cap_member *m = &x->u.obj.items[i];
      struct path cp = {p, m->key, m->keylen, 0};
      bool matched = false;
      if (s->props) {
        long pi = find_prop(s, m->key, m->keylen, hint);
        if (pi >= 0) {
          hint = (size_t)pi + 1;
          const struct js_schema *ps = s->props[pi].schema;
          if (s->prop_required)
            required_seen += s->prop_required[pi];
          matched = true;
          ev_mark(ev, i);
          if (!validate_child(c, ps, m->value, &cp, sc)) {
            valid = false;
            if (stop(c))
              goto out;
          }
        }
      }
      for (size_t j = 0; j < s->n_pattern_props; j++) {
        const struct js_pattern_prop *pp = &s->pattern_props[j];
        int r = regex_match(c, pp->re, pp->fast, m->key, m->keylen);
        if (r < 0)
          FAIL("patternProperties", LIT("property name is too costly to match against \""),
               zpiece(pp->source), LIT("\""));
        if (!r)
          continue;
        matched = true;
        ev_mark(ev, i);
        if (!validate(c, pp->schema, m->value, &cp, sc, NULL)) {
          valid = false;
          if (stop(c))
            goto out;
        }
      }
      if (!matched && s->additional_props) {
        ev_mark(ev, i);
        if (s->additional_props->is_bool && !s->additional_props->bool_value) {
          REPORT_AT(&cp, "additionalProperties", LIT("property \""), keypiece(m->key, m->keylen),
                    T(s->not_allowed));
          valid = false;
          if (stop(c))
            goto out;
        } else if (!validate_child(c, s->additional_props, m->value, &cp, sc)) {
          valid = false;
          if (stop(c))
            goto out;
        }
      }
      if (s->property_names) {
        struct cap_node key = {.kind = CAP_NODE_STRING, .line = m->line, .col = m->col};
        key.u.str.ptr = m->key;
        key.u.str.len = m->keylen;
        if (!validate(c, s->property_names, &key, &cp, sc, NULL)) {
          valid = false;
          if (stop(c))
            goto out;
        }
      }
    }
  }
  /* member names are unique, so seeing every required one is enough */
  for (size_t i = 0; !(s->required_in_props && required_seen == s->n_required) && i < s->n_required;
       i++)
    if (!find_member(x, s->required[i].key, s->required[i].keylen))
      FAIL("required", T(s->required_msg[i]));
  if (!s->obj_tail)
    goto out; /* none of the keywords below */
  for (size_t i = 0; i < s->n_dep_required; i++) {
    const struct js_dep_required *d = &s->dep_required[i];
    if (!find_member(x, d->key, d->keylen))
      continue;
    for (size_t j = 0; j < d->names->u.arr.len; j++) {
      const struct cap_node *name = d->names->u.arr.items[j];
      if (!find_member(x, name->u.str.ptr, name->u.str.len))
        FAIL("dependentRequired", LIT("property \""), zpiece(name->u.str.ptr),
             LIT("\" is required when \""), zpiece(d->key), LIT("\" is present"));
    }
  }
  for (size_t i = 0; i < s->n_dep_schemas; i++) {
    const struct js_prop *d = &s->dep_schemas[i];
    if (find_member(x, d->key, d->keylen) && !validate(c, d->schema, x, p, sc, ev)) {
      valid = false;
      if (stop(c))
        goto out;
    }
  }
  if (s->max_props >= 0 && (int64_t)n > s->max_props)
    FAIL("maxProperties", LIT("has "), U(n), LIT(" properties; at most "), I(s->max_props),
         LIT(" are allowed"));
  if (s->min_props >= 0 && (int64_t)n < s->min_props)
    FAIL("minProperties", LIT("has "), U(n), LIT(" properties; at least "), I(s->min_props),
         LIT(" are required"));
out:
  if (rewalking)
    c->rewalk--;
  return valid;
}

static bool validate_array(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                           const struct path *p, const struct scope *sc, struct ev *ev)
{
  bool valid = true;
  size_t n = x->u.arr.len;
  size_t np = s->n_prefix_items < n ? s->n_prefix_items : n;
  for (size_t i = 0; i < np; i++) {
    struct path cp = {p, NULL, 0, i};
    ev_mark(ev, i);
    if (!validate_child(c, s->prefix_items[i], x->u.arr.items[i], &cp, sc)) {
      valid = false;
      if (stop(c))
        goto out;
    }
  }
  if (s->items) {
    for (size_t i = np; i < n && s->items->is_bool; i++)
      ev_mark(ev, i);
    if (s->items->is_bool && !s->items->bool_value && n > np) {
      struct path cp = {p, NULL, 0, np};
      REPORT_AT(&cp, "items", LIT("array has "), U(n), LIT(" items; at most "), U(np),
                LIT(" are allowed"));
      valid = false;
      if (stop(c))
        goto out;
    }
    for (size_t i = np; i < n && !s->items->is_bool; i++) {
      struct path cp = {p, NULL, 0, i};
      ev_mark(ev, i);
      if (!validate_child(c, s->items, x->u.arr.items[i], &cp, sc)) {
        valid = false;
        if (stop(c))
          goto out;
      }
    }
  }
  if (s->contains) {
    size_t matches = 0;
    bool need_all = ev || s->max_contains >= 0;
    for (size_t i = 0; i < n; i++) {
      struct path cp = {p, NULL, 0, i};
      if (branch(c, s->contains, x->u.arr.items[i], &cp, sc, NULL)) {
        matches++;
        ev_mark(ev, i);
        if (!need_all && (int64_t)matches >= s->min_contains)
          break;
      }
      if (c->aborted)
        return false;
    }
    if ((int64_t)matches < s->min_contains) {
      if (s->min_contains == 1)
        FAIL("contains", LIT("no item matches the \"contains\" schema; at least one must"));
      else
        FAIL("minContains", U(matches), LIT(" items match the \"contains\" schema; at least "),
             I(s->min_contains), LIT(" must"));
    }
    if (s->max_contains >= 0 && (int64_t)matches > s->max_contains)
      FAIL("maxContains", U(matches), LIT(" items match the \"contains\" schema; at most "),
           I(s->max_contains), LIT(" may"));
  }
  if (s->max_items >= 0 && (int64_t)n > s->max_items)
    FAIL("maxItems", LIT("has "), U(n), T(s->max_items_tail));
  if (s->min_items >= 0 && (int64_t)n < s->min_items)
    FAIL("minItems", LIT("has "), U(n), T(s->min_items_tail));
  if (s->unique_items && n > 1) {
    size_t i = 0, j = 0;
    if (!unique_items(x, &i, &j))
      FAIL("uniqueItems", LIT("items "), U(i), LIT(" and "), U(j),
           LIT(" are equal; items must be unique"));
  }
out:
  return valid;
}

static bool validate_string(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                            const struct path *p)
{
  bool valid = true;
  if (s->max_length >= 0 || s->min_length >= 0) {
    size_t len = x->u.str.len;
    /* bytes bound code points from above, and from below by a quarter */
    if (s->max_length >= 0 && len > (size_t)s->max_length)
      len = utf8_length(x->u.str.ptr, x->u.str.len);
    else if (s->min_length >= 0 && len < (size_t)s->min_length * 4)
      len = utf8_length(x->u.str.ptr, x->u.str.len);
    if (s->max_length >= 0 && len > (size_t)s->max_length)
      FAIL("maxLength", LIT("is "), U(len), T(s->max_length_tail));
    if (s->min_length >= 0 && len < (size_t)s->min_length)
      FAIL("minLength", LIT("is "), U(len), T(s->min_length_tail));
  }
  if (s->pattern) {
    int r = regex_match(c, s->pattern, s->pattern_fast, x->u.str.ptr, x->u.str.len);
    if (r < 0)
      FAIL("pattern", LIT("string is too costly to match against the pattern \""),
           TXT(s->pattern_source, s->pattern_source_len), LIT("\""));
    if (r == 0)
      FAIL("pattern", T(s->pattern_msg));
  }
  if (s->format_assert && !js_format_check(s->format, x->u.str.ptr, x->u.str.len))
    FAIL("format", LIT("is not a valid "), zpiece(s->format_name));
out:
  return valid;
}

static bool validate_number(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                            const struct path *p)
{
  bool valid = true;
  if (s->minimum && num_cmp(x, s->minimum) < 0)
    FAIL("minimum", LIT("must be >= "), TXT(s->minimum->text, s->minimum->text_len));
  if (s->maximum && num_cmp(x, s->maximum) > 0)
    FAIL("maximum", LIT("must be <= "), TXT(s->maximum->text, s->maximum->text_len));
  if (s->exclusive_minimum && num_cmp(x, s->exclusive_minimum) <= 0)
    FAIL("exclusiveMinimum", LIT("must be > "),
         TXT(s->exclusive_minimum->text, s->exclusive_minimum->text_len));
  if (s->exclusive_maximum && num_cmp(x, s->exclusive_maximum) >= 0)
    FAIL("exclusiveMaximum", LIT("must be < "),
         TXT(s->exclusive_maximum->text, s->exclusive_maximum->text_len));
  if (s->multiple_of && !is_multiple(x, s->multiple_of))
    FAIL("multipleOf", LIT("must be a multiple of "),
         TXT(s->multiple_of->text, s->multiple_of->text_len));
out:
  return valid;
}

/* "type" of s accepts x */
static inline bool type_ok(const struct js_schema *s, const struct cap_node *x)
{
  if (LIKELY(s->type_ok & (1u << x->kind)))
    return true;
  return x->kind == CAP_NODE_FLOAT && (s->types & JS_T_INT) && is_integer(x);
}

static __attribute__((noinline)) void report_type(struct vctx *c, const struct js_schema *s,
                                                  const struct cap_node *x, const struct path *p)
{
  REPORT_AT(p, "type", LIT("expected "), TXT(s->types_text, s->types_text_len), LIT(", got "),
            zpiece(x->kind == CAP_NODE_FLOAT && is_integer(x) ? "integer" : kind_name(x)));
}

static bool validate_inplace(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                             const struct path *p, const struct scope *sc, struct ev *ev)
{
  bool valid = true;
  if (s->ref && !validate(c, s->ref, x, p, sc, ev)) {
    valid = false;
    if (stop(c))
      goto out;
  }
  if (s->dynref) {
    const struct js_schema *t = s->dynref_anchor >= 0 ? dynamic_target(s, sc) : s->dynref;
    if (!validate(c, t, x, p, sc, ev)) {
      valid = false;
      if (stop(c))
        goto out;
    }
  }
  for (size_t i = 0; i < s->n_all_of; i++)
    if (!validate(c, s->all_of[i], x, p, sc, ev)) {
      valid = false;
      if (stop(c))
        goto out;
    }
  if (s->n_any_of) {
    bool any = false;
    for (size_t i = 0; i < s->n_any_of; i++) {
      if (branch(c, s->any_of[i], x, p, sc, ev)) {
        any = true;
        if (!ev)
          break; /* annotations need every passing branch; the verdict does not */
      }
      if (c->aborted)
        return false;
    }
    if (!any)
      FAIL("anyOf", LIT("does not match any of the "), U(s->n_any_of),
           LIT(" alternatives in anyOf"));
  }
  if (s->n_one_of) {
    size_t matched = 0, first = 0, second = 0;
    for (size_t i = 0; i < s->n_one_of; i++) {
      if (branch(c, s->one_of[i], x, p, sc, matched ? NULL : ev)) {
        if (matched == 0)
          first = i;
        else if (matched == 1)
          second = i;
        matched++;
      }
      if (c->aborted)
        return false;
      if (matched > 1)
        break;
    }
    if (matched == 0)
      FAIL("oneOf", LIT("does not match any of the "), U(s->n_one_of),
           LIT(" alternatives in oneOf; it must match one"));
    if (matched > 1)
      FAIL("oneOf", LIT("matches alternatives "), U(first), LIT(" and "), U(second),
           LIT(" of oneOf; it must match exactly one"));
  }
  if (s->not_) {
    bool ok = branch(c, s->not_, x, p, sc, NULL);
    if (c->aborted)
      return false;
    if (ok)
      FAIL("not", LIT("must not match the schema in \"not\""));
  }
  if (s->if_) {
    const struct js_schema *is = s->if_, *ps = is->disc ? is->props[0].schema : NULL;
    bool ok;
    if (ps && !ps->is_bool && ps->direct == 2 && !ps->types && !c->aborted &&
        c->steps + 2 <= c->max_steps && c->depth + 1 < c->max_depth) {
      /* what branch() would find, with the same steps: a non-object or an
       * object without the member passes; else the member's value decides
       * and is marked evaluated when it passes */
      c->steps++;
      ok = true;
      if (x->kind == CAP_NODE_OBJECT) {
        long i = member_index(x, is->props[0].key, is->props[0].keylen);
        if (i >= 0) {
          c->steps++;
          ok = value_match(ps, x->u.obj.items[i].value);
          if (ok)
            ev_mark(ev, (size_t)i);
        }
      }
    } else {
      ok = branch(c, is, x, p, sc, ev);
    }
    if (c->aborted)
      return false;
    const struct js_schema *next = ok ? s->then_ : s->else_;
    if (next && !validate(c, next, x, p, sc, ev)) {
      valid = false;
      if (stop(c))
        goto out;
    }
  }
out:
  return valid;
}

/* The keywords of one schema object; kev collects evaluated members/items
 * (NULL when nobody needs them). Kept apart from validate() so the common
 * path carries no annotation bitmap on its stack frame. */
/* cap_node_equal, with strings (the usual enum/const) compared inline */
static inline bool value_eq(const struct cap_node *a, const struct cap_node *x)
{
  if (a->kind == CAP_NODE_STRING && x->kind == CAP_NODE_STRING)
    return a->u.str.len == x->u.str.len && key_eq(a->u.str.ptr, x->u.str.ptr, a->u.str.len);
  if (a->kind == CAP_NODE_STRING || x->kind == CAP_NODE_STRING)
    return false;
  return cap_node_equal(a, x);
}

static bool validate_keywords(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                              const struct path *p, const struct scope *sc, struct ev *kev)
{
  bool valid = true;
  if (!type_ok(s, x)) {
    if (recording(c))
      report_type(c, s, x, p);
    valid = false;
    if (stop(c))
      goto out;
  }
  if (s->groups & JS_G_VALUE) {
    if (s->const_value && !value_eq(s->const_value, x)) {
      REPORT_AT(p, "const", TXT(s->const_text, s->const_text_len));
      valid = false;
      if (stop(c))
        goto out;
    }
    if (s->has_enum) {
      bool found = false;
      for (size_t i = 0; i < s->n_enum && !found; i++)
        found = value_eq(s->enum_values[i], x);
      if (!found) {
        REPORT_AT(p, "enum", TXT(s->enum_text, s->enum_text_len));
        valid = false;
        if (stop(c))
          goto out;
      }
    }
  }
  switch (x->kind) {
  case CAP_NODE_OBJECT:
    if ((s->groups & JS_G_OBJ) && !validate_object(c, s, x, p, sc, kev)) {
      valid = false;
      if (stop(c))
        goto out;
    }
    break;
  case CAP_NODE_ARRAY:
    if ((s->groups & JS_G_ARR) && !validate_array(c, s, x, p, sc, kev)) {
      valid = false;
      if (stop(c))
        goto out;
    }
    break;
  case CAP_NODE_STRING:
    if ((s->groups & JS_G_STR) && !validate_string(c, s, x, p)) {
      valid = false;
      if (stop(c))
        goto out;
    }
    break;
  case CAP_NODE_INT:
  case CAP_NODE_FLOAT:
    if ((s->groups & JS_G_NUM) && !validate_number(c, s, x, p)) {
      valid = false;
      if (stop(c))
        goto out;
    }
    break;
  default: break;
  }
  if ((s->groups & JS_G_INPLACE) && !validate_inplace(c, s, x, p, sc, kev)) {
    valid = false;
    if (stop(c))
      goto out;
  }
  if (!s->has_unevaluated)
    goto out;
  if (c->aborted) {
    valid = false;
    goto out;
  }
  /* unevaluated* last: they see what every other keyword evaluated */
  if (s->unevaluated_props && x->kind == CAP_NODE_OBJECT) {
    for (size_t i = 0; i < x->u.obj.len; i++) {
      if (ev_has(kev, i))
        continue;
      const struct cap_member *m = &x->u.obj.items[i];
      struct path cp = {p, m->key, m->keylen, 0};
      ev_mark(kev, i);
      if (s->unevaluated_props->is_bool && !s->unevaluated_props->bool_value) {
        REPORT_AT(&cp, "unevaluatedProperties", LIT("property \""), keypiece(m->key, m->keylen),
                  T(s->not_allowed));
        valid = false;
        if (stop(c))
          goto out;
      } else if (!validate(c, s->unevaluated_props, m->value, &cp, sc, NULL)) {
        valid = false;
        if (stop(c))
          goto out;
      }
    }
  }
  if (s->unevaluated_items && x->kind == CAP_NODE_ARRAY) {
    for (size_t i = 0; i < x->u.arr.len; i++) {
      if (ev_has(kev, i))
        continue;
      struct path cp = {p, NULL, 0, i};
      ev_mark(kev, i);
      if (s->unevaluated_items->is_bool && !s->unevaluated_items->bool_value) {
        REPORT_AT(&cp, "unevaluatedItems", LIT("item "), U(i), LIT(" is not allowed here"));
        valid = false;
        if (stop(c))
          goto out;
      } else if (!validate(c, s->unevaluated_items, x->u.arr.items[i], &cp, sc, NULL)) {
        valid = false;
        if (stop(c))
          goto out;
      }
    }
  }
out:
  return valid;
}

/* a schema with unevaluated* gathers its own annotations, then reports
 * everything as evaluated to its parent */
static __attribute__((noinline)) bool validate_tracked(struct vctx *c, const struct js_schema *s,
                                                       const struct cap_node *x,
                                                       const struct path *p, const struct scope *sc,
                                                       struct ev *ev)
{
  uint64_t words[EV_STACK_WORDS];
  struct ev local;
  ev_init(&local, words, instance_size(x));
  bool valid = validate_keywords(c, s, x, p, sc, &local);
  if (ev && valid)
    ev_merge(ev, &local);
  ev_release(&local, words);
  return valid;
}

static __attribute__((noinline)) bool value_match(const struct js_schema *s,
                                                  const struct cap_node *x)
{
  if (s->const_value && !value_eq(s->const_value, x))
    return false;
  if (!s->has_enum)
    return true;
  for (size_t i = 0; i < s->n_enum; i++)
    if (value_eq(s->enum_values[i], x))
      return true;
  return false;
}

static bool validate(struct vctx *c, const struct js_schema *s, const struct cap_node *x,
                     const struct path *p, const struct scope *sc, struct ev *ev)
{
  if (s->is_bool) {
    if (s->bool_value)
      return true;
    REPORT_AT(p, "", LIT("no value is allowed here (the schema is false)"));
    return false;
  }
  if (UNLIKELY(++c->steps > c->max_steps)) {
    abort_validation(c, s, p,
                     "validation stopped: the evaluation budget ran out (an exponential "
                     "schema or a huge instance); simplify the schema or the instance");
    return false;
  }
  if (UNLIKELY(c->depth >= c->max_depth)) {
    abort_validation(c, s, p,
                     "validation stopped: schema recursion is too deep (a $ref cycle that "
                     "never consumes the instance?)");
    return false;
  }
  if (!(s->work & (1u << x->kind))) {
    /* nothing but "type" applies to this kind of instance (or "type" and
     * enum/const to any: a failed value check takes the full path, which
     * reports it) */
    if (LIKELY(type_ok(s, x))) {
      if (LIKELY(s->direct != 2) || value_match(s, x))
        return true;
    } else if (s->direct != 2) {
      if (recording(c))
        report_type(c, s, x, p);
      return false;
    }
  }
  if (s->direct == 1 && type_ok(s, x)) {
    /* only the keywords of this kind of instance: straight to them */
    switch (x->kind) {
    case CAP_NODE_STRING: return validate_string(c, s, x, p);
    case CAP_NODE_INT:
    case CAP_NODE_FLOAT: return validate_number(c, s, x, p);
    case CAP_NODE_OBJECT:
    case CAP_NODE_ARRAY:
      if (!c->v->dynamic_scope) {
        c->depth++;
        bool valid = x->kind == CAP_NODE_OBJECT ? validate_object(c, s, x, p, NULL, ev)
                                                : validate_array(c, s, x, p, NULL, ev);
        c->depth--;
        return valid && !c->aborted;
      }
      break;
    default: break;
    }
  }
  c->depth++;
  struct scope here;
  if (c->v->dynamic_scope && (!sc || sc->res != s->resource)) {
    here.res = s->resource;
    here.up = sc;
    sc = &here;
  }
  bool container = x->kind == CAP_NODE_OBJECT || x->kind == CAP_NODE_ARRAY;
  bool valid;
  if (container && s->has_unevaluated)
    valid = validate_tracked(c, s, x, p, sc, ev);
  else
    valid = validate_keywords(c, s, x, p, sc, container ? ev : NULL);
  c->depth--;
  return valid && !c->aborted;
}

bool cap_js_validate(const struct cap_js_validator *v, const struct cap_node *instance,
                     unsigned flags, struct cap_js_errors *errs)
{
  struct vctx c = {.v = v,
                   .errs = errs,
                   .first_only = flags & CAP_JS_FIRST_ONLY,
                   .max_steps = v->opts.max_steps,
                   .max_depth = v->opts.max_depth};
  /* a root of per-kind keywords alone may skip validate() as a member's does */
  bool ok = v->root->direct == 1 ? validate_child(&c, v->root, instance, NULL, NULL)
                                 : validate(&c, v->root, instance, NULL, NULL, NULL);
  return ok && !c.aborted;
}

void cap_js_errors_free(struct cap_js_errors *errs)
{
  if (!errs)
    return;
  if (errs->items == &errs->first && errs->first.instance_location == errs->first_text) {
    errs->items = NULL; /* the usual first error: nothing allocated */
    errs->len = errs->cap = 0;
    return;
  }
  for (size_t i = 0; i < errs->len; i++)
    if (errs->items[i].instance_location != errs->first_text)
      free(errs->items[i].instance_location); /* one block holds all three */
  if (errs->items != &errs->first)
    free(errs->items);
  errs->items = NULL;
  errs->len = errs->cap = 0;
}
