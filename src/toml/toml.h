/* TOML 1.0 into the positioned document tree. Tables become objects, arrays
 * arrays, datetimes CAP_NODE_DATETIME nodes with their RFC 3339 text and
 * kind. Every syntax or semantic error (redefined keys and tables, bad
 * escapes, invalid UTF-8, ...) is reported at file:line:col; parsing stops
 * at the first error. */
#ifndef CAPSULE_TOML_TOML_H
#define CAPSULE_TOML_TOML_H

#include <stddef.h>

#include "core/diag.h"
#include "core/node.h"

int cap_toml_parse(struct cap_doc *doc, const char *data, size_t len, const char *file,
                   struct cap_diags *diags);

#endif
