/* Text from elsewhere (a tool's name or error, a stored name) made safe
 * for a terminal: what could move the cursor, ring, recolour, reorder the
 * line or start a new one is shown as an escape instead. */
#ifndef CAPSULE_CORE_ESCAPE_H
#define CAPSULE_CORE_ESCAPE_H

#include <stddef.h>

#include "core/buf.h"

/* Appends s[0..len) to out with C0 and C1 controls and DEL as \xNN (\n,
 * \r, \t as such), bytes that are not valid UTF-8 as \xNN, bidirectional
 * overrides and isolates (U+202A..U+202E, U+2066..U+2069) as \u{NNNN},
 * and backslash as \\; everything else as it is. */
void cap_escape_text(struct cap_buf *out, const char *s, size_t len);
/* The same for a NUL-terminated string, into a new one (caller frees). */
char *cap_escape_str(const char *s);

#endif
