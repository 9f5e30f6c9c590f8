/* What the schema compiler's files share (compile.c: the compiler state,
 * compiling a schema object, resolving references; index.c: indexing
 * resources and anchors, loading documents, resolving URIs; keywords.c: the
 * keyword table and what each keyword pre-digests). Nothing outside
 * src/jsonschema uses this. */
#ifndef CAPSULE_JSONSCHEMA_COMPILE_INTERNAL_H
#define CAPSULE_JSONSCHEMA_COMPILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/diag.h"
#include "jsonschema/internal.h"

#define DEFAULT_BASE "urn:capsule:schema"
#define META_2020 "https://json-schema.org/draft/2020-12/schema"
#define VOCAB_PREFIX "https://json-schema.org/draft/2020-12/vocab/"
#define MAX_SCHEMA_DEPTH 512
#define MAX_LOADED_DOCS 256
#define MAX_FILE_BYTES (16u << 20)

/* ---- small hash maps (open addressing; keys are not copied) ---- */

struct map_slot {
  const void *key; /* string (NUL-terminated) or pointer */
  void *value;
};

struct map {
  struct map_slot *slots;
  size_t len, cap; /* cap is a power of two */
  bool strings;
};

uint64_t js_hash_bytes(const char *s, size_t n);
void *js_map_get(const struct map *m, const void *key);
/* Sets key (not copied: it must outlive the map) unless present; returns
 * the value now stored. */
void *js_map_put(struct map *m, const void *key, void *value);

/* ---- compiler state ---- */

struct node_info {
  const char *base; /* absolute base URI in effect at this schema */
  const char *loc;  /* keyword-location prefix for errors */
  const char *path; /* dotted field path for compile diagnostics */
  const char *file; /* file name for compile diagnostics */
  struct js_resource *res;
  unsigned depth;
};

struct pending_ref {
  struct js_schema *schema;
  const char *uri;
  bool dynamic;
  const struct cap_node *at;
  const struct node_info *info;
};

struct compiler {
  struct cap_js_validator *v;
  const struct cap_js_registry *reg;
  const char *file;
  struct cap_diags *diags;
  bool failed;
  struct map uris;     /* absolute URI (with #anchor) -> const struct cap_node * */
  struct map infos;    /* node -> struct node_info * */
  struct map compiled; /* node -> struct js_schema * */
  struct map loading;  /* document URI -> (void *)1 once tried */
  struct pending_ref *pending;
  size_t n_pending, cap_pending;
};

/* A compile error at `at` (the keyword `key` below info's path); marks the
 * compilation failed. */
void js_diag(struct compiler *c, const struct node_info *info, const struct cap_node *at,
             const char *key, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The location/path of a child: key is a keyword or property name, or
 * index >= 0. */
struct node_info *js_child_info(struct compiler *c, const struct node_info *parent, const char *key,
                                size_t keylen, long index);

/* index.c */
void js_index_document(struct compiler *c, const struct cap_node *root, const char *uri,
                       const char *loc, const char *path, const char *file);
const struct cap_node *js_resolve_uri(struct compiler *c, const char *uri,
                                      const struct node_info **out_info);

/* index.c: the index of an anchor name in the validator's table. */
int js_intern_anchor(struct cap_js_validator *v, const char *name);

/* compile.c: the compiled schema of node n (compiled once, then shared). */
struct js_schema *js_compile_schema(struct compiler *c, const struct cap_node *n);

/* keywords.c: one keyword of schema object s; then, after all of them,
 * what validation needs precomputed (messages, fast-path flags). */
void js_compile_keyword(struct compiler *c, struct js_schema *s, const struct node_info *info,
                        const struct cap_member *m);
void js_schema_finish(struct compiler *c, struct js_schema *s, const struct node_info *info);

#endif
