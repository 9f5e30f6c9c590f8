/* The sandbox's resolver: UDP and TCP on EGRESS_DNS_ADDR:53 inside its
 * network namespace, answered from the egress plan (egress_plan_answer):
 * an allowed name's synthetic address (a pattern's name given one from
 * the on-demand pool), NXDOMAIN for every other name (SERVFAIL when the
 * pool is full). No
 * query is ever passed on: the sandbox learns no real address, and no DNS
 * leaves it. Refusals go to the egress log (kind "dns"). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "core/io.h"
#include "net/dns.h"
#include "net/proxy_internal.h"

#define UDP_BATCH 64       /* datagrams answered per wake-up, so TCP work is not starved */
#define TCP_QUERIES 32     /* queries on one TCP connection */
#define DNS_TCP_TIMEOUT 10 /* seconds a TCP client may take for each */
#define STR_(x) #x
#define STR(x) STR_(x)

static void log_refused(struct proxy *px, const char *name, enum egress_dns_outcome o)
{
  if (o != EGRESS_DNS_REFUSED && o != EGRESS_DNS_FULL)
    return;
  struct event ev = {.kind = "dns",
                     .host = name[0] ? name : "(not a query capsule reads)",
                     .port = EGRESS_DNS_PORT};
  proxy_log_event(px, &ev, false,
                  o == EGRESS_DNS_FULL
                      ? "the pattern's on-demand address pool is full (" STR(
                            EGRESS_POOL_MAX) " names): SERVFAIL, reach it through the proxy"
                      : "the name is not in the capability's network allowlist");
}

void proxy_dns_udp(struct proxy *px, int fd)
{
  uint8_t in[DNS_MESSAGE_MAX + 1], out[DNS_MESSAGE_MAX];
  char name[DNS_NAME_MAX];
  for (int i = 0; i < UDP_BATCH; i++) {
    struct sockaddr_storage from;
    socklen_t from_len = sizeof from;
    ssize_t n =
        recvfrom(fd, in, sizeof in, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &from_len);
    if (n < 0)
      return;                                                   /* EAGAIN: all answered */
    size_t len = (size_t)n > sizeof in ? sizeof in : (size_t)n; /* longer: FORMERR below */
    size_t out_len;
    enum egress_dns_outcome o = egress_plan_answer(&px->plan, px->pool_on ? &px->pool : NULL, in,
                                                   len, out, sizeof out, &out_len, name);
    log_refused(px, name, o);
    if (out_len)
      sendto(fd, out, out_len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&from, from_len);
  }
}

void proxy_dns_tcp(struct worker *w, int fd)
{
  struct proxy *px = w->px;
  proxy_set_timeouts(fd, DNS_TCP_TIMEOUT);
  uint8_t *in = (uint8_t *)w->buf, out[2 + DNS_MESSAGE_MAX];
  char name[DNS_NAME_MAX];
  for (int q = 0; q < TCP_QUERIES; q++) {
    uint8_t prefix[2];
    if (cap_read_all(fd, prefix, 2) < 0)
      return;
    size_t len = (size_t)prefix[0] << 8 | prefix[1];
    if (len > DNS_MESSAGE_MAX || cap_read_all(fd, in, len) < 0)
      return; /* a query no stub resolver sends: the connection ends */
    size_t out_len;
    enum egress_dns_outcome o = egress_plan_answer(&px->plan, px->pool_on ? &px->pool : NULL, in,
                                                   len, out + 2, sizeof out - 2, &out_len, name);
    log_refused(px, name, o);
    if (!out_len)
      return;
    out[0] = (uint8_t)(out_len >> 8);
    out[1] = (uint8_t)out_len;
    struct stream s = {.fd = fd};
    if (!proxy_stream_write(&s, (const char *)out, out_len + 2))
      return;
  }
}
