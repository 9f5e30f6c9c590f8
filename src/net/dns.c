/* DNS messages for the sandbox's resolver (dns.h): RFC 1035 section 4, with
 * RFC 6891's OPT record tolerated. Every length is checked against the
 * message before a byte is read. */
#include "net/dns.h"

#include <string.h>

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static void put16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

/* A byte a host name label may hold: letters, digits, '-', '_' (SRV-style
 * labels); everything else (dots inside a label, NUL, bytes past ASCII)
 * is refused rather than carried into a name capsule compares and logs. */
static bool label_byte(uint8_t c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

/* The question's name from msg[*off..len) into name; *off moved past it. */
static bool parse_name(const uint8_t *msg, size_t len, size_t *off, char *name)
{
  size_t at = *off, out = 0;
  for (;;) {
    if (at >= len)
      return false;
    uint8_t l = msg[at++];
    if (l == 0)
      break;
    if (l > 63 || len - at < l) /* 0xC0 pointers and 0x40/0x80 label types are > 63 too */
      return false;
    if (out + (out ? 1 : 0) + l > DNS_NAME_MAX - 1)
      return false;
    if (out)
      name[out++] = '.';
    for (uint8_t i = 0; i < l; i++) {
      uint8_t c = msg[at + i];
      if (!label_byte(c))
        return false;
      name[out++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    at += l;
  }
  name[out] = '\0';
  *off = at;
  return true;
}

/* The one additional record a query may carry: EDNS's OPT, owned by the
 * root, filling the rest of the message exactly. */
static bool parse_opt(const uint8_t *msg, size_t len, size_t off)
{
  if (len - off < 11 || msg[off] != 0 || get16(msg + off + 1) != 41)
    return false;
  size_t rdlen = get16(msg + off + 9);
  return len - off - 11 == rdlen;
}

enum dns_parse dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *q)
{
  memset(q, 0, sizeof *q);
  if (len < 12)
    return DNS_PARSE_DROP;
  uint16_t flags = get16(msg + 2);
  if (flags & 0x8000) /* a response: never answered (no reflection loops) */
    return DNS_PARSE_DROP;
  q->id = get16(msg);
  q->recursion_desired = flags & 0x0100;
  if (((flags >> 11) & 0xF) != 0)
    return DNS_PARSE_NOTIMP;
  uint16_t qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8), ar = get16(msg + 10);
  if (qd != 1 || an != 0 || ns != 0 || ar > 1 || (flags & 0x0200) /* TC */ || len > 65535)
    return DNS_PARSE_FORMERR;
  size_t off = 12;
  if (!parse_name(msg, len, &off, q->name) || len - off < 4) {
    q->name[0] = '\0';
    return DNS_PARSE_FORMERR;
  }
  q->qtype = get16(msg + off);
  q->qclass = get16(msg + off + 2);
  off += 4;
  if (ar ? !parse_opt(msg, len, off) : off != len) {
    q->name[0] = '\0';
    return DNS_PARSE_FORMERR;
  }
  q->question_len = off - 12;
  return DNS_PARSE_OK;
}

size_t dns_build_answer(const uint8_t *msg, const struct dns_question *q, enum dns_rcode rcode,
                        const uint8_t *addr, uint32_t ttl, uint8_t *out, size_t size)
{
  size_t need = 12 + q->question_len + (addr ? 16 : 0);
  if (need > size || need > DNS_MESSAGE_MAX || (addr && !q->question_len))
    return 0;
  /* QR, AA, RA; RD copied; opcode QUERY */
  uint16_t flags = 0x8000 | 0x0400 | 0x0080 | (q->recursion_desired ? 0x0100 : 0) | (rcode & 0xF);
  put16(out, q->id);
  put16(out + 2, flags);
  put16(out + 4, q->question_len ? 1 : 0);
  put16(out + 6, addr ? 1 : 0);
  put16(out + 8, 0);
  put16(out + 10, 0);
  memcpy(out + 12, msg + 12, q->question_len);
  size_t at = 12 + q->question_len;
  if (addr) {
    put16(out + at, 0xC00C); /* the question's name */
    put16(out + at + 2, DNS_TYPE_A);
    put16(out + at + 4, 1); /* IN */
    put16(out + at + 6, (uint16_t)(ttl >> 16));
    put16(out + at + 8, (uint16_t)ttl);
    put16(out + at + 10, 4);
    memcpy(out + at + 12, addr, 4);
  }
  return need;
}
