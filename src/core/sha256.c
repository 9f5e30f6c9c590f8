/* SHA-256 (see sha256.h). The SHA-NI compression function follows the
 * shape of Intel's published use of the instructions (FIPS 180-4's
 * schedule: sha256msg1/msg2 compute W, sha256rnds2 two rounds at a time
 * on the state kept as ABEF and CDGH); the padding is FIPS 180-4's. */
#include "core/sha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

static const uint32_t K[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_ni(uint32_t h[8], const uint8_t *p,
                                                                  size_t n)
{
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);  /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
  __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                        /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                                             /* CDGH */
  for (; n; n--, p += 64) {
    __m128i abef = s0, cdgh = s1, g[4];
    for (int i = 0; i < 16; i++) {
      __m128i w;
      if (i < 4) {
        w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
      } else { /* W[4i..4i+3] from the four groups before */
        w = _mm_sha256msg1_epu32(g[i & 3], g[(i + 1) & 3]);
        w = _mm_add_epi32(w, _mm_alignr_epi8(g[(i + 3) & 3], g[(i + 2) & 3], 4));
        w = _mm_sha256msg2_epu32(w, g[(i + 3) & 3]);
      }
      g[i & 3] = w;
      __m128i m = _mm_add_epi32(w, _mm_load_si128((const __m128i *)&K[4 * i]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, m);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);                                  /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);                                 /* DCHG */
  _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xF0)); /* DCBA */
  _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));    /* HGFE */
}

bool cap_sha256_accelerated(void)
{
  static int known = -1;
  if (known < 0) {
    unsigned a, b, c, d;
    known = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) && /* SHA */
            __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) &&          /* SSE4.1 */
            (c & (1u << 9));                                               /* SSSE3 */
  }
  return known;
}
#else
static void blocks_ni(uint32_t h[8], const uint8_t *p, size_t n) { (void)h, (void)p, (void)n; }
bool cap_sha256_accelerated(void) { return false; }
#endif

void cap_sha256_init(struct cap_sha256 *s)
{
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  s->ni = cap_sha256_accelerated();
  if (!s->ni) {
    crypto_hash_sha256_init(&s->u.sodium);
    return;
  }
  memcpy(s->u.own.h, iv, sizeof iv);
  s->u.own.used = 0;
  s->u.own.total = 0;
}

void cap_sha256_update(struct cap_sha256 *s, const void *data, size_t len)
{
  if (!s->ni) {
    crypto_hash_sha256_update(&s->u.sodium, data, (unsigned long long)len);
    return;
  }
  const uint8_t *p = data;
  s->u.own.total += len;
  if (s->u.own.used) {
    size_t take = 64 - s->u.own.used < len ? 64 - s->u.own.used : len;
    memcpy(s->u.own.block + s->u.own.used, p, take);
    s->u.own.used += take;
    p += take;
    len -= take;
    if (s->u.own.used < 64)
      return;
    blocks_ni(s->u.own.h, s->u.own.block, 1);
    s->u.own.used = 0;
  }
  blocks_ni(s->u.own.h, p, len / 64);
  memcpy(s->u.own.block, p + len / 64 * 64, len % 64);
  s->u.own.used = len % 64;
}

void cap_sha256_final(struct cap_sha256 *s, unsigned char out[32])
{
  if (!s->ni) {
    crypto_hash_sha256_final(&s->u.sodium, out);
    return;
  }
  uint64_t bits = s->u.own.total * 8;
  uint8_t pad[72] = {0x80};
  size_t n = (s->u.own.used < 56 ? 56 : 120) - s->u.own.used;
  for (int i = 0; i < 8; i++)
    pad[n + i] = (uint8_t)(bits >> (56 - 8 * i));
  cap_sha256_update(s, pad, n + 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t)(s->u.own.h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(s->u.own.h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(s->u.own.h[i] >> 8);
    out[4 * i + 3] = (uint8_t)s->u.own.h[i];
  }
}

void cap_hmac_sha256_init(struct cap_hmac_sha256 *h, const unsigned char *key, size_t len)
{
  unsigned char k[64] = {0}, pad[64];
  if (len > sizeof k) { /* a long key is its hash */
    struct cap_sha256 s;
    cap_sha256_init(&s);
    cap_sha256_update(&s, key, len);
    cap_sha256_final(&s, k);
    sodium_memzero(&s, sizeof s);
  } else if (len) {
    memcpy(k, key, len);
  }
  for (size_t i = 0; i < sizeof pad; i++)
    pad[i] = k[i] ^ 0x36;
  cap_sha256_init(&h->inner);
  cap_sha256_update(&h->inner, pad, sizeof pad);
  for (size_t i = 0; i < sizeof pad; i++)
    pad[i] = k[i] ^ 0x5c;
  cap_sha256_init(&h->outer);
  cap_sha256_update(&h->outer, pad, sizeof pad);
  sodium_memzero(k, sizeof k);
  sodium_memzero(pad, sizeof pad);
}

void cap_hmac_sha256(const struct cap_hmac_sha256 *h, const void *msg, size_t len,
                     unsigned char out[32])
{
  struct cap_sha256 s = h->inner;
  unsigned char inner[32];
  cap_sha256_update(&s, msg, len);
  cap_sha256_final(&s, inner);
  s = h->outer;
  cap_sha256_update(&s, inner, sizeof inner);
  cap_sha256_final(&s, out);
  sodium_memzero(&s, sizeof s);
  sodium_memzero(inner, sizeof inner);
}
