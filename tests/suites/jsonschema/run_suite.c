/* Runs the JSON Schema Test Suite (draft 2020-12) against src/jsonschema.
 * usage: run_suite SUITE_DIR [-v] [FILTER]
 * Remote references (http://localhost:1234/...) are served from the suite's
 * remotes/ folder through the registry; nothing touches the network.
 * Prints pass counts for the required tests and for each optional group;
 * exits 1 when a required test fails, 77 when the suite is absent. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/text.h"
#include "jsonschema/jsonschema.h"

static int verbose;
static const char *filter;

struct count {
  size_t pass, total;
};

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sorted *.json names in dir */
static char **list_json(const char *dir, size_t *n)
{
  DIR *d = opendir(dir);
  *n = 0;
  if (!d)
    return NULL;
  char **names = NULL;
  size_t cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
      continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof(char *));
    }
    names[(*n)++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, *n, sizeof(char *), cmp_str);
  return names;
}

static void run_file(const char *path, const char *remotes, bool format_assert, struct count *cnt,
                     bool report_failures)
{
  char *data;
  size_t len;
  struct cap_error err = {0};
  if (cap_read_file(path, 64u << 20, &data, &len, &err) < 0) {
    fprintf(stderr, "%s: %s\n", path, err.message);
    cap_error_clear(&err);
    return;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, data, len, path, 0, &diags) < 0) {
    cap_diags_print(&diags, stderr);
    goto done;
  }
  struct cap_js_registry *reg = cap_js_registry_new();
  cap_js_registry_add_dir(reg, "http://localhost:1234/", remotes);
  struct cap_js_options opts = {.format_assert = format_assert};
  const struct cap_node *groups = doc->root;
  for (size_t g = 0; g < groups->u.arr.len; g++) {
    const struct cap_node *group = groups->u.arr.items[g];
    const struct cap_node *gdesc = cap_node_get(group, "description");
    const struct cap_node *schema = cap_node_get(group, "schema");
    const struct cap_node *tests = cap_node_get(group, "tests");
    if (filter && !strstr(path, filter) && !strstr(gdesc->u.str.ptr, filter))
      continue;
    struct cap_diags cd = {0};
    struct cap_js_validator *v = cap_js_compile(schema, reg, &opts, path, "", &cd);
    for (size_t t = 0; t < tests->u.arr.len; t++) {
      const struct cap_node *test = tests->u.arr.items[t];
      const struct cap_node *data_node = cap_node_get(test, "data");
      bool expect = cap_node_get(test, "valid")->u.boolean;
      bool got = false, got_fast = false;
      struct cap_js_errors errs = {0};
      if (v) {
        got = cap_js_validate(v, data_node, 0, &errs);
        got_fast = cap_js_validate(v, data_node, 0, NULL);
      }
      cnt->total++;
      bool ok = v && got == expect && got_fast == expect && (got || errs.len > 0);
      if (ok)
        cnt->pass++;
      if (!ok && (report_failures || verbose)) {
        printf("FAIL %s: %s / %s (expected %s)\n", path, gdesc->u.str.ptr,
               cap_node_get(test, "description")->u.str.ptr, expect ? "valid" : "invalid");
        if (!v)
          cap_diags_print(&cd, stdout);
        for (size_t i = 0; verbose && i < errs.len; i++)
          printf("    %s: %s (%s)\n", errs.items[i].instance_location, errs.items[i].message,
                 errs.items[i].keyword_location);
      }
      cap_js_errors_free(&errs);
    }
    cap_js_validator_free(v);
    cap_diags_free(&cd);
  }
  cap_js_registry_free(reg);
done:
  cap_diags_free(&diags);
  cap_doc_free(doc);
  free(data);
}

static void run_dir(const char *dir, const char *remotes, bool format_assert, bool required,
                    const char *label_prefix, struct count *total)
{
  size_t n;
  char **names = list_json(dir, &n);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    struct count c = {0};
    run_file(path, remotes, format_assert, &c, required);
    if (!required && c.total) {
      char label[256];
      snprintf(label, sizeof(label), "%s%.*s", label_prefix, (int)(strlen(names[i]) - 5), names[i]);
      printf("  optional %-36s %4zu/%-4zu\n", label, c.pass, c.total);
    }
    total->pass += c.pass;
    total->total += c.total;
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv)
{
  const char *suite = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-v") == 0)
      verbose = 1;
    else if (!suite)
      suite = argv[i];
    else
      filter = argv[i];
  }
  if (!suite) {
    fprintf(stderr, "usage: run_suite SUITE_DIR [-v] [FILTER]\n");
    return 2;
  }
  char dir[4096], remotes[4200], opt[4200], fmt[4200];
  snprintf(dir, sizeof(dir), "%s/tests/draft2020-12", suite);
  snprintf(remotes, sizeof(remotes), "%s/remotes", suite);
  snprintf(opt, sizeof(opt), "%s/optional", dir);
  snprintf(fmt, sizeof(fmt), "%s/optional/format", dir);
  struct stat st;
  if (stat(dir, &st) < 0) {
    printf("SKIP: JSON Schema Test Suite not found at %s\n", dir);
    return 77;
  }
  struct count req = {0}, o = {0}, f = {0};
  run_dir(dir, remotes, false, true, "", &req);
  printf("JSON Schema Test Suite draft2020-12\n");
  printf("  required %44zu/%-4zu\n", req.pass, req.total);
  run_dir(opt, remotes, false, false, "", &o);
  run_dir(fmt, remotes, true, false, "format/", &f);
  printf("  optional total (without format) %21zu/%-4zu\n", o.pass, o.total);
  printf("  optional format (assertion on)  %21zu/%-4zu\n", f.pass, f.total);
  return req.pass == req.total ? 0 : 1;
}
