/* URI references (RFC 3986 section 5): enough to resolve "$id" and "$ref"
 * against their base URI. */
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "jsonschema/internal.h"

struct uri_parts {
  const char *scheme, *auth, *path, *query, *frag;
  size_t scheme_len, auth_len, path_len, query_len, frag_len;
  bool has_scheme, has_auth, has_query, has_frag;
};

static void uri_parse(const char *s, struct uri_parts *u)
{
  memset(u, 0, sizeof(*u));
  const char *p = s;
  /* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
  const char *q = p;
  if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')) {
    while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
           *q == '+' || *q == '-' || *q == '.')
      q++;
    if (*q == ':') {
      u->has_scheme = true;
      u->scheme = p;
      u->scheme_len = (size_t)(q - p);
      p = q + 1;
    }
  }
  if (p[0] == '/' && p[1] == '/') {
    p += 2;
    u->has_auth = true;
    u->auth = p;
    while (*p && *p != '/' && *p != '?' && *p != '#')
      p++;
    u->auth_len = (size_t)(p - u->auth);
  }
  u->path = p;
  while (*p && *p != '?' && *p != '#')
    p++;
  u->path_len = (size_t)(p - u->path);
  if (*p == '?') {
    u->has_query = true;
    u->query = ++p;
    while (*p && *p != '#')
      p++;
    u->query_len = (size_t)(p - u->query);
  }
  if (*p == '#') {
    u->has_frag = true;
    u->frag = p + 1;
    u->frag_len = strlen(u->frag);
  }
}

/* RFC 3986 5.2.4, in place on a NUL-terminated buffer (the output never
 * overtakes the input). */
static void remove_dot_segments(char *path)
{
  char *in = path, *out = path;
  while (*in) {
    if (strncmp(in, "../", 3) == 0) {
      in += 3;
    } else if (strncmp(in, "./", 2) == 0) {
      in += 2;
    } else if (strncmp(in, "/./", 3) == 0) {
      in += 2;
    } else if (strcmp(in, "/.") == 0) {
      in += 1;
      in[0] = '/';
    } else if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
      if (in[3] == '/') {
        in += 3;
      } else {
        in += 2;
        in[0] = '/';
      }
      while (out > path && *--out != '/')
        ;
    } else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) {
      in += strlen(in);
    } else {
      do
        *out++ = *in++;
      while (*in && *in != '/');
    }
  }
  *out = '\0';
}

static void put(struct cap_buf *b, const char *s, size_t n) { cap_buf_append(b, s, n); }

char *js_uri_resolve(const char *base, const char *ref)
{
  struct uri_parts B, R;
  uri_parse(base, &B);
  uri_parse(ref, &R);
  struct cap_buf out = {0}, path = {0};
  const char *query = NULL;
  size_t query_len = 0;
  bool has_query = false;
  if (R.has_scheme) {
    put(&out, R.scheme, R.scheme_len);
    put(&out, ":", 1);
    if (R.has_auth) {
      put(&out, "//", 2);
      put(&out, R.auth, R.auth_len);
    }
    put(&path, R.path, R.path_len);
    has_query = R.has_query, query = R.query, query_len = R.query_len;
  } else {
    if (B.has_scheme) {
      put(&out, B.scheme, B.scheme_len);
      put(&out, ":", 1);
    }
    if (R.has_auth) {
      put(&out, "//", 2);
      put(&out, R.auth, R.auth_len);
      put(&path, R.path, R.path_len);
      has_query = R.has_query, query = R.query, query_len = R.query_len;
    } else {
      if (B.has_auth) {
        put(&out, "//", 2);
        put(&out, B.auth, B.auth_len);
      }
      if (R.path_len == 0) {
        put(&path, B.path, B.path_len);
        if (R.has_query)
          has_query = true, query = R.query, query_len = R.query_len;
        else
          has_query = B.has_query, query = B.query, query_len = B.query_len;
      } else {
        if (R.path[0] == '/') {
          put(&path, R.path, R.path_len);
        } else {
          if (B.has_auth && B.path_len == 0) {
            put(&path, "/", 1);
          } else {
            size_t keep = B.path_len;
            while (keep > 0 && B.path[keep - 1] != '/')
              keep--;
            put(&path, B.path, keep);
          }
          put(&path, R.path, R.path_len);
        }
        has_query = R.has_query, query = R.query, query_len = R.query_len;
      }
    }
  }
  if (path.data) {
    remove_dot_segments(path.data);
    cap_buf_puts(&out, path.data);
  }
  cap_buf_free(&path);
  if (has_query) {
    put(&out, "?", 1);
    put(&out, query, query_len);
  }
  if (R.has_frag && R.frag_len) {
    put(&out, "#", 1);
    put(&out, R.frag, R.frag_len);
  }
  return cap_buf_steal(&out);
}

char *js_uri_split(const char *uri, const char **frag)
{
  const char *h = strchr(uri, '#');
  if (!h) {
    *frag = uri + strlen(uri);
    return cap_xstrdup(uri);
  }
  *frag = h + 1;
  return cap_xstrndup(uri, (size_t)(h - uri));
}

char *js_percent_decode(const char *s, size_t *out_len)
{
  size_t n = strlen(s);
  char *out = cap_xmalloc(n + 1);
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      if (i + 2 >= n) {
        free(out);
        return NULL;
      }
      int h = cap_hex_digit((unsigned char)s[i + 1]),
          l = h < 0 ? -1 : cap_hex_digit((unsigned char)s[i + 2]);
      if (h < 0 || l < 0) {
        free(out);
        return NULL;
      }
      out[o++] = (char)(h * 16 + l);
      i += 2;
    } else {
      out[o++] = s[i];
    }
  }
  out[o] = '\0';
  if (out_len)
    *out_len = o;
  return out;
}
