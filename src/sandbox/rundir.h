/* A sandbox's run directory on the host ($TMPDIR/.capsule-XXXXXX, the mount
 * point of its tmpfs root) and what a killed capsule leaves behind. The run
 * directory holds a lock file, flocked by the supervisor for the sandbox's
 * whole life, that names the sandbox's cgroups; a later capsule removes a
 * run directory (and the cgroups it names) only when it can take that
 * lock, i.e. when its owner is gone. Used by spawn.c only. */
#ifndef CAPSULE_SANDBOX_RUNDIR_H
#define CAPSULE_SANDBOX_RUNDIR_H

#include "core/error.h"
#include "sandbox/limits.h"

struct rundir {
  char *path;  /* $TMPDIR/.capsule-XXXXXX; NULL: none */
  int lock_fd; /* path/lock, flocked (LOCK_EX) while the sandbox lives */
};

/* Removes the leftovers of dead capsules of this euid in tmpdir (run
 * directories whose lock is free, and the cgroups they name). Best effort:
 * what cannot be removed stays for the next start. */
void rundir_clean_leftovers(const char *tmpdir);
/* Creates and locks a run directory in tmpdir. Returns 0, or -errno with
 * err set. */
int rundir_create(struct rundir *rd, const char *tmpdir, struct cap_error *err);
/* Writes the sandbox's cgroup directories into the lock file, so a later
 * start can remove them if this capsule dies. */
void rundir_record_cgroups(struct rundir *rd, const struct sandbox_limits *lim);
/* Removes the run directory (its cgroups are the caller's to release
 * first) and drops the lock. Accepts an empty rundir. */
void rundir_remove(struct rundir *rd);

#endif
