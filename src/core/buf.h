/* A growable byte buffer, always NUL-terminated. Allocation failure aborts:
 * capsule treats out-of-memory as fatal rather than threading it through
 * every string operation (as systemd and git do for small allocations). */
#ifndef CAPSULE_CORE_BUF_H
#define CAPSULE_CORE_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cap_buf {
  char *data; /* owned; NULL until the first append */
  size_t len;
  size_t cap;
};

void cap_buf_append(struct cap_buf *b, const char *s, size_t n);
/* Room for extra more bytes (and the NUL) past len, for a writer that
 * fills data + len itself and then moves len. */
void cap_buf_reserve(struct cap_buf *b, size_t extra);
void cap_buf_puts(struct cap_buf *b, const char *s);
void cap_buf_putc(struct cap_buf *b, char c);
void cap_buf_printf(struct cap_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cap_buf_vprintf(struct cap_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Returns the contents (never NULL) and leaves the buffer empty; caller frees. */
char *cap_buf_steal(struct cap_buf *b);
void cap_buf_free(struct cap_buf *b);

/* v in decimal into out (at most 20 bytes, no NUL); its length. No
 * printf: for code that formats many numbers (the dashboard's pages). */
size_t cap_fmt_i64(char out[20], int64_t v);
void cap_buf_put_i64(struct cap_buf *b, int64_t v);

/* A text between processes of capsule's own: a 32-bit length in host
 * order then the bytes, NULL as a length of UINT32_MAX. get reads one at
 * *p (up to end) into *out (NULL for NULL), moving *p past it; false when
 * it is cut short or holds a NUL (*out then NULL). */
void cap_buf_put_text(struct cap_buf *b, const char *s);
bool cap_buf_get_text(const char **p, const char *end, char **out);

/* Allocation helpers that abort on out-of-memory. */
void *cap_xmalloc(size_t n);
void *cap_xcalloc(size_t n, size_t size);
void *cap_xrealloc(void *p, size_t n);
char *cap_xstrdup(const char *s);
char *cap_xstrndup(const char *s, size_t n);
char *cap_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
