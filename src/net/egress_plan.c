/* The transparent path's plan and the resolver's answers (egress_plan.h). */
#include "net/egress_plan.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "net/dns.h"
#include "net/http.h"
#include "net/rules.h"

static const uint16_t default_ports[] = {80, 443};

/* host (a manifest's spelling: "Name.", "name:port", "[v6]:port") as a
 * synthetic-address candidate: lower case, no trailing dot, *port 0 when
 * it names none. False for patterns, IP literals and what is not a name. */
static bool exact_name(const char *host, char out[256], uint16_t *port)
{
  *port = 0;
  if (!host || host[0] == '[' || host[0] == '.' || strchr(host, '*'))
    return false;
  const char *colon = strchr(host, ':');
  size_t len = colon ? (size_t)(colon - host) : strlen(host);
  if (colon) {
    if (strchr(colon + 1, ':'))
      return false; /* an IPv6 literal */
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 1 || p > 65535)
      return false;
    *port = (uint16_t)p;
  }
  if (len && host[len - 1] == '.')
    len--;
  if (len == 0 || len > 253)
    return false;
  for (size_t i = 0; i < len; i++)
    out[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + ('a' - 'A') : host[i]);
  out[len] = '\0';
  struct in_addr v4;
  if (!net_host_valid(out) || inet_pton(AF_INET, out, &v4) == 1 || inet_aton(out, &v4))
    return false;
  return strcmp(out, "localhost") != 0;
}

static size_t find_name(const struct egress_plan *plan, const char *name)
{
  for (size_t i = 0; i < plan->n_names; i++)
    if (strcmp(plan->names[i].name, name) == 0)
      return i;
  return SIZE_MAX;
}

/* The name's index, added when new; SIZE_MAX when the plan is full. */
static size_t add_name(struct egress_plan *plan, const char *name)
{
  size_t i = find_name(plan, name);
  if (i != SIZE_MAX)
    return i;
  if (plan->n_names == EGRESS_MAX_NAMES) {
    plan->n_dropped++;
    plan->pool = plan->capture = true; /* on demand instead */
    return SIZE_MAX;
  }
  i = plan->n_names++;
  size_t n = i + 1; /* 127.77.0.1 onwards */
  plan->names[i] = (struct egress_name){.name = cap_xstrdup(name),
                                        .addr = {127, 77, (uint8_t)(n >> 8), (uint8_t)n}};
  return i;
}

static void add_listener(struct egress_plan *plan, size_t name, uint16_t port)
{
  for (size_t i = 0; i < plan->n_listeners; i++)
    if (plan->listeners[i].name == name && plan->listeners[i].port == port)
      return;
  if (plan->n_listeners == EGRESS_MAX_LISTENERS) {
    plan->n_dropped++;
    return;
  }
  plan->listeners[plan->n_listeners++] = (struct egress_listener){name, port};
}

/* host allowed (port 0: on every port the manifest allows it) */
static void add_host(struct egress_plan *plan, const struct cap_network *net, const char *host,
                     uint16_t port)
{
  char name[256];
  uint16_t named_port;
  if (host && (host[0] == '.' || strchr(host, '*')))
    plan->pool = plan->capture = true; /* a pattern: its names on demand */
  if (!exact_name(host, name, &named_port))
    return;
  if (named_port)
    port = named_port;
  size_t i = add_name(plan, name);
  if (i == SIZE_MAX)
    return;
  if (port) {
    add_listener(plan, i, port);
  } else if (net->connect.len) {
    for (size_t k = 0; k < net->connect.len; k++)
      add_listener(plan, i, net->connect.v[k]);
  } else {
    plan->names[i].any_port = true;
    plan->capture = true;
    for (size_t k = 0; k < sizeof default_ports / sizeof default_ports[0]; k++)
      add_listener(plan, i, default_ports[k]);
  }
}

void egress_plan_build(const struct cap_spec *spec, struct egress_plan *plan)
{
  memset(plan, 0, sizeof *plan);
  const struct cap_network *net = &spec->network;
  if (net->mode != CAP_NET_PROXY)
    return;
  plan->net = net;
  for (size_t i = 0; i < net->n_endpoints; i++)
    add_host(plan, net, net->endpoints[i].host, 0);
  for (size_t i = 0; i < net->allow_domains.len; i++)
    add_host(plan, net, net->allow_domains.v[i], 0);
  for (size_t i = 0; i < spec->n_routes; i++) {
    struct http_url u;
    if (spec->routes[i].upstream && http_parse_url(spec->routes[i].upstream, &u))
      add_host(plan, net, u.host, u.port);
  }
}

void egress_plan_free(struct egress_plan *plan)
{
  for (size_t i = 0; i < plan->n_names; i++)
    free(plan->names[i].name);
  plan->n_names = plan->n_listeners = 0;
}

const struct egress_name *egress_plan_by_addr(const struct egress_plan *plan, const uint8_t addr[4])
{
  if (addr[0] != 127 || addr[1] != 77)
    return NULL;
  size_t n = (size_t)addr[2] << 8 | addr[3];
  return n >= 1 && n <= plan->n_names ? &plan->names[n - 1] : NULL;
}

void egress_pool_init(struct egress_pool *pool)
{
  memset(pool, 0, sizeof *pool);
  pthread_mutex_init(&pool->lock, NULL);
}

void egress_pool_free(struct egress_pool *pool)
{
  for (size_t i = 0; i < pool->n; i++)
    free(pool->names[i]);
  pool->n = 0;
  pthread_mutex_destroy(&pool->lock);
}

static void pool_addr(size_t i, uint8_t addr[4])
{
  size_t n = i + 1; /* 127.77.128.1 onwards */
  addr[0] = 127;
  addr[1] = 77;
  addr[2] = (uint8_t)(128 + (n >> 8));
  addr[3] = (uint8_t)n;
}

const char *egress_pool_by_addr(struct egress_pool *pool, const uint8_t addr[4])
{
  if (addr[0] != 127 || addr[1] != 77 || addr[2] < 128)
    return NULL;
  size_t n = (size_t)(addr[2] - 128) << 8 | addr[3];
  pthread_mutex_lock(&pool->lock);
  const char *name = n >= 1 && n <= pool->n ? pool->names[n - 1] : NULL;
  pthread_mutex_unlock(&pool->lock);
  return name;
}

/* name's on-demand address into addr, given now when it has none; false
 * when the pool is full. */
static bool pool_take(struct egress_pool *pool, const char *name, uint8_t addr[4])
{
  pthread_mutex_lock(&pool->lock);
  size_t i = 0;
  while (i < pool->n && strcmp(pool->names[i], name) != 0)
    i++;
  bool ok = i < pool->n || pool->n < EGRESS_POOL_MAX;
  if (ok && i == pool->n)
    pool->names[pool->n++] = cap_xstrdup(name);
  pthread_mutex_unlock(&pool->lock);
  if (ok)
    pool_addr(i, addr);
  return ok;
}

/* Whether name may get an on-demand address: the plan has a pool, the
 * name is a host name (not an IP literal, not localhost) and some entry
 * of the allowlist names it. */
static bool pool_covers(const struct egress_plan *plan, const char *name)
{
  char norm[256];
  uint16_t port;
  return plan->pool && plan->net && exact_name(name, norm, &port) && !port &&
         net_host_listed(plan->net, norm);
}

enum egress_dns_outcome egress_plan_answer(const struct egress_plan *plan, struct egress_pool *pool,
                                           const uint8_t *msg, size_t len, uint8_t *out,
                                           size_t size, size_t *out_len, char *name)
{
  struct dns_question q;
  enum dns_parse p = dns_parse_query(msg, len, &q);
  *out_len = 0;
  if (name)
    memcpy(name, q.name, strlen(q.name) + 1);
  if (p == DNS_PARSE_DROP)
    return EGRESS_DNS_NONE;
  if (p != DNS_PARSE_OK) {
    enum dns_rcode rc = p == DNS_PARSE_NOTIMP ? DNS_NOTIMP : DNS_FORMERR;
    *out_len = dns_build_answer(msg, &q, rc, NULL, 0, out, size);
    return EGRESS_DNS_REFUSED;
  }
  if (q.qclass != 1) { /* IN only: CHAOS and friends tell nothing here */
    *out_len = dns_build_answer(msg, &q, DNS_REFUSED, NULL, 0, out, size);
    return EGRESS_DNS_REFUSED;
  }
  size_t i = find_name(plan, q.name);
  uint8_t given[4];
  const uint8_t *addr = NULL;
  if (i != SIZE_MAX) {
    addr = plan->names[i].addr;
  } else if (!pool || !pool_covers(plan, q.name)) {
    *out_len = dns_build_answer(msg, &q, DNS_NXDOMAIN, NULL, 0, out, size);
    return EGRESS_DNS_REFUSED;
  } else if (q.qtype == DNS_TYPE_A) { /* only an A query spends an address */
    if (!pool_take(pool, q.name, given)) {
      *out_len = dns_build_answer(msg, &q, DNS_SERVFAIL, NULL, 0, out, size);
      return EGRESS_DNS_FULL;
    }
    addr = given;
  }
  /* A: the synthetic address; any other type (AAAA, HTTPS, MX): NODATA,
   * so a client falls back to A instead of giving up on the name */
  if (q.qtype != DNS_TYPE_A)
    addr = NULL;
  *out_len = dns_build_answer(msg, &q, DNS_NOERROR, addr, EGRESS_DNS_TTL, out, size);
  return EGRESS_DNS_ANSWERED;
}
