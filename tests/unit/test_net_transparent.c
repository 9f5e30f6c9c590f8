/* Unit tests for the transparent path's pure parts: the DNS wire format
 * (src/net/dns.c), the ClientHello's server name (src/net/sni.c) and the
 * plan with the resolver's answers (src/net/egress_plan.c). */
#include <stdio.h>
#include <string.h>

#include "manifest/model.h"
#include "net/dns.h"
#include "net/egress_plan.h"
#include "net/sni.h"
#include "unit.h"

/* A query for name (dotted) of qtype into out; its length. */
static size_t query(const char *name, uint16_t qtype, uint8_t *out)
{
  static const uint8_t head[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  memcpy(out, head, 12);
  size_t at = 12;
  while (*name) {
    size_t l = strcspn(name, ".");
    out[at++] = (uint8_t)l;
    memcpy(out + at, name, l);
    at += l;
    name += l + (name[l] == '.');
  }
  out[at++] = 0;
  out[at++] = (uint8_t)(qtype >> 8);
  out[at++] = (uint8_t)qtype;
  out[at++] = 0;
  out[at++] = 1;
  return at;
}

static void test_dns_parse(void)
{
  uint8_t m[600];
  struct dns_question q;
  size_t n = query("Mail.Example.com", DNS_TYPE_A, m);
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_OK);
  CHECK_STR(q.name, "mail.example.com");
  CHECK(q.id == 0x1234 && q.recursion_desired && q.qtype == DNS_TYPE_A && q.qclass == 1);
  CHECK(dns_parse_query(m, 11, &q) == DNS_PARSE_DROP);       /* not a header */
  CHECK(dns_parse_query(m, n - 1, &q) == DNS_PARSE_FORMERR); /* cut short */
  m[n] = 0;
  CHECK(dns_parse_query(m, n + 1, &q) == DNS_PARSE_FORMERR); /* trailing byte */
  m[2] |= 0x80;
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_DROP); /* a response */
  m[2] = 0x01 | (2 << 3);
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_NOTIMP); /* opcode STATUS */
  m[2] = 0x01;
  m[5] = 2;
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_FORMERR); /* two questions */
  m[5] = 1;
  /* a compression pointer in a query */
  uint8_t p[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1};
  CHECK(dns_parse_query(p, sizeof p, &q) == DNS_PARSE_FORMERR);
  /* bytes a host name cannot hold */
  n = query("a\x01"
            "b.example",
            DNS_TYPE_A, m);
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_FORMERR);
  /* a label of 64 and a name past 253 */
  char longl[70];
  memset(longl, 'a', 64);
  longl[64] = '\0';
  n = query(longl, DNS_TYPE_A, m);
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_FORMERR);
  char longn[300];
  for (int i = 0; i < 5; i++) {
    memset(longn + i * 52, 'b', 51);
    longn[i * 52 + 51] = '.';
  }
  longn[259] = '\0';
  n = query(longn, DNS_TYPE_A, m);
  CHECK(dns_parse_query(m, n, &q) == DNS_PARSE_FORMERR);
  /* EDNS OPT tolerated */
  n = query("example.com", DNS_TYPE_AAAA, m);
  m[11] = 1;
  uint8_t opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
  memcpy(m + n, opt, sizeof opt);
  CHECK(dns_parse_query(m, n + sizeof opt, &q) == DNS_PARSE_OK && q.qtype == DNS_TYPE_AAAA);
  CHECK(dns_parse_query(m, n + sizeof opt - 1, &q) == DNS_PARSE_FORMERR);
}

static struct cap_spec *spec_with(const char *const *hosts, size_t n, const uint16_t *ports,
                                  size_t n_ports)
{
  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_NONO);
  spec->network.mode = CAP_NET_PROXY;
  for (size_t i = 0; i < n; i++)
    cap_strv_push(&spec->network.allow_domains, hosts[i]);
  for (size_t i = 0; i < n_ports; i++)
    cap_ports_push(&spec->network.connect, ports[i]);
  return spec;
}

/* The A answer's address (the last 4 bytes), or NULL when none. */
static const uint8_t *answer_addr(const uint8_t *out, size_t len)
{
  return len >= 16 && out[7] == 1 ? out + len - 4 : NULL;
}

/* On-demand addresses for the names plan's patterns cover. */
static void test_pool(const struct egress_plan *plan)
{
  struct egress_pool pool;
  egress_pool_init(&pool);
  uint8_t m[600], out[DNS_MESSAGE_MAX];
  char name[DNS_NAME_MAX];
  size_t len, n = query("X.Wild.example", DNS_TYPE_A, m);
  CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  const uint8_t *a = answer_addr(out, len);
  CHECK(a && memcmp(a, (uint8_t[]){127, 77, 128, 1}, 4) == 0);
  n = query("b.suffix.example", DNS_TYPE_A, m);
  CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  a = answer_addr(out, len);
  CHECK(a && memcmp(a, (uint8_t[]){127, 77, 128, 2}, 4) == 0);
  n = query("x.wild.example", DNS_TYPE_A, m); /* asked again: the same address */
  CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  a = answer_addr(out, len);
  CHECK(a && memcmp(a, (uint8_t[]){127, 77, 128, 1}, 4) == 0);
  n = query("y.wild.example", DNS_TYPE_AAAA, m); /* NODATA, and no address spent */
  CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  CHECK(len == n && (out[3] & 0xF) == DNS_NOERROR && out[7] == 0 && pool.n == 2);
  static const char *const outside[] = {"wild.example", "suffix.example", "evil.example",
                                        "x.wild.example.evil", "10.0.0.2"};
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
    n = query(outside[i], DNS_TYPE_A, m);
    CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_REFUSED);
    CHECK((out[3] & 0xF) == DNS_NXDOMAIN && pool.n == 2);
  }
  CHECK_STR(egress_pool_by_addr(&pool, (uint8_t[]){127, 77, 128, 2}), "b.suffix.example");
  CHECK(egress_pool_by_addr(&pool, (uint8_t[]){127, 77, 128, 3}) == NULL);
  CHECK(egress_pool_by_addr(&pool, (uint8_t[]){127, 77, 0, 1}) == NULL);
  /* filled: SERVFAIL past EGRESS_POOL_MAX names, the ones given kept */
  char many[64];
  for (size_t i = pool.n; i < EGRESS_POOL_MAX; i++) {
    snprintf(many, sizeof many, "n%zu.wild.example", i);
    n = query(many, DNS_TYPE_A, m);
    CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) ==
          EGRESS_DNS_ANSWERED);
  }
  CHECK(pool.n == EGRESS_POOL_MAX);
  CHECK_STR(egress_pool_by_addr(&pool, (uint8_t[]){127, 77, 128 + 4, 0}), many);
  n = query("one-more.wild.example", DNS_TYPE_A, m);
  CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_FULL);
  CHECK(len == n && (out[3] & 0xF) == DNS_SERVFAIL && out[7] == 0);
  n = query("x.wild.example", DNS_TYPE_A, m);
  CHECK(egress_plan_answer(plan, &pool, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  egress_pool_free(&pool);
}

static void test_plan(void)
{
  static const char *const hosts[] = {"Good.Example.", "*.wild.example", ".suffix.example",
                                      "10.0.0.1",      "good.example",   "imap.example:993",
                                      "localhost"};
  struct cap_spec *spec = spec_with(hosts, 7, NULL, 0);
  struct egress_plan plan;
  egress_plan_build(spec, &plan);
  CHECK(plan.n_names == 2); /* patterns, literals and localhost get none; one per name */
  CHECK_STR(plan.names[0].name, "good.example");
  CHECK(plan.names[0].any_port && !plan.names[1].any_port);
  CHECK(memcmp(plan.names[1].addr, (uint8_t[]){127, 77, 0, 2}, 4) == 0);
  CHECK(plan.n_listeners == 3); /* 80 and 443 for the any-port name, 993 */
  CHECK(plan.listeners[2].name == 1 && plan.listeners[2].port == 993);
  CHECK(egress_plan_by_addr(&plan, (uint8_t[]){127, 77, 0, 1}) == &plan.names[0]);
  CHECK(egress_plan_by_addr(&plan, (uint8_t[]){127, 77, 0, 3}) == NULL);
  CHECK(egress_plan_by_addr(&plan, (uint8_t[]){127, 0, 0, 1}) == NULL);

  /* the resolver: A, AAAA NODATA, NXDOMAIN */
  uint8_t m[600], out[DNS_MESSAGE_MAX];
  size_t len, n = query("IMAP.example", DNS_TYPE_A, m);
  char name[DNS_NAME_MAX];
  CHECK(egress_plan_answer(&plan, NULL, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  CHECK(len == n + 16 && (out[3] & 0xF) == DNS_NOERROR && out[7] == 1);
  CHECK(memcmp(out + len - 4, (uint8_t[]){127, 77, 0, 2}, 4) == 0);
  n = query("imap.example", DNS_TYPE_AAAA, m);
  CHECK(egress_plan_answer(&plan, NULL, m, n, out, sizeof out, &len, name) == EGRESS_DNS_ANSWERED);
  CHECK(len == n && (out[3] & 0xF) == DNS_NOERROR && out[7] == 0);
  n = query("evil.example", DNS_TYPE_A, m);
  CHECK(egress_plan_answer(&plan, NULL, m, n, out, sizeof out, &len, name) == EGRESS_DNS_REFUSED);
  CHECK(len == n && (out[3] & 0xF) == DNS_NXDOMAIN && out[7] == 0);
  CHECK_STR(name, "evil.example");
  n = query("x.wild.example", DNS_TYPE_A, m); /* patterns: without a pool, the proxy's alone */
  CHECK(egress_plan_answer(&plan, NULL, m, n, out, sizeof out, &len, name) == EGRESS_DNS_REFUSED);
  CHECK(plan.pool && plan.capture);
  test_pool(&plan);
  egress_plan_free(&plan);
  cap_spec_free(spec);

  /* ports.connect decides a name's ports */
  static const char *const one[] = {"db.example"};
  static const uint16_t ports[] = {5432, 6432};
  spec = spec_with(one, 1, ports, 2);
  egress_plan_build(spec, &plan);
  CHECK(plan.n_names == 1 && !plan.names[0].any_port && plan.n_listeners == 2);
  CHECK(!plan.pool && !plan.capture);
  CHECK(plan.listeners[0].port == 5432 && plan.listeners[1].port == 6432);
  egress_plan_free(&plan);
  spec->network.mode = CAP_NET_BLOCKED;
  egress_plan_build(spec, &plan);
  CHECK(plan.n_names == 0 && plan.n_listeners == 0);
  cap_spec_free(spec);
}

/* A ClientHello record with the given extensions block (NULL: none). */
static size_t hello(const uint8_t *exts, size_t exts_len, uint8_t *out)
{
  size_t at = 9;
  out[at++] = 3;
  out[at++] = 3;
  memset(out + at, 0xAB, 32); /* random */
  at += 32;
  out[at++] = 0; /* session id */
  out[at++] = 0;
  out[at++] = 2;
  out[at++] = 0x13;
  out[at++] = 0x01;
  out[at++] = 1; /* compression: null */
  out[at++] = 0;
  if (exts) {
    out[at++] = (uint8_t)(exts_len >> 8);
    out[at++] = (uint8_t)exts_len;
    memcpy(out + at, exts, exts_len);
    at += exts_len;
  }
  size_t body = at - 9, record = at - 5;
  out[0] = 0x16;
  out[1] = 3;
  out[2] = 1;
  out[3] = (uint8_t)(record >> 8);
  out[4] = (uint8_t)record;
  out[5] = 1;
  out[6] = 0;
  out[7] = (uint8_t)(body >> 8);
  out[8] = (uint8_t)body;
  return at;
}

static size_t sni_ext(const char *name, uint8_t *out)
{
  size_t n = strlen(name);
  uint8_t e[] = {0, 0, 0, (uint8_t)(n + 5), 0, (uint8_t)(n + 3), 0, 0, (uint8_t)n};
  memcpy(out, e, sizeof e);
  memcpy(out + sizeof e, name, n);
  return sizeof e + n;
}

static void test_sni(void)
{
  uint8_t m[600], ext[300];
  char name[SNI_NAME_MAX];
  size_t e = sni_ext("IMAP.Example.com", ext);
  size_t n = hello(ext, e, m);
  CHECK(sni_parse(m, n, name) == SNI_FOUND);
  CHECK_STR(name, "imap.example.com");
  for (size_t k = 0; k < n; k++) /* every prefix: more needed, never a verdict */
    CHECK(sni_parse(m, k, name) == SNI_NEED_MORE);
  m[n] = 0;
  m[4]++; /* a record longer than the ClientHello: refused */
  CHECK(sni_parse(m, n + 1, name) == SNI_MALFORMED);
  n = hello(NULL, 0, m);
  CHECK(sni_parse(m, n, name) == SNI_NONE);
  /* two server_name extensions */
  memcpy(ext + e, ext, e);
  n = hello(ext, 2 * e, m);
  CHECK(sni_parse(m, n, name) == SNI_MALFORMED);
  /* a name with a byte no host name holds, a trailing dot */
  e = sni_ext("a/b.example", ext);
  n = hello(ext, e, m);
  CHECK(sni_parse(m, n, name) == SNI_MALFORMED);
  e = sni_ext("a.example.", ext);
  n = hello(ext, e, m);
  CHECK(sni_parse(m, n, name) == SNI_MALFORMED);
  /* an extension overrunning its block */
  e = sni_ext("a.example", ext);
  ext[3] += 1;
  n = hello(ext, e, m);
  CHECK(sni_parse(m, n, name) == SNI_MALFORMED);
  CHECK(sni_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name) == SNI_NOT_TLS);
  CHECK(sni_parse((const uint8_t *)"\x16\x02", 2, name) == SNI_NOT_TLS);
}

UNIT_MAIN(test_dns_parse, test_plan, test_sni)
