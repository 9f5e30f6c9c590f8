/* Queries to the host's nameservers and their answers read (dns_answer.h):
 * RFC 1035 section 4 with compression, RFC 2181's TTL rules, RFC 2308's
 * negative TTL, RFC 6891's OPT in the query. */
#include "net/dns_answer.h"

#include <stdbool.h>
#include <string.h>

#define NAME_UNMATCHABLE "\x01" /* a name holding bytes no host name has */
#define RR_KEPT 32              /* answer records looked at */
#define POINTER_HOPS 64

enum { TYPE_CNAME = 5, TYPE_SOA = 6, TYPE_OPT = 41, CLASS_IN = 1 };

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t get32(const uint8_t *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static bool host_byte(uint8_t c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

/* A TTL as RFC 2181 section 8 reads it (the top bit set means 0), capped. */
static uint32_t ttl_of(uint32_t raw)
{
  if (raw & 0x80000000u)
    return 0;
  return raw > DNS_TTL_CAP ? DNS_TTL_CAP : raw;
}

/* The name at msg[*off..len) (compression pointers followed) into out,
 * lower case and dotted; *off moves past it where it starts. False when
 * the message is broken there. A name with bytes no host name holds, or
 * longer than 253, becomes NAME_UNMATCHABLE. out may be NULL (skipped). */
static bool read_name(const uint8_t *msg, size_t len, size_t *off, char out[DNS_NAME_MAX])
{
  size_t at = *off, n = 0, hops = 0;
  bool jumped = false, valid = true;
  for (;;) {
    if (at >= len)
      return false;
    uint8_t l = msg[at];
    if ((l & 0xC0) == 0xC0) {
      if (len - at < 2 || ++hops > POINTER_HOPS)
        return false;
      size_t to = (size_t)(get16(msg + at) & 0x3FFF);
      if (to >= at) /* only backwards: no loops */
        return false;
      if (!jumped)
        *off = at + 2;
      jumped = true;
      at = to;
      continue;
    }
    if (l & 0xC0) /* 0x40 and 0x80 label types */
      return false;
    at++;
    if (l == 0)
      break;
    if (len - at < l)
      return false;
    if (n + (n ? 1 : 0) + l > DNS_NAME_MAX - 1)
      valid = false;
    for (uint8_t i = 0; i < l && valid; i++)
      valid = host_byte(msg[at + i]);
    if (valid && out) {
      if (n)
        out[n++] = '.';
      for (uint8_t i = 0; i < l; i++) {
        uint8_t c = msg[at + i];
        out[n++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
      }
    }
    at += l;
  }
  if (!jumped)
    *off = at;
  if (out) {
    if (valid)
      out[n] = '\0';
    else
      strcpy(out, NAME_UNMATCHABLE);
  }
  return true;
}

/* name lower-cased, its trailing dot dropped, into out; false when it is
 * not a host name (empty, too long, a byte no host name holds). */
static bool normalize(const char *name, char out[DNS_NAME_MAX])
{
  size_t n = strlen(name);
  if (n && name[n - 1] == '.')
    n--;
  if (n == 0 || n > DNS_NAME_MAX - 1)
    return false;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)name[i];
    if (c != '.' && !host_byte(c))
      return false;
    out[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
  }
  out[n] = '\0';
  return true;
}

size_t dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out, size_t size)
{
  char norm[DNS_NAME_MAX];
  if (size < DNS_QUERY_MAX || !normalize(name, norm))
    return 0;
  memset(out, 0, 12);
  put16(out, id);
  put16(out + 2, 0x0100); /* RD */
  put16(out + 4, 1);
  put16(out + 10, 1); /* the OPT record */
  size_t at = 12;
  for (const char *p = norm; *p;) {
    size_t l = strcspn(p, ".");
    if (l == 0 || l > 63)
      return 0;
    out[at++] = (uint8_t)l;
    memcpy(out + at, p, l);
    at += l;
    p += l + (p[l] == '.');
  }
  out[at++] = 0;
  put16(out + at, qtype);
  put16(out + at + 2, CLASS_IN);
  at += 4;
  /* OPT: root owner, the UDP size offered, no flags, no options */
  out[at] = 0;
  put16(out + at + 1, TYPE_OPT);
  put16(out + at + 3, DNS_MESSAGE_MAX);
  memset(out + at + 5, 0, 6);
  return at + 11;
}

/* One answer record kept for the chain. */
struct rr {
  char owner[DNS_NAME_MAX];
  uint16_t type;
  uint32_t ttl;
  size_t rdata, rdlen; /* offsets into the message */
};

/* A resource record's fixed part at msg[*off..len): owner into owner
 * (NULL: skipped), *off moved past the whole record. */
static bool read_rr(const uint8_t *msg, size_t len, size_t *off, char *owner, struct rr *r)
{
  if (!read_name(msg, len, off, owner) || len - *off < 10)
    return false;
  const uint8_t *p = msg + *off;
  r->type = get16(p);
  uint16_t class = get16(p + 2);
  r->ttl = ttl_of(get32(p + 4));
  r->rdlen = get16(p + 8);
  r->rdata = *off + 10;
  if (len - r->rdata < r->rdlen)
    return false;
  *off = r->rdata + r->rdlen;
  if (class != CLASS_IN && r->type != TYPE_OPT)
    r->type = 0; /* another class: never used */
  return true;
}

/* The SOA's negative TTL in the authority section: min(its TTL, its
 * MINIMUM); false when there is none. */
static bool read_authority(const uint8_t *msg, size_t len, size_t *off, uint16_t count,
                           uint32_t *neg, bool *broken)
{
  bool found = false;
  for (uint16_t i = 0; i < count; i++) {
    struct rr r;
    if (!read_rr(msg, len, off, NULL, &r)) {
      *broken = true;
      return false;
    }
    if (r.type != TYPE_SOA || found)
      continue;
    size_t at = r.rdata, end = r.rdata + r.rdlen;
    if (!read_name(msg, end, &at, NULL) || !read_name(msg, end, &at, NULL) || end - at != 20) {
      *broken = true;
      return false;
    }
    uint32_t minimum = ttl_of(get32(msg + at + 16));
    *neg = r.ttl < minimum ? r.ttl : minimum;
    found = true;
  }
  return found;
}

/* The CNAME chain from name through rrs[0..n), addresses of qtype at its
 * end into a. */
static enum dns_answer_kind follow(const uint8_t *msg, const struct rr *rrs, size_t n,
                                   const char *name, uint16_t qtype, struct dns_answer *a)
{
  char cur[DNS_NAME_MAX];
  strcpy(cur, name);
  uint32_t ttl = DNS_TTL_CAP;
  size_t alen = qtype == DNS_TYPE_A ? 4 : 16;
  for (;;) {
    for (size_t i = 0; i < n; i++) {
      if (rrs[i].type != qtype || strcmp(rrs[i].owner, cur) != 0)
        continue;
      if (rrs[i].rdlen != alen) {
        a->n = 0; /* the addresses before it too: a malformed answer holds none */
        return DNS_ANS_MALFORMED;
      }
      if (a->n < DNS_ANSWER_MAX)
        memcpy(a->addr[a->n++], msg + rrs[i].rdata, alen);
      ttl = rrs[i].ttl < ttl ? rrs[i].ttl : ttl;
    }
    if (a->n) {
      a->ttl = ttl;
      return DNS_ANS_ADDRS;
    }
    const struct rr *alias = NULL;
    for (size_t i = 0; i < n && !alias; i++)
      if (rrs[i].type == TYPE_CNAME && strcmp(rrs[i].owner, cur) == 0)
        alias = &rrs[i];
    if (!alias) {
      if (a->has_soa && ttl < a->ttl) /* else: the SOA's, or 0 without one */
        a->ttl = ttl;
      return DNS_ANS_NODATA;
    }
    if (++a->cnames > DNS_CNAME_HOPS)
      return DNS_ANS_MALFORMED; /* a loop, or a chain longer than capsule follows */
    size_t at = alias->rdata, end = alias->rdata + alias->rdlen;
    if (!read_name(msg, end, &at, cur) || at != end)
      return DNS_ANS_MALFORMED;
    ttl = alias->ttl < ttl ? alias->ttl : ttl;
  }
}

/* The header and the question: DNS_ANS_ADDRS when both are this query's
 * answer (*off past the question), else what the message is. */
static enum dns_answer_kind check_head(const uint8_t *msg, size_t len, uint16_t id,
                                       const char *name, uint16_t qtype, size_t *off)
{
  if (len < 12 || len > 65535 || get16(msg) != id)
    return DNS_ANS_MALFORMED;
  uint16_t flags = get16(msg + 2);
  if (!(flags & 0x8000) || ((flags >> 11) & 0xF) != 0)
    return DNS_ANS_MALFORMED; /* a query, or another opcode */
  if (flags & 0x0200)
    return DNS_ANS_TRUNCATED;
  unsigned rcode = flags & 0xF;
  if (rcode != DNS_NOERROR && rcode != DNS_NXDOMAIN)
    return DNS_ANS_FAILED;
  char qname[DNS_NAME_MAX];
  *off = 12;
  if (get16(msg + 4) != 1 || !read_name(msg, len, off, qname) || len - *off < 4 ||
      strcmp(qname, name) != 0 || get16(msg + *off) != qtype || get16(msg + *off + 2) != CLASS_IN)
    return DNS_ANS_MALFORMED;
  *off += 4;
  return DNS_ANS_ADDRS;
}

enum dns_answer_kind dns_parse_answer(const uint8_t *msg, size_t len, uint16_t id, const char *name,
                                      uint16_t qtype, struct dns_answer *a)
{
  memset(a, 0, sizeof *a);
  char norm[DNS_NAME_MAX];
  size_t off = 0;
  a->kind = DNS_ANS_MALFORMED;
  if ((qtype != DNS_TYPE_A && qtype != DNS_TYPE_AAAA) || !normalize(name, norm))
    return a->kind;
  enum dns_answer_kind head = check_head(msg, len, id, norm, qtype, &off);
  if (head != DNS_ANS_ADDRS)
    return a->kind = head;
  struct rr rrs[RR_KEPT];
  size_t n = 0;
  uint16_t an = get16(msg + 6), ns = get16(msg + 8);
  for (uint16_t i = 0; i < an; i++) {
    struct rr r;
    if (!read_rr(msg, len, &off, r.owner, &r))
      return a->kind;
    if ((r.type == qtype || r.type == TYPE_CNAME) && n < RR_KEPT)
      rrs[n++] = r;
  }
  bool broken = false;
  uint32_t neg = 0;
  a->has_soa = read_authority(msg, len, &off, ns, &neg, &broken);
  if (broken)
    return a->kind;
  a->ttl = a->has_soa ? neg : 0;
  if ((get16(msg + 2) & 0xF) == DNS_NXDOMAIN) {
    a->n = 0;
    return a->kind = DNS_ANS_NXDOMAIN;
  }
  return a->kind = follow(msg, rrs, n, norm, qtype, a);
}
