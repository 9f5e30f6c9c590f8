/* Masking a secret in bytes that stream past (an upstream's response to a
 * request capsule injected the secret into), with no I/O. Every match is
 * overwritten with '*' of the same length, so lengths and framing stay
 * valid. Recognised forms of the secret S (at least 4 bytes):
 *  - S itself, each of its bytes optionally written as %XX (either case of
 *    hex digits) or as a JSON escape (\/, \", \\, \u00XX for ASCII), in any
 *    mix ("a%2Fb", "a\/b", "a%2fb", "\u0061/b");
 *  - base64 of S at each of the three byte offsets it can start at inside
 *    a longer encoded value, standard (+/) and URL-safe (-_) alphabets:
 *    the characters that depend on S's bytes alone (up to two at each end,
 *    which mix in the neighbouring bytes, stay visible).
 * Not recognised: S compressed, hashed, hex-encoded, split by line breaks
 * (MIME base64), or a base64 of S that is itself percent-encoded. */
#ifndef CAPSULE_NET_MASK_H
#define CAPSULE_NET_MASK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

#define MASK_MIN_SECRET 4 /* shorter secrets are not masked: too many false matches */

struct secret_mask {
  char *secret;
  size_t len;
  char *b64[6]; /* base64 cores: 3 offsets x 2 alphabets */
  size_t b64_len[6], n_b64;
  size_t keep; /* the longest form, minus one: what a feed holds back */
  struct cap_buf carry;
};

/* secret NULL or shorter than MASK_MIN_SECRET: a mask that passes bytes
 * through unchanged. */
void secret_mask_init(struct secret_mask *m, const char *secret);

/* Masks every complete occurrence inside buf[0..len), in place. */
void secret_mask_buf(const struct secret_mask *m, char *buf, size_t len);

/* Streaming: appends data, masks, and moves to out all but the last
 * m->keep bytes (a form split across feeds is caught on the next one). */
void secret_mask_feed(struct secret_mask *m, const char *data, size_t n, struct cap_buf *out);

/* The held-back bytes (masked) to out; then every copy of the secret is
 * wiped and freed. */
void secret_mask_finish(struct secret_mask *m, struct cap_buf *out);

#endif
