/* The ClientHello's server_name (sni.h): RFC 8446 section 4.1.2 and RFC 6066
 * section 3. A reader with a bound: each step checks the bytes it needs
 * are inside the part it is reading. */
#include "net/sni.h"

#include <stdbool.h>
#include <string.h>

struct reader {
  const uint8_t *p;
  size_t left;
};

static bool take(struct reader *r, size_t n, const uint8_t **out)
{
  if (r->left < n)
    return false;
  if (out)
    *out = r->p;
  r->p += n;
  r->left -= n;
  return true;
}

static bool take_u8(struct reader *r, size_t *v)
{
  const uint8_t *p;
  if (!take(r, 1, &p))
    return false;
  *v = p[0];
  return true;
}

static bool take_u16(struct reader *r, size_t *v)
{
  const uint8_t *p;
  if (!take(r, 2, &p))
    return false;
  *v = (size_t)p[0] << 8 | p[1];
  return true;
}

/* A part of r, n bytes long, as a reader of its own. */
static bool sub(struct reader *r, size_t n, struct reader *part)
{
  const uint8_t *p;
  if (!take(r, n, &p))
    return false;
  *part = (struct reader){p, n};
  return true;
}

/* host_name: letters, digits, '-', '_', single dots inside; no trailing
 * dot (RFC 6066 forbids it) and no IP literal check (a literal is a name
 * the allowlist then does not hold). */
static bool host_name(const uint8_t *p, size_t n, char name[SNI_NAME_MAX])
{
  if (n == 0 || n >= SNI_NAME_MAX || p[0] == '.' || p[n - 1] == '.')
    return false;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = p[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              (c == '.' && p[i - 1] != '.');
    if (c >= 'A' && c <= 'Z') {
      c = (uint8_t)(c + ('a' - 'A'));
      ok = true;
    }
    if (!ok)
      return false;
    name[i] = (char)c;
  }
  name[n] = '\0';
  return true;
}

/* The server_name extension's body: exactly one host_name entry. */
static enum sni_result server_name(struct reader ext, char name[SNI_NAME_MAX])
{
  size_t list_len, type, len;
  struct reader list;
  const uint8_t *p;
  if (!take_u16(&ext, &list_len) || !sub(&ext, list_len, &list) || ext.left != 0 || list.left == 0)
    return SNI_MALFORMED;
  bool found = false;
  while (list.left) {
    if (!take_u8(&list, &type) || !take_u16(&list, &len) || !take(&list, len, &p))
      return SNI_MALFORMED;
    if (type != 0)
      continue; /* no other name type is defined; skipped as RFC 6066 says */
    if (found || !host_name(p, len, name))
      return SNI_MALFORMED;
    found = true;
  }
  return found ? SNI_FOUND : SNI_NONE;
}

/* The ClientHello's body, up to and through its extensions. */
static enum sni_result client_hello(struct reader h, char name[SNI_NAME_MAX])
{
  size_t n;
  if (!take(&h, 2 + 32, NULL) || !take_u8(&h, &n) || n > 32 || !take(&h, n, NULL) ||
      !take_u16(&h, &n) || n < 2 || n % 2 || !take(&h, n, NULL) || !take_u8(&h, &n) || n < 1 ||
      !take(&h, n, NULL))
    return SNI_MALFORMED;
  if (h.left == 0)
    return SNI_NONE; /* no extensions at all */
  struct reader exts;
  if (!take_u16(&h, &n) || !sub(&h, n, &exts) || h.left != 0)
    return SNI_MALFORMED;
  enum sni_result result = SNI_NONE;
  while (exts.left) {
    size_t type, len;
    struct reader body;
    if (!take_u16(&exts, &type) || !take_u16(&exts, &len) || !sub(&exts, len, &body))
      return SNI_MALFORMED;
    if (type != 0)
      continue;
    if (result != SNI_NONE) /* a second server_name */
      return SNI_MALFORMED;
    result = server_name(body, name);
    if (result == SNI_MALFORMED)
      return result;
  }
  return result;
}

enum sni_result sni_parse(const uint8_t *data, size_t len, char name[SNI_NAME_MAX])
{
  name[0] = '\0';
  if (len >= 1 && data[0] != 0x16)
    return SNI_NOT_TLS;
  if (len >= 2 && data[1] != 3)
    return SNI_NOT_TLS;
  if (len < 5)
    return SNI_NEED_MORE;
  size_t record = (size_t)data[3] << 8 | data[4];
  if (data[2] > 4 || record == 0 || record > SNI_RECORD_MAX - 5)
    return SNI_MALFORMED;
  if (len < 5 + record)
    return SNI_NEED_MORE;
  struct reader r = {data + 5, record}, body;
  size_t type;
  const uint8_t *l;
  if (!take_u8(&r, &type) || type != 1 || !take(&r, 3, &l))
    return SNI_MALFORMED;
  size_t hello = (size_t)l[0] << 16 | (size_t)l[1] << 8 | l[2];
  /* the whole ClientHello in this one record, and nothing after it */
  if (!sub(&r, hello, &body) || r.left != 0)
    return SNI_MALFORMED;
  enum sni_result res = client_hello(body, name);
  if (res != SNI_FOUND)
    name[0] = '\0';
  return res;
}
