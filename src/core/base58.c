/* Base58 by repeated division (inputs here are 32 and 64 bytes). */
#include "core/base58.h"

#include <stdint.h>
#include <string.h>

static const char alphabet[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

void cap_base58_encode(const unsigned char *data, size_t len, char *out)
{
  unsigned char digits[CAP_BASE58_SIZE(128)];
  if (len > 128) { /* never for keys and signatures */
    out[0] = '\0';
    return;
  }
  size_t zeros = 0;
  while (zeros < len && data[zeros] == 0)
    zeros++;
  size_t size = (len - zeros) * 138 / 100 + 1, used = 0; /* digits in use, from the end */
  memset(digits, 0, size);
  for (size_t i = zeros; i < len; i++) {
    unsigned carry = data[i];
    size_t k = 0;
    for (size_t j = size; j-- > 0 && (carry || k < used); k++) {
      carry += 256u * digits[j];
      digits[j] = (unsigned char)(carry % 58);
      carry /= 58;
    }
    used = k;
  }
  size_t o = 0;
  for (size_t z = 0; z < zeros; z++)
    out[o++] = '1';
  for (size_t k = size - used; k < size; k++)
    out[o++] = alphabet[digits[k]];
  out[o] = '\0';
}

static int digit_value(char c)
{
  const char *p = c ? strchr(alphabet, c) : NULL;
  return p ? (int)(p - alphabet) : -1;
}

bool cap_base58_decode(const char *text, size_t len, unsigned char *out, size_t want)
{
  unsigned char buf[128];
  if (want > sizeof buf || len == 0 || len > 200)
    return false;
  size_t zeros = 0;
  while (zeros < len && text[zeros] == '1')
    zeros++;
  memset(buf, 0, sizeof buf);
  size_t used = 0; /* bytes of buf in use, from the end */
  for (size_t i = zeros; i < len; i++) {
    int v = digit_value(text[i]);
    if (v < 0)
      return false;
    unsigned carry = (unsigned)v;
    for (size_t j = 0; j < used || carry; j++) {
      if (j >= sizeof buf)
        return false;
      carry += 58u * buf[sizeof buf - 1 - j];
      buf[sizeof buf - 1 - j] = (unsigned char)(carry & 0xff);
      carry >>= 8;
      if (j + 1 > used)
        used = j + 1;
    }
  }
  if (zeros + used != want)
    return false;
  memset(out, 0, zeros);
  memcpy(out + zeros, buf + sizeof buf - used, used);
  return true;
}
