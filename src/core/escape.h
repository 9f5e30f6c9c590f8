/* Text from elsewhere (a tool's name, output or error, a stored name, a
 * host an HTTP client sent) made safe for a person's terminal: what could
 * move the cursor, ring, recolour, reorder the line or start a new one is
 * shown as an escape instead. The one place that decides which characters
 * those are: the CLI's listings, the sandbox's terminal relay, the egress
 * proxy's messages and the JSON writer (json.c) all use it.
 *
 * Escaped: C0 controls, DEL, C1 controls (U+0080..U+009F, 0x9b is CSI on
 * many terminals), the bidirectional marks, embeddings, overrides and
 * isolates and the invisible formatting characters (U+061C, U+200B..U+200F,
 * U+2028..U+202E, U+2060..U+2069, U+FEFF: zero-width characters and the
 * line and paragraph separators hide or break a line too), and
 * bytes that are not well-formed UTF-8 (overlongs, surrogates, above
 * U+10FFFF, stray continuation bytes, a sequence cut short). */
#ifndef CAPSULE_CORE_ESCAPE_H
#define CAPSULE_CORE_ESCAPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/buf.h"

/* What the text at s starts with (cap_escape_scan). */
enum cap_text_kind {
  CAP_TEXT_PLAIN,   /* a printable character (cp), shown as it is */
  CAP_TEXT_CONTROL, /* a C0 control, DEL or a C1 control (cp) */
  CAP_TEXT_BIDI,    /* a direction or invisible formatting character (cp) */
  CAP_TEXT_INVALID, /* one byte that starts no well-formed sequence (cp: the byte) */
  CAP_TEXT_CUT,     /* a well-formed start of a sequence that len cuts short */
};

/* Classifies the character at s[0..len) (len > 0): returns its length in
 * bytes (1 for INVALID; all of len for CUT) and sets *cp and *kind. */
size_t cap_escape_scan(const char *s, size_t len, uint32_t *cp, enum cap_text_kind *kind);

/* Text for a person to read back: backslash as \\, newline, carriage
 * return and tab as \n \r \t, other C0 controls, DEL and bytes that are
 * not UTF-8 as \xNN, C1 and bidi controls as \u{NNNN}. Since backslash is
 * doubled, what it prints tells each escape from text that looked like it.
 * Appends s[0..len) escaped to out. */
void cap_escape_text(struct cap_buf *out, const char *s, size_t len);
/* The same written to f: at most max bytes of s (cut at a character
 * boundary), then "..." when s was longer. */
void cap_escape_fput(FILE *f, const char *s, size_t max);

/* A program's output copied to a terminal, possibly in pieces as a pipe
 * delivers it: newline and tab pass and backslash stays single (the
 * output is read as lines, not parsed back); every other escape is \xNN
 * or \u{NNNN} as above. A sequence cut at the end of one piece is held in
 * the stream and finished with the next; zero-initialise the stream. */
struct cap_escape_stream {
  char carry[4];
  size_t n_carry;
};
/* Appends in[0..n) escaped to out, holding a cut sequence in st. */
void cap_escape_output(struct cap_escape_stream *st, struct cap_buf *out, const char *in, size_t n);
/* At the end of the output: what st still holds never became a character
 * and is escaped as malformed. */
void cap_escape_output_end(struct cap_escape_stream *st, struct cap_buf *out);

/* Text for an HTML page (the dashboard, front/ui_pages.c), in element
 * content or a quoted attribute value: & < > " ' as character
 * references, and what the terminal escaper escapes (controls but
 * newline and tab, bidi and invisible characters, bytes that are not
 * UTF-8) shown the same way (\x1b, \u{202e}), so a hostile name can
 * neither open markup nor hide or reorder what the operator reads.
 * Appends s[0..len) escaped to out. */
void cap_escape_html(struct cap_buf *out, const char *s, size_t len);

/* s as one word a POSIX shell reads back unchanged, for a command the
 * operator is told to paste: as it is when it holds only
 * [A-Za-z0-9_./+,:@%=-], else in single quotes (each ' as '\''); never
 * empty (''). Allocated. */
char *cap_shell_quote(const char *s);

#endif
