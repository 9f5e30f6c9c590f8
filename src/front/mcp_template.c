/* A resource template's URIs (RFC 6570 URI templates, as MCP's
 * resources/templates/list names them): whether a URI is one of a
 * template's, so that resources/read of a URI no list named goes to the
 * capability whose template it fits (mcp_gather.c). The template becomes
 * an anchored POSIX extended regular expression: its literal characters
 * escaped, each expression {...} a run of what its operator may expand
 * to (RFC 6570 section 3.2): none and "." stop at '/', '?' and '#'; "+"
 * and "#" may hold any character; "/", ";", "?" and "&" begin with their
 * own character and stop where the next part of a URI begins. No
 * back-references, so matching cannot take exponential time; each
 * template is compiled once, when its list is learnt. A compiled regex's
 * memory grows with the square of its expressions (glibc: some 1.8 MiB
 * for 255 of them, 120 KiB for 1000 literal characters), so a template
 * past MCP_TEMPLATE_MAX bytes or MCP_TEMPLATE_EXPRS expressions matches
 * nothing (and the session compiles at most MCP_MAX_TEMPLATES of them,
 * mcp_gather.c): a server's list cannot make a session hold gigabytes. */
#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "front/mcp_internal.h"

#define MCP_TEMPLATE_MAX 256      /* bytes of a template matched; a longer one matches nothing */
#define MCP_TEMPLATE_EXPRS 16     /* expressions of a template matched; more: it matches nothing */
#define MCP_TEMPLATE_URI_MAX 8192 /* bytes of a URI matched against templates */

/* What expression {OP...} may expand to, as a regex fragment; NULL: the
 * operator is reserved (=,!@|) or unknown: the template matches nothing */
static const char *expansion(char op)
{
  switch (op) {
  case '+':
  case '#': return "(.*)";
  case '/': return "((/[^?#]*)?)";
  case '.': return "((\\.[^/?#]*)?)";
  case ';': return "((;[^/?#]*)?)";
  case '?':
  case '&': return "(([?&][^#]*)?)";
  default: return strchr("=,!@|", op) ? NULL : "([^/?#]*)";
  }
}

/* The regex of tmpl; false where tmpl is not a template capsule reads
 * (an unclosed or nested brace, a reserved operator, too long, too many
 * expressions) */
static bool template_regex(const char *tmpl, struct cap_buf *re)
{
  if (strlen(tmpl) > MCP_TEMPLATE_MAX)
    return false;
  unsigned exprs = 0;
  cap_buf_putc(re, '^');
  for (const char *p = tmpl; *p; p++) {
    if (*p == '}')
      return false;
    if (*p != '{') {
      if (strchr("\\^$.[]|()*+?{}", *p))
        cap_buf_putc(re, '\\');
      cap_buf_putc(re, *p);
      continue;
    }
    const char *end = strchr(p + 1, '}');
    if (++exprs > MCP_TEMPLATE_EXPRS)
      return false;
    const char *frag = end && end > p + 1 ? expansion(p[1]) : NULL;
    if (!frag || memchr(p + 1, '{', (size_t)(end - p - 1)))
      return false;
    cap_buf_puts(re, frag);
    p = end;
  }
  cap_buf_putc(re, '$');
  return true;
}

regex_t *mcp_template_compile(const char *tmpl)
{
  struct cap_buf re = {0};
  bool ok = template_regex(tmpl, &re);
  _cleanup_free_ char *pattern = cap_buf_steal(&re);
  regex_t *rx = cap_xmalloc(sizeof *rx);
  if (ok && regcomp(rx, pattern, REG_EXTENDED | REG_NOSUB) == 0)
    return rx;
  free(rx);
  return NULL;
}

bool mcp_template_fits(const regex_t *rx, const char *uri)
{
  return rx && strlen(uri) <= MCP_TEMPLATE_URI_MAX && regexec(rx, uri, 0, NULL, 0) == 0;
}

void mcp_template_free(regex_t *rx)
{
  if (rx)
    regfree(rx);
  free(rx);
}

bool mcp_template_match(const char *tmpl, const char *uri)
{
  regex_t *rx = mcp_template_compile(tmpl);
  bool hit = mcp_template_fits(rx, uri);
  mcp_template_free(rx);
  return hit;
}
