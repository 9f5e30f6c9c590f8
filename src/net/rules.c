#include "net/rules.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/text.h"

/* host without one trailing dot, as a length */
static size_t host_len(const char *host)
{
  size_t n = strlen(host);
  return n && host[n - 1] == '.' ? n - 1 : n;
}

/* case-insensitive: host (length n) equals name, or is a subdomain of it
 * when subdomains_only */
static bool name_matches(const char *host, size_t n, const char *name, size_t m,
                         bool subdomains_only)
{
  if (!subdomains_only)
    return n == m && strncasecmp(host, name, n) == 0;
  return n > m + 1 && host[n - m - 1] == '.' && strncasecmp(host + n - m, name, m) == 0;
}

/* One allowlist pattern: "name", ".suffix", "*.suffix", or "*" */
static bool pattern_matches(const char *pattern, size_t plen, const char *host, size_t n)
{
  if (plen == 1 && pattern[0] == '*')
    return true;
  if (plen > 2 && pattern[0] == '*' && pattern[1] == '.')
    return name_matches(host, n, pattern + 2, plen - 2, true);
  if (plen > 1 && pattern[0] == '.')
    return name_matches(host, n, pattern + 1, plen - 1, true);
  return name_matches(host, n, pattern, plen, false);
}

static bool port_listed(const struct cap_ports *ports, uint16_t port)
{
  for (size_t i = 0; i < ports->len; i++)
    if (ports->v[i] == port)
      return true;
  return false;
}

bool net_host_valid(const char *host)
{
  unsigned char addr[16];
  if (inet_pton(AF_INET6, host, addr) == 1)
    return true;
  size_t n = strlen(host);
  if (n == 0 || n > 254 || host[0] == '.' || host[0] == '-')
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)host[i];
    if (!isalnum(c) && c != '.' && c != '-' && c != '_')
      return false;
    if (c == '.' && i + 1 < n && host[i + 1] == '.')
      return false;
  }
  return true;
}

bool net_host_allowed(const struct cap_network *net, const char *host, uint16_t port,
                      const struct cap_endpoint **ret_endpoint)
{
  if (ret_endpoint)
    *ret_endpoint = NULL;
  if (net->mode == CAP_NET_UNRESTRICTED)
    return true;
  if (net->mode == CAP_NET_BLOCKED || !host || !net_host_valid(host) || port == 0)
    return false;
  size_t n = host_len(host);
  /* endpoints first: they may carry L7 rules that must then apply */
  for (size_t i = 0; i < net->n_endpoints; i++) {
    const struct cap_endpoint *e = &net->endpoints[i];
    const char *colon = strrchr(e->host, ':');
    size_t plen = colon ? (size_t)(colon - e->host) : strlen(e->host);
    if (colon && (uint16_t)atoi(colon + 1) != port)
      continue;
    if (!colon && net->connect.len && !port_listed(&net->connect, port))
      continue;
    if (pattern_matches(e->host, plen, host, n)) {
      if (ret_endpoint)
        *ret_endpoint = e;
      return true;
    }
  }
  if (net->connect.len && !port_listed(&net->connect, port))
    return false;
  for (size_t i = 0; i < net->allow_domains.len; i++) {
    const char *d = net->allow_domains.v[i];
    if (pattern_matches(d, strlen(d), host, n))
      return true;
  }
  return false;
}

bool net_host_listed(const struct cap_network *net, const char *host)
{
  if (net->mode != CAP_NET_PROXY || !host || !net_host_valid(host))
    return false;
  size_t n = host_len(host);
  for (size_t i = 0; i < net->n_endpoints; i++) {
    const char *h = net->endpoints[i].host;
    const char *colon = strrchr(h, ':');
    if (pattern_matches(h, colon ? (size_t)(colon - h) : strlen(h), host, n))
      return true;
  }
  for (size_t i = 0; i < net->allow_domains.len; i++) {
    const char *d = net->allow_domains.v[i];
    if (pattern_matches(d, strlen(d), host, n))
      return true;
  }
  return false;
}

static bool ipv4_forbidden(uint32_t a, bool allow_private)
{
  uint8_t b0 = (uint8_t)(a >> 24), b1 = (uint8_t)(a >> 16);
  if (b0 == 0 || (b0 == 169 && b1 == 254) || b0 >= 224) /* this net, link-local, mcast, 240/4 */
    return true;
  if (allow_private)
    return false;
  return b0 == 127 || b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168) ||
         (b0 == 100 && (b1 & 0xc0) == 64) /* carrier-grade NAT */;
}

bool net_address_forbidden(const struct sockaddr *sa, bool allow_private)
{
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    return ipv4_forbidden(ntohl(in->sin_addr.s_addr), allow_private);
  }
  if (sa->sa_family != AF_INET6)
    return true;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  const uint8_t *b = a->s6_addr;
  /* IPv4 carried in IPv6: mapped, compatible, and NAT64 (64:ff9b::/96 and
   * the local-use 64:ff9b:1::/48), which a NAT64 gateway turns back into
   * that IPv4 address: judged as the IPv4 address */
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
  bool nat64_local =
      b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1;
  if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a) || memcmp(b, nat64, 12) == 0 ||
      nat64_local) {
    uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
    return ipv4_forbidden(v4, allow_private);
  }
  if (IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_MULTICAST(a))
    return true;
  /* fd00:ec2::254, the EC2 metadata service over IPv6, is refused even
   * where private addresses are allowed */
  if (b[0] == 0xfd && b[1] == 0x00 && b[2] == 0x0e && b[3] == 0xc2 &&
      memcmp(b + 4, "\0\0\0\0\0\0\0\0\0\0", 10) == 0 && b[14] == 0x02 && b[15] == 0x54)
    return true;
  if (allow_private)
    return false;
  return IN6_IS_ADDR_LOOPBACK(a) || (b[0] & 0xfe) == 0xfc /* unique local fc00::/7 */ ||
         IN6_IS_ADDR_SITELOCAL(a);
}

/* A path a proxy and an upstream might read differently, before segments
 * are looked at: backslashes, "//", broken escapes and encoded '/', '.',
 * '\' or '%'. */
static bool ambiguous(const char *path)
{
  for (const char *p = path; *p; p++) {
    if (*p == '\\' || (*p == '/' && p[1] == '/'))
      return true;
    if (*p == '%') {
      int hi = cap_hex_digit((unsigned char)p[1]);
      int lo = hi < 0 ? -1 : cap_hex_digit((unsigned char)p[2]);
      if (lo < 0)
        return true;
      int c = hi * 16 + lo;
      if (c == '/' || c == '.' || c == '\\' || c == '%')
        return true;
    }
  }
  return false;
}

struct segment {
  const char *s;
  size_t len;
};

/* Splits s at '/' into at most max non-empty segments; returns the count,
 * or SIZE_MAX when there are more. For a path (params), each segment ends
 * at its first ';': "/api/..;/admin" is read as "/api/../admin", as servlet
 * containers read it, so the rules see what such an upstream serves. */
static size_t split(const char *s, struct segment *v, size_t max, bool params)
{
  size_t n = 0;
  while (*s) {
    while (*s == '/')
      s++;
    if (!*s)
      break;
    size_t len = strcspn(s, "/");
    if (n == max)
      return SIZE_MAX;
    size_t keep = params ? strcspn(s, ";/") : len;
    v[n++] = (struct segment){s, keep};
    s += len;
  }
  return n;
}

/* A dot segment, or one that is empty once its ';' parameters are cut
 * ("/;x/admin"): an upstream may resolve it away. */
static bool dot_or_empty(const struct segment *p)
{
  return p->len == 0 || (p->len == 1 && p->s[0] == '.') ||
         (p->len == 2 && p->s[0] == '.' && p->s[1] == '.');
}

static bool is_globstar(const struct segment *g)
{
  return g->len == 2 && memcmp(g->s, "**", 2) == 0;
}

static bool segment_matches(const struct segment *g, const struct segment *p)
{
  return (g->len == 1 && g->s[0] == '*') || (g->len == p->len && memcmp(g->s, p->s, p->len) == 0);
}

/* The two-pointer wildcard match over segments ('**' as the star, '*' as
 * any one segment): on a mismatch only the latest '**' takes one more
 * segment, so the work is at most (glob segments x path segments)
 * comparisons, never the exponential backtracking of trying every split
 * for every '**'. A later '**' subsumes what an earlier one could still
 * take, which is why the latest alone needs retrying. */
static bool match_segments(const struct segment *g, size_t ng, const struct segment *p, size_t np)
{
  size_t gi = 0, pi = 0, star = SIZE_MAX, star_p = 0;
  while (pi < np) {
    if (gi < ng && is_globstar(&g[gi])) {
      star = gi++;
      star_p = pi;
    } else if (gi < ng && segment_matches(&g[gi], &p[pi])) {
      gi++;
      pi++;
    } else if (star != SIZE_MAX) {
      gi = star + 1;
      pi = ++star_p;
    } else {
      return false;
    }
  }
  while (gi < ng && is_globstar(&g[gi]))
    gi++;
  return gi == ng;
}

#define PATH_MAX_SEGMENTS 4096

bool net_path_matches(const char *glob, const char *path)
{
  if (!path || path[0] != '/' || ambiguous(path))
    return false;
  size_t nmax = strlen(path) / 2 + 1, gmax = strlen(glob) / 2 + 1;
  if (nmax > PATH_MAX_SEGMENTS || gmax > PATH_MAX_SEGMENTS)
    return false; /* bounded work: longer paths than the proxy takes never match */
  struct segment *p = cap_xcalloc(nmax + gmax, sizeof *p), *g = p + nmax;
  size_t np = split(path, p, nmax, true), ng = split(glob, g, gmax, false);
  bool ok = np != SIZE_MAX && ng != SIZE_MAX;
  for (size_t i = 0; ok && i < np; i++)
    ok = !dot_or_empty(&p[i]);
  ok = ok && match_segments(g, ng, p, np);
  free(p);
  return ok;
}

bool net_rules_allow(const struct cap_http_rule *rules, size_t n, const char *method,
                     const char *path)
{
  if (n == 0)
    return true;
  for (size_t i = 0; i < n; i++)
    if ((strcmp(rules[i].method, "*") == 0 || strcmp(rules[i].method, method) == 0) &&
        net_path_matches(rules[i].path, path))
      return true;
  return false;
}
