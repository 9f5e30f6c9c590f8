/* Scope-bound cleanup, systemd style: a variable declared with one of these
 * attributes is released when it leaves scope. Destructors accept NULL. */
#ifndef CAPSULE_CORE_CLEANUP_H
#define CAPSULE_CORE_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void cap_freep(void *p) { free(*(void **)p); }
static inline void cap_closep(int *fd)
{
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
  }
}
static inline void cap_fclosep(FILE **f)
{
  if (*f)
    fclose(*f);
}

#define _cleanup_free_ _cleanup_(cap_freep)
#define _cleanup_close_ _cleanup_(cap_closep)
#define _cleanup_fclose_ _cleanup_(cap_fclosep)

/* Take ownership out of a cleanup-managed variable. */
#define steal_pointer(pp)                                                                          \
  ({                                                                                               \
    __typeof__(*(pp)) _stolen = *(pp);                                                             \
    *(pp) = NULL;                                                                                  \
    _stolen;                                                                                       \
  })

#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
