/* Side by side in one process: (1) loading a registry of agents against
 * loading it and routing an intent over it, (2) checking a capability
 * token's signature (gw_token_signature_ok: the signed bytes built, then
 * verified) against libsodium's bare crypto_sign_verify_detached over the
 * same bytes. Each round runs both, the order alternating round by round.
 * Prints the means, their ratios and the median of the rounds' ratios.
 * Usage: covenant_bench AGENTS_DIR ROUNDS */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/diag.h"
#include "core/json.h"
#include "gateway/registry.h"
#include "gateway/router.h"
#include "gateway/tokens.h"

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double load(const char *dir, bool route, unsigned *score)
{
  struct gw_registry reg;
  struct cap_diags diags = {0};
  double t = now_s();
  if (gw_registry_load(dir, &reg, &diags) < 0 || diags.errors) {
    fprintf(stderr, "covenant_bench: %s does not load\n", dir);
    exit(1);
  }
  if (route && !gw_route(&reg, "please find recent papers and summarize them", score))
    exit(1);
  t = now_s() - t;
  cap_diags_free(&diags);
  gw_registry_free(&reg);
  return t;
}

static int by_value(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of the rounds' ratios: a burst of load from elsewhere lands
 * on one round, not on the figure. */
static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bench_routing(const char *dir, int rounds)
{
  double plain = 0, routed = 0;
  double *ratios = calloc((size_t)rounds, sizeof *ratios);
  unsigned score = 0;
  load(dir, true, &score); /* warm the page cache */
  /* interleaved, the order alternating round by round: both see the same
   * machine, and neither always runs second */
  for (int i = 0; i < rounds; i++) {
    double p, r;
    if (i % 2) {
      r = load(dir, true, &score);
      p = load(dir, false, &score);
    } else {
      p = load(dir, false, &score);
      r = load(dir, true, &score);
    }
    plain += p;
    routed += r;
    ratios[i] = r / p;
  }
  plain /= rounds;
  routed /= rounds;
  printf("registry load: %.2f ms; load + route: %.2f ms; routing adds %.1f%% (median of the "
         "rounds: %.1f%%; score %u)\n",
         plain * 1e3, routed * 1e3, (routed / plain - 1) * 100, (median(ratios, rounds) - 1) * 100,
         score);
  free(ratios);
}

static void bench_tokens(int rounds)
{
  unsigned char pk[32], sk[64];
  crypto_sign_keypair(pk, sk);
  struct gw_token t = {.subject_display = "research@agent",
                       .action = "tool.web_search",
                       .scope = "{\"agent_id\":\"research\",\"version\":1}",
                       .granted_by_display = "operator@local",
                       .expires = true,
                       .expires_at = 4102444800000ULL};
  memset(t.subject, 1, 32);
  memcpy(t.granted_by, pk, 32);
  gw_token_sign(&t, sk);
  struct cap_buf m = {0};
  gw_token_message(&t, &m);
  int n = rounds * 200, ok = 0;
  double bare = 0, check = 0;
  double *ratios = calloc((size_t)rounds, sizeof *ratios);
  for (int r = 0; r < rounds; r++) {
    double x = 0, y = 0;
    for (int pass = 0; pass < 2; pass++) { /* the order alternating, as above */
      bool bare_now = (pass == 0) == (r % 2 == 0);
      double a = now_s();
      for (int i = 0; i < 200; i++)
        ok += bare_now ? crypto_sign_verify_detached(t.signature, (const unsigned char *)m.data,
                                                     m.len, pk) == 0
                       : gw_token_signature_ok(&t);
      *(bare_now ? &x : &y) = now_s() - a;
    }
    bare += x;
    check += y;
    ratios[r] = y / x;
  }
  if (ok != 2 * n)
    exit(1);
  printf("token check: %.2f us; bare crypto_sign_verify_detached: %.2f us; ratio %.3fx (median "
         "of the rounds: %.3fx)\n",
         check / n * 1e6, bare / n * 1e6, check / bare, median(ratios, rounds));
  free(ratios);
  cap_buf_free(&m);
}

int main(int argc, char **argv)
{
  if (argc != 3 || sodium_init() < 0)
    return 2;
  int rounds = atoi(argv[2]);
  bench_routing(argv[1], rounds);
  bench_tokens(rounds);
  return 0;
}
