/* What only the rollback files share (rollback.c, rollback_record.c,
 * rollback_restore.c). */
#ifndef CAPSULE_SANDBOX_ROLLBACK_INTERNAL_H
#define CAPSULE_SANDBOX_ROLLBACK_INTERNAL_H

#include <sys/types.h>

/* STORE/objects/AB/CDEF... for the hash hex (allocated). */
char *rb_object_path(const char *store, const char *hex);
/* mkdir -p; 0 or -errno. */
int rb_mkdirs(const char *path, mode_t mode);

#endif
