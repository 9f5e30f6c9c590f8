/* The process title: what `ps` and /proc/PID/cmdline show. A process
 * forked from a command (a warm instance's keeper, forked from `capsule
 * call`) inherits that command's arguments, which may hold secrets; it
 * names itself instead, by overwriting the memory the kernel reads the
 * command line from (as nginx and PostgreSQL do) and its comm name.
 * Not thread-safe: init once in main, set before threads start. */
#ifndef CAPSULE_CORE_PROCTITLE_H
#define CAPSULE_CORE_PROCTITLE_H

#include <stddef.h>

/* Records argv's memory and moves each argv[i] to a heap copy, so that
 * pointers taken from argv stay valid after a title overwrites it. Call
 * first thing in main, before anything keeps a pointer into argv. */
void cap_proctitle_init(int argc, char **argv);

/* Overwrites len bytes of the i-th argument, from off, with '*' in the
 * memory the kernel shows (the heap copies keep the text): a secret on
 * the command line stays out of `ps`. Without init, nothing. */
void cap_proctitle_mask(int i, size_t off, size_t len);

/* Sets the title (truncated to the original command line's length; the
 * rest is zeroed, so nothing of the old arguments stays readable) and,
 * unless comm is NULL, the comm name (its first 15 bytes). Without init
 * only the comm name. */
void cap_proctitle_set(const char *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
