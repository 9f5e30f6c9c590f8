/* Unit tests for the egress policy decisions (src/net/rules.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "manifest/model.h"
#include "net/rules.h"
#include "unit.h"

static void add_endpoint(struct cap_spec *spec, const char *host, const char *method,
                         const char *path)
{
  struct cap_endpoint *e = cap_spec_add_endpoint(spec, host);
  if (method)
    cap_rules_push(&e->rules, &e->n_rules, method, path);
}

static void test_hosts(void)
{
  struct cap_spec *spec = cap_spec_new(CAP_FORMAT_NONO);
  struct cap_network *net = &spec->network;
  net->mode = CAP_NET_PROXY;
  cap_strv_push(&net->allow_domains, "example.com");
  cap_strv_push(&net->allow_domains, ".googleapis.com");
  add_endpoint(spec, "api.github.com:443", "GET", "/repos/*/issues/**");
  add_endpoint(spec, "*.duckduckgo.com:443", NULL, NULL);
  const struct cap_endpoint *e = NULL;

  CHECK(net_host_allowed(net, "example.com", 80, &e) && e == NULL);
  CHECK(net_host_allowed(net, "EXAMPLE.com.", 443, NULL));     /* case, trailing dot */
  CHECK(!net_host_allowed(net, "www.example.com", 443, NULL)); /* exact only */
  CHECK(!net_host_allowed(net, "example.com.evil.net", 443, NULL));
  CHECK(!net_host_allowed(net, "evilexample.com", 443, NULL));
  CHECK(net_host_allowed(net, "storage.googleapis.com", 443, NULL));
  CHECK(!net_host_allowed(net, "googleapis.com", 443, NULL)); /* subdomains only */
  CHECK(!net_host_allowed(net, "xgoogleapis.com", 443, NULL));
  CHECK(net_host_allowed(net, "api.github.com", 443, &e) && e && e->n_rules == 1);
  CHECK(!net_host_allowed(net, "api.github.com", 80, NULL)); /* port pinned */
  CHECK(net_host_allowed(net, "html.duckduckgo.com", 443, NULL));
  CHECK(!net_host_allowed(net, "duckduckgo.com", 443, NULL));
  /* host strings that are no DNS name never match, even a wildcard: they
   * would reach the resolver, the log and a minted certificate's SAN */
  CHECK(!net_host_allowed(net, "x,DNS:a.duckduckgo.com", 443, NULL));
  CHECK(!net_host_allowed(net, "a b.duckduckgo.com", 443, NULL));
  CHECK(!net_host_allowed(net, "a..duckduckgo.com", 443, NULL));
  CHECK(!net_host_allowed(net, "", 443, NULL));
  CHECK(net_host_valid("::1") && net_host_valid("127.0.0.1") && net_host_valid("a_b.example."));
  CHECK(!net_host_valid("a/b") && !net_host_valid("a@b") && !net_host_valid(".a") &&
        !net_host_valid("a\n"));
  net->mode = CAP_NET_PROXY;
  CHECK(!net_host_allowed(net, "", 443, NULL));
  CHECK(!net_host_allowed(net, "example.com", 0, NULL));

  /* a connect-port list narrows hosts allowed on any port */
  cap_ports_push(&net->connect, 443);
  CHECK(!net_host_allowed(net, "example.com", 80, NULL));
  CHECK(net_host_allowed(net, "example.com", 443, NULL));

  net->mode = CAP_NET_BLOCKED;
  CHECK(!net_host_allowed(net, "example.com", 443, NULL));
  net->mode = CAP_NET_UNRESTRICTED;
  CHECK(net_host_allowed(net, "anything.invalid", 1, NULL));
  cap_spec_free(spec);

  /* Covenant's outbound-https-only: any host, port 443 */
  spec = cap_spec_new(CAP_FORMAT_COVENANT);
  spec->network.mode = CAP_NET_PROXY;
  cap_strv_push(&spec->network.allow_domains, "*");
  cap_ports_push(&spec->network.connect, 443);
  CHECK(net_host_allowed(&spec->network, "any.example", 443, NULL));
  CHECK(!net_host_allowed(&spec->network, "any.example", 22, NULL));
  cap_spec_free(spec);
}

static bool forbidden(const char *ip, bool allow_private)
{
  struct sockaddr_storage ss = {0};
  if (strchr(ip, ':')) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &in6->sin6_addr);
  } else {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &in->sin_addr);
  }
  return net_address_forbidden((struct sockaddr *)&ss, allow_private);
}

static void test_addresses(void)
{
  {
    struct sockaddr_in6 n64 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "64:ff9b::a0a:a05", &n64.sin6_addr); /* 10.10.10.5 via NAT64 */
    CHECK(net_address_forbidden((struct sockaddr *)&n64, false));
    inet_pton(AF_INET6, "64:ff9b::a9fe:a9fe", &n64.sin6_addr); /* 169.254.169.254 */
    CHECK(net_address_forbidden((struct sockaddr *)&n64, true));
    inet_pton(AF_INET6, "64:ff9b:1::808:808", &n64.sin6_addr); /* 8.8.8.8, local-use prefix */
    CHECK(!net_address_forbidden((struct sockaddr *)&n64, false));
    inet_pton(AF_INET6, "64:ff9b::808:808", &n64.sin6_addr);
    CHECK(!net_address_forbidden((struct sockaddr *)&n64, false));
  }
  static const char *const always[] = {
      "169.254.169.254", "0.0.0.0", "224.0.0.1", "255.255.255.255",       "fe80::1",
      "fd00:ec2::254",   "::",      "ff02::1",   "::ffff:169.254.169.254"};
  for (size_t i = 0; i < sizeof always / sizeof always[0]; i++) {
    CHECK(forbidden(always[i], false));
    CHECK(forbidden(always[i], true));
  }
  static const char *const private_ranges[] = {
      "127.0.0.1",  "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
      "100.64.0.1", "::1",      "fc00::1",    "fd12::1",        "::ffff:10.0.0.1"};
  for (size_t i = 0; i < sizeof private_ranges / sizeof private_ranges[0]; i++) {
    CHECK(forbidden(private_ranges[i], false));
    CHECK(!forbidden(private_ranges[i], true));
  }
  static const char *const public_ips[] = {"93.184.216.34", "172.32.0.1", "8.8.8.8",
                                           "2606:4700::1111", "100.128.0.1"};
  for (size_t i = 0; i < sizeof public_ips / sizeof public_ips[0]; i++)
    CHECK(!forbidden(public_ips[i], false));
}

static void test_paths(void)
{
  CHECK(net_path_matches("/repos/*/issues/**", "/repos/capsule/issues"));
  CHECK(net_path_matches("/repos/*/issues/**", "/repos/capsule/issues/12/comments"));
  CHECK(!net_path_matches("/repos/*/issues/**", "/repos/a/b/issues"));
  CHECK(!net_path_matches("/repos/*/issues/**", "/repos/capsule/pulls"));
  CHECK(net_path_matches("/**", "/"));
  CHECK(net_path_matches("/a/**/z", "/a/z"));
  CHECK(net_path_matches("/a/**/z", "/a/b/c/z"));
  CHECK(!net_path_matches("/a/**/z", "/a/b/c/y"));
  CHECK(!net_path_matches("/repos/*", "/repos"));
  /* what a proxy and an upstream could read differently never matches */
  CHECK(!net_path_matches("/repos/**", "/repos/../admin"));
  CHECK(!net_path_matches("/repos/**", "/repos/./x"));
  CHECK(!net_path_matches("/repos/**", "/repos/%2e%2e/admin"));
  CHECK(!net_path_matches("/repos/**", "/repos/a%2Fb"));
  CHECK(!net_path_matches("/repos/**", "/repos/a%zz"));
  CHECK(!net_path_matches("/repos/**", "/repos\\\\x"));
  CHECK(!net_path_matches("/repos/**", "//repos/x"));
  CHECK(!net_path_matches("/repos/**", "repos/x"));
  CHECK(net_path_matches("/repos/**", "/repos/a%20b"));
  /* ';' path parameters are cut before matching (servlet containers read
   * "..;" as ".."), so they hide no dot segment and no other name */
  CHECK(!net_path_matches("/api/**", "/api/..;/admin"));
  CHECK(!net_path_matches("/api/**", "/api/.;x=1/admin"));
  CHECK(!net_path_matches("/api/**", "/api/;x/admin"));
  CHECK(net_path_matches("/api/*/x", "/api/a;v=1/x"));
  CHECK(net_path_matches("/admin", "/admin;jsessionid=1"));
  CHECK(!net_path_matches("/public/**", "/admin;/public/x"));
  /* bounded work: 1,000 "a/b" pairs against five '**' would take the old
   * backtracking matcher far longer than the test's timeout */
  char deep[4096 + 8] = "";
  for (int i = 0; i < 1000; i++)
    strcat(deep, "/a/b");
  CHECK(!net_path_matches("/**/a/**/b/**/a/**/b/**/c", deep));
  CHECK(net_path_matches("/**/a/**/b/**/a/**/b/**", deep));
  CHECK(net_path_matches("/a/**/b/*/b", deep));
  CHECK(!net_path_matches("/a/**/b/*/a", deep));

  struct cap_http_rule *rules = NULL;
  size_t n = 0;
  CHECK(net_rules_allow(rules, n, "DELETE", "/anything")); /* no rules: all paths */
  cap_rules_push(&rules, &n, "GET", "/repos/*/issues/**");
  cap_rules_push(&rules, &n, "*", "/health");
  CHECK(net_rules_allow(rules, n, "GET", "/repos/x/issues/1"));
  CHECK(!net_rules_allow(rules, n, "POST", "/repos/x/issues/1"));
  CHECK(net_rules_allow(rules, n, "POST", "/health"));
  CHECK(!net_rules_allow(rules, n, "GET", "/other"));
  cap_rules_free(rules, n);
}

UNIT_MAIN(test_hosts, test_addresses, test_paths)
