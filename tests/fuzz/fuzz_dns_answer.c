/* libFuzzer target for the host side's DNS client (src/net/dns_answer.c,
 * src/net/dns_client.c's resolv.conf reader): the input is a datagram as
 * a nameserver (or anyone spoofing one) could send it, read as the answer
 * to capsule's A and AAAA queries for example.com, and as resolv.conf and
 * hosts-file text.
 * Whatever the bytes, nothing may be read out of bounds, an answer holds
 * addresses exactly when it says so (at most DNS_ANSWER_MAX), and TTLs
 * stay within the cap. */
#include <stdlib.h>
#include <string.h>

#include "net/dns_answer.h"
#include "net/dns_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint16_t id = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;
  static const uint16_t types[2] = {DNS_TYPE_A, DNS_TYPE_AAAA};
  for (int k = 0; k < 2; k++) {
    struct dns_answer a;
    enum dns_answer_kind kind = dns_parse_answer(data, size, id, "Example.COM.", types[k], &a);
    if (kind != a.kind || a.n > DNS_ANSWER_MAX || a.ttl > DNS_TTL_CAP ||
        a.cnames > DNS_CNAME_HOPS + 1)
      abort();
    if ((kind == DNS_ANS_ADDRS) != (a.n > 0))
      abort();
    if ((kind == DNS_ANS_NODATA || kind == DNS_ANS_NXDOMAIN) && !a.has_soa && a.ttl != 0)
      abort();
  }
  struct dns_client_config cfg;
  dns_config_parse((const char *)data, size, &cfg);
  if (cfg.n_ns > DNS_NS_MAX || cfg.timeout_ms < 1000 || cfg.timeout_ms > 30000 ||
      cfg.attempts < 1 || cfg.attempts > 5)
    abort();
  for (size_t i = 0; i < cfg.n_ns; i++)
    if (cfg.ns[i].ss_family != AF_INET && cfg.ns[i].ss_family != AF_INET6)
      abort();
  struct sockaddr_storage out[4];
  size_t n = dns_hosts_find((const char *)data, size, "example.com", out, 4);
  if (n > 4)
    abort();
  for (size_t i = 0; i < n; i++)
    if (out[i].ss_family != AF_INET && out[i].ss_family != AF_INET6)
      abort();
  return 0;
}
