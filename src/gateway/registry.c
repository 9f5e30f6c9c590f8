#include "gateway/registry.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "manifest/load.h"

static int by_id(const void *a, const void *b)
{
  const struct cap_spec *x = *(const struct cap_spec *const *)a,
                        *y = *(const struct cap_spec *const *)b;
  return strcmp(x->id, y->id);
}

int gw_registry_load(const char *dir, struct gw_registry *reg, struct cap_diags *diags)
{
  *reg = (struct gw_registry){.dir = cap_xstrdup(dir)};
  struct cap_strv files = {0};
  int r = cap_caps_discover(dir, &files, diags);
  if (r < 0)
    return r;

  for (size_t i = 0; i < files.len; i++) {
    struct cap_spec *spec = NULL;
    if (cap_manifest_load(files.v[i], &spec, diags) < 0 || !spec)
      continue;
    reg->caps = cap_xrealloc(reg->caps, (reg->n + 1) * sizeof *reg->caps);
    reg->caps[reg->n++] = spec;
  }
  cap_strv_free(&files);
  qsort(reg->caps, reg->n, sizeof *reg->caps, by_id);
  /* an id twice: an error naming both places, and neither is used */
  size_t out = 0;
  for (size_t i = 0; i < reg->n;) {
    size_t j = i + 1;
    while (j < reg->n && strcmp(reg->caps[j]->id, reg->caps[i]->id) == 0)
      j++;
    if (j - i > 1) {
      for (size_t k = i + 1; k < j; k++)
        cap_diags_add(diags, CAP_SEV_ERROR, reg->caps[k]->source_path, 0, 0, "",
                      "capability id \"%s\" is also used by %s; ids must be unique (rename one)",
                      reg->caps[k]->id, reg->caps[i]->source_path);
      for (size_t k = i; k < j; k++)
        cap_spec_free(reg->caps[k]);
    } else {
      reg->caps[out++] = reg->caps[i];
    }
    i = j;
  }
  reg->n = out;
  return 0;
}

void gw_registry_free(struct gw_registry *reg)
{
  for (size_t i = 0; i < reg->n; i++)
    cap_spec_free(reg->caps[i]);
  free(reg->caps);
  free(reg->dir);
  *reg = (struct gw_registry){0};
}

const struct cap_spec *gw_registry_find(const struct gw_registry *reg, const char *id)
{
  size_t lo = 0, hi = reg->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(reg->caps[mid]->id, id);
    if (c == 0)
      return reg->caps[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const struct cap_tool *gw_spec_tool(const struct cap_spec *spec, const char *name)
{
  for (size_t i = 0; i < spec->n_tools; i++)
    if (strcmp(spec->tools[i].name, name) == 0)
      return &spec->tools[i];
  return NULL;
}
