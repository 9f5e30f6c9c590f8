/* Base58 (the Bitcoin alphabet), as Covenant writes public keys and
 * signatures (bs58). Pure functions; nothing allocated. */
#ifndef CAPSULE_CORE_BASE58_H
#define CAPSULE_CORE_BASE58_H

#include <stdbool.h>
#include <stddef.h>

/* Room for n bytes as base58, with the NUL. */
#define CAP_BASE58_SIZE(n) ((n)*138 / 100 + 2)

/* Writes data as base58 into out (CAP_BASE58_SIZE(len) bytes). */
void cap_base58_encode(const unsigned char *data, size_t len, char *out);
/* Decodes text (len bytes) into exactly want bytes; false when text is not
 * base58 or does not decode to exactly want bytes. */
bool cap_base58_decode(const char *text, size_t len, unsigned char *out, size_t want);

#endif
