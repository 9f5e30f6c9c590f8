/* /proc/PID/stat read once and cut after the command name: one reader for
 * the CPU sums (sandbox/limits.c) and the keepers' start times
 * (gateway/instance_status.c). */
#ifndef CAPSULE_CORE_PROCSTAT_H
#define CAPSULE_CORE_PROCSTAT_H

#include <stddef.h>

/* Reads `path` (a PID/stat file, relative to at_fd or absolute) into buf
 * and returns what follows the name's closing parenthesis and its space:
 * field 3 (the state) onwards. NULL when it cannot be read. */
const char *cap_proc_stat(int at_fd, const char *path, char *buf, size_t size);

#endif
