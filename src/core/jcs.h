/* RFC 8785 JSON Canonicalization Scheme: the bytes Covenant signs a
 * capability token's scope as (serde_jcs). Object members sorted by their
 * keys' UTF-16 code units, no whitespace, strings escaped only where JSON
 * requires, numbers as ECMAScript prints them. */
#ifndef CAPSULE_CORE_JCS_H
#define CAPSULE_CORE_JCS_H

#include "core/buf.h"
#include "core/node.h"

/* Appends n canonicalised to out. Returns 0, or -EINVAL when n holds what
 * JSON cannot (a datetime, a non-finite number) or an object repeats a key. */
int cap_jcs_write(struct cap_buf *out, const struct cap_node *n);

#endif
