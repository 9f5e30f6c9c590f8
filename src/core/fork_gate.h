/* A fork taken between allocations, never inside one, in builds with
 * GCC's AddressSanitizer (core/fork_gate.c says why). Code that forks with
 * a raw clone syscall (glibc's fork() runs these itself, as pthread_atfork
 * handlers) calls cap_fork_prepare() before it, cap_fork_parent() in the
 * parent after it and cap_fork_child() first thing in the child. In the
 * plain build they are empty. */
#ifndef CAP_CORE_FORK_GATE_H
#define CAP_CORE_FORK_GATE_H

#include <stdbool.h>

#if defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
#define CAP_FORK_GATE 1
void cap_fork_prepare(void);
void cap_fork_parent(void);
void cap_fork_child(void);
/* How many of a fork's waits (a thread starting, one ending) ran out
 * their bound in this process: each one a fork held for seconds */
unsigned cap_fork_gate_gave_up(void);
#else
#define CAP_FORK_GATE 0
static inline void cap_fork_prepare(void) {}
static inline void cap_fork_parent(void) {}
static inline void cap_fork_child(void) {}
static inline unsigned cap_fork_gate_gave_up(void) { return 0; }
#endif

#endif
