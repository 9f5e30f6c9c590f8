/* "format" checks (RFC 3339 dates and times, RFC 5321 addresses, RFC 1123
 * host names, RFC 4291 IPv6, RFC 3986 URIs, RFC 4122 UUIDs, ECMA-262
 * regexes, RFC 6901 JSON Pointers). Used only when formats assert. */
#include <string.h>

#include "jsonschema/internal.h"

static const struct {
  const char *name;
  enum js_format f;
} formats[] = {
    {"date-time", JS_FMT_DATE_TIME},
    {"date", JS_FMT_DATE},
    {"time", JS_FMT_TIME},
    {"duration", JS_FMT_DURATION},
    {"email", JS_FMT_EMAIL},
    {"idn-email", JS_FMT_IDN_EMAIL},
    {"hostname", JS_FMT_HOSTNAME},
    {"idn-hostname", JS_FMT_IDN_HOSTNAME},
    {"ipv4", JS_FMT_IPV4},
    {"ipv6", JS_FMT_IPV6},
    {"uri", JS_FMT_URI},
    {"uri-reference", JS_FMT_URI_REFERENCE},
    {"iri", JS_FMT_IRI},
    {"iri-reference", JS_FMT_IRI_REFERENCE},
    {"uri-template", JS_FMT_URI_TEMPLATE},
    {"uuid", JS_FMT_UUID},
    {"regex", JS_FMT_REGEX},
    {"json-pointer", JS_FMT_JSON_POINTER},
    {"relative-json-pointer", JS_FMT_RELATIVE_JSON_POINTER},
};

enum js_format js_format_lookup(const char *name)
{
  for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
    if (strcmp(formats[i].name, name) == 0)
      return formats[i].f;
  return JS_FMT_UNKNOWN;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_hex(char c)
{
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* n digits at s[*i] as a number; false when not all digits */
static bool digits(const char *s, size_t len, size_t *i, size_t n, int *out)
{
  if (*i + n > len)
    return false;
  int v = 0;
  for (size_t k = 0; k < n; k++) {
    if (!is_digit(s[*i + k]))
      return false;
    v = v * 10 + (s[*i + k] - '0');
  }
  *i += n;
  *out = v;
  return true;
}

static bool lit(const char *s, size_t len, size_t *i, char c)
{
  if (*i < len && s[*i] == c) {
    (*i)++;
    return true;
  }
  return false;
}

static bool parse_date(const char *s, size_t len, size_t *i)
{
  int y, m, d;
  if (!digits(s, len, i, 4, &y) || !lit(s, len, i, '-') || !digits(s, len, i, 2, &m) ||
      !lit(s, len, i, '-') || !digits(s, len, i, 2, &d))
    return false;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
    return false;
  if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
    return false;
  return true;
}

static bool parse_time(const char *s, size_t len, size_t *i)
{
  int h, mi, sec, oh = 0, om = 0, sign = 0;
  if (!digits(s, len, i, 2, &h) || !lit(s, len, i, ':') || !digits(s, len, i, 2, &mi) ||
      !lit(s, len, i, ':') || !digits(s, len, i, 2, &sec))
    return false;
  if (lit(s, len, i, '.')) {
    size_t start = *i;
    while (*i < len && is_digit(s[*i]))
      (*i)++;
    if (*i == start)
      return false;
  }
  if (lit(s, len, i, 'Z') || lit(s, len, i, 'z')) {
    sign = 0;
  } else if (*i < len && (s[*i] == '+' || s[*i] == '-')) {
    sign = s[*i] == '+' ? 1 : -1;
    (*i)++;
    if (!digits(s, len, i, 2, &oh) || !lit(s, len, i, ':') || !digits(s, len, i, 2, &om))
      return false;
    if (oh > 23 || om > 59)
      return false;
  } else {
    return false;
  }
  if (h > 23 || mi > 59 || sec > 60)
    return false;
  if (sec == 60) {
    /* a leap second happens at 23:59:60 UTC only */
    int utc = ((h * 60 + mi - sign * (oh * 60 + om)) % 1440 + 1440) % 1440;
    if (utc != 23 * 60 + 59)
      return false;
  }
  return true;
}

static bool check_date_time(const char *s, size_t len)
{
  size_t i = 0;
  if (!parse_date(s, len, &i))
    return false;
  if (!(lit(s, len, &i, 'T') || lit(s, len, &i, 't')))
    return false;
  return parse_time(s, len, &i) && i == len;
}

static bool check_duration(const char *s, size_t len)
{
  size_t i = 0;
  if (!lit(s, len, &i, 'P') || i == len)
    return false;
  static const char date_units[] = "YMD", time_units[] = "HMS";
  /* week form: P n W */
  size_t j = i;
  while (j < len && is_digit(s[j]))
    j++;
  if (j > i && j + 1 == len && s[j] == 'W')
    return true;
  int last = -1;
  bool any = false;
  while (i < len && s[i] != 'T') {
    size_t start = i;
    while (i < len && is_digit(s[i]))
      i++;
    if (i == start || i >= len)
      return false;
    const char *u = strchr(date_units, s[i]);
    if (!u || s[i] == '\0')
      return false;
    int idx = (int)(u - date_units);
    if (last != -1 && idx != last + 1)
      return false;
    last = idx;
    any = true;
    i++;
  }
  if (i < len) {
    i++; /* 'T' */
    last = -1;
    bool any_time = false;
    while (i < len) {
      size_t start = i;
      while (i < len && is_digit(s[i]))
        i++;
      if (i == start || i >= len)
        return false;
      const char *u = strchr(time_units, s[i]);
      if (!u || s[i] == '\0')
        return false;
      int idx = (int)(u - time_units);
      if (last != -1 && idx != last + 1)
        return false;
      last = idx;
      any_time = true;
      i++;
    }
    if (!any_time)
      return false;
    any = true;
  }
  return any;
}

static bool check_ipv4(const char *s, size_t len)
{
  size_t i = 0;
  for (int part = 0; part < 4; part++) {
    if (part && !lit(s, len, &i, '.'))
      return false;
    size_t start = i;
    int v = 0;
    while (i < len && is_digit(s[i]) && i - start < 4)
      v = v * 10 + (s[i++] - '0');
    size_t n = i - start;
    if (n == 0 || n > 3 || v > 255 || (n > 1 && s[start] == '0'))
      return false;
  }
  return i == len;
}

static bool check_ipv6(const char *s, size_t len)
{
  size_t i = 0;
  int groups = 0;
  bool compressed = false;
  if (len >= 2 && s[0] == ':' && s[1] == ':') {
    compressed = true;
    i = 2;
    if (i == len)
      return true;
  } else if (len && s[0] == ':') {
    return false;
  }
  while (i < len) {
    size_t start = i;
    while (i < len && is_hex(s[i]))
      i++;
    size_t n = i - start;
    if (i < len && s[i] == '.') {
      /* trailing dotted IPv4 takes two groups */
      if (!check_ipv4(s + start, len - start))
        return false;
      groups += 2;
      i = len;
      break;
    }
    if (n == 0 || n > 4)
      return false;
    groups++;
    if (i == len)
      break;
    if (s[i] != ':')
      return false;
    i++;
    if (i < len && s[i] == ':') {
      if (compressed)
        return false;
      compressed = true;
      i++;
      if (i == len)
        break;
    } else if (i == len) {
      return false;
    }
  }
  return compressed ? groups < 8 : groups == 8;
}

static bool check_hostname(const char *s, size_t len, bool idn)
{
  if (len == 0 || len > 253 + (s[len - 1] == '.'))
    return false;
  if (s[len - 1] == '.')
    len--;
  if (len == 0)
    return false;
  size_t label = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '.') {
      if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
        return false;
      /* "xn--" labels are punycode; "--" in positions 3-4 is reserved */
      if (!idn && label >= 4 && s[i - label + 2] == '-' && s[i - label + 3] == '-' &&
          !((s[i - label] == 'x' || s[i - label] == 'X') &&
            (s[i - label + 1] == 'n' || s[i - label + 1] == 'N')))
        return false;
      label = 0;
      continue;
    }
    unsigned char c = (unsigned char)s[i];
    if (!(is_alpha((char)c) || is_digit((char)c) || c == '-' || (idn && c >= 0x80)))
      return false;
    label++;
  }
  return true;
}

static bool check_email(const char *s, size_t len, bool idn)
{
  const char *at = NULL;
  size_t i = 0;
  if (len && s[0] == '"') {
    for (i = 1; i < len && s[i] != '"'; i++)
      if (s[i] == '\\')
        i++;
    if (i >= len)
      return false;
    i++;
    if (i >= len || s[i] != '@')
      return false;
    at = s + i;
  } else {
    for (i = 0; i < len && s[i] != '@'; i++) {
      unsigned char c = (unsigned char)s[i];
      if (!(is_alpha((char)c) || is_digit((char)c) || strchr("!#$%&'*+-/=?^_`{|}~.", c) ||
            (idn && c >= 0x80)))
        return false;
      if (c == '.' && (i == 0 || s[i - 1] == '.'))
        return false;
    }
    if (i == 0 || i >= len || s[i - 1] == '.')
      return false;
    at = s + i;
  }
  const char *dom = at + 1;
  size_t dlen = len - (size_t)(dom - s);
  if (dlen >= 2 && dom[0] == '[' && dom[dlen - 1] == ']') {
    if (dlen > 7 && strncmp(dom + 1, "IPv6:", 5) == 0)
      return check_ipv6(dom + 6, dlen - 7);
    return check_ipv4(dom + 1, dlen - 2);
  }
  return check_hostname(dom, dlen, idn);
}

static bool check_uuid(const char *s, size_t len)
{
  if (len != 36)
    return false;
  for (size_t i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-')
        return false;
    } else if (!is_hex(s[i])) {
      return false;
    }
  }
  return true;
}

static bool check_json_pointer(const char *s, size_t len)
{
  if (len && s[0] != '/')
    return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] == '~' && (i + 1 >= len || (s[i + 1] != '0' && s[i + 1] != '1')))
      return false;
  return true;
}

static bool check_relative_json_pointer(const char *s, size_t len)
{
  size_t i = 0;
  while (i < len && is_digit(s[i]))
    i++;
  if (i == 0 || (i > 1 && s[0] == '0'))
    return false;
  if (i < len && (s[i] == '+' || s[i] == '-')) {
    size_t start = ++i;
    while (i < len && is_digit(s[i]))
      i++;
    if (i == start || (i - start > 1 && s[start] == '0') || (i - start == 1 && s[start] == '0'))
      return false;
  }
  if (i < len && s[i] == '#')
    return i + 1 == len;
  return check_json_pointer(s + i, len - i);
}

static bool uri_char(unsigned char c, bool iri)
{
  return is_alpha((char)c) || is_digit((char)c) || strchr("-._~!$&'()*+,;=:@/?", c) ||
         (iri && c >= 0x80);
}

/* RFC 3986 URI-reference (absolute when `absolute`). */
/* An authority's host (a name, an IPv4 address, or [IPv6]/[vFuture]) and
 * optional :port, without its userinfo. */
static bool check_host_port(const char *auth, size_t alen, bool iri)
{
  if (alen && auth[0] == '[') {
    const char *close = memchr(auth, ']', alen);
    if (!close)
      return false;
    if (!check_ipv6(auth + 1, (size_t)(close - auth - 1)) &&
        !(close - auth > 1 && (auth[1] == 'v' || auth[1] == 'V')))
      return false;
    size_t rest = alen - (size_t)(close + 1 - auth);
    if (rest) {
      if (close[1] != ':')
        return false;
      for (size_t k = 2; k <= rest; k++)
        if (!is_digit(close[k]))
          return false;
    }
  } else {
    const char *colon = memchr(auth, ':', alen);
    size_t hlen = colon ? (size_t)(colon - auth) : alen;
    for (size_t k = 0; k < hlen; k++)
      if (!(uri_char((unsigned char)auth[k], iri) || auth[k] == '%') || auth[k] == ':' ||
          auth[k] == '/' || auth[k] == '?' || auth[k] == '@')
        return false;
    if (colon)
      for (const char *p = colon + 1; p < auth + alen; p++)
        if (!is_digit(*p))
          return false;
  }
  return true;
}

static bool check_uri(const char *s, size_t len, bool absolute, bool iri)
{
  size_t i = 0;
  size_t scheme_end = 0;
  if (len && is_alpha(s[0])) {
    size_t j = 1;
    while (j < len &&
           (is_alpha(s[j]) || is_digit(s[j]) || s[j] == '+' || s[j] == '-' || s[j] == '.'))
      j++;
    if (j < len && s[j] == ':')
      scheme_end = j + 1;
  }
  if (absolute && !scheme_end)
    return false;
  if (!scheme_end) {
    /* a relative reference's first segment must not contain ':' */
    for (size_t j = 0; j < len && s[j] != '/' && s[j] != '?' && s[j] != '#'; j++)
      if (s[j] == ':')
        return false;
  }
  i = scheme_end;
  if (i + 1 < len && s[i] == '/' && s[i + 1] == '/') {
    i += 2;
    size_t start = i;
    while (i < len && s[i] != '/' && s[i] != '?' && s[i] != '#')
      i++;
    const char *auth = s + start;
    size_t alen = i - start;
    const char *at = memchr(auth, '@', alen);
    if (at) {
      alen -= (size_t)(at + 1 - auth);
      auth = at + 1;
    }
    if (!check_host_port(auth, alen, iri))
      return false;
    for (size_t k = start; k < (size_t)(auth - s); k++)
      if (s[k] != '@' && s[k] != '%' && !uri_char((unsigned char)s[k], iri))
        return false;
  }
  bool frag = false;
  for (; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '%') {
      if (i + 2 >= len || !is_hex(s[i + 1]) || !is_hex(s[i + 2]))
        return false;
      i += 2;
      continue;
    }
    if (c == '#') {
      if (frag)
        return false;
      frag = true;
      continue;
    }
    if (!uri_char(c, iri))
      return false;
  }
  return true;
}

static bool check_uri_template(const char *s, size_t len)
{
  bool in = false;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '{') {
      if (in)
        return false;
      in = true;
    } else if (s[i] == '}') {
      if (!in)
        return false;
      in = false;
    }
  }
  return !in;
}

bool js_format_check(enum js_format f, const char *s, size_t len)
{
  size_t i = 0;
  switch (f) {
  case JS_FMT_DATE_TIME: return check_date_time(s, len);
  case JS_FMT_DATE: return parse_date(s, len, &i) && i == len;
  case JS_FMT_TIME: return parse_time(s, len, &i) && i == len;
  case JS_FMT_DURATION: return check_duration(s, len);
  case JS_FMT_EMAIL: return check_email(s, len, false);
  case JS_FMT_IDN_EMAIL: return check_email(s, len, true);
  case JS_FMT_HOSTNAME: return check_hostname(s, len, false);
  case JS_FMT_IDN_HOSTNAME: return check_hostname(s, len, true);
  case JS_FMT_IPV4: return check_ipv4(s, len);
  case JS_FMT_IPV6: return check_ipv6(s, len);
  case JS_FMT_URI: return check_uri(s, len, true, false);
  case JS_FMT_URI_REFERENCE: return check_uri(s, len, false, false);
  case JS_FMT_IRI: return check_uri(s, len, true, true);
  case JS_FMT_IRI_REFERENCE: return check_uri(s, len, false, true);
  case JS_FMT_URI_TEMPLATE: return check_uri_template(s, len);
  case JS_FMT_UUID: return check_uuid(s, len);
  case JS_FMT_REGEX: {
    char err[160];
    pcre2_code *re = js_regex_compile(s, len, err, sizeof(err));
    if (!re)
      return false;
    pcre2_code_free(re);
    return true;
  }
  case JS_FMT_JSON_POINTER: return check_json_pointer(s, len);
  case JS_FMT_RELATIVE_JSON_POINTER: return check_relative_json_pointer(s, len);
  case JS_FMT_NONE:
  case JS_FMT_UNKNOWN: return true;
  }
  return true;
}
