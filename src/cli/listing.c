/* The listing verbs' two output forms (listing.h). */
#include "cli/listing.h"

#include <stdio.h>
#include <string.h>

#include "core/escape.h"

void cli_listing_begin(struct cli_listing *l, bool json)
{
  memset(l, 0, sizeof *l);
  l->json = json;
  cap_jw_init(&l->w, &l->out, true);
  if (json)
    cap_jw_begin_array(&l->w);
}

void cli_listing_row(struct cli_listing *l, const struct cli_column *cols,
                     const char *const *values, size_t n)
{
  l->n++;
  if (l->json) {
    cap_jw_begin_object(&l->w);
    for (size_t i = 0; i < n; i++) {
      cap_jw_key(&l->w, cols[i].key);
      cap_jw_string_or_null(&l->w, values[i]);
    }
    cap_jw_end_object(&l->w);
    return;
  }
  struct cap_buf b = {0};
  for (size_t i = 0; i < n; i++) {
    const char *v = values[i] ? values[i] : cols[i].absent ? cols[i].absent : "";
    size_t start = b.len;
    cap_escape_text(&b, v, strlen(v));
    for (size_t w = b.len - start; i + 1 < n && w < (size_t)cols[i].width; w++)
      cap_buf_putc(&b, ' ');
    cap_buf_putc(&b, i + 1 < n ? ' ' : '\n');
  }
  fwrite(b.data, 1, b.len, stdout);
  cap_buf_free(&b);
}

void cli_listing_end(struct cli_listing *l, bool ok)
{
  if (l->json) {
    cap_jw_end_array(&l->w);
    if (ok)
      printf("%s\n", l->out.data);
  }
  cap_buf_free(&l->out);
}
