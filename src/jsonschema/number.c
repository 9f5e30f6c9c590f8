/* Exact decimal arithmetic on JSON number text, so that "multipleOf",
 * "minimum" and friends and "integer" do not depend on binary floating
 * point: 0.3 is a multiple of 0.1, 1e308 is an integer, and two numbers
 * that round to the same double still compare as different. */
#include <stdlib.h>
#include <string.h>

#include "jsonschema/internal.h"

#define EXP_CAP 1000000000000000LL

bool js_dec_parse(const char *text, size_t len, char *buf, struct js_dec *out)
{
  size_t i = 0, n = 0;
  int sign = 1;
  int64_t frac = 0;
  if (i < len && (text[i] == '-' || text[i] == '+')) {
    sign = text[i] == '-' ? -1 : 1;
    i++;
  }
  size_t digits_seen = 0;
  while (i < len && text[i] >= '0' && text[i] <= '9') {
    buf[n++] = text[i++];
    digits_seen++;
  }
  if (i < len && text[i] == '.') {
    i++;
    while (i < len && text[i] >= '0' && text[i] <= '9') {
      buf[n++] = text[i++];
      frac++;
      digits_seen++;
    }
  }
  if (!digits_seen)
    return false;
  int64_t e = 0;
  if (i < len && (text[i] == 'e' || text[i] == 'E')) {
    i++;
    int es = 1;
    if (i < len && (text[i] == '-' || text[i] == '+')) {
      es = text[i] == '-' ? -1 : 1;
      i++;
    }
    if (i >= len || text[i] < '0' || text[i] > '9')
      return false;
    while (i < len && text[i] >= '0' && text[i] <= '9') {
      if (e < EXP_CAP)
        e = e * 10 + (text[i] - '0');
      i++;
    }
    e *= es;
  }
  if (i != len)
    return false;
  const char *d = buf;
  while (n > 0 && *d == '0') {
    d++;
    n--;
  }
  int64_t exp = e - frac;
  while (n > 0 && d[n - 1] == '0') {
    n--;
    exp++;
  }
  out->digits = d;
  out->ndigits = n;
  out->exp = n ? exp : 0;
  out->sign = n ? sign : 0;
  return true;
}

bool js_dec_is_integer(const struct js_dec *a) { return a->sign == 0 || a->exp >= 0; }

static int cmp_magnitude(const struct js_dec *a, const struct js_dec *b)
{
  /* position of the most significant digit */
  int64_t ma = (int64_t)a->ndigits + a->exp, mb = (int64_t)b->ndigits + b->exp;
  if (ma != mb)
    return ma < mb ? -1 : 1;
  size_t n = a->ndigits > b->ndigits ? a->ndigits : b->ndigits;
  for (size_t i = 0; i < n; i++) {
    char ca = i < a->ndigits ? a->digits[i] : '0';
    char cb = i < b->ndigits ? b->digits[i] : '0';
    if (ca != cb)
      return ca < cb ? -1 : 1;
  }
  return 0;
}

int js_dec_cmp(const struct js_dec *a, const struct js_dec *b)
{
  if (a->sign != b->sign)
    return a->sign < b->sign ? -1 : 1;
  if (a->sign == 0)
    return 0;
  int m = cmp_magnitude(a, b);
  return a->sign > 0 ? m : -m;
}

static uint64_t mulmod(uint64_t x, uint64_t y, uint64_t m)
{
  return (uint64_t)(((unsigned __int128)x * y) % m);
}

/* Long division remainder for divisors too big for 64 bits: r holds L
 * big-endian digits, always < B after each step. */
static bool big_multiple(const struct js_dec *a, const struct js_dec *b, int64_t k)
{
  size_t L = b->ndigits + 1;
  unsigned char *r = calloc(L, 1), *bd = calloc(L, 1);
  if (!r || !bd) {
    free(r);
    free(bd);
    return false;
  }
  for (size_t i = 0; i < b->ndigits; i++)
    bd[i + 1] = (unsigned char)(b->digits[i] - '0');
  uint64_t total = (uint64_t)a->ndigits + (uint64_t)k;
  for (uint64_t step = 0; step < total; step++) {
    unsigned char d = step < a->ndigits ? (unsigned char)(a->digits[step] - '0') : 0;
    memmove(r, r + 1, L - 1);
    r[L - 1] = d;
    for (;;) {
      if (memcmp(r, bd, L) < 0)
        break;
      int borrow = 0;
      for (size_t i = L; i-- > 0;) {
        int v = r[i] - bd[i] - borrow;
        borrow = v < 0;
        r[i] = (unsigned char)(v + (borrow ? 10 : 0));
      }
    }
  }
  bool zero = true;
  for (size_t i = 0; i < L; i++)
    zero = zero && r[i] == 0;
  free(r);
  free(bd);
  return zero;
}

bool js_dec_is_multiple(const struct js_dec *a, const struct js_dec *b)
{
  if (a->sign == 0)
    return true;
  if (b->sign == 0)
    return false;
  /* a = A*10^ea, b = B*10^eb with A, B free of trailing zeros: B*10^eb
   * divides A*10^ea only if ea >= eb and B divides A*10^(ea-eb). */
  if (a->exp < b->exp)
    return false;
  int64_t k = a->exp - b->exp;
  if (b->ndigits <= 18) {
    uint64_t B = 0;
    for (size_t i = 0; i < b->ndigits; i++)
      B = B * 10 + (uint64_t)(b->digits[i] - '0');
    uint64_t r = 0;
    for (size_t i = 0; i < a->ndigits; i++)
      r = (r * 10 + (uint64_t)(a->digits[i] - '0')) % B;
    uint64_t p = 1 % B, base = 10 % B;
    for (int64_t e = k; e > 0; e >>= 1) {
      if (e & 1)
        p = mulmod(p, base, B);
      base = mulmod(base, base, B);
    }
    return mulmod(r, p, B) == 0;
  }
  if ((uint64_t)k + a->ndigits > 10000000ULL / (b->ndigits + 1))
    return false; /* absurd sizes: refuse rather than spin */
  return big_multiple(a, b, k);
}
