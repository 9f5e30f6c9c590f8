/* Keyword routing, as covenant-router scores intents (router.h). */
#include "gateway/router.h"

#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

static const char *const web_search[] = {"search",   "find", "look up", "papers", "articles",
                                         "research", "news", "what is", NULL};
static const char *const summarize[] = {"summarize", "summarise", "tl;dr",
                                        "brief",     "summary",   NULL};
static const char *const gpu_inference[] = {"generate",  "render", "image",
                                            "diffusion", "infer",  NULL};
static const char *const memory_write[] = {"remember", "save", "note", "store", "log", NULL};
static const char *const memory_read[] = {"recall", "what did", "previous", "earlier", NULL};
static const char *const delegate[] = {"assign", "delegate", "ask another", "route to", NULL};
static const char *const subscribe[] = {"hello", "hi", "echo", "ping", "test", NULL};
static const char *const none[] = {NULL};

static const struct {
  const char *action;
  const char *const *keywords;
} table[] = {
    {"tool.web_search", web_search},       {"tool.summarize", summarize},
    {"tool.gpu_inference", gpu_inference}, {"memory.write", memory_write},
    {"memory.read", memory_read},          {"intent.delegate", delegate},
    {"intent.subscribe", subscribe},
};

const char *const *gw_route_keywords(const char *action)
{
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (strcmp(table[i].action, action) == 0)
      return table[i].keywords;
  return none;
}

/* Rust's str::to_lowercase as far as ASCII keywords can tell: ASCII
 * letters, KELVIN SIGN to 'k', and DOTTED CAPITAL I to "i" + U+0307; no
 * other character lowercases into ASCII. */
static char *lowercase(const char *text)
{
  struct cap_buf b = {0};
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    if (p[0] == 0xe2 && p[1] == 0x84 && p[2] == 0xaa) { /* U+212A */
      cap_buf_putc(&b, 'k');
      p += 2;
    } else if (p[0] == 0xc4 && p[1] == 0xb0) { /* U+0130 */
      cap_buf_puts(&b, "i\xcc\x87");
      p += 1;
    } else {
      cap_buf_putc(&b, (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p));
    }
  }
  cap_buf_putc(&b, '\0');
  return cap_buf_steal(&b);
}

static unsigned score_actions(const struct cap_strv *actions, const char *lowered)
{
  unsigned score = 0;
  for (size_t i = 0; i < actions->len; i++)
    for (const char *const *k = gw_route_keywords(actions->v[i]); *k; k++)
      if (strstr(lowered, *k))
        score++;
  return score;
}

const struct cap_spec *gw_route(const struct gw_registry *reg, const char *text, unsigned *score)
{
  char *lowered = lowercase(text);
  const struct cap_spec *best = NULL;
  unsigned best_score = 0;
  for (size_t i = 0; i < reg->n; i++) {
    const struct cap_spec *spec = reg->caps[i];
    if (spec->format != CAP_FORMAT_COVENANT)
      continue;
    unsigned s = score_actions(&spec->actions_required, lowered) +
                 score_actions(&spec->actions_optional, lowered);
    if (s > best_score) {
      best = spec;
      best_score = s;
    }
  }
  free(lowered);
  *score = best_score;
  return best;
}
