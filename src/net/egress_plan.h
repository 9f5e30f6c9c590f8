/* The transparent egress path's plan, computed from the resolved spec alone
 * so that every side that needs it computes the same one: the sandbox's
 * pid 1 (which makes the listeners inside the network namespace), the
 * supervisor (which receives them and serves them through the proxy),
 * `capsule run --dry-run` and `doctor`.
 *
 * Each exact host name the manifest allows (allow_domains, endpoints,
 * credential routes' upstreams; not patterns, not IP literals) gets a
 * synthetic loopback address 127.77.x.y, in the order the manifest lists
 * it, and a listener on that address for every port it may use: the
 * endpoint's own port, else the manifest's ports.connect, else (any port
 * allowed) EGRESS_DEFAULT_PORTS. The sandbox's resolver, at
 * EGRESS_DNS_ADDR port 53 (UDP and TCP), answers those names with their
 * addresses and every other name with NXDOMAIN (egress_plan_answer).
 * A name allowed on any port is also reached on every other port where the
 * sandbox can redirect to EGRESS_CAPTURE_PORT (capture is then set).
 * Beyond EGRESS_MAX_NAMES names or EGRESS_MAX_LISTENERS listeners the
 * rest are left out (n_dropped says how many names).
 * Names the manifest allows only by a pattern (`*.example.com`,
 * `.example.com`, `*`), and exact names past EGRESS_MAX_NAMES, get an
 * address on demand instead (pool is then set, and capture with it): the
 * resolver gives the first A query for such a name the next free address
 * of EGRESS_POOL_NET (struct egress_pool, at most EGRESS_POOL_MAX names,
 * kept for the sandbox's life); the capture redirect brings every
 * connection to it to the capture listener, where SO_ORIGINAL_DST maps it
 * back to the name. Pure: no I/O; egress_plan_free frees the names. */
#ifndef CAPSULE_NET_EGRESS_PLAN_H
#define CAPSULE_NET_EGRESS_PLAN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/model.h"

#define EGRESS_DNS_ADDR "127.0.0.53"
#define EGRESS_DNS_PORT 53
#define EGRESS_MAX_NAMES 64
#define EGRESS_MAX_LISTENERS 64 /* proxy.h's PROXY_MAX_LISTENERS counts on it */
#define EGRESS_DNS_TTL 300
/* inside: where an nftables redirect sends TCP to 127.77.0.0/16 when some
 * name is allowed on any port (sandbox/capture.c); the original
 * destination is read with SO_ORIGINAL_DST */
#define EGRESS_CAPTURE_PORT 3129
#define EGRESS_CAPTURE_NET "127.77.0.0/16"
/* the on-demand addresses: 127.77.128.1 onwards, inside EGRESS_CAPTURE_NET */
#define EGRESS_POOL_NET "127.77.128.0/17"
#define EGRESS_POOL_MAX 1024

struct egress_name {
  char *name;      /* lower case, no trailing dot */
  uint8_t addr[4]; /* 127.77.x.y, network order */
  bool any_port;   /* allowed without a port and no ports.connect list */
};

struct egress_listener {
  size_t name; /* index into names */
  uint16_t port;
};

struct egress_plan {
  struct egress_name names[EGRESS_MAX_NAMES];
  size_t n_names;
  struct egress_listener listeners[EGRESS_MAX_LISTENERS];
  size_t n_listeners;
  size_t n_dropped; /* names, or ports of names, left to the proxy alone */
  bool capture;     /* some name is allowed on any port, or pool: a capture listener too */
  bool pool;        /* names matched by a pattern (or past the limit) get addresses on demand */
  const struct cap_network *net; /* the spec's, for the resolver's test (net_host_listed) */
};

/* The on-demand names (pool above): shared by the resolver's threads and
 * the workers serving the capture listener. A name, once given an
 * address, keeps it until egress_pool_free. */
struct egress_pool {
  pthread_mutex_t lock;
  char *names[EGRESS_POOL_MAX]; /* names[i] holds 127.77.128.0 + i + 1 */
  size_t n;
};

/* The plan for spec (empty unless spec is in proxy mode). */
void egress_plan_build(const struct cap_spec *spec, struct egress_plan *plan);
void egress_plan_free(struct egress_plan *plan);

/* The name a synthetic address stands for, or NULL. */
const struct egress_name *egress_plan_by_addr(const struct egress_plan *plan,
                                              const uint8_t addr[4]);

void egress_pool_init(struct egress_pool *pool);
void egress_pool_free(struct egress_pool *pool);

/* The name an on-demand address stands for (valid until egress_pool_free),
 * or NULL. */
const char *egress_pool_by_addr(struct egress_pool *pool, const uint8_t addr[4]);

/* What the resolver did with one message. */
enum egress_dns_outcome {
  EGRESS_DNS_NONE,     /* nothing to answer (not a query) */
  EGRESS_DNS_ANSWERED, /* an allowed name: its address, or NODATA for other types */
  EGRESS_DNS_REFUSED,  /* NXDOMAIN, or FORMERR/NOTIMP/REFUSED for what is not a plain query */
  EGRESS_DNS_FULL,     /* a pattern's name, but the pool is full: SERVFAIL */
};

/* The resolver's answer to the query msg[0..len) into out (at most size
 * bytes), *out_len its length (0: send nothing); name (DNS_NAME_MAX bytes,
 * may be NULL) receives the name asked about, for the log. pool (NULL:
 * none) is where a name plan->pool covers gets its address. */
enum egress_dns_outcome egress_plan_answer(const struct egress_plan *plan, struct egress_pool *pool,
                                           const uint8_t *msg, size_t len, uint8_t *out,
                                           size_t size, size_t *out_len, char *name);

#endif
