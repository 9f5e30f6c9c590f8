/* The host id-range registry's line format (see id_range.c): one line
 * "BASE KEY[@M:D:I] STATE-DIR" read and written, a key as one word, the
 * format's marker line. No I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/id_registry_line.h"

/* One line "BASE KEY[@M:D:I] STATE-DIR" parsed in place: false for a
 * malformed one. The where-part rides on the key's word, so a capsule
 * that knows only "BASE KEY STATE-DIR" reads the same path and keeps the
 * line (it takes KEY@M:D:I for a key of its own). */
bool registry_line(char *line, uint64_t *base, char **key, struct reg_where *where, char **state)
{
  unsigned long long b;
  int k = 0, ke = 0, at = 0;
  line[strcspn(line, "\n")] = '\0';
  if (sscanf(line, "%llu %n%*s%n %n", &b, &k, &ke, &at) != 1 || !k || !ke || !at)
    return false;
  line[ke] = '\0';
  *base = b;
  *key = line + k;
  *where = (struct reg_where){0};
  char *sep = strrchr(*key, '@'); /* a key's own '@' is written %40 */
  int n = 0;
  /* registry_put never writes an all-zero where-part: such a tail is
   * part of the key ("k@1:2:3@0:0:0" would else be written back as
   * "k@1:2:3" and read as another line; tests/fuzz) */
  if (sep && sscanf(sep, "@%llu:%llu:%llu%n", &where->mnt, &where->dev, &where->ino, &n) == 3 &&
      sep[n] == '\0' && (where->mnt || where->dev || where->ino))
    *sep = '\0';
  else
    *where = (struct reg_where){0};
  *state = line + at; /* the rest of the line: it may hold spaces */
  /* an empty key ("B @M:D:I /dir") would be written back as "B  /dir",
   * which reads as the key "/dir" and no state (tests/fuzz) */
  return **key && **state == '/';
}

void registry_put(struct cap_buf *b, uint64_t base, const char *word, const struct reg_where *w,
                  const char *state)
{
  if (w->mnt || w->dev || w->ino)
    cap_buf_printf(b, "%llu %s@%llu:%llu:%llu %s\n", (unsigned long long)base, word, w->mnt, w->dev,
                   w->ino, state);
  else
    cap_buf_printf(b, "%llu %s %s\n", (unsigned long long)base, word, state);
}

/* KEY as the registry writes it: one word. A key is a folder's name for
 * nono and Talos capabilities, which may hold spaces, tabs or newlines:
 * those bytes, every control byte, '%' and '@' (which separates the
 * where-part) are written %XX, so that the
 * line reads back as written (a key with none of them is unchanged). */
char *registry_key(const char *key)
{
  struct cap_buf b = {0};
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
    if (*p <= ' ' || *p == 0x7f || *p == '%' || *p == '@')
      cap_buf_printf(&b, "%%%02X", *p);
    else
      cap_buf_putc(&b, (char)*p);
  }
  return b.data ? cap_buf_steal(&b) : cap_xstrdup("");
}

/* The format a marker line (base 0, key REGISTRY_MARK + N) names; 0
 * for any other line. */
unsigned registry_marker(uint64_t base, const char *key)
{
  size_t n = strlen(REGISTRY_MARK);
  if (base != 0 || strncmp(key, REGISTRY_MARK, n) != 0)
    return 0;
  char *end;
  unsigned long v = strtoul(key + n, &end, 10);
  return *end || v == 0 || v > 1000000 ? 1000000 : (unsigned)v; /* unreadable: later */
}

/* Whether line (n bytes) starts as a well-formed one, "DIGITS WORD" with
 * WORD ending at a space or '@', of a key other than word: skipped
 * unparsed. A line that does not start so is parsed (and one it cannot
 * read sends the peek to the full path, as before). */
bool registry_other_key(const char *line, size_t n, const char *word, size_t word_len)
{
  size_t i = 0;
  while (i < n && line[i] >= '0' && line[i] <= '9')
    i++;
  if (i == 0 || i >= n || line[i] != ' ')
    return false;
  const char *k = line + i + 1;
  size_t rest = n - i - 1, kl = 0;
  while (kl < rest && k[kl] != ' ' && k[kl] != '@')
    kl++;
  if (kl == 0 || kl == rest) /* an empty word, or no end to it: not well-formed */
    return false;
  return kl != word_len || memcmp(k, word, kl) != 0;
}
