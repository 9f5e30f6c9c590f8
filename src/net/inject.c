#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "core/secret.h"
#include "core/text.h"
#include "net/proxy_internal.h"

/* ---- URLs and credential routes ---- */

static bool host_equal(const char *a, const char *b)
{
  size_t na = strlen(a), nb = strlen(b);
  if (na && a[na - 1] == '.')
    na--;
  if (nb && b[nb - 1] == '.')
    nb--;
  return na == nb && strncasecmp(a, b, na) == 0;
}

/* The route whose upstream is t's scheme, host and port, and whose base
 * path is a prefix of t's path (at a segment boundary). */
const struct cap_credential_route *proxy_route_for(const struct proxy *px, const struct http_url *t,
                                                   size_t *base_len)
{
  for (size_t i = 0; i < px->spec->n_routes; i++) {
    struct http_url up;
    if (!http_parse_url(px->spec->routes[i].upstream, &up) || up.tls != t->tls ||
        up.port != t->port || !host_equal(up.host, t->host))
      continue;
    size_t n = strlen(up.path);
    while (n && up.path[n - 1] == '/')
      n--;
    if (strncmp(t->path, up.path, n) == 0 &&
        (t->path[n] == '/' || t->path[n] == '?' || !t->path[n])) {
      *base_len = n;
      return &px->spec->routes[i];
    }
  }
  return NULL;
}

bool proxy_has_route_host(const struct proxy *px, const char *host, uint16_t port)
{
  for (size_t i = 0; i < px->spec->n_routes; i++) {
    struct http_url up;
    if (http_parse_url(px->spec->routes[i].upstream, &up) && up.port == port &&
        host_equal(up.host, host))
      return true;
  }
  return false;
}

const struct route_secret *proxy_secret_of(const struct proxy *px,
                                           const struct cap_credential_route *r)
{
  return &px->secrets[r - px->spec->routes];
}

static bool phantom_equal(const struct route_secret *s, const char *v, size_t n)
{
  size_t len = strlen(s->phantom);
  return n == len && CRYPTO_memcmp(v, s->phantom, len) == 0;
}

/* ---- credential injection ---- */

/* s with "{}" replaced by value */
void proxy_put_format(struct cap_buf *out, const char *fmt, const char *value)
{
  const char *hole = strstr(fmt, "{}");
  if (!hole) {
    cap_buf_puts(out, fmt);
    return;
  }
  cap_buf_append(out, fmt, (size_t)(hole - fmt));
  cap_buf_puts(out, value);
  cap_buf_puts(out, hole + 2);
}

static void put_urlencoded(struct cap_buf *out, const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
        strchr("-._~", c))
      cap_buf_putc(out, (char)c);
    else {
      cap_buf_putc(out, '%');
      cap_buf_putc(out, hex[c >> 4]);
      cap_buf_putc(out, hex[c & 15]);
    }
  }
}

void proxy_put_base64(struct cap_buf *out, const char *s)
{
  size_t n = strlen(s);
  unsigned char *enc = cap_xmalloc(4 * ((n + 2) / 3) + 1);
  int len = EVP_EncodeBlock(enc, (const unsigned char *)s, (int)n);
  cap_buf_append(out, (const char *)enc, (size_t)len);
  OPENSSL_cleanse(enc, (size_t)len);
  free(enc);
}

/* Whether the tool's value for the injected header carries the phantom:
 * "Bearer <phantom>", or the phantom itself, or for basic_auth
 * "Basic base64(user:<phantom>)". */
bool proxy_header_has_phantom(const struct route_secret *s, enum cap_inject_mode mode,
                              const char *v)
{
  while (*v == ' ')
    v++;
  if (mode == CAP_INJECT_BASIC_AUTH) {
    if (strncasecmp(v, "Basic ", 6) != 0)
      return false;
    v += 6;
    unsigned char dec[512];
    size_t n = strlen(v);
    if (n == 0 || n > 4 * (sizeof dec / 3) - 4)
      return false;
    int len = EVP_DecodeBlock(dec, (const unsigned char *)v, (int)n);
    if (len < 0)
      return false;
    while (len > 0 && n && v[n - 1] == '=') { /* DecodeBlock counts padding as zeros */
      len--;
      n--;
    }
    dec[len] = '\0';
    const char *colon = memchr(dec, ':', (size_t)len);
    const char *pw = colon ? colon + 1 : (const char *)dec;
    return phantom_equal(s, pw, strlen(pw));
  }
  const char *sp = strrchr(v, ' ');
  const char *token = sp ? sp + 1 : v;
  return phantom_equal(s, token, strlen(token));
}

/* Rewrites t->path for url_path and query_param routes (into out, the
 * upstream's origin form). Returns NULL, or why the request is refused. */
const char *proxy_rewrite_path(const struct cap_credential_route *r, const struct route_secret *s,
                               const char *path, struct cap_buf *out)
{
  size_t plen = strcspn(path, "?");
  if (r->mode == CAP_INJECT_URL_PATH) {
    const char *hole = strstr(r->path_pattern, "{}");
    size_t pre = (size_t)(hole - r->path_pattern);
    const char *suffix = hole + 2;
    const char *at = NULL;
    for (const char *p = path; p + pre <= path + plen; p++)
      if (strncmp(p, r->path_pattern, pre) == 0) {
        at = p;
        break;
      }
    if (!at)
      return "the path does not contain the credential's path_pattern";
    const char *tok = at + pre;
    size_t tlen = *suffix ? 0 : strcspn(tok, "/?");
    if (*suffix) {
      const char *end = strstr(tok, suffix);
      if (!end || end > path + plen)
        return "the path does not contain the credential's path_pattern";
      tlen = (size_t)(end - tok);
    }
    if (s->phantom[0] && !phantom_equal(s, tok, tlen))
      return "the path does not carry this session's token for the credential";
    cap_buf_append(out, path, (size_t)(at - path));
    proxy_put_format(out, r->path_replacement ? r->path_replacement : r->path_pattern, s->secret);
    cap_buf_puts(out, tok + tlen + strlen(suffix));
    return NULL;
  }
  if (r->mode == CAP_INJECT_QUERY_PARAM) {
    cap_buf_append(out, path, plen);
    const char *q = path[plen] == '?' ? path + plen + 1 : "";
    size_t name_len = strlen(r->query_param_name);
    bool first = true, saw_phantom = false;
    while (*q) {
      size_t n = strcspn(q, "&");
      bool ours = n >= name_len && strncmp(q, r->query_param_name, name_len) == 0 &&
                  (n == name_len || q[name_len] == '=');
      if (ours) {
        const char *v = n > name_len ? q + name_len + 1 : "";
        saw_phantom |= phantom_equal(s, v, n > name_len ? n - name_len - 1 : 0);
      } else if (n) {
        cap_buf_putc(out, first ? '?' : '&');
        cap_buf_append(out, q, n);
        first = false;
      }
      q += n + (q[n] == '&');
    }
    if (s->phantom[0] && !saw_phantom)
      return "the query does not carry this session's token for the credential";
    cap_buf_putc(out, first ? '?' : '&');
    cap_buf_puts(out, r->query_param_name);
    cap_buf_putc(out, '=');
    put_urlencoded(out, s->secret);
    return NULL;
  }
  cap_buf_puts(out, path);
  return NULL;
}

/* env://NAME or file:///path; the value without a trailing newline. */
int proxy_read_secret(const struct cap_credential_route *r, const struct proxy_store *store,
                      char **ret, struct cap_error *err)
{
  cap_secret_hold(); /* this process holds a credential from here on */
  const char *src = r->source;
  if (strncmp(src, "env://", 6) == 0) {
    const char *v = getenv(src + 6);
    if (!v || !*v)
      return cap_error_set(err, ENOENT,
                           "credential \"%s\": the environment variable %s is not set; export it "
                           "before running capsule",
                           r->name, src + 6);
    *ret = cap_xstrdup(v);
    return 0;
  }
  if (strncmp(src, "file://", 7) == 0) {
    char *text = NULL;
    size_t len = 0;
    int e = cap_read_file(src + 7, SECRET_MAX, &text, &len, err);
    if (e < 0)
      return cap_error_set(err, -e, "credential \"%s\": %s", r->name, err->message);
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
      text[--len] = '\0';
    if (!len || memchr(text, '\n', len) || memchr(text, '\0', len)) {
      OPENSSL_cleanse(text, len);
      free(text);
      return cap_error_set(err, EINVAL,
                           "credential \"%s\": %s must hold one non-empty line (the secret)",
                           r->name, src + 7);
    }
    *ret = text;
    return 0;
  }
  if (!strstr(src, "://") && store) { /* a bare name: capsule's credential store */
    bool found = false;
    int e = store->lookup(store->arg, src, ret, &found, err);
    if (e < 0)
      return e;
    if (!found) {
      _cleanup_free_ char *qsrc = cap_shell_quote(src); /* the manifest's text */
      return cap_error_set(
          err, ENOENT,
          "credential \"%s\": %s is not in capsule's credential store; set it "
          "with `capsule cred set --shared %s --scope system` (the value on stdin)",
          r->name, src, qsrc);
    }
    return 0;
  }
  return cap_error_set(err, ENOTSUP,
                       "credential \"%s\": capsule cannot read %s sources; use env://, file:// or "
                       "a name in capsule's credential store",
                       r->name, src);
}

void proxy_wipe_secrets(struct proxy *px)
{
  for (size_t i = 0; px->secrets && i < px->spec->n_routes; i++)
    if (px->secrets[i].secret) {
      OPENSSL_cleanse(px->secrets[i].secret, strlen(px->secrets[i].secret));
      free(px->secrets[i].secret);
      px->secrets[i].secret = NULL;
    }
}
