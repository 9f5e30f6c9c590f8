#include "core/proctitle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

/* The argv strings as the kernel laid them out: contiguous, from
 * title_area to title_end (the end of the last argument's NUL). The
 * kernel's cmdline is that range (mm->arg_start..arg_end). */
static char *title_area;
static size_t title_len;

void cap_proctitle_init(int argc, char **argv)
{
  if (argc < 1 || !argv[0])
    return;
  char *end = argv[0] + strlen(argv[0]) + 1;
  for (int i = 1; i < argc; i++) {
    if (argv[i] != end) /* not laid out as the kernel does: leave it */
      return;
    end = argv[i] + strlen(argv[i]) + 1;
  }
  title_area = argv[0];
  title_len = (size_t)(end - argv[0]);
  for (int i = 0; i < argc; i++) {
    char *copy = strdup(argv[i]);
    if (!copy) {
      title_area = NULL; /* keep argv as it is: nothing will be overwritten */
      return;
    }
    argv[i] = copy;
  }
}

void cap_proctitle_mask(int i, size_t off, size_t len)
{
  if (!title_area || i < 0)
    return;
  char *p = title_area, *end = title_area + title_len;
  for (; i > 0 && p < end; i--)
    p += strnlen(p, (size_t)(end - p)) + 1;
  size_t n = p < end ? strnlen(p, (size_t)(end - p)) : 0;
  if (off < n)
    memset(p + off, '*', len < n - off ? len : n - off);
}

void cap_proctitle_set(const char *comm, const char *fmt, ...)
{
  char title[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(title, sizeof title, fmt, ap);
  va_end(ap);
  if (comm) {
    char name[16] = {0};
    memcpy(name, comm, strnlen(comm, sizeof name - 1));
    prctl(PR_SET_NAME, name, 0, 0, 0);
  }
  if (!title_area || title_len < 2)
    return;
  memset(title_area, 0, title_len);
  memcpy(title_area, title, strnlen(title, title_len - 1));
}
