/* The host ids already taken, for gateway/id_range.c's allocation: a set
 * of [start, end) ranges. Internal to src/gateway. */
#ifndef CAPSULE_GATEWAY_ID_TAKEN_H
#define CAPSULE_GATEWAY_ID_TAKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* where ranges are taken from (id_range.c says why there) */
#define RANGE_FIRST 0x70000000u
#define RANGE_END 0x7ffe0000u /* exclusive */

struct taken {
  uint64_t (*v)[2]; /* [start, end) */
  size_t n;
};

void taken_add(struct taken *t, uint64_t start, uint64_t count);
bool taken_overlaps(const struct taken *t, uint64_t start, uint64_t end);
/* The subordinate ranges of /etc/subuid and /etc/subgid (or the files
 * their environment variables name, for tests) and every user's and
 * group's id. */
void host_ids(struct taken *t);

#endif
