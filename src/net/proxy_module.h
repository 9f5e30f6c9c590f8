/* The contract between libcapsule and the egress proxy module
 * (capsule-proxy.so: proxy.c and tls.c with OpenSSL, the rest of
 * libcapsule they use linked in privately): the module exports this one
 * table and nothing else. proxy_load.c gives libcapsule proxy.h's
 * functions by opening the module on the first proxy_new, so only a
 * sandbox in proxy mode maps libssl and libcrypto (loading them costs
 * every process about 1 ms). The functions have the contracts of proxy.h
 * and tls_client.h (the verified client the Hermes runtime uses). */
#ifndef CAPSULE_NET_PROXY_MODULE_H
#define CAPSULE_NET_PROXY_MODULE_H

#include "net/proxy.h"
#include "net/tls_client.h"

#define PROXY_MODULE_NAME "capsule-proxy.so"
#define PROXY_MODULE_SYMBOL "proxy_module_v1"

struct proxy_module {
  size_t size; /* sizeof(struct proxy_module) as the module was built */
  int (*create)(const struct cap_spec *spec, const struct proxy_options *opt, struct proxy **ret,
                struct cap_error *err);
  const char *(*ca_bundle)(const struct proxy *p, size_t *len);
  char *const *(*tool_env)(const struct proxy *p, size_t *n);
  void (*scrub)(struct proxy *p);
  int (*start)(struct proxy *p, const int *fds, size_t n, struct cap_error *err);
  void (*stop)(struct proxy *p);
  int64_t (*cpu_ms)(struct proxy *p);
  /* tls_client.h */
  int (*tls_open)(int fd, const char *host, const struct tls_client_files *files, uint64_t deadline,
                  struct tls_client **ret, struct cap_error *err);
  ssize_t (*tls_read)(struct tls_client *c, void *buf, size_t len);
  ssize_t (*tls_write)(struct tls_client *c, const void *buf, size_t len);
  size_t (*tls_pending)(const struct tls_client *c);
  void (*tls_free)(struct tls_client *c);
  /* proxy.h: connections the connect supervisor made */
  void (*expect_supervisor)(struct proxy *p);
  bool (*hold)(struct proxy *p);
  void (*connected)(struct proxy *p, const struct sockaddr *dest, socklen_t len, int *made);
};

#endif
