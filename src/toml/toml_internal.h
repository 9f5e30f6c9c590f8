/* What the TOML parser's two files share: the parser state, the input
 * cursor (inline: the hot path), and the helpers both use. toml.c holds the
 * structure (tables, arrays, keys, headers, the document); scalar.c the
 * scalar values (strings, numbers, dates and times). */
#ifndef CAPSULE_TOML_INTERNAL_H
#define CAPSULE_TOML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/diag.h"
#include "core/node.h"

#define TOML_MAX_DEPTH 128

enum {
  F_HEADER = 1,
  F_IMPLICIT = 2,
  F_DOTTED = 4,
  F_FROZEN = 8,
  F_AOT = 16,
};

struct key_part {
  const char *s;
  size_t len;
  uint32_t line, col;
};

struct key {
  struct key_part parts[TOML_MAX_DEPTH];
  size_t n;
};

/* (table, key) -> member index, so big tables stay linear to build. */
struct slot {
  const struct cap_node *table;
  size_t index;
};

struct parser {
  struct cap_doc *doc;
  const char *s;
  size_t len, pos;
  uint32_t line, col;
  const char *file;
  struct cap_diags *diags;
  struct cap_node *root, *cur;
  unsigned cur_depth;
  struct cap_buf sbuf;
  struct slot *slots;
  size_t nslots, used;
};

/* ---- input ---- */

static inline int peek(const struct parser *p)
{
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static inline int peek_at(const struct parser *p, size_t k)
{
  return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1;
}

static inline void adv(struct parser *p)
{
  unsigned char c = (unsigned char)p->s[p->pos++];
  if (c == '\n') {
    p->line++;
    p->col = 1;
  } else if ((c & 0xC0) != 0x80) {
    p->col++;
  }
}

static inline void adv_n(struct parser *p, size_t n)
{
  while (n-- && p->pos < p->len)
    adv(p);
}

static inline bool is_digit(int c) { return c >= '0' && c <= '9'; }

static inline bool is_bare(int c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

static inline bool is_control(int c) { return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f; }

/* What the parser sees at the current position, for messages. */
const char *toml_describe(const struct parser *p, char *buf, size_t size);
__attribute__((format(printf, 4, 5))) int toml_fail_at(struct parser *p, uint32_t line,
                                                       uint32_t col, const char *fmt, ...);
#define fail(p, ...) toml_fail_at((p), (p)->line, (p)->col, __VA_ARGS__)

void toml_skip_ws(struct parser *p);
int toml_eat_newline(struct parser *p);
bool toml_at_newline(const struct parser *p);

/* scalar.c */
int toml_parse_string(struct parser *p, struct cap_buf *b);
bool toml_at_value_end(const struct parser *p);
int toml_value_end(struct parser *p, uint32_t line, uint32_t col, const char *what);
int toml_parse_number(struct parser *p, struct cap_node **out);
int toml_parse_datetime(struct parser *p, bool has_date, struct cap_node **out);

#endif
