/* SHA-256 for bulk hashing (rollback snapshots): the CPU's SHA extensions
 * (x86_64 SHA-NI), 4-5x the portable code's speed, when it has them, else
 * libsodium's. The same digest either way; the state is the caller's (no
 * allocation), one per thread. cap_sha256_init needs sodium_init first. */
#ifndef CAPSULE_CORE_SHA256_H
#define CAPSULE_CORE_SHA256_H

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cap_sha256 {
  bool ni;
  union {
    crypto_hash_sha256_state sodium;
    struct {
      uint32_t h[8];
      uint8_t block[64];
      size_t used;
      uint64_t total;
    } own;
  } u;
};

/* Whether the SHA extensions are used on this CPU. */
bool cap_sha256_accelerated(void);
void cap_sha256_init(struct cap_sha256 *s);
void cap_sha256_update(struct cap_sha256 *s, const void *data, size_t len);
void cap_sha256_final(struct cap_sha256 *s, unsigned char out[32]);

/* HMAC-SHA-256 (RFC 2104) on the same SHA-256: the key's inner and outer
 * blocks hashed once (init), then each MAC copies those states, so a short
 * message costs its own blocks and two more. The same MAC as libsodium's
 * crypto_auth_hmacsha256 for the same key (tests/unit/test_core.c). The
 * states are as secret as the key: keep them where the key is kept. */
struct cap_hmac_sha256 {
  struct cap_sha256 inner, outer;
};
void cap_hmac_sha256_init(struct cap_hmac_sha256 *h, const unsigned char *key, size_t len);
void cap_hmac_sha256(const struct cap_hmac_sha256 *h, const void *msg, size_t len,
                     unsigned char out[32]);

#endif
