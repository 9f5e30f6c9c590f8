/* libFuzzer target for the sandbox's resolver (src/net/dns.c and the
 * answers of src/net/egress_plan.c): the input is a datagram as a tool in
 * the sandbox could send it. Whatever the bytes, the parser must not read
 * out of bounds, a name it returns must be one the plan could hold, and an
 * answer must fit its buffer, echo the query's id and answer only allowed
 * names with an address (a pattern's from the on-demand pool). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/model.h"
#include "net/dns.h"
#include "net/egress_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct egress_plan plan;
static struct egress_pool pool; /* fills up: SERVFAIL afterwards, checked too */
static struct cap_spec *spec;   /* the plan points into it */

static void plan_once(void)
{
  static int done;
  if (done++)
    return;
  spec = cap_spec_new(CAP_FORMAT_NONO);
  spec->network.mode = CAP_NET_PROXY;
  cap_strv_push(&spec->network.allow_domains, "example.com");
  cap_strv_push(&spec->network.allow_domains, "imap.mail.me.com:993");
  cap_strv_push(&spec->network.allow_domains, "*.wild.example");
  egress_plan_build(spec, &plan);
  egress_pool_init(&pool);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  plan_once();
  struct dns_question q;
  enum dns_parse p = dns_parse_query(data, size, &q);
  if (p == DNS_PARSE_OK) {
    size_t n = strlen(q.name);
    if (n >= DNS_NAME_MAX || q.question_len < n + 5 || 12 + q.question_len > size)
      abort();
    for (size_t i = 0; i < n; i++)
      if (q.name[i] >= 'A' && q.name[i] <= 'Z')
        abort(); /* names are compared in lower case */
  }
  uint8_t out[DNS_MESSAGE_MAX];
  size_t len;
  char name[DNS_NAME_MAX];
  enum egress_dns_outcome o =
      egress_plan_answer(&plan, &pool, data, size, out, sizeof out, &len, name);
  if (len > sizeof out || (o == EGRESS_DNS_NONE && len))
    abort();
  if (len) {
    if (len < 12 || out[0] != data[0] || out[1] != data[1] || !(out[2] & 0x80))
      abort();
    bool has_answer = out[7] != 0;
    if (has_answer && (o != EGRESS_DNS_ANSWERED || q.qtype != DNS_TYPE_A))
      abort();
    size_t n = strlen(name), w = strlen(".wild.example");
    bool wild = n > w && strcmp(name + n - w, ".wild.example") == 0;
    if (o == EGRESS_DNS_ANSWERED && strcmp(name, "example.com") != 0 &&
        strcmp(name, "imap.mail.me.com") != 0 && !wild)
      abort();
    /* an on-demand address is the pool's, and stands for the name asked */
    if (has_answer && wild &&
        (len < 16 || out[len - 4] != 127 || out[len - 3] != 77 || out[len - 2] < 128 ||
         !egress_pool_by_addr(&pool, out + len - 4) ||
         strcmp(egress_pool_by_addr(&pool, out + len - 4), name) != 0))
      abort();
    if (o == EGRESS_DNS_FULL && (!wild || pool.n != EGRESS_POOL_MAX || has_answer))
      abort();
  }
  return 0;
}
