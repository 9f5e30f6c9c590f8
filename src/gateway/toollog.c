/* The tools' stderr logs, STATE/logs/<capability>.log: appended to by every
 * call, rotated so they stay bounded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "gateway/call.h"

/* A log past this (or past the capability's own disk limit, when that is
 * smaller) becomes <capability>.log.1, replacing the one before: at most
 * two files, each at most the threshold plus one call's output. */
#define TOOL_LOG_MAX (8ull << 20)

static uint64_t rotate_at(const struct cap_spec *spec)
{
  uint64_t disk = spec->limits.disk_bytes;
  return disk && disk < TOOL_LOG_MAX ? disk : TOOL_LOG_MAX;
}

uint64_t gw_tool_log_bound(const struct cap_spec *spec) { return rotate_at(spec); }

char *gw_tool_log_prepare(const char *log_dir, const struct cap_spec *spec)
{
  if (!log_dir)
    return NULL;
  char *path = cap_xasprintf("%s/%s.log", log_dir, spec->id);
  struct stat st;
  int r = stat(path, &st);
  if (r < 0 && errno == ENOENT) /* the directory made only when the log is missing */
    mkdir(log_dir, 0700);
  if (r == 0 && (uint64_t)st.st_size >= rotate_at(spec)) {
    char *old = cap_xasprintf("%s.1", path);
    rename(path, old); /* a concurrent call may rotate first: either is fine */
    free(old);
  }
  return path;
}
