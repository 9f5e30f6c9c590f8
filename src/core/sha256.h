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

#endif
