/* The other half of the DNS wire format: capsule's own A/AAAA queries to
 * the host's nameservers (net/dns_client.c) and a strict reader of their
 * answers, so the host side learns each record's TTL (getaddrinfo gives
 * none). No I/O and no allocation. The reader follows compression
 * pointers (backwards only, at most 64 per name) and CNAME chains (at most
 * DNS_CNAME_HOPS, loops refused), and checks every length against the
 * message before a byte is read. */
#ifndef CAPSULE_NET_DNS_ANSWER_H
#define CAPSULE_NET_DNS_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "net/dns.h"

#define DNS_ANSWER_MAX 16 /* addresses kept from one answer */
#define DNS_CNAME_HOPS 8  /* aliases followed from the question's name */
#define DNS_TTL_CAP 86400 /* longer TTLs are read as one day */
#define DNS_QUERY_MAX (12 + DNS_NAME_MAX + 1 + 4 + 11)

/* What an answer said. */
enum dns_answer_kind {
  DNS_ANS_ADDRS,     /* addresses of the asked type (after any CNAMEs) */
  DNS_ANS_NODATA,    /* the name exists, no record of that type */
  DNS_ANS_NXDOMAIN,  /* no such name */
  DNS_ANS_TRUNCATED, /* TC set: ask again over TCP */
  DNS_ANS_FAILED,    /* SERVFAIL, REFUSED or another error code: ask another server */
  DNS_ANS_MALFORMED, /* not an answer to this question, or broken */
};

struct dns_answer {
  enum dns_answer_kind kind;
  /* Seconds it may be kept: the least TTL of the chain's CNAMEs and the
   * addresses; for NODATA and NXDOMAIN the SOA's negative TTL (RFC 2308),
   * 0 without one (has_soa false). */
  uint32_t ttl;
  int has_soa;
  unsigned cnames; /* aliases followed */
  size_t n;
  uint8_t addr[DNS_ANSWER_MAX][16]; /* 4 bytes used for A */
};

/* A recursive query (RD, one question, an EDNS OPT offering
 * DNS_MESSAGE_MAX bytes) for name (dotted, no trailing dot needed) of
 * qtype into out (at least DNS_QUERY_MAX bytes): its length, 0 when the
 * name is not a host name capsule asks about. */
size_t dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out, size_t size);

/* Reads msg[0..len) as the answer to query id for name's qtype (class IN)
 * into *a; returns a->kind. */
enum dns_answer_kind dns_parse_answer(const uint8_t *msg, size_t len, uint16_t id, const char *name,
                                      uint16_t qtype, struct dns_answer *a);

#endif
