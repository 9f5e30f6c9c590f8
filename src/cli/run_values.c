/* `capsule run`'s option values: sizes, counts, ports, hosts, --env and
 * --resolve entries, read as run.c's parse_option meets them (run.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "net/rules.h"

/* "256M" -> bytes; 0 on a bad size */
uint64_t run_parse_size(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || s[0] == '-')
    return 0;
  uint64_t mult = 1;
  switch (*end) {
  case 'K':
  case 'k':
    mult = 1ull << 10;
    end++;
    break;
  case 'M':
  case 'm':
    mult = 1ull << 20;
    end++;
    break;
  case 'G':
  case 'g':
    mult = 1ull << 30;
    end++;
    break;
  case '\0': break;
  default: return 0;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  return *end || v > UINT64_MAX / mult ? 0 : v * mult;
}

uint64_t run_parse_count(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  return errno || end == s || *end || s[0] == '-' ? 0 : v;
}

void run_push_env(struct cap_strv *env, const char *arg)
{
  if (strchr(arg, '=')) {
    cap_strv_push(env, arg);
  } else if (getenv(arg)) {
    _cleanup_free_ char *kv = cap_xasprintf("%s=%s", arg, getenv(arg));
    cap_strv_push(env, kv);
  }
}

/* "1".."65535" -> the port; 0 otherwise */
uint16_t run_parse_port(const char *s)
{
  uint64_t v = run_parse_count(s);
  return v <= 65535 ? (uint16_t)v : 0;
}

/* --allow-host HOST[:PORT]: a name (or ".suffix", "*.suffix", "*", an IP
 * literal), as nono's allow_domains and endpoints spell them. A bare IPv6
 * literal has more than one ':' and takes no port. */
int run_parse_allow_host(const char *arg, struct cap_strv *hosts)
{
  const char *colon = strchr(arg, ':');
  bool has_port = colon && !strchr(colon + 1, ':');
  _cleanup_free_ char *host = has_port ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
  if (!host)
    return CLI_EXIT_INVALID;
  const char *name = host;
  if (strncmp(name, "*.", 2) == 0)
    name += 2;
  else if (name[0] == '.')
    name += 1;
  if (!(strcmp(host, "*") == 0 || (*name && net_host_valid(name))))
    return cli_usage_error("run",
                           "--allow-host '%s' is not HOST[:PORT] (a name such as example.com, "
                           ".example.com or *.example.com for its subdomains, an IP address, or *)",
                           arg);
  if (has_port && !run_parse_port(colon + 1))
    return cli_usage_error("run", "--allow-host '%s': the port must be 1..65535", arg);
  /* "*.suffix" is stored as ".suffix", as the nono lowering does */
  _cleanup_free_ char *entry = strncmp(arg, "*.", 2) == 0 ? cap_xstrdup(arg + 1) : cap_xstrdup(arg);
  cap_strv_push(hosts, entry);
  return 0;
}

/* --resolve HOST:ADDR[,ADDR...]: a host name and IPv4 or IPv6 literals
 * (one IPv6 in brackets or not) the proxy uses for it instead of the
 * system's resolver. */
int run_parse_resolve(const char *arg, struct run_args *a)
{
  const char *colon = strchr(arg, ':');
  _cleanup_free_ char *host = colon ? strndup(arg, (size_t)(colon - arg)) : NULL;
  _cleanup_free_ char *addr = NULL;
  if (colon) {
    const char *v = colon + 1;
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '[' && v[n - 1] == ']')
      addr = strndup(v + 1, n - 2);
    else
      addr = strdup(v);
  }
  bool valid = host && addr && *host && *addr && net_host_valid(host);
  for (const char *v = addr; valid && *v;) { /* ADDR[,ADDR...] */
    size_t n = strcspn(v, ",");
    char one[64];
    unsigned char bin[16];
    valid = n < sizeof one;
    if (valid) {
      memcpy(one, v, n);
      one[n] = '\0';
      valid = inet_pton(AF_INET, one, bin) == 1 || inet_pton(AF_INET6, one, bin) == 1;
    }
    v += n + (v[n] == ',' && v[n + 1]);
  }
  if (!valid)
    return cli_usage_error("run",
                           "--resolve '%s' is not HOST:ADDR[,ADDR...] (a host name and IP "
                           "addresses, e.g. api.example.com:127.0.0.1 or api.example.com:[::1])",
                           arg);
  if (a->n_resolve == RUN_MAX_RESOLVE)
    return cli_usage_error("run", "--resolve: at most %d entries", RUN_MAX_RESOLVE);
  a->resolve[a->n_resolve++] =
      (struct proxy_resolve){.host = steal_pointer(&host), .addr = steal_pointer(&addr)};
  return 0;
}
