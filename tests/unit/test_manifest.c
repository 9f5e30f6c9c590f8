/* Unit tests for the manifest plumbing: the field helpers' diagnostics,
 * discovery of capability directories, and format detection. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "manifest/fields.h"
#include "manifest/load.h"
#include "unit.h"

static char *format_all(struct cap_diags *d)
{
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  cap_diags_sort(d);
  cap_diags_print(d, f);
  fclose(f);
  return buf;
}

static struct cap_doc *parse(const char *text)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, text, strlen(text), "m.json", 0, &d) < 0)
    abort();
  cap_diags_free(&d);
  return doc;
}

static void test_field_helpers(void)
{
  struct cap_doc *doc = parse("{\"s\": 1, \"e\": \"blok\", \"n\": 70000, \"a\": [\"x\", 2],\n"
                              " \"o\": {\"netwrok\": 1}, \"empty\": \"\", \"f\": 2.5}");
  struct cap_diags d = {0};
  struct mf_ctx c;
  mf_init(&c, "m.json", &d);
  CHECK_STR(mf_string(&c, doc->root, "s", 0, "def"), "def");
  CHECK_STR(mf_string(&c, doc->root, "missing", MF_REQUIRED, "def"), "def");
  static const char *const policies[] = {"allow", "ask", "block", NULL};
  CHECK(mf_enum(&c, doc->root, "e", 0, policies, 2) == 2);
  CHECK(mf_int(&c, doc->root, "n", 0, 1, 65535, 7) == 7);
  CHECK(mf_string_array(&c, doc->root, "a", 0) == NULL);
  CHECK(mf_string(&c, doc->root, "empty", MF_NONEMPTY, NULL) == NULL);
  CHECK(mf_int(&c, doc->root, "f", 0, 0, 10, 3) == 3); /* 2.5 is not an integer */
  CHECK(mf_number(&c, doc->root, "n", 0, 0, 1e9, 0) == 70000);
  size_t mark = mf_push_key(&c, "o");
  static const char *const known[] = {"network", "filesystem", NULL};
  mf_unknown_keys(&c, cap_node_get(doc->root, "o"), known, CAP_SEV_WARNING);
  mf_pop(&c, mark);
  char *out = format_all(&d);
  CHECK_STR(out, "m.json:1:1: error: missing: required field is missing; add a string\n"
                 "m.json:1:7: error: s: must be a string, not an integer\n"
                 "m.json:1:15: error: e: \"blok\" is not one of \"allow\", \"ask\", \"block\" (did "
                 "you mean \"block\"?)\n"
                 "m.json:1:28: error: n: 70000 is out of range; it must be 1..65535\n"
                 "m.json:1:46: error: a[1]: must be a string, not an integer\n"
                 "m.json:2:8: warning: o.netwrok: unknown field; capsule ignores it (did you mean "
                 "\"network\"?)\n"
                 "m.json:2:32: error: empty: must not be empty\n"
                 "m.json:2:41: error: f: must be an integer, not a number\n");
  free(out);
  mf_free(&c);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static void test_discovery(void)
{
  char tmpl[] = "/tmp/capsule-unit-XXXXXX";
  char *root = mkdtemp(tmpl);
  CHECK(root != NULL);
  if (!root)
    return;
  char path[512];
  snprintf(path, sizeof path, "%s/agents", root);
  mkdir(path, 0755);
  const char *subs[] = {"zeta", "alpha", "empty"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/agents/%s", root, subs[i]);
    mkdir(path, 0755);
    if (i < 2) {
      snprintf(path, sizeof path, "%s/agents/%s/agent.toml", root, subs[i]);
      write_file(path, "");
    }
  }
  snprintf(path, sizeof path, "%s/agents/flat.toml", root);
  write_file(path, "");

  struct cap_strv files = {0};
  struct cap_diags d = {0};
  CHECK(cap_manifest_discover(root, &files, &d) == 0);
  CHECK(files.len == 2);
  if (files.len == 2) {
    CHECK(strstr(files.v[0], "/agents/alpha/agent.toml") != NULL);
    CHECK(strstr(files.v[1], "/agents/zeta/agent.toml") != NULL);
  }
  cap_strv_free(&files);

  /* two manifests in one directory is ambiguous */
  snprintf(path, sizeof path, "%s/agents/alpha/manifest.yaml", root);
  write_file(path, "");
  snprintf(path, sizeof path, "%s/agents/alpha", root);
  CHECK(cap_manifest_discover(path, &files, &d) < 0);
  CHECK(d.errors == 1 && strstr(d.items[0].message, "holds both") != NULL);
  cap_strv_free(&files);
  cap_diags_free(&d);

  snprintf(path, sizeof path, "%s/agents/empty", root);
  CHECK(cap_manifest_discover(path, &files, &d) == -ENOENT);
  CHECK(d.errors == 1 && strstr(d.items[0].message, "no manifest found") != NULL);
  cap_strv_free(&files);
  cap_diags_free(&d);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0);
}

static void test_top_level_must_be_object(void)
{
  struct cap_diags d = {0};
  struct cap_spec *spec = NULL;
  CHECK(cap_manifest_load_buffer("[1]", 3, "capability.json", CAP_HINT_AUTO, "/x", &spec, &d) < 0);
  char *out = format_all(&d);
  CHECK_STR(out, "capability.json:1:1: error: the manifest must be a JSON object at the top level, "
                 "not an array\n");
  free(out);
  cap_diags_free(&d);
}

UNIT_MAIN(test_field_helpers, test_discovery, test_top_level_must_be_object)
