/* The document tree: what every front-end parser (JSON, YAML, TOML) produces,
 * with the line and column of every value and key, so validators can report
 * problems where they are. A tree lives in one `struct cap_doc` whose arena
 * owns every node and string; cap_doc_free releases it all at once.
 *
 * Strings are length-counted (they may contain NUL) and also NUL-terminated.
 * Objects keep their members in document order. */
#ifndef CAPSULE_CORE_NODE_H
#define CAPSULE_CORE_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cap_node_kind {
  CAP_NODE_NULL,
  CAP_NODE_BOOL,
  CAP_NODE_INT,   /* fits int64; u.num.f holds the same value as a double */
  CAP_NODE_FLOAT, /* u.num.f; JSON numbers too large for int64 land here */
  CAP_NODE_STRING,
  CAP_NODE_ARRAY,
  CAP_NODE_OBJECT,
  CAP_NODE_DATETIME, /* TOML only: u.str is the RFC 3339 text, subkind says which */
};

/* subkind of CAP_NODE_DATETIME */
enum cap_datetime_kind {
  CAP_DT_OFFSET,         /* 1979-05-27T07:32:00Z */
  CAP_DT_LOCAL_DATETIME, /* 1979-05-27T07:32:00 */
  CAP_DT_LOCAL_DATE,     /* 1979-05-27 */
  CAP_DT_LOCAL_TIME,     /* 07:32:00 */
};

struct cap_node;

struct cap_member {
  const char *key; /* NUL-terminated; keylen excludes the NUL */
  size_t keylen;
  uint32_t line, col; /* position of the key */
  struct cap_node *value;
};

struct cap_node {
  uint8_t kind;       /* enum cap_node_kind */
  uint8_t subkind;    /* enum cap_datetime_kind for datetimes */
  uint8_t flags;      /* free for the parser that built the tree */
  uint32_t line, col; /* 1-based position of the value's first character */
  union {
    bool boolean;
    struct {
      int64_t i;       /* CAP_NODE_INT */
      double f;        /* both number kinds */
      const char *raw; /* source text of a JSON number, else NULL */
    } num;
    struct {
      const char *ptr;
      size_t len;
    } str;
    struct {
      struct cap_node **items;
      size_t len, cap;
    } arr;
    struct {
      struct cap_member *items;
      size_t len, cap;
    } obj;
  } u;
};

struct cap_arena_block;

struct cap_doc {
  struct cap_node *root;
  struct cap_arena_block *blocks; /* private */
};

struct cap_doc *cap_doc_new(void);
void cap_doc_free(struct cap_doc *doc);
void cap_doc_freep(struct cap_doc **doc);

/* Arena allocation; lives as long as the doc. Aborts on out-of-memory. */
void *cap_doc_alloc(struct cap_doc *doc, size_t size);
char *cap_doc_strndup(struct cap_doc *doc, const char *s, size_t n);

struct cap_node *cap_node_new(struct cap_doc *doc, enum cap_node_kind kind, uint32_t line,
                              uint32_t col);
struct cap_node *cap_node_new_string(struct cap_doc *doc, const char *s, size_t n, uint32_t line,
                                     uint32_t col);
void cap_node_array_push(struct cap_doc *doc, struct cap_node *array, struct cap_node *item);
/* Appends without checking for duplicates; the key is copied. */
struct cap_member *cap_node_object_add(struct cap_doc *doc, struct cap_node *object,
                                       const char *key, size_t keylen, uint32_t line, uint32_t col,
                                       struct cap_node *value);

/* Lookup by key (first match); NULL when absent or obj is not an object. */
struct cap_node *cap_node_get(const struct cap_node *obj, const char *key);
struct cap_member *cap_node_get_member(const struct cap_node *obj, const char *key, size_t keylen);

/* "string", "integer", "object", ... for messages. */
const char *cap_node_kind_name(enum cap_node_kind kind);
bool cap_node_is_number(const struct cap_node *n);

/* Structural equality (numbers compare by value, objects ignore order). */
bool cap_node_equal(const struct cap_node *a, const struct cap_node *b);

#endif
