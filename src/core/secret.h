/* Keeping a process's secrets away from other processes of the same user.
 * A process that holds the state key, a credential or the proxy's CA key
 * calls cap_secret_hold() once it has loaded them: from then on it is not
 * dumpable, so a same-uid process can neither ptrace it nor open its
 * /proc/PID/mem or environ (the kernel makes those root's), and it leaves
 * no core dump. Children inherit this until they exec. */
#ifndef CAPSULE_CORE_SECRET_H
#define CAPSULE_CORE_SECRET_H

#include <stddef.h>

/* PR_SET_DUMPABLE 0 for this process; 0 or a negative errno. */
int cap_secret_hold(void);

/* size bytes on pages of their own that a forked child sees zeroed
 * (MADV_WIPEONFORK) and a core dump leaves out; zeroed, never NULL.
 * Free with cap_secret_free, which wipes them. */
void *cap_secret_alloc(size_t size);
void cap_secret_free(void *p, size_t size);

#endif
