#include "net/mask.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

/* The base64 characters of secret that depend on its bytes alone when it
 * starts `offset` bytes into an encoded value: encode offset zero bytes
 * followed by the secret, then cut the characters that mix in neighbours. */
static char *base64_core(const char *secret, size_t len, size_t offset, bool url, size_t *ret_len)
{
  size_t in_len = offset + len;
  unsigned char *in = calloc(in_len, 1), *enc = malloc(4 * ((in_len + 2) / 3) + 1);
  if (!in || !enc)
    abort();
  memcpy(in + offset, secret, len);
  EVP_EncodeBlock(enc, in, (int)in_len);
  size_t first = (8 * offset + 5) / 6, end = 8 * in_len / 6;
  char *core = NULL;
  *ret_len = end > first ? end - first : 0;
  if (*ret_len >= MASK_MIN_SECRET) {
    core = cap_xmalloc(*ret_len + 1);
    memcpy(core, enc + first, *ret_len);
    core[*ret_len] = '\0';
    for (char *c = core; url && *c; c++)
      *c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
  }
  OPENSSL_cleanse(in, in_len);
  OPENSSL_cleanse(enc, 4 * ((in_len + 2) / 3) + 1);
  free(in);
  free(enc);
  return core;
}

void secret_mask_init(struct secret_mask *m, const char *secret)
{
  *m = (struct secret_mask){0};
  if (!secret || strlen(secret) < MASK_MIN_SECRET)
    return;
  m->len = strlen(secret);
  m->secret = cap_xstrdup(secret);
  m->keep = 6 * m->len; /* every byte as \u00XX */
  for (size_t offset = 0; offset < 3; offset++)
    for (int url = 0; url < 2; url++) {
      size_t n;
      char *core = base64_core(secret, m->len, offset, url, &n);
      bool dup = false;
      for (size_t k = 0; core && k < m->n_b64; k++)
        dup |= strcmp(core, m->b64[k]) == 0;
      if (!core || dup) {
        if (core)
          OPENSSL_cleanse(core, n);
        free(core);
        continue;
      }
      m->b64[m->n_b64] = core;
      m->b64_len[m->n_b64++] = n;
      if (n > m->keep)
        m->keep = n;
    }
  m->keep--;
}

/* One byte of an encoded text at d[0..n): its value and how many bytes
 * spell it (%XX, a JSON escape of an ASCII character, or itself). */
static size_t decode_one(const char *d, size_t n, int *value)
{
  if (d[0] == '%' && n >= 3 && cap_hex_digit((unsigned char)d[1]) >= 0 &&
      cap_hex_digit((unsigned char)d[2]) >= 0) {
    *value = cap_hex_digit((unsigned char)d[1]) * 16 + cap_hex_digit((unsigned char)d[2]);
    return 3;
  }
  if (d[0] == '\\' && n >= 2 && (d[1] == '/' || d[1] == '"' || d[1] == '\\')) {
    *value = d[1];
    return 2;
  }
  if (d[0] == '\\' && n >= 6 && d[1] == 'u' && d[2] == '0' && d[3] == '0' &&
      cap_hex_digit((unsigned char)d[4]) >= 0 && cap_hex_digit((unsigned char)d[5]) >= 0) {
    int v = cap_hex_digit((unsigned char)d[4]) * 16 + cap_hex_digit((unsigned char)d[5]);
    if (v < 0x80) {
      *value = v;
      return 6;
    }
  }
  *value = (unsigned char)d[0];
  return 1;
}

/* The length of the secret spelled at d[0..n) in the per-byte forms, or 0.
 * An escape that decodes to another byte is read as its first byte alone
 * (a literal '%' or '\' in the secret). */
static size_t match_encoded(const struct secret_mask *m, const char *d, size_t n)
{
  size_t p = 0;
  for (size_t k = 0; k < m->len; k++) {
    if (p >= n)
      return 0;
    int v;
    size_t used = decode_one(d + p, n - p, &v);
    if (v != (unsigned char)m->secret[k]) {
      if (d[p] != m->secret[k])
        return 0;
      used = 1;
    }
    p += used;
  }
  return p;
}

void secret_mask_buf(const struct secret_mask *m, char *buf, size_t len)
{
  if (!m->secret)
    return;
  for (size_t i = 0; i < len; i++) {
    char c = buf[i];
    if (c != m->secret[0] && c != '%' && c != '\\')
      continue;
    size_t n = match_encoded(m, buf + i, len - i);
    if (n) {
      memset(buf + i, '*', n);
      i += n - 1;
    }
  }
  for (size_t k = 0; k < m->n_b64; k++)
    for (char *p = buf; p && (p = memmem(p, len - (size_t)(p - buf), m->b64[k], m->b64_len[k]));)
      memset(p, '*', m->b64_len[k]);
}

void secret_mask_feed(struct secret_mask *m, const char *data, size_t n, struct cap_buf *out)
{
  if (!m->secret) {
    cap_buf_append(out, data, n);
    return;
  }
  cap_buf_append(&m->carry, data, n);
  secret_mask_buf(m, m->carry.data, m->carry.len);
  if (m->carry.len > m->keep) {
    size_t emit = m->carry.len - m->keep;
    cap_buf_append(out, m->carry.data, emit);
    memmove(m->carry.data, m->carry.data + emit, m->keep);
    m->carry.len = m->keep;
  }
}

void secret_mask_finish(struct secret_mask *m, struct cap_buf *out)
{
  if (m->carry.len)
    cap_buf_append(out, m->carry.data, m->carry.len);
  if (m->secret) {
    OPENSSL_cleanse(m->secret, m->len);
    free(m->secret);
  }
  for (size_t k = 0; k < m->n_b64; k++) {
    OPENSSL_cleanse(m->b64[k], m->b64_len[k]);
    free(m->b64[k]);
  }
  OPENSSL_cleanse(m->carry.data, m->carry.len);
  cap_buf_free(&m->carry);
  *m = (struct secret_mask){0};
}
