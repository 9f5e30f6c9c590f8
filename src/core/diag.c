#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "escape.h"

#define DIAG_DEFAULT_LIMIT 200

void cap_diags_vadd(struct cap_diags *d, enum cap_severity sev, const char *file, uint32_t line,
                    uint32_t col, const char *path, const char *fmt, va_list ap)
{
  if (sev == CAP_SEV_ERROR)
    d->errors++;
  else
    d->warnings++;
  size_t limit = d->limit ? d->limit : DIAG_DEFAULT_LIMIT;
  if (d->len >= limit)
    return;
  if (d->len == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 8;
    d->items = cap_xrealloc(d->items, d->cap * sizeof(*d->items));
  }
  struct cap_buf msg = {0};
  cap_buf_vprintf(&msg, fmt, ap);
  d->items[d->len++] = (struct cap_diag){
      .severity = sev,
      .file = cap_xstrdup(file ? file : ""),
      .line = line,
      .col = col,
      .path = cap_xstrdup(path ? path : ""),
      .message = cap_buf_steal(&msg),
  };
}

void cap_diags_add(struct cap_diags *d, enum cap_severity sev, const char *file, uint32_t line,
                   uint32_t col, const char *path, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cap_diags_vadd(d, sev, file, line, col, path, fmt, ap);
  va_end(ap);
}

static int diag_compare(const struct cap_diag *a, const struct cap_diag *b)
{
  int c = strcmp(a->file, b->file);
  if (c)
    return c;
  if (a->line != b->line)
    return a->line < b->line ? -1 : 1;
  if (a->col != b->col)
    return a->col < b->col ? -1 : 1;
  return 0;
}

void cap_diags_sort(struct cap_diags *d)
{
  /* insertion sort: stable, and lists are short */
  for (size_t i = 1; i < d->len; i++) {
    struct cap_diag cur = d->items[i];
    size_t j = i;
    while (j > 0 && diag_compare(&d->items[j - 1], &cur) > 0) {
      d->items[j] = d->items[j - 1];
      j--;
    }
    d->items[j] = cur;
  }
}

void cap_diag_format(const struct cap_diag *diag, FILE *out)
{
  /* file names, field paths and messages quote what a manifest holds: one
   * line each, escaped for the terminal (a manifest cannot forge lines or
   * drive the cursor) */
  const char *sev = diag->severity == CAP_SEV_ERROR ? "error" : "warning";
  struct cap_buf line = {0};
  if (diag->line)
    cap_buf_printf(&line, "%s:%u:%u: %s: ", diag->file, diag->line, diag->col, sev);
  else
    cap_buf_printf(&line, "%s: %s: ", diag->file, sev);
  if (diag->path[0])
    cap_buf_printf(&line, "%s: ", diag->path);
  cap_buf_puts(&line, diag->message);
  struct cap_escape_stream st = {0};
  struct cap_buf b = {0};
  size_t from = 0;
  for (size_t i = 0; i <= line.len; i++) { /* one line: newline and tab inside are escaped too */
    char c = i < line.len ? line.data[i] : '\0';
    if (i < line.len && c != '\n' && c != '\t')
      continue;
    cap_escape_output(&st, &b, line.data + from, i - from);
    if (i < line.len)
      cap_buf_puts(&b, c == '\n' ? "\\n" : "\\t");
    from = i + 1;
  }
  cap_escape_output_end(&st, &b);
  fwrite(b.data ? b.data : "", 1, b.len, out);
  fputc('\n', out);
  cap_buf_free(&b);
  cap_buf_free(&line);
}

void cap_diags_print(const struct cap_diags *d, FILE *out)
{
  for (size_t i = 0; i < d->len; i++)
    cap_diag_format(&d->items[i], out);
  size_t total = d->errors + d->warnings;
  if (total > d->len)
    fprintf(out, "capsule: %zu more problems not shown\n", total - d->len);
}

void cap_diags_free(struct cap_diags *d)
{
  for (size_t i = 0; i < d->len; i++) {
    free(d->items[i].file);
    free(d->items[i].path);
    free(d->items[i].message);
  }
  free(d->items);
  *d = (struct cap_diags){0};
}
