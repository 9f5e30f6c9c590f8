/* The listeners' address, Host and Origin checks and TLS files
 * (serve_guard.h). */
#include "front/serve_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/text.h"

static int parse_addr(struct serve_guard *g, const char *option, const char *addr,
                      struct cap_error *err)
{
  const char *colon = strrchr(addr, ':');
  if (!colon)
    return cap_error_set(err, EINVAL, "%s takes HOST:PORT (e.g. 127.0.0.1:8080), not %s", option,
                         addr);
  char *end;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (*end || !colon[1] || port > 65535)
    return cap_error_set(err, EINVAL, "%s %s: the port must be 0..65535 (0: any free one)", option,
                         addr);
  _cleanup_free_ char *host = cap_xstrndup(addr, (size_t)(colon - addr));
  if (host[0] == '[' && host[strlen(host) - 1] == ']') {
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  memset(&g->ss, 0, sizeof g->ss);
  struct sockaddr_in *a4 = (struct sockaddr_in *)&g->ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&g->ss;
  if (strcmp(host, "localhost") == 0)
    strcpy(host, "127.0.0.1");
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    g->loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    g->wildcard = a4->sin_addr.s_addr == htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    g->loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
    g->wildcard = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
  } else {
    return cap_error_set(err, EINVAL, "%s %s: the host must be an IP address or localhost", option,
                         addr);
  }
  return (int)port;
}

void serve_guard_set_port(struct serve_guard *g, const char *addr, int port)
{
  for (size_t i = 0; i < g->n_hosts; i++)
    free(g->hosts[i]);
  g->n_hosts = 0;
  if (g->wildcard)
    return; /* any name may reach it: the token is the guard (docs/serve.md) */
  if (g->loopback) {
    const char *names[] = {"127.0.0.1", "localhost", "[::1]"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
      g->hosts[g->n_hosts++] = cap_xasprintf("%s:%d", names[i], port);
    return;
  }
  const char *colon = strrchr(addr, ':');
  g->hosts[g->n_hosts++] = cap_xasprintf("%.*s:%d", (int)(colon - addr), addr, port);
}

char *serve_guard_bound_addr(const char *addr, int port)
{
  const char *colon = strrchr(addr, ':');
  return cap_xasprintf("%.*s:%d", (int)(colon ? colon - addr : (ptrdiff_t)strlen(addr)), addr,
                       port);
}

static int read_tls(struct serve_guard *g, const struct serve_options *opt, struct cap_error *err)
{
  size_t len;
  if (cap_read_file(opt->tls_cert, 1 << 20, &g->cert, &len, err) < 0 ||
      cap_read_file(opt->tls_key, 1 << 20, &g->key, &len, err) < 0)
    return cap_error_prefix(err, "cannot read the TLS certificate or key"), -ENOENT;
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return cap_error_set(err, ENOTSUP, "this libmicrohttpd was built without TLS");
  return 0;
}

int serve_guard_init(struct serve_guard *g, const char *option, const char *addr,
                     const struct serve_options *opt, struct cap_error *err)
{
  memset(g, 0, sizeof *g);
  int port = parse_addr(g, option, addr, err);
  if (port < 0)
    return port;
  g->tls = opt->tls_cert || opt->tls_key;
  if (g->tls && !(opt->tls_cert && opt->tls_key))
    return cap_error_set(err, EINVAL, "--tls-cert and --tls-key go together");
  if (!g->loopback && !g->tls && !opt->insecure)
    return cap_error_set(err, EINVAL,
                         "%s %s is not a loopback address: give --tls-cert and --tls-key, "
                         "or --insecure to serve bearer tokens in clear text",
                         option, addr);
  serve_guard_set_port(g, addr, port);
  if (g->tls && read_tls(g, opt, err) < 0)
    return -ENOENT;
  return port;
}

struct host_count {
  const char *value;
  int n;
};

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
  (void)kind;
  struct host_count *h = cls;
  if (key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
    h->value = value;
    h->n++;
  }
  return MHD_YES;
}

const char *serve_guard_request_host(struct MHD_Connection *c)
{
  struct host_count h = {0};
  MHD_get_connection_values(c, MHD_HEADER_KIND, count_host, &h);
  return h.n == 1 ? h.value : NULL; /* two Host headers: which one names us? neither */
}

bool serve_guard_host_ok(const struct serve_guard *g, const char *host)
{
  if (!g->n_hosts)
    return true;
  for (size_t i = 0; host && i < g->n_hosts; i++)
    if (strcasecmp(host, g->hosts[i]) == 0)
      return true;
  return false;
}

bool serve_guard_origin_ok(const struct serve_guard *g, const char *origin)
{
  if (!origin)
    return true;
  const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                     : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                           : NULL;
  return rest && g->n_hosts && serve_guard_host_ok(g, rest);
}

void serve_guard_free(struct serve_guard *g)
{
  for (size_t i = 0; i < g->n_hosts; i++)
    free(g->hosts[i]);
  g->n_hosts = 0;
  if (g->key)
    explicit_bzero(g->key, strlen(g->key));
  free(g->cert);
  free(g->key);
  g->cert = g->key = NULL;
}

struct MHD_Daemon *serve_guard_daemon(const struct serve_guard *g, int port,
                                      MHD_AccessHandlerCallback on_request,
                                      MHD_RequestCompletedCallback on_done, void *ctx,
                                      const struct serve_guard_limits *lim)
{
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                   (g->ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) | (g->tls ? MHD_USE_TLS : 0);
  struct MHD_OptionItem opts[] = {
      {g->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, g->cert},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, g->key},
      {MHD_OPTION_END, 0, NULL},
  };
  return MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, on_request, ctx, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&g->ss, MHD_OPTION_NOTIFY_COMPLETED, on_done, ctx,
      MHD_OPTION_NOTIFY_CONNECTION, lim->on_conn, lim->conn_ctx, MHD_OPTION_CONNECTION_TIMEOUT,
      lim->timeout_s, MHD_OPTION_CONNECTION_LIMIT, lim->connections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, lim->per_ip, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)65536, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}
