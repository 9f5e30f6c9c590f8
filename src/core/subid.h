/* One line of /etc/subuid or /etc/subgid (shadow's subuid(5)):
 * NAME_OR_ID:START:COUNT, the subordinate ids START..START+COUNT-1 of the
 * user named. */
#ifndef CAP_CORE_SUBID_H
#define CAP_CORE_SUBID_H

#include <stddef.h>
#include <stdint.h>

/* 0 with the line's parts (the name: its first *name_len bytes), or
 * -EINVAL for anything else: a blank line, a comment, an empty name, a
 * number with a sign or past 2^32, a count of 0, a range past 2^32, a
 * fourth field. len: the line's length, its newline included or not. */
int cap_subid_line(const char *line, size_t len, size_t *name_len, uint64_t *start,
                   uint64_t *count);

#endif
