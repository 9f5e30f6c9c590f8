/* libFuzzer target for the dashboard's form reader (src/front/ui_form.c)
 * and the HTML escaper (cap_escape_html): whatever the body, at most
 * UI_MAX_FIELDS pairs come out, each read back unchanged when encoded
 * again, and each value escaped for HTML holds no character that opens
 * markup or an attribute. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/escape.h"
#include "front/ui.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct pairs {
  char *name[UI_MAX_FIELDS + 1], *value[UI_MAX_FIELDS + 1];
  size_t n;
};

static void keep(void *arg, const char *name, const char *value)
{
  struct pairs *p = arg;
  if (p->n > UI_MAX_FIELDS)
    abort();
  p->name[p->n] = strdup(name);
  p->value[p->n++] = strdup(value);
}

static void encode(struct cap_buf *b, const char *s)
{
  for (const unsigned char *c = (const unsigned char *)s; *c; c++)
    if ((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))
      cap_buf_putc(b, (char)*c);
    else
      cap_buf_printf(b, "%%%02X", *c);
}

static void drop(struct pairs *p)
{
  for (size_t i = 0; i < p->n; i++) {
    free(p->name[i]);
    free(p->value[i]);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct pairs first = {0}, again = {0};
  size_t n = ui_form_parse((const char *)data, size, keep, &first);
  if (n != first.n || n > UI_MAX_FIELDS)
    abort();
  struct cap_buf body = {0};
  for (size_t i = 0; i < n; i++) {
    if (i)
      cap_buf_putc(&body, '&');
    encode(&body, first.name[i]);
    cap_buf_putc(&body, '=');
    encode(&body, first.value[i]);
    struct cap_buf html = {0};
    cap_escape_html(&html, first.value[i], strlen(first.value[i]));
    if (html.len && memchr(html.data, '<', html.len)) /* and the rest of the markup set */
      abort();
    for (size_t k = 0; k < html.len; k++)
      if (strchr(">\"'", html.data[k]) && html.data[k])
        abort();
    cap_buf_free(&html);
  }
  ui_form_parse(body.data ? body.data : "", body.len, keep, &again);
  if (again.n != n)
    abort();
  for (size_t i = 0; i < n; i++)
    if (strcmp(first.name[i], again.name[i]) || strcmp(first.value[i], again.value[i]))
      abort();
  cap_buf_free(&body);
  drop(&first);
  drop(&again);
  return 0;
}
