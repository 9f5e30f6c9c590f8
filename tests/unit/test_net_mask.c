/* Unit tests for masking a secret in streamed bytes (src/net/mask.c). */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "net/mask.h"
#include "unit.h"

#define SECRET "s3cr/t+k=y\"x\\z-Q7"

/* text masked whole, then again fed one byte at a time: both must agree */
static char *masked(const char *secret, const char *text)
{
  struct secret_mask m;
  secret_mask_init(&m, secret);
  char *whole = strdup(text);
  secret_mask_buf(&m, whole, strlen(whole));
  struct cap_buf out = {0};
  for (const char *c = text; *c; c++)
    secret_mask_feed(&m, c, 1, &out);
  secret_mask_finish(&m, &out);
  cap_buf_putc(&out, '\0');
  CHECK_STR(out.data, whole);
  cap_buf_free(&out);
  return whole;
}

static bool hidden(const char *form)
{
  char *text = malloc(strlen(form) + 16);
  sprintf(text, "<<%s>>", form);
  char *m = masked(SECRET, text);
  bool ok = strspn(m + 2, "*") == strlen(form) && strcmp(m + 2 + strlen(form), ">>") == 0;
  if (!ok)
    fprintf(stderr, "  visible: %s\n", m);
  free(m);
  free(text);
  return ok;
}

static void test_forms(void)
{
  CHECK(hidden(SECRET));
  CHECK(hidden("s3cr%2Ft%2Bk%3Dy%22x%5Cz-Q7")); /* percent, upper case */
  CHECK(hidden("s3cr%2ft%2bk%3dy%22x%5cz-Q7")); /* lower case */
  CHECK(hidden("%73%33cr/t+k=y\"x\\z-Q7"));     /* letters encoded too */
  CHECK(hidden("s3cr\\/t+k=y\\\"x\\\\z-Q7"));   /* JSON */
  CHECK(hidden("\\u0073\\u0033cr\\u002Ft+k=y\\u0022x\\u005cz-Q7"));
  CHECK(hidden("s3cr%2Ft+k=y\\\"x%5cz-Q7")); /* a mix */
  /* other text stays as it was */
  char *m = masked(SECRET, "s3cr/t+k=y\"x\\z-Q8 and %2F and \\/");
  CHECK_STR(m, "s3cr/t+k=y\"x\\z-Q8 and %2F and \\/");
  free(m);
  /* too short to mask */
  m = masked("abc", "abc");
  CHECK_STR(m, "abc");
  free(m);
}

/* base64 (standard, URL-safe) of the secret after 0, 1 and 2 bytes: only
 * the characters that mix in neighbouring bytes may stay */
static void test_base64(void)
{
  static const char *const prefixes[] = {"", "a", "ab", "user:"};
  for (size_t i = 0; i < 4; i++)
    for (int url = 0; url < 2; url++) {
      char in[128], enc[256];
      int n = snprintf(in, sizeof in, "%s%s+tail", prefixes[i], SECRET);
      EVP_EncodeBlock((unsigned char *)enc, (unsigned char *)in, n);
      for (char *c = enc; url && *c; c++)
        *c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
      char *m = masked(SECRET, enc);
      size_t stars = 0;
      for (char *c = m; *c; c++)
        stars += *c == '*';
      size_t secret_chars = 4 * strlen(SECRET) / 3;
      CHECK(stars + 4 >= secret_chars);
      free(m);
    }
}

/* a secret with '%' and '\' in it: its literal bytes still match */
static void test_escape_chars_in_secret(void)
{
  char *m = masked("ab%41\\cd", "x ab%41\\cd y");
  CHECK_STR(m, "x ******** y");
  free(m);
  m = masked("ab%41\\cd", "x ab%2541%5Ccd y");
  CHECK_STR(m, "x ************ y");
  free(m);
}

UNIT_MAIN(test_forms, test_base64, test_escape_chars_in_secret)
