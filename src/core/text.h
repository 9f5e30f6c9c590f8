/* Text helpers shared by the parsers: UTF-8 checking, turning byte offsets
 * into line:column, and reading a whole file with a size cap. */
#ifndef CAPSULE_CORE_TEXT_H
#define CAPSULE_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF). On failure *bad_offset is the first bad byte. */
bool cap_utf8_valid(const char *s, size_t len, size_t *bad_offset);
/* Decodes one code point at s (assumed valid UTF-8); returns bytes used. */
size_t cap_utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Encodes cp into out (4 bytes room); returns bytes written. */
size_t cap_utf8_encode(uint32_t cp, char *out);
/* Value of a hexadecimal digit (also serves decimal and octal), or -1. */
int cap_hex_digit(int c);

/* Number of code points in valid UTF-8. */
size_t cap_utf8_length(const char *s, size_t len);

/* Incremental offset -> 1-based line:column (column in code points).
 * Offsets passed to cap_textpos_at must not decrease. */
struct cap_textpos {
  const char *data;
  size_t len;
  size_t off;    /* offset reached so far */
  uint32_t line; /* line at off */
  uint32_t col;  /* column at off */
};
void cap_textpos_init(struct cap_textpos *tp, const char *data, size_t len);
void cap_textpos_at(struct cap_textpos *tp, size_t off, uint32_t *line, uint32_t *col);

/* Reads path ("-" is stdin) into a NUL-terminated buffer. Refuses files
 * larger than max_bytes with EFBIG and a message naming the limit. */
int cap_read_file(const char *path, size_t max_bytes, char **ret_data, size_t *ret_len,
                  struct cap_error *err);

/* Writes text to the existing file at path in one write (a /proc or
 * cgroup control file). Returns 0, or -errno. */
int cap_write_text(const char *path, const char *text);

#endif
