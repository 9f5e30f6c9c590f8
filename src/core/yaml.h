/* YAML (libyaml) into the positioned document tree, resolving plain scalars
 * by the YAML 1.2 core schema (null, booleans, integers, floats; quoted
 * scalars stay strings). One document per file; duplicate keys, non-scalar
 * keys and runaway aliases are errors at file:line:col. */
#ifndef CAPSULE_CORE_YAML_H
#define CAPSULE_CORE_YAML_H

#include <stddef.h>

#include "diag.h"
#include "node.h"

int cap_yaml_parse(struct cap_doc *doc, const char *data, size_t len, const char *file,
                   struct cap_diags *diags);

#endif
