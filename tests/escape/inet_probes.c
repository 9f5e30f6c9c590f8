/* The hostile tool's inet probes (seccomp_gen.c's inet_refusals): a
 * socket of a protocol or type the kernel would load a module for (SCTP,
 * DCCP, UDP-Lite, L2TP, MPTCP, SOCK_SEQPACKET, SOCK_RDM), refused by the
 * filter with EPERM in every network mode; and what must keep working:
 * TCP and UDP of both families, flags, ping sockets not refused by the
 * filter, a UDP round trip on loopback and a TCP connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel_probes.h"

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef IPPROTO_L2TP
#define IPPROTO_L2TP 115
#endif
#ifndef SOCK_DCCP
#define SOCK_DCCP 6
#endif

/* inet-refused NAME: the filter's EPERM, not the kernel's own answer */
static int inet_refused(const char *name)
{
  static const struct {
    const char *name;
    long family, type, protocol;
    bool pair;
  } probes[] = {
      {"sctp", AF_INET, SOCK_STREAM, IPPROTO_SCTP, false},
      {"sctp-seqpacket", AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP, false},
      {"sctp6", AF_INET6, SOCK_STREAM, IPPROTO_SCTP, false},
      {"dccp", AF_INET, SOCK_DCCP, IPPROTO_DCCP, false},
      {"dccp6", AF_INET6, SOCK_DCCP, IPPROTO_DCCP, false},
      {"udplite", AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE, false},
      {"l2tp", AF_INET, SOCK_DGRAM, IPPROTO_L2TP, false},
      {"mptcp", AF_INET, SOCK_STREAM, IPPROTO_MPTCP, false},
      {"rdm", AF_INET6, SOCK_RDM, 0, false},
      {"icmp6-in-inet", AF_INET, SOCK_DGRAM, IPPROTO_ICMPV6, false},
      {"icmp-in-inet6", AF_INET6, SOCK_DGRAM, IPPROTO_ICMP, false},
      {"udp-as-stream", AF_INET, SOCK_STREAM, IPPROTO_UDP, false},
      /* the kernel reads an int: the upper half must not hide SCTP */
      {"sctp-high-bits", AF_INET, SOCK_STREAM, (long)(0x100000000ull | IPPROTO_SCTP), false},
      {"tcp-high-bits", AF_INET, SOCK_STREAM, (long)(0x100000000ull | IPPROTO_TCP), false},
      {"dccp-flags", AF_INET, SOCK_DCCP | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_DCCP, false},
      /* socketpair creates the socket (and loads its module) first */
      {"socketpair-sctp", AF_INET, SOCK_STREAM, IPPROTO_SCTP, true},
      {"socketpair-dccp6", AF_INET6, SOCK_DCCP, IPPROTO_DCCP, true},
  };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    if (strcmp(probes[i].name, name))
      continue;
    int sv[2];
    long rc =
        probes[i].pair
            ? syscall(SYS_socketpair, probes[i].family, probes[i].type, probes[i].protocol, sv)
            : syscall(SYS_socket, probes[i].family, probes[i].type, probes[i].protocol);
    if (rc >= 0) {
      printf("ESCAPED: %s: a socket was made\n", name);
      return 1;
    }
    if (errno != EPERM) {
      printf("ESCAPED: %s failed with %s, not the filter's EPERM\n", name, strerror(errno));
      return 1;
    }
    printf("BLOCKED: %s (%s)\n", name, strerror(errno));
    return 0;
  }
  return 2;
}

static int fail(const char *what)
{
  printf("BROKEN: %s: %s\n", what, strerror(errno));
  return 1;
}

static int udp_round_trip(void)
{
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
      getsockname(s, (struct sockaddr *)&a, &len) < 0)
    return fail("udp bind on loopback");
  char buf[8] = {0};
  if (sendto(s, "ping", 4, 0, (struct sockaddr *)&a, sizeof a) != 4 ||
      recv(s, buf, sizeof buf, 0) != 4 || memcmp(buf, "ping", 4))
    return fail("udp round trip on loopback");
  close(s);
  return 0;
}

/* a TCP connection to 127.0.0.1:port, and a line echoed when echo */
static int tcp_to(int port, bool echo)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0)
    return fail("tcp connect on loopback");
  char buf[8] = {0};
  if (echo && (write(s, "echo\n", 5) != 5 || read(s, buf, sizeof buf) != 5))
    return fail("tcp echo");
  close(s);
  return 0;
}

/* inet-works [PORT]: every allowed combination makes a socket; ping
 * sockets are not refused by the filter (the namespace's
 * ping_group_range may still say EACCES); UDP on loopback; a TCP
 * connection to PORT's echo server, else to the proxy HTTP_PROXY names */
static int inet_works(const char *port)
{
  static const int combos[][3] = {
      {AF_INET, SOCK_STREAM, 0},
      {AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP},
      {AF_INET, SOCK_DGRAM, 0},
      {AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, IPPROTO_UDP},
      {AF_INET6, SOCK_STREAM, IPPROTO_TCP},
      {AF_INET6, SOCK_DGRAM, IPPROTO_UDP},
  };
  for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
    int s = socket(combos[i][0], combos[i][1], combos[i][2]);
    if (s < 0 && !(combos[i][0] == AF_INET6 && errno == EAFNOSUPPORT))
      return fail("an allowed socket");
    if (s >= 0)
      close(s);
  }
  int ping = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
  if (ping < 0 && errno == EPERM)
    return fail("an ICMP datagram (ping) socket");
  if (ping >= 0)
    close(ping);
  if (udp_round_trip())
    return 1;
  const char *proxy = getenv("HTTP_PROXY") ? getenv("HTTP_PROXY") : getenv("http_proxy");
  const char *colon = proxy ? strrchr(proxy, ':') : NULL;
  if (*port ? tcp_to(atoi(port), true) : colon ? tcp_to(atoi(colon + 1), false) : 0)
    return 1;
  printf("WORKS: tcp and udp sockets%s\n", *port || colon ? ", a tcp connection" : "");
  return 0;
}

int inet_probe(int argc, char **argv)
{
  const char *arg = argc > 2 ? argv[2] : "";
  if (!strcmp(argv[1], "inet-refused"))
    return inet_refused(arg);
  if (!strcmp(argv[1], "inet-works"))
    return inet_works(arg);
  return -1;
}
