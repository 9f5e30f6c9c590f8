/* Runs toml-test (https://github.com/toml-lang/toml-test) against the TOML
 * parser without the Go harness: every valid case must parse to a tree equal
 * to the tagged JSON next to it, every invalid case must be rejected.
 * TOML 1.0 decides the exit status; TOML 1.1 is reported for information.
 * Also checks, first, that error positions (line:col) are right.
 *
 * Usage: toml_test_runner [SUITE_DIR]   (SUITE_DIR holds tests/) */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "core/node.h"
#include "core/text.h"
#include "toml/toml.h"

#define MAX_FILE (16u << 20)

static const char *tag_of(const struct cap_node *n)
{
  switch (n->kind) {
  case CAP_NODE_STRING: return "string";
  case CAP_NODE_INT: return "integer";
  case CAP_NODE_FLOAT: return "float";
  case CAP_NODE_BOOL: return "bool";
  case CAP_NODE_DATETIME:
    switch (n->subkind) {
    case CAP_DT_OFFSET: return "datetime";
    case CAP_DT_LOCAL_DATETIME: return "datetime-local";
    case CAP_DT_LOCAL_DATE: return "date-local";
    default: return "time-local";
    }
  default: return NULL;
  }
}

/* {"type": "...", "value": "..."} as toml-test writes a scalar. */
static bool tagged(const struct cap_node *e, const char **type, const struct cap_node **value)
{
  if (e->kind != CAP_NODE_OBJECT || e->u.obj.len != 2)
    return false;
  const struct cap_node *t = cap_node_get(e, "type"), *v = cap_node_get(e, "value");
  if (!t || !v || t->kind != CAP_NODE_STRING || v->kind != CAP_NODE_STRING)
    return false;
  *type = t->u.str.ptr;
  *value = v;
  return true;
}

/* Upper-case, 'T' separator, fraction without trailing zeros. */
static void normalise_datetime(const char *in, size_t n, char *out, size_t size)
{
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < size; i++) {
    char c = in[i];
    if (c >= 'a' && c <= 'z')
      c = (char)(c - 'a' + 'A');
    if (c == ' ' && i == 10)
      c = 'T';
    if (c == '.') {
      size_t j = i + 1;
      while (j < n && in[j] >= '0' && in[j] <= '9')
        j++;
      size_t end = j;
      while (end > i + 1 && in[end - 1] == '0')
        end--;
      if (end > i + 1)
        for (size_t k = i; k < end && o + 1 < size; k++)
          out[o++] = in[k];
      i = j - 1;
      continue;
    }
    out[o++] = c;
  }
  out[o] = '\0';
}

static bool float_equal(double got, const char *want)
{
  const char *w = want;
  if (*w == '+' || *w == '-')
    w++;
  if (strcmp(w, "nan") == 0)
    return isnan(got);
  double v = strcmp(w, "inf") == 0 ? INFINITY : strtod(w, NULL);
  if (want[0] == '-')
    v = -v;
  if (isnan(got))
    return false;
  return got == v && signbit(got) == signbit(v);
}

static bool equal(const struct cap_node *got, const struct cap_node *want, struct cap_buf *why,
                  const char *path)
{
  const char *type;
  const struct cap_node *value;
  if (got->kind == CAP_NODE_OBJECT) {
    if (want->kind != CAP_NODE_OBJECT || tagged(want, &type, &value) ||
        want->u.obj.len != got->u.obj.len) {
      cap_buf_printf(why, "%s: table differs (got %zu keys)", path, got->u.obj.len);
      return false;
    }
    for (size_t i = 0; i < got->u.obj.len; i++) {
      const struct cap_member *m = &got->u.obj.items[i];
      const struct cap_member *w = cap_node_get_member(want, m->key, m->keylen);
      _cleanup_free_ char *sub = cap_xasprintf("%s.%s", path, m->key);
      if (!w) {
        cap_buf_printf(why, "%s: unexpected key", sub);
        return false;
      }
      if (!equal(m->value, w->value, why, sub))
        return false;
    }
    return true;
  }
  if (got->kind == CAP_NODE_ARRAY) {
    if (want->kind != CAP_NODE_ARRAY || want->u.arr.len != got->u.arr.len) {
      cap_buf_printf(why, "%s: array differs (got %zu items)", path, got->u.arr.len);
      return false;
    }
    for (size_t i = 0; i < got->u.arr.len; i++) {
      _cleanup_free_ char *sub = cap_xasprintf("%s[%zu]", path, i);
      if (!equal(got->u.arr.items[i], want->u.arr.items[i], why, sub))
        return false;
    }
    return true;
  }
  const char *tag = tag_of(got);
  if (!tagged(want, &type, &value) || !tag || strcmp(type, tag) != 0) {
    cap_buf_printf(why, "%s: got a %s, want something else", path, tag ? tag : "?");
    return false;
  }
  const char *w = value->u.str.ptr;
  bool ok = false;
  switch (got->kind) {
  case CAP_NODE_STRING:
    ok = got->u.str.len == value->u.str.len && memcmp(got->u.str.ptr, w, got->u.str.len) == 0;
    break;
  case CAP_NODE_INT: {
    errno = 0;
    long long v = strtoll(w, NULL, 10);
    ok = errno == 0 && v == got->u.num.i;
    break;
  }
  case CAP_NODE_FLOAT: ok = float_equal(got->u.num.f, w); break;
  case CAP_NODE_BOOL: ok = strcmp(w, got->u.boolean ? "true" : "false") == 0; break;
  case CAP_NODE_DATETIME: {
    char a[128], b[128];
    normalise_datetime(got->u.str.ptr, got->u.str.len, a, sizeof(a));
    normalise_datetime(w, value->u.str.len, b, sizeof(b));
    ok = strcmp(a, b) == 0;
    break;
  }
  default: break;
  }
  if (!ok) {
    if (got->kind == CAP_NODE_INT)
      cap_buf_printf(why, "%s: got %" PRId64 ", want %s", path, got->u.num.i, w);
    else if (got->kind == CAP_NODE_FLOAT)
      cap_buf_printf(why, "%s: got %.17g, want %s", path, got->u.num.f, w);
    else
      cap_buf_printf(why, "%s: got \"%.*s\", want \"%s\"", path,
                     got->kind == CAP_NODE_BOOL ? 0 : (int)got->u.str.len,
                     got->kind == CAP_NODE_BOOL ? "" : got->u.str.ptr, w);
  }
  return ok;
}

struct tally {
  size_t valid_pass, valid_total, invalid_pass, invalid_total;
  struct cap_buf failures;
};

static void run_valid(const char *dir, const char *name, struct tally *t, bool verbose)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/tests/%s", dir, name);
  size_t n = strlen(path);
  _cleanup_free_ char *json_path = cap_xasprintf("%.*s.json", (int)(n - 5), path);
  _cleanup_free_ char *data = NULL, *jdata = NULL;
  size_t len, jlen;
  struct cap_error err = {0};
  t->valid_total++;
  if (cap_read_file(path, MAX_FILE, &data, &len, &err) < 0 ||
      cap_read_file(json_path, MAX_FILE, &jdata, &jlen, &err) < 0) {
    cap_buf_printf(&t->failures, "  FAIL %s: %s\n", name, err.message);
    cap_error_clear(&err);
    return;
  }
  struct cap_diags diags = {0};
  struct cap_doc *got = cap_doc_new(), *want = cap_doc_new();
  struct cap_buf why = {0};
  if (cap_toml_parse(got, data, len, name, &diags) < 0) {
    cap_buf_printf(&t->failures, "  FAIL %s: rejected: %d:%d: %s\n", name,
                   diags.len ? (int)diags.items[0].line : 0,
                   diags.len ? (int)diags.items[0].col : 0,
                   diags.len ? diags.items[0].message : "?");
  } else if (cap_json_parse(want, jdata, jlen, json_path, 0, &diags) < 0) {
    cap_buf_printf(&t->failures, "  FAIL %s: expected JSON does not parse\n", name);
  } else if (!equal(got->root, want->root, &why, "$")) {
    cap_buf_printf(&t->failures, "  FAIL %s: %s\n", name, why.data);
  } else {
    t->valid_pass++;
  }
  (void)verbose;
  cap_buf_free(&why);
  cap_diags_free(&diags);
  cap_doc_free(got);
  cap_doc_free(want);
}

static void run_invalid(const char *dir, const char *name, struct tally *t, bool verbose)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/tests/%s", dir, name);
  _cleanup_free_ char *data = NULL;
  size_t len;
  struct cap_error err = {0};
  t->invalid_total++;
  if (cap_read_file(path, MAX_FILE, &data, &len, &err) < 0) {
    cap_buf_printf(&t->failures, "  FAIL %s: %s\n", name, err.message);
    cap_error_clear(&err);
    return;
  }
  struct cap_diags diags = {0};
  struct cap_doc *doc = cap_doc_new();
  if (cap_toml_parse(doc, data, len, name, &diags) < 0) {
    t->invalid_pass++;
    if (verbose && diags.len)
      printf("  %s:%u:%u: %s\n", name, diags.items[0].line, diags.items[0].col,
             diags.items[0].message);
  } else {
    cap_buf_printf(&t->failures, "  FAIL %s: accepted\n", name);
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

static int run_list(const char *dir, const char *version, struct tally *t, bool verbose)
{
  _cleanup_free_ char *list_path = cap_xasprintf("%s/tests/files-toml-%s", dir, version);
  _cleanup_fclose_ FILE *f = fopen(list_path, "re");
  if (!f)
    return -errno;
  char line[4096];
  while (fgets(line, sizeof(line), f)) {
    line[strcspn(line, "\r\n")] = '\0';
    size_t n = strlen(line);
    if (n < 6 || strcmp(line + n - 5, ".toml") != 0)
      continue;
    if (strncmp(line, "valid/", 6) == 0)
      run_valid(dir, line, t, verbose);
    else if (strncmp(line, "invalid/", 8) == 0)
      run_invalid(dir, line, t, verbose);
  }
  return 0;
}

/* ---- error positions ---- */

struct position_case {
  const char *toml;
  uint32_t line, col;
  const char *message_part;
};

static const struct position_case position_cases[] = {
    {"name = 1\nname = 2\n", 2, 1, "duplicate key \"name\": already defined at line 1; remove one"},
    {"a = 1\n[t]\nx = 1\n\n[t]\n", 5, 1, "table [t] is already defined at line 2"},
    {"a = \"\\q\"\n", 1, 6, "invalid escape sequence"},
    {"s = \"h\xc3\xa9llo\n", 1, 5, "unterminated string"},
    {"s = \"\xc3\xa9\" x\n", 1, 9, "unexpected 'x' after the value"},
    {"\xef\xbb\xbfk = 0x\n", 1, 5, "invalid hexadecimal integer"},
    {"a = 9223372036854775808\n", 1, 5, "does not fit"},
    {"a = 1 # ok\r\nb = { c = 1,\n", 2, 13, "newlines are not allowed inside an inline table"},
    {"a = 1979-02-30\n", 1, 5, "no such day"},
    {"# bell \x07\n", 1, 8, "control character U+0007"},
    {"x = [1, 2\n", 1, 5, "unterminated array"},
    {"a.b = 1\n[a]\n", 2, 1, "already defined by dotted keys at line 1"},
    {"k = \"\\uD800\"\n", 1, 6, "not a Unicode scalar value"},
    {"ok = true\nbad = \xff\n", 2, 7, "invalid UTF-8"},
    {"v = yes\n", 1, 5, "strings need quotes"},
};

static int check_positions(void)
{
  int failures = 0;
  for (size_t i = 0; i < sizeof(position_cases) / sizeof(position_cases[0]); i++) {
    const struct position_case *pc = &position_cases[i];
    struct cap_diags diags = {0};
    struct cap_doc *doc = cap_doc_new();
    int r = cap_toml_parse(doc, pc->toml, strlen(pc->toml), "t.toml", &diags);
    if (r >= 0 || diags.len != 1 || diags.items[0].line != pc->line ||
        diags.items[0].col != pc->col || !strstr(diags.items[0].message, pc->message_part)) {
      printf("  FAIL position case %zu: want %u:%u \"%s\", got %s%u:%u \"%s\"\n", i, pc->line,
             pc->col, pc->message_part, r >= 0 ? "(accepted) " : "",
             diags.len ? diags.items[0].line : 0, diags.len ? diags.items[0].col : 0,
             diags.len ? diags.items[0].message : "");
      failures++;
    }
    cap_diags_free(&diags);
    cap_doc_free(doc);
  }

  /* nesting deeper than the cap is refused, not a stack overflow */
  struct cap_buf deep = {0};
  cap_buf_puts(&deep, "a = ");
  for (int i = 0; i < 100000; i++)
    cap_buf_putc(&deep, '[');
  struct cap_diags diags = {0};
  struct cap_doc *doc = cap_doc_new();
  if (cap_toml_parse(doc, deep.data, deep.len, "deep.toml", &diags) >= 0 || diags.len != 1 ||
      !strstr(diags.items[0].message, "too deep")) {
    printf("  FAIL deep nesting not refused with a clear error\n");
    failures++;
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  cap_buf_free(&deep);

  /* key positions and value positions */
  const char *src = "[server]\n  host = \"x\"\n  port.main = 8080\n";
  diags = (struct cap_diags){0};
  doc = cap_doc_new();
  if (cap_toml_parse(doc, src, strlen(src), "p.toml", &diags) < 0) {
    printf("  FAIL positions document rejected\n");
    failures++;
  } else {
    const struct cap_member *server = cap_node_get_member(doc->root, "server", 6);
    const struct cap_member *host = cap_node_get_member(server->value, "host", 4);
    const struct cap_node *port = cap_node_get(server->value, "port");
    const struct cap_member *main = cap_node_get_member(port, "main", 4);
    if (server->line != 1 || server->col != 2 || host->line != 2 || host->col != 3 ||
        host->value->col != 10 || main->line != 3 || main->col != 8 || main->value->col != 15 ||
        main->value->u.num.i != 8080) {
      printf("  FAIL member positions\n");
      failures++;
    }
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  printf("error positions: %zu cases, %d failed\n",
         sizeof(position_cases) / sizeof(position_cases[0]) + 2, failures);
  return failures;
}

int main(int argc, char **argv)
{
  const char *dir = argc > 1 ? argv[1] : "../shared/testsuites/toml-test";
  bool verbose = getenv("TOML_TEST_VERBOSE") != NULL;
  int failed = check_positions() ? 1 : 0;

  struct stat st;
  _cleanup_free_ char *tests = cap_xasprintf("%s/tests/files-toml-1.0.0", dir);
  if (stat(tests, &st) < 0) {
    printf("SKIP: toml-test suite not found at %s (expected %s); fetch toml-test there to "
           "run it\n",
           dir, tests);
    return failed ? 1 : 77;
  }

  struct tally t10 = {0}, t11 = {0};
  run_list(dir, "1.0.0", &t10, verbose);
  printf("toml-test (TOML 1.0.0): valid %zu/%zu passed, invalid %zu/%zu rejected\n", t10.valid_pass,
         t10.valid_total, t10.invalid_pass, t10.invalid_total);
  if (t10.failures.len)
    fputs(t10.failures.data, stdout);
  if (t10.valid_pass != t10.valid_total || t10.invalid_pass != t10.invalid_total ||
      t10.valid_total == 0)
    failed = 1;

  if (run_list(dir, "1.1.0", &t11, false) == 0) {
    printf("TOML 1.1.0 (not targeted): valid %zu/%zu passed, invalid %zu/%zu rejected\n",
           t11.valid_pass, t11.valid_total, t11.invalid_pass, t11.invalid_total);
    if (t11.failures.len)
      fputs(t11.failures.data, stdout);
  }
  cap_buf_free(&t10.failures);
  cap_buf_free(&t11.failures);
  return failed;
}
