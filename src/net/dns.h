/* The DNS wire format, as little of it as the sandbox's resolver needs: one
 * question parsed strictly out of a query, and the answer built. No I/O and
 * no allocation: a message is at most DNS_MESSAGE_MAX bytes (a query longer
 * than that is not a query a stub resolver sends), the name at most 253
 * characters. Compression pointers, more than one question, answers or
 * authority records in a query are refused (FORMERR); an EDNS OPT record in
 * the additional section is accepted and ignored. */
#ifndef CAPSULE_NET_DNS_H
#define CAPSULE_NET_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_MESSAGE_MAX 1232 /* what the answer may take (EDNS's safe UDP size) */
#define DNS_NAME_MAX 254     /* 253 characters and the NUL */

enum dns_type { DNS_TYPE_A = 1, DNS_TYPE_AAAA = 28 };
enum dns_rcode {
  DNS_NOERROR = 0,
  DNS_FORMERR = 1,
  DNS_SERVFAIL = 2,
  DNS_NXDOMAIN = 3,
  DNS_NOTIMP = 4,
  DNS_REFUSED = 5
};

struct dns_question {
  uint16_t id;
  bool recursion_desired;
  char name[DNS_NAME_MAX]; /* lower case, dotted, no trailing dot; "" is the root */
  uint16_t qtype, qclass;
  size_t question_len; /* the question's bytes, from offset 12, echoed in the answer */
};

/* What dns_parse_query found. */
enum dns_parse {
  DNS_PARSE_OK,
  DNS_PARSE_DROP,    /* not even a header, or a response: no answer at all */
  DNS_PARSE_FORMERR, /* a header with an id, but the rest is not a query capsule reads */
  DNS_PARSE_NOTIMP,  /* a well-formed message with an opcode other than QUERY */
};

/* Parses msg[0..len). On OK, *q holds the question; on FORMERR and NOTIMP,
 * q->id and q->recursion_desired are set (question_len 0). */
enum dns_parse dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *q);

/* The answer to q (or to the header of a refused message) into out, at
 * most size bytes: rcode, and when addr is not NULL one A record holding
 * *addr (4 bytes, network order) with ttl seconds. msg is the query (its
 * question is echoed). Returns the answer's length, 0 when it does not fit. */
size_t dns_build_answer(const uint8_t *msg, const struct dns_question *q, enum dns_rcode rcode,
                        const uint8_t *addr, uint32_t ttl, uint8_t *out, size_t size);

#endif
