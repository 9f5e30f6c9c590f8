/* Small file-system helpers shared by the sandbox and the gateway. No
 * allocation: safe in the sandbox's child between clone and exec. */
#ifndef CAPSULE_CORE_FS_H
#define CAPSULE_CORE_FS_H

#include <sys/types.h>

/* mkdir -p: path and its missing parents, each with mode. The path itself
 * is tried first (its parent usually exists: one system call), then the
 * walk goes back to the deepest existing ancestor and forward from there.
 * 0 when the path exists afterwards as anything (the caller checks what),
 * else -errno. */
int cap_mkdir_p(const char *path, mode_t mode);

#endif
