/* The host side's own resolver for the egress proxy: A and AAAA queries to
 * the host's nameservers (resolv.conf), answers read with net/dns_answer.h,
 * and a cache that keeps each answer for its TTL, so a connection to an
 * allowed name costs no DNS round trip while the answer is fresh and
 * always sees the current one after (getaddrinfo gives no TTL, so nothing
 * could be cached through it). /etc/hosts comes first, as nsswitch's
 * "files dns" has it (read again when it changes). When no nameserver
 * answers, or none knows the name (search domains, mDNS, other NSS
 * sources), getaddrinfo answers, uncached. The addresses are only found
 * here: every refusal (metadata, private, the host's own) is the
 * caller's, on every use, cached or not. */
#ifndef CAPSULE_NET_DNS_CLIENT_H
#define CAPSULE_NET_DNS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNS_NS_MAX 3       /* nameservers used, as glibc's MAXNS */
#define DNS_CACHE_NAMES 64 /* names kept; the least recently used goes */
#define DNS_CACHE_ADDRS 16 /* addresses kept per name */

/* What to do when no nameserver gives an address: out[0..max) filled,
 * the count returned (0: none). */
typedef size_t (*dns_fallback_fn)(const char *name, struct sockaddr_storage *out, size_t max,
                                  void *arg);

struct dns_client_config {
  struct sockaddr_storage ns[DNS_NS_MAX];
  size_t n_ns;
  int timeout_ms;           /* per query round to one server (resolv.conf's timeout:) */
  int attempts;             /* rounds over all servers (attempts:) */
  dns_fallback_fn fallback; /* NULL: getaddrinfo */
  void *fallback_arg;
  const char *hosts_path; /* NULL: /etc/hosts, read before any query */
};

/* resolv.conf's text[0..len): "nameserver ADDR" lines (IPv4 or IPv6
 * literals, at most DNS_NS_MAX; link-local ones with a scope are skipped)
 * and "options timeout:N attempts:N"; the rest is ignored. Defaults as
 * glibc's: 5 s, 2 attempts. */
void dns_config_parse(const char *text, size_t len, struct dns_client_config *cfg);
/* The same from a file; without it (or without a nameserver line) only
 * the fallback answers. */
void dns_config_read(const char *path, struct dns_client_config *cfg);

/* name's addresses in hosts-file text[0..len) ("ADDR NAME [ALIAS...]"
 * lines, '#' comments; every line naming it, in order; port 0) into
 * out[0..max): the count. */
size_t dns_hosts_find(const char *text, size_t len, const char *name, struct sockaddr_storage *out,
                      size_t max);

/* Where dns_cache_lookup's answer came from. */
enum dns_source { DNS_FROM_HOSTS, DNS_FROM_CACHE, DNS_FROM_SERVER, DNS_FROM_FALLBACK };

struct dns_cache;
struct dns_cache *dns_cache_new(const struct dns_client_config *cfg);
void dns_cache_free(struct dns_cache *c);

/* name's addresses (IPv4 first, then IPv6; port 0) into out[0..max), at
 * now_ms (CLOCK_MONOTONIC): the count, or -ENOENT when nothing knows the
 * name. Safe from any thread; queries are made without the cache's lock. */
int dns_cache_lookup(struct dns_cache *c, const char *name, uint64_t now_ms,
                     struct sockaddr_storage *out, size_t max, enum dns_source *from);

#endif
