#include "net/hostaddr.h"

#include <sys/time.h>

#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"

#define ROUTES_KEPT 64

struct host_addrs {
  pthread_mutex_t lock;
  int netlink;        /* address and route change events, or -1: then re-read on every check */
  bool stale;         /* an event arrived (or was lost): re-read before the next answer */
  struct in6_addr *v; /* every address, IPv4 ones as IPv4-mapped IPv6 */
  size_t n, cap;
  /* the kernel's routing verdicts (RTM_GETROUTE) since the last event,
   * so a destination asked about again costs no netlink round trip */
  struct {
    struct in6_addr a;
    bool local;
  } routes[ROUTES_KEPT];
  size_t n_routes, next_route;
  uint64_t generation; /* reloads so far: a verdict asked across one is not kept */
};

/* a = the address sa holds, IPv4 in mapped form; false for other families */
static bool as_v6(const struct sockaddr *sa, struct in6_addr *a)
{
  if (sa->sa_family == AF_INET6) {
    *a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
    /* IPv4-compatible and NAT64 (64:ff9b::/96) forms reach the IPv4
     * address: judged as it (in mapped form) */
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    if (IN6_IS_ADDR_V4COMPAT(a) || memcmp(a->s6_addr, nat64, 12) == 0) {
      memset(a->s6_addr, 0, 10);
      a->s6_addr[10] = a->s6_addr[11] = 0xff;
    }
    return true;
  }
  if (sa->sa_family != AF_INET)
    return false;
  memset(a, 0, sizeof *a);
  a->s6_addr[10] = a->s6_addr[11] = 0xff;
  memcpy(a->s6_addr + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  return true;
}

/* Re-reads the interfaces' addresses (locked). On failure the old list
 * stays and the next check tries again. */
static void reload(struct host_addrs *h)
{
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) < 0)
    return;
  h->n = 0;
  for (struct ifaddrs *i = list; i; i = i->ifa_next) {
    struct in6_addr a;
    if (!i->ifa_addr || !as_v6(i->ifa_addr, &a))
      continue;
    if (h->n == h->cap) {
      h->cap = h->cap ? 2 * h->cap : 16;
      h->v = cap_xrealloc(h->v, h->cap * sizeof *h->v);
    }
    h->v[h->n++] = a;
  }
  freeifaddrs(list);
  h->stale = false;
  h->n_routes = 0; /* a route may have changed too */
  h->generation++;
}

/* Empties the event socket (locked): any message, or a lost one
 * (ENOBUFS), means the list may be out of date. The kernel queues the
 * event before the change's own system call returns, so a check that
 * starts after an address was added always sees it here. */
static void drain_events(struct host_addrs *h)
{
  char buf[8192];
  for (;;) {
    ssize_t n = recv(h->netlink, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == ENOBUFS)) {
      h->stale = true;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return;
  }
}

int host_addrs_new(struct host_addrs **ret)
{
  struct host_addrs *h = cap_xcalloc(1, sizeof *h);
  pthread_mutex_init(&h->lock, NULL);
  h->netlink = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
  /* addresses, routes (`ip route add local ...`) and policy rules: any
   * of them can change which destinations are this machine */
  struct sockaddr_nl nl = {.nl_family = AF_NETLINK,
                           .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR |
                                        RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_IPV4_RULE};
  int v6_rules = RTNLGRP_IPV6_RULE;
  if (h->netlink >= 0 && (bind(h->netlink, (struct sockaddr *)&nl, sizeof nl) < 0 ||
                          setsockopt(h->netlink, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &v6_rules,
                                     sizeof v6_rules) < 0)) {
    close(h->netlink);
    h->netlink = -1;
  }
  reload(h); /* subscribed first: a change after this read is an event */
  *ret = h;
  return 0;
}

bool host_addrs_contains(struct host_addrs *h, const struct sockaddr *sa)
{
  struct in6_addr a;
  if (!h || !as_v6(sa, &a))
    return false;
  pthread_mutex_lock(&h->lock);
  if (h->netlink >= 0)
    drain_events(h);
  if (h->netlink < 0 || h->stale)
    reload(h);
  bool found = false;
  for (size_t i = 0; i < h->n && !found; i++)
    found = memcmp(&h->v[i], &a, sizeof a) == 0;
  pthread_mutex_unlock(&h->lock);
  return found;
}

/* The destination host_route_local asks the kernel about, as the key of
 * its kept verdict: an IPv4 address and its mapped form are asked as the
 * IPv4 address, any other IPv6 address as itself. Not as_v6's form: the
 * IPv4-compatible or NAT64 address of 203.0.113.1 is asked as an IPv6
 * route, and that verdict is not 203.0.113.1's (tests/review8/
 * route_verdict_nat64.sh). */
static bool route_key(const struct sockaddr *sa, struct in6_addr *k)
{
  if (sa->sa_family == AF_INET6) {
    *k = ((const struct sockaddr_in6 *)sa)->sin6_addr;
    return true;
  }
  return as_v6(sa, k);
}

bool host_addrs_local(struct host_addrs *h, const struct sockaddr *sa)
{
  struct in6_addr a, key;
  if (!h || h->netlink < 0 || !as_v6(sa, &a) || !route_key(sa, &key)) /* no events: none kept */
    return host_addrs_contains(h, sa) || host_route_local(sa);
  pthread_mutex_lock(&h->lock);
  drain_events(h);
  if (h->stale)
    reload(h);
  bool found = false;
  for (size_t i = 0; i < h->n && !found; i++)
    found = memcmp(&h->v[i], &a, sizeof a) == 0;
  for (size_t i = 0; i < h->n_routes && !found; i++)
    if (memcmp(&h->routes[i].a, &key, sizeof key) == 0) {
      found = h->routes[i].local;
      pthread_mutex_unlock(&h->lock);
      return found;
    }
  uint64_t generation = h->generation;
  pthread_mutex_unlock(&h->lock);
  if (found)
    return true;
  /* asked without the lock; kept only if no event came meanwhile (one
   * queued before the answer leaves the list stale, or reloaded by another
   * thread: a new generation) */
  bool local = host_route_local(sa);
  pthread_mutex_lock(&h->lock);
  drain_events(h);
  if (!h->stale && h->generation == generation) {
    size_t slot = h->n_routes < ROUTES_KEPT ? h->n_routes++ : h->next_route++ % ROUTES_KEPT;
    h->routes[slot].a = key;
    h->routes[slot].local = local;
  }
  pthread_mutex_unlock(&h->lock);
  return local;
}

bool host_addrs_same(const struct sockaddr *a, const struct sockaddr *b)
{
  struct in6_addr x, y;
  return as_v6(a, &x) && as_v6(b, &y) && memcmp(&x, &y, sizeof x) == 0;
}

void host_addrs_free(struct host_addrs *h)
{
  if (!h)
    return;
  if (h->netlink >= 0)
    close(h->netlink);
  pthread_mutex_destroy(&h->lock);
  free(h->v);
  free(h);
}

bool host_route_local(const struct sockaddr *sa)
{
  struct {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[64];
  } req = {0};
  unsigned char addr[16];
  size_t alen;
  int family;
  if (sa->sa_family == AF_INET) {
    family = AF_INET;
    alen = 4;
    memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) {
      family = AF_INET;
      alen = 4;
      memcpy(addr, &a6->s6_addr[12], 4);
    } else {
      family = AF_INET6;
      alen = 16;
      memcpy(addr, a6, 16);
    }
  } else {
    return false;
  }
  req.nh.nlmsg_type = RTM_GETROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.rt.rtm_family = (unsigned char)family;
  req.rt.rtm_dst_len = (unsigned char)(alen * 8);
  struct rtattr *rta = (struct rtattr *)req.attrs;
  rta->rta_type = RTA_DST;
  rta->rta_len = (unsigned short)RTA_LENGTH(alen);
  memcpy(RTA_DATA(rta), addr, alen);
  req.nh.nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof req.rt) + RTA_ALIGN(rta->rta_len));
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0)
    return false;
  struct timeval tv = {.tv_sec = 1};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool local = false;
  char buf[4096];
  if (send(fd, &req, req.nh.nlmsg_len, 0) == (ssize_t)req.nh.nlmsg_len) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    if (n > 0 && NLMSG_OK(nh, (size_t)n) && nh->nlmsg_type == RTM_NEWROUTE) {
      struct rtmsg *rt = NLMSG_DATA(nh);
      local = rt->rtm_type == RTN_LOCAL;
    }
  }
  close(fd);
  return local;
}
