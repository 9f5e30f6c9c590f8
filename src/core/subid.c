/* A line of /etc/subuid or /etc/subgid (core/subid.h). */
#include "core/subid.h"

#include <errno.h>
#include <string.h>

/* Decimal digits up to the end or a ':' at most 2^32: the value and the
 * position after it, or NULL. */
static const char *number(const char *p, const char *end, uint64_t *out)
{
  uint64_t v = 0;
  const char *start = p;
  for (; p < end && *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (uint64_t)(*p - '0');
    if (v > UINT32_MAX + 1ull)
      return NULL;
  }
  if (p == start)
    return NULL;
  *out = v;
  return p;
}

int cap_subid_line(const char *line, size_t len, size_t *name_len, uint64_t *start, uint64_t *count)
{
  const char *end = line + len;
  if (len && end[-1] == '\n')
    end--;
  const char *c1 = memchr(line, ':', (size_t)(end - line));
  if (!c1 || c1 == line || line[0] == '#' || memchr(line, '\0', (size_t)(c1 - line)))
    return -EINVAL;
  const char *p = number(c1 + 1, end, start);
  if (!p || p == end || *p != ':')
    return -EINVAL;
  p = number(p + 1, end, count);
  if (!p || p != end || *count == 0 || *start + *count > UINT32_MAX + 1ull)
    return -EINVAL;
  *name_len = (size_t)(c1 - line);
  return 0;
}
