/* Unit tests for the host side's DNS client (src/net/dns_answer.c,
 * src/net/dns_client.c) against a fake nameserver this test runs on
 * 127.0.0.1 (UDP and TCP on one ephemeral port; never another address):
 * TTL expiry, CNAME chains (compressed, out of order, looping), a
 * truncated answer asked again over TCP, broken answers, NXDOMAIN and
 * NODATA, and the fallback when no nameserver answers. Times are passed
 * in, so nothing here waits for a TTL to run out. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/dns.h"
#include "net/dns_answer.h"
#include "net/dns_client.h"
#include "unit.h"

/* ---- the fake nameserver ---- */

static int udp_fd = -1, tcp_fd = -1, stop_pipe[2];
static uint16_t fake_port;
static int ttl_queries, bad_queries; /* A queries for ttl.test; queries the parser refused */

static void put16(uint8_t *p, unsigned v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

/* name (dotted) in wire form at m[*at] */
static void put_name(uint8_t *m, size_t *at, const char *name)
{
  while (*name) {
    size_t l = strcspn(name, ".");
    m[(*at)++] = (uint8_t)l;
    memcpy(m + *at, name, l);
    *at += l;
    name += l + (name[l] == '.');
  }
  m[(*at)++] = 0;
}

/* One record: owner NULL means a pointer to the question's name. */
static void put_rr(uint8_t *m, size_t *at, const char *owner, unsigned type, uint32_t ttl,
                   const uint8_t *rdata, size_t rdlen)
{
  if (owner)
    put_name(m, at, owner);
  else {
    put16(m + *at, 0xC00C);
    *at += 2;
  }
  put16(m + *at, type);
  put16(m + *at + 2, 1);
  put16(m + *at + 4, ttl >> 16);
  put16(m + *at + 6, ttl & 0xFFFF);
  put16(m + *at + 8, (unsigned)rdlen);
  memcpy(m + *at + 10, rdata, rdlen);
  *at += 10 + rdlen;
}

static void put_cname(uint8_t *m, size_t *at, const char *owner, const char *target, uint32_t ttl)
{
  uint8_t rd[300];
  size_t n = 0;
  put_name(rd, &n, target);
  put_rr(m, at, owner, 5, ttl, rd, n);
}

static void put_soa(uint8_t *m, size_t *at, uint32_t ttl, uint32_t minimum)
{
  uint8_t rd[64];
  size_t n = 0;
  put_name(rd, &n, "ns.test");
  put_name(rd, &n, "hostmaster.test");
  memset(rd + n, 0, 16);
  rd[n + 16] = (uint8_t)(minimum >> 24);
  rd[n + 17] = (uint8_t)(minimum >> 16);
  rd[n + 18] = (uint8_t)(minimum >> 8);
  rd[n + 19] = (uint8_t)minimum;
  put_rr(m, at, "test", 6, ttl, rd, n + 20);
}

/* The answer to query q into m; its length (0: no answer at all). tcp:
 * asked over TCP. */
static size_t answer(const uint8_t *q, size_t qlen, bool tcp, uint8_t *m)
{
  struct dns_question dq;
  if (dns_parse_query(q, qlen, &dq) != DNS_PARSE_OK) {
    __atomic_add_fetch(&bad_queries, 1, __ATOMIC_SEQ_CST);
    return 0;
  }
  size_t at = 12 + dq.question_len;
  memcpy(m, q, at);
  put16(m + 2, 0x8180);
  unsigned an = 0, ns = 0, rcode = 0, flags = 0x8180;
  bool a = dq.qtype == DNS_TYPE_A;
  const char *name = dq.name;
  uint8_t v4[4] = {192, 0, 2, 0};
  static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
  if (strcmp(name, "ttl.test") == 0) { /* a new address on each A query, TTL 2 s */
    if (a) {
      v4[3] = (uint8_t)__atomic_add_fetch(&ttl_queries, 1, __ATOMIC_SEQ_CST);
      put_rr(m, &at, NULL, 1, 2, v4, 4), an++;
    } else
      put_soa(m, &at, 3600, 60), ns++;
  } else if (strcmp(name, "alias.test") == 0) { /* out of order, compressed */
    put_cname(m, &at, "mid.test", "final.test", 50), an++;
    if (a) {
      v4[3] = 7;
      put_rr(m, &at, "final.test", 1, 300, v4, 4), an++;
    }
    put_cname(m, &at, NULL, "mid.test", 100), an++;
    if (!a)
      put_soa(m, &at, 3600, 600), ns++;
  } else if (strcmp(name, "loop.test") == 0) {
    put_cname(m, &at, NULL, "loop2.test", 100), an++;
    put_cname(m, &at, "loop2.test", "loop.test", 100), an++;
  } else if (strcmp(name, "big.test") == 0) { /* too big for UDP */
    if (!tcp)
      flags |= 0x0200;
    else if (a)
      for (v4[3] = 10; v4[3] < 13; v4[3]++)
        put_rr(m, &at, NULL, 1, 120, v4, 4), an++;
    else
      put_soa(m, &at, 3600, 90), ns++;
  } else if (strcmp(name, "cut.test") == 0) {
    put_rr(m, &at, NULL, a ? 1 : 28, 60, v6, a ? 4 : 16), an++;
    at -= 3; /* the record cut short */
  } else if (strcmp(name, "v6.test") == 0) {
    if (a)
      put_soa(m, &at, 30, 600), ns++;
    else
      put_rr(m, &at, NULL, 28, 120, v6, 16), an++;
  } else if (strcmp(name, "nosoa.test") == 0) {
    v4[3] = 5;
    if (a)
      put_rr(m, &at, NULL, 1, 100, v4, 4), an++;
  } else if (strcmp(name, "zero.test") == 0) {
    v4[3] = 6;
    if (a)
      put_rr(m, &at, NULL, 1, 0, v4, 4), an++;
  } else if (strcmp(name, "fail.test") == 0) {
    rcode = DNS_SERVFAIL;
  } else if (strcmp(name, "silent.test") == 0) {
    return 0;
  } else {
    rcode = DNS_NXDOMAIN;
    put_soa(m, &at, 3600, 60), ns++;
  }
  put16(m + 2, flags | rcode);
  put16(m + 6, an);
  put16(m + 8, ns);
  put16(m + 10, 0);
  return at;
}

static void serve_tcp(int fd)
{
  uint8_t len[2], q[600], m[4096];
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (recv(fd, len, 2, MSG_WAITALL) != 2)
    return;
  size_t n = (size_t)len[0] << 8 | len[1];
  if (n > sizeof q || recv(fd, q, n, MSG_WAITALL) != (ssize_t)n)
    return;
  size_t r = answer(q, n, true, m + 2);
  put16(m, (unsigned)r);
  if (r)
    send(fd, m, r + 2, MSG_NOSIGNAL);
}

static void *fake_server(void *arg)
{
  (void)arg;
  for (;;) {
    struct pollfd p[3] = {{.fd = udp_fd, .events = POLLIN},
                          {.fd = tcp_fd, .events = POLLIN},
                          {.fd = stop_pipe[0], .events = POLLIN}};
    if (poll(p, 3, -1) < 0 || p[2].revents)
      return NULL;
    if (p[0].revents) {
      uint8_t q[600], m[4096];
      struct sockaddr_storage peer;
      socklen_t pl = sizeof peer;
      ssize_t n = recvfrom(udp_fd, q, sizeof q, 0, (struct sockaddr *)&peer, &pl);
      size_t r = n > 0 ? answer(q, (size_t)n, false, m) : 0;
      if (r)
        sendto(udp_fd, m, r, 0, (struct sockaddr *)&peer, pl);
    }
    if (p[1].revents) {
      int c = accept4(tcp_fd, NULL, NULL, SOCK_CLOEXEC);
      if (c >= 0) {
        serve_tcp(c);
        close(c);
      }
    }
  }
}

/* UDP and TCP on one free port of 127.0.0.1 */
static bool fake_start(pthread_t *t)
{
  for (int tries = 0; tries < 50; tries++) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bind(udp_fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(udp_fd, (struct sockaddr *)&a, &al) == 0 &&
        bind(tcp_fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(tcp_fd, 8) == 0) {
      fake_port = ntohs(a.sin_port);
      return pipe(stop_pipe) == 0 && pthread_create(t, NULL, fake_server, NULL) == 0;
    }
    close(udp_fd);
    close(tcp_fd);
  }
  return false;
}

/* ---- the client ---- */

static int fallback_calls;

static size_t fake_fallback(const char *name, struct sockaddr_storage *out, size_t max, void *arg)
{
  (void)arg;
  fallback_calls++;
  if (max == 0 || strcmp(name, "fallback-knows.test") != 0)
    return 0;
  struct sockaddr_in *s = (struct sockaddr_in *)&out[0];
  memset(out, 0, sizeof out[0]);
  s->sin_family = AF_INET;
  inet_pton(AF_INET, "198.51.100.9", &s->sin_addr);
  return 1;
}

static void config_for(struct dns_client_config *cfg, uint16_t port, dns_fallback_fn fb)
{
  char text[128];
  /* generous: a slow sanitizer build on a loaded machine must not fall
   * back for want of time */
  snprintf(text, sizeof text, "# test\nnameserver 127.0.0.1\noptions timeout:10 attempts:2\n");
  dns_config_parse(text, strlen(text), cfg);
  ((struct sockaddr_in *)&cfg->ns[0])->sin_port = htons(port);
  cfg->fallback = fb;
  cfg->hosts_path = "/nonexistent/hosts"; /* the host's own entries play no part */
}

/* The first address of name at now as text ("" when none), *from set. */
static const char *first(struct dns_cache *c, const char *name, uint64_t now, int *count,
                         enum dns_source *from)
{
  static char text[INET6_ADDRSTRLEN];
  struct sockaddr_storage out[DNS_CACHE_ADDRS];
  *count = dns_cache_lookup(c, name, now, out, DNS_CACHE_ADDRS, from);
  text[0] = '\0';
  if (*count > 0) {
    const void *a = out[0].ss_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)&out[0])->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)&out[0])->sin6_addr;
    inet_ntop(out[0].ss_family, a, text, sizeof text);
  }
  return text;
}

static void test_config(void)
{
  struct dns_client_config cfg;
  const char *t = "nameserver 192.0.2.53\n; c\nnameserver fe80::1%eth0\nnameserver ::1\n"
                  "nameserver 192.0.2.54\nnameserver 192.0.2.55\noptions ndots:2 timeout:0 "
                  "attempts:9\nsearch x";
  dns_config_parse(t, strlen(t), &cfg);
  CHECK(cfg.n_ns == 3 && cfg.ns[1].ss_family == AF_INET6); /* the scoped one skipped */
  CHECK(cfg.timeout_ms == 1000 && cfg.attempts == 5);
  dns_config_parse("", 0, &cfg);
  CHECK(cfg.n_ns == 0 && cfg.timeout_ms == 5000 && cfg.attempts == 2);
}

static void test_ttl_and_chains(void)
{
  struct dns_client_config cfg;
  config_for(&cfg, fake_port, fake_fallback);
  struct dns_cache *c = dns_cache_new(&cfg);
  enum dns_source from;
  int n;
  /* TTL 2 s: kept until then, asked again after (a new address) */
  CHECK_STR(first(c, "TTL.test.", 10000, &n, &from), "192.0.2.1");
  CHECK(n == 1 && from == DNS_FROM_SERVER);
  CHECK_STR(first(c, "ttl.test", 11999, &n, &from), "192.0.2.1");
  CHECK(from == DNS_FROM_CACHE);
  CHECK_STR(first(c, "ttl.test", 12000, &n, &from), "192.0.2.2");
  CHECK(from == DNS_FROM_SERVER && ttl_queries == 2);
  /* a CNAME chain out of order: the last address's, the least TTL (50 s) */
  CHECK_STR(first(c, "alias.test", 0, &n, &from), "192.0.2.7");
  CHECK(n == 1 && from == DNS_FROM_SERVER);
  CHECK(first(c, "alias.test", 49999, &n, &from)[0] && from == DNS_FROM_CACHE);
  first(c, "alias.test", 50000, &n, &from);
  CHECK(from == DNS_FROM_SERVER);
  /* truncated over UDP: asked again over TCP, three addresses */
  CHECK_STR(first(c, "big.test", 0, &n, &from), "192.0.2.10");
  CHECK(n == 3 && from == DNS_FROM_SERVER);
  /* IPv6 only; the A side's negative TTL (30 s) bounds the pair */
  CHECK_STR(first(c, "v6.test", 0, &n, &from), "2001:db8::1");
  first(c, "v6.test", 29999, &n, &from);
  CHECK(from == DNS_FROM_CACHE);
  first(c, "v6.test", 30000, &n, &from);
  CHECK(from == DNS_FROM_SERVER);
  /* NODATA without an SOA does not bound it; TTL 0 is never kept */
  first(c, "nosoa.test", 0, &n, &from);
  first(c, "nosoa.test", 99999, &n, &from);
  CHECK(n == 1 && from == DNS_FROM_CACHE);
  CHECK_STR(first(c, "zero.test", 0, &n, &from), "192.0.2.6");
  first(c, "zero.test", 0, &n, &from);
  CHECK(from == DNS_FROM_SERVER);
  /* no address from any server: the fallback answers, nothing kept */
  int before = fallback_calls;
  CHECK(first(c, "loop.test", 0, &n, &from)[0] == '\0'); /* a CNAME loop */
  CHECK(n == -ENOENT && from == DNS_FROM_FALLBACK);
  first(c, "cut.test", 0, &n, &from); /* a record cut short */
  CHECK(n == -ENOENT && from == DNS_FROM_FALLBACK);
  first(c, "fail.test", 0, &n, &from); /* SERVFAIL */
  CHECK(n == -ENOENT && from == DNS_FROM_FALLBACK);
  CHECK_STR(first(c, "fallback-knows.test", 0, &n, &from), "198.51.100.9"); /* NXDOMAIN */
  CHECK(n == 1 && from == DNS_FROM_FALLBACK);
  first(c, "fallback-knows.test", 0, &n, &from);
  CHECK(from == DNS_FROM_FALLBACK && fallback_calls == before + 5);
  CHECK(bad_queries == 0); /* every query capsule sent was one the strict reader takes */
  dns_cache_free(c);
}

/* No nameserver answers: one that is silent, one where nothing listens. */
static void test_no_answer(void)
{
  struct dns_client_config cfg;
  config_for(&cfg, fake_port, fake_fallback);
  cfg.timeout_ms = 300; /* silence is what is tested: any wait will do */
  cfg.attempts = 1;
  struct dns_cache *c = dns_cache_new(&cfg);
  enum dns_source from;
  int n, before = fallback_calls;
  first(c, "silent.test", 0, &n, &from);
  CHECK(n == -ENOENT && from == DNS_FROM_FALLBACK && fallback_calls == before + 1);
  dns_cache_free(c);
  int closed = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  bind(closed, (struct sockaddr *)&a, sizeof a);
  getsockname(closed, (struct sockaddr *)&a, &al);
  close(closed);                             /* its port now refuses */
  config_for(&cfg, ntohs(a.sin_port), NULL); /* getaddrinfo: /etc/hosts has localhost */
  c = dns_cache_new(&cfg);
  const char *got = first(c, "localhost", 0, &n, &from);
  CHECK(n >= 1 && from == DNS_FROM_FALLBACK);
  CHECK(strcmp(got, "127.0.0.1") == 0 || strcmp(got, "::1") == 0);
  dns_cache_free(c);
}

/* The reader alone: ids, questions, pointers. */
static void test_parse(void)
{
  uint8_t q[DNS_QUERY_MAX], other[DNS_QUERY_MAX], m[600];
  struct dns_answer a;
  size_t qn = dns_build_query(0x4242, "Alias.Test.", DNS_TYPE_A, q, sizeof q);
  CHECK(qn > 0);
  CHECK(dns_build_query(1, "a b.test", DNS_TYPE_A, other, sizeof other) == 0);
  CHECK(dns_build_query(1, "a..test", DNS_TYPE_A, other, sizeof other) == 0);
  size_t n = answer(q, qn, false, m);
  CHECK(dns_parse_answer(m, n, 0x4242, "alias.test", DNS_TYPE_A, &a) == DNS_ANS_ADDRS);
  CHECK(a.cnames == 2 && a.ttl == 50 && a.n == 1);
  CHECK(dns_parse_answer(m, n, 0x4243, "alias.test", DNS_TYPE_A, &a) == DNS_ANS_MALFORMED);
  CHECK(dns_parse_answer(m, n, 0x4242, "other.test", DNS_TYPE_A, &a) == DNS_ANS_MALFORMED);
  CHECK(dns_parse_answer(m, n, 0x4242, "alias.test", DNS_TYPE_AAAA, &a) == DNS_ANS_MALFORMED);
  for (size_t cut = 0; cut < n; cut++) /* every prefix is refused, none read past */
    CHECK(dns_parse_answer(m, cut, 0x4242, "alias.test", DNS_TYPE_A, &a) != DNS_ANS_ADDRS);
  /* a pointer to itself, and one forwards */
  uint8_t self[] = {0x42, 0x42, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1};
  CHECK(dns_parse_answer(self, sizeof self, 0x4242, "a.test", DNS_TYPE_A, &a) == DNS_ANS_MALFORMED);
  self[13] = 16;
  CHECK(dns_parse_answer(self, sizeof self, 0x4242, "a.test", DNS_TYPE_A, &a) == DNS_ANS_MALFORMED);
  /* a query is not an answer */
  CHECK(dns_parse_answer(q, qn, 0x4242, "alias.test", DNS_TYPE_A, &a) == DNS_ANS_MALFORMED);
}

/* The hosts file comes first, and is read again when it changes. */
static void test_hosts(void)
{
  char path[] = "/tmp/capsule-test-hosts.XXXXXX";
  int fd = mkstemp(path);
  const char *one =
      "# pinned names\n192.0.2.99 pinned.test alias.test # a comment\n"
      "2001:db8::5\tPinned.Test.\n#192.0.2.98 commented.test\nnot-an-address x.test\n";
  CHECK(fd >= 0 && write(fd, one, strlen(one)) == (ssize_t)strlen(one));
  close(fd);
  struct dns_client_config cfg;
  config_for(&cfg, fake_port, fake_fallback);
  cfg.hosts_path = path;
  struct dns_cache *c = dns_cache_new(&cfg);
  enum dns_source from;
  int n;
  CHECK_STR(first(c, "PINNED.test", 0, &n, &from), "192.0.2.99");
  CHECK(n == 2 && from == DNS_FROM_HOSTS);
  CHECK_STR(first(c, "alias.test", 0, &n, &from), "192.0.2.99"); /* not DNS's 192.0.2.7 */
  CHECK(n == 1 && from == DNS_FROM_HOSTS);
  first(c, "commented.test", 0, &n, &from);
  CHECK(n == -ENOENT && from == DNS_FROM_FALLBACK);
  first(c, "x.test", 0, &n, &from);
  CHECK(n == -ENOENT);
  /* rewritten (another size): read again, alias.test is DNS's again */
  const char *two = "192.0.2.100 pinned.test\n";
  fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  CHECK(fd >= 0 && write(fd, two, strlen(two)) == (ssize_t)strlen(two));
  close(fd);
  CHECK_STR(first(c, "pinned.test", 0, &n, &from), "192.0.2.100");
  CHECK(n == 1 && from == DNS_FROM_HOSTS);
  CHECK_STR(first(c, "alias.test", 0, &n, &from), "192.0.2.7");
  CHECK(from == DNS_FROM_SERVER);
  unlink(path);
  first(c, "pinned.test", 0, &n, &from); /* gone: no entries */
  CHECK(n == -ENOENT && from == DNS_FROM_FALLBACK);
  dns_cache_free(c);
  struct sockaddr_storage out[2];
  CHECK(dns_hosts_find("1.2.3.4 a\n5.6.7.8 a\n9.9.9.9 a\n", 30, "a", out, 2) == 2);
  CHECK(dns_hosts_find("1.2.3.4", 7, "1.2.3.4", out, 2) == 0); /* an address is not a name */
}

static void test_fake(void)
{
  pthread_t t;
  if (!fake_start(&t)) {
    CHECK(!"the fake nameserver could not listen on 127.0.0.1");
    return;
  }
  test_parse();
  test_ttl_and_chains();
  test_no_answer();
  test_hosts();
  if (write(stop_pipe[1], "x", 1) == 1)
    pthread_join(t, NULL);
  close(udp_fd);
  close(tcp_fd);
}

UNIT_MAIN(test_config, test_fake)
