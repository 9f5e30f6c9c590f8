/* libFuzzer target for the state's SQL rewrite for PostgreSQL and the
 * URL redaction of its messages (src/gateway/db_sql.c). The SQL is
 * capsule's own, but the rewrite is a tokenizer: whatever the bytes, it
 * must not read out of bounds, must return NULL only for an unterminated
 * quote or comment, must keep quoted text as it was (a rewrite never
 * grows a literal) and must number placeholders from 1. A redacted URL
 * never holds the password of its user info. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *in = malloc(size + 1);
  if (!in)
    return 0;
  memcpy(in, data, size);
  in[size] = '\0';
  int n = -1;
  char *out = gw_db_sql_pg(in, &n);
  if (out) {
    if (n < 0 || (strchr(in, '?') == NULL && n != 0))
      abort();
    if (strchr(in, '?') == NULL && strchr(in, '\'') == NULL && strchr(in, '"') == NULL &&
        strchr(out, '$') != NULL && strchr(in, '$') == NULL)
      abort(); /* a placeholder from nowhere */
    free(out);
  }
  char red[256];
  gw_db_url_redact(in, red, sizeof red);
  (void)gw_db_url_password_ambiguous(in); /* reads within the string, whatever it holds */
  if (strlen(red) >= sizeof red)
    abort();
  /* scheme://user:SECRET@host: SECRET is gone */
  const char *p = strstr(in, "://");
  const char *auth = p ? p + 3 : in;
  size_t host_end = strcspn(auth, "/?");
  const char *at = memchr(auth, '@', host_end);
  const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
  if (colon && at - colon > 4) {
    size_t k = (size_t)(at - colon - 1);
    size_t off = (size_t)(colon - in) + 1; /* where the password was, and is "***" now */
    if (off < strlen(red) && strncmp(colon + 1, "***", 3) != 0 &&
        strncmp(red + off, colon + 1, k) == 0)
      abort();
  }
  free(in);
  return 0;
}
