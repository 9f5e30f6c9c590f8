/* gRPC's wire details shared by its client (runtime/selu_h2.c) and its
 * server (front/grpc_serve_conn.c), from gRPC's PROTOCOL-HTTP2: header
 * names and numbers, a message's 5-byte prefix, grpc-message's percent
 * encoding.
 *
 * Header-only (static inline): both sides live in modules of their own. */
#ifndef CAPSULE_CORE_GRPC_WIRE_H
#define CAPSULE_CORE_GRPC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/buf.h"

/* A decimal of 1-9 digits up to max, or -1 */
static inline int grpc_wire_digits(const uint8_t *v, size_t n, int max)
{
  int x = 0;
  if (n == 0 || n > 9)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return -1;
    x = x * 10 + (v[i] - '0');
  }
  return x > max ? -1 : x;
}

/* A header's name is what */
static inline bool grpc_wire_named(const uint8_t *name, size_t n, const char *what)
{
  return n == strlen(what) && memcmp(name, what, n) == 0;
}

/* The length a message's prefix (flag, then 4 bytes big-endian) announces */
static inline uint32_t grpc_wire_prefix_len(const uint8_t *p)
{
  return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
}

/* grpc-message as sent: bytes outside printable ASCII, and '%', as %XX
 * (malloc'd) */
static inline char *grpc_wire_percent_encoded(const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  struct cap_buf b = {0};
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
      cap_buf_putc(&b, (char)*p);
    } else {
      char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      cap_buf_append(&b, e, 3);
    }
  }
  return cap_buf_steal(&b);
}

#endif
