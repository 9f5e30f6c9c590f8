/* The host id-range registry's line format, shared by id_range.c (the
 * registry and the peek) and id_registry_line.c. Internal to gateway/. */
#ifndef CAPSULE_GATEWAY_ID_REGISTRY_LINE_H
#define CAPSULE_GATEWAY_ID_REGISTRY_LINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* The registry's format, named by its marker line "0 KEY /" (KEY
 * REGISTRY_MARK followed by the number). The marker reads as an ordinary
 * line to every earlier capsule (base 0 is no range; "/" always exists),
 * so none of them drops it. A capsule refuses to rewrite a registry
 * marked with a later format than its own, or holding a line it cannot
 * read: it would drop lines a newer capsule wrote (and hand their ranges
 * out again). A later format must keep "BASE WORD /PATH" readable to
 * this one or raise the number. */
#define REGISTRY_FORMAT 2u
#define REGISTRY_MARK "capsule-id-ranges-format-"

/* Where a line's state directory is: the mount namespace it was written
 * in and the directory's device and inode (all 0: an older line). */
struct reg_where {
  unsigned long long mnt, dev, ino;
};

/* One line parsed in place: false for a malformed one. */
bool registry_line(char *line, uint64_t *base, char **key, struct reg_where *where, char **state);
/* One line appended to b. */
void registry_put(struct cap_buf *b, uint64_t base, const char *word, const struct reg_where *w,
                  const char *state);
/* KEY as the registry writes it: one word (allocated). */
char *registry_key(const char *key);
/* The format a marker line names; 0 for any other line. */
unsigned registry_marker(uint64_t base, const char *key);
/* Whether line (n bytes) is a well-formed one of a key other than word. */
bool registry_other_key(const char *line, size_t n, const char *word, size_t word_len);

#endif
