/* Readers of what an image carries: the OCI image index, image manifest
 * and image configuration (and Docker's schema 2 forms of the first two),
 * and just enough of a tar archive's headers to tell an OCI archive from a
 * `docker save` one. Everything read is untrusted: sizes bounded, every
 * field checked for its kind, every digest for its form. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "image/image.h"

#define IMAGE_MAX_LAYERS 1024
#define IMAGE_MAX_STRINGS 4096

static const char *const manifest_types[] = {
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
};
static const char *const index_types[] = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
};
/* the layer media types the applier reads (layer_read.c) */
static const char *const layer_types[] = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

static bool in_table(const char *s, const char *const *table, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(s, table[i]) == 0)
      return true;
  return false;
}

bool image_digest_valid(const char *s)
{
  if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != IMAGE_DIGEST_LEN)
    return false;
  for (const char *p = s + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

static struct cap_doc *parse(const char *json, size_t len, const char *what, struct cap_error *err)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, json, len, what, 32, &diags);
  if (r < 0 || !doc->root || doc->root->kind != CAP_NODE_OBJECT) {
    if (r < 0 && diags.len)
      cap_error_set(err, EINVAL, "the image's %s is not JSON (%u:%u: %s)", what,
                    diags.items[0].line, diags.items[0].col, diags.items[0].message);
    else
      cap_error_set(err, EINVAL, "the image's %s is not a JSON object", what);
    cap_diags_free(&diags);
    cap_doc_free(doc);
    return NULL;
  }
  cap_diags_free(&diags);
  return doc;
}

static const char *str_of(const struct cap_node *obj, const char *key)
{
  const struct cap_node *n = obj && obj->kind == CAP_NODE_OBJECT ? cap_node_get(obj, key) : NULL;
  return n && n->kind == CAP_NODE_STRING && strlen(n->u.str.ptr) == n->u.str.len ? n->u.str.ptr
                                                                                 : NULL;
}

/* A descriptor's digest and size, checked. */
static int descriptor(const struct cap_node *d, const char *what, char digest[72], int64_t *size,
                      struct cap_error *err)
{
  const char *dg = str_of(d, "digest");
  const struct cap_node *sz = d && d->kind == CAP_NODE_OBJECT ? cap_node_get(d, "size") : NULL;
  if (!image_digest_valid(dg))
    return cap_error_set(err, EINVAL, "%s has no sha256 digest (\"sha256:\" and 64 hex digits)",
                         what);
  if (!sz || sz->kind != CAP_NODE_INT || sz->u.num.i < 0)
    return cap_error_set(err, EINVAL, "%s has no size", what);
  memcpy(digest, dg, IMAGE_DIGEST_LEN + 1);
  *size = sz->u.num.i;
  return 0;
}

static bool host_platform(const struct cap_node *d)
{
  const struct cap_node *p = cap_node_get(d, "platform");
  const char *arch = str_of(p, "architecture"), *os = str_of(p, "os");
#if defined(__x86_64__)
  const char *want = "amd64";
#elif defined(__aarch64__)
  const char *want = "arm64";
#else
  const char *want = "";
#endif
  return arch && os && strcmp(arch, want) == 0 && strcmp(os, "linux") == 0;
}

static bool ref_matches(const char *name, const char *want)
{
  if (!name || !want)
    return false;
  if (strcmp(name, want) == 0)
    return true;
  const char *colon = strrchr(want, ':'), *slash = strrchr(want, '/');
  return colon && (!slash || colon > slash) && strcmp(name, colon + 1) == 0;
}

int image_index_pick(const char *json, size_t len, const char *want_ref, char digest[72],
                     bool *nested, struct cap_error *err)
{
  _cleanup_(cap_doc_freep) struct cap_doc *doc = parse(json, len, "index", err);
  if (!doc)
    return -EINVAL;
  const struct cap_node *list = cap_node_get(doc->root, "manifests");
  if (!list || list->kind != CAP_NODE_ARRAY || list->u.arr.len == 0)
    return cap_error_set(err, EINVAL, "the image index lists no manifests");
  const struct cap_node *pick = NULL;
  size_t n_images = 0, n_host = 0;
  const struct cap_node *host = NULL;
  for (size_t i = 0; i < list->u.arr.len; i++) {
    const struct cap_node *d = list->u.arr.items[i];
    if (d->kind != CAP_NODE_OBJECT)
      return cap_error_set(err, EINVAL, "the image index's manifests[%zu] is not an object", i);
    const char *name = str_of(cap_node_get(d, "annotations"), "org.opencontainers.image.ref.name");
    if (want_ref && ref_matches(name, want_ref))
      pick = d;
    n_images++;
    if (host_platform(d)) {
      host = d;
      n_host++;
    }
  }
  if (!pick && n_images == 1)
    pick = list->u.arr.items[0];
  if (!pick && n_host == 1)
    pick = host;
  if (!pick)
    return cap_error_set(err, EINVAL,
                         "the image index holds %zu images and none is named %s; name one with "
                         "--tag (its org.opencontainers.image.ref.name)",
                         n_images, want_ref ? want_ref : "(no --tag given)");
  const char *type = str_of(pick, "mediaType");
  int64_t size;
  int r = descriptor(pick, "the index's manifest descriptor", digest, &size, err);
  if (r < 0)
    return r;
  if (type && !in_table(type, manifest_types, ARRAY_SIZE(manifest_types)) &&
      !in_table(type, index_types, ARRAY_SIZE(index_types)))
    return cap_error_set(err, EINVAL, "the index names a manifest of media type \"%s\"", type);
  *nested = type && in_table(type, index_types, ARRAY_SIZE(index_types));
  return 0;
}

void image_manifest_free(struct image_manifest *m)
{
  for (size_t i = 0; i < m->n_layers; i++)
    free(m->layers[i].media_type);
  free(m->layers);
  *m = (struct image_manifest){0};
}

int image_manifest_parse(const char *json, size_t len, struct image_manifest *out,
                         struct cap_error *err)
{
  *out = (struct image_manifest){0};
  _cleanup_(cap_doc_freep) struct cap_doc *doc = parse(json, len, "manifest", err);
  if (!doc)
    return -EINVAL;
  const char *type = str_of(doc->root, "mediaType");
  if (type && !in_table(type, manifest_types, ARRAY_SIZE(manifest_types)))
    return cap_error_set(err, EINVAL,
                         "the image manifest's media type is \"%s\", not an image manifest", type);
  int r = descriptor(cap_node_get(doc->root, "config"), "the manifest's config", out->config_digest,
                     &out->config_size, err);
  if (r < 0)
    return r;
  const struct cap_node *layers = cap_node_get(doc->root, "layers");
  if (!layers || layers->kind != CAP_NODE_ARRAY)
    return cap_error_set(err, EINVAL, "the image manifest has no layers array");
  if (layers->u.arr.len > IMAGE_MAX_LAYERS)
    return cap_error_set(err, EINVAL, "the image manifest lists %zu layers (at most %d)",
                         layers->u.arr.len, IMAGE_MAX_LAYERS);
  out->layers = cap_xcalloc(layers->u.arr.len + 1, sizeof *out->layers);
  for (size_t i = 0; i < layers->u.arr.len; i++) {
    const struct cap_node *d = layers->u.arr.items[i];
    char what[48];
    snprintf(what, sizeof what, "the manifest's layers[%zu]", i);
    struct image_layer *l = &out->layers[i];
    r = descriptor(d, what, l->digest, &l->size, err);
    const char *lt = str_of(d, "mediaType");
    if (r == 0 && (!lt || !in_table(lt, layer_types, ARRAY_SIZE(layer_types))))
      r = cap_error_set(err, EINVAL, "%s has media type \"%s\", which capsule cannot unpack", what,
                        lt ? lt : "(none)");
    if (r < 0) {
      image_manifest_free(out);
      return r;
    }
    l->media_type = cap_xstrdup(lt);
    out->n_layers++;
  }
  return 0;
}

void image_strv_free(char **v)
{
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

void image_config_free(struct image_config *c)
{
  image_strv_free(c->entrypoint);
  image_strv_free(c->cmd);
  image_strv_free(c->env);
  free(c->working_dir);
  free(c->user);
  free(c->architecture);
  free(c->os);
  free(c->created);
  *c = (struct image_config){0};
}

/* An array of strings (no NUL inside), or null/absent. */
static int strv_of(const struct cap_node *obj, const char *key, char ***out, struct cap_error *err)
{
  const struct cap_node *a = obj ? cap_node_get(obj, key) : NULL;
  if (!a || a->kind == CAP_NODE_NULL)
    return 0;
  if (a->kind != CAP_NODE_ARRAY || a->u.arr.len > IMAGE_MAX_STRINGS)
    return cap_error_set(err, EINVAL, "the image config's %s is not an array of strings", key);
  char **v = cap_xcalloc(a->u.arr.len + 1, sizeof *v);
  for (size_t i = 0; i < a->u.arr.len; i++) {
    const struct cap_node *s = a->u.arr.items[i];
    if (s->kind != CAP_NODE_STRING || strlen(s->u.str.ptr) != s->u.str.len) {
      image_strv_free(v);
      return cap_error_set(err, EINVAL, "the image config's %s[%zu] is not a string", key, i);
    }
    v[i] = cap_xstrdup(s->u.str.ptr);
  }
  *out = v;
  return 0;
}

static char *dup_or_null(const char *s) { return s && *s ? cap_xstrdup(s) : NULL; }

int image_config_parse(const char *json, size_t len, struct image_config *out,
                       struct cap_error *err)
{
  *out = (struct image_config){0};
  _cleanup_(cap_doc_freep) struct cap_doc *doc = parse(json, len, "config", err);
  if (!doc)
    return -EINVAL;
  const struct cap_node *c = cap_node_get(doc->root, "config");
  if (c && c->kind != CAP_NODE_OBJECT && c->kind != CAP_NODE_NULL)
    return cap_error_set(err, EINVAL, "the image config's config is not an object");
  if (c && c->kind == CAP_NODE_NULL)
    c = NULL;
  int r = strv_of(c, "Entrypoint", &out->entrypoint, err);
  if (r == 0)
    r = strv_of(c, "Cmd", &out->cmd, err);
  if (r == 0)
    r = strv_of(c, "Env", &out->env, err);
  if (r < 0) {
    image_config_free(out);
    return r;
  }
  out->working_dir = dup_or_null(str_of(c, "WorkingDir"));
  out->user = dup_or_null(str_of(c, "User"));
  out->architecture = dup_or_null(str_of(doc->root, "architecture"));
  out->os = dup_or_null(str_of(doc->root, "os"));
  out->created = dup_or_null(str_of(doc->root, "created"));
  if (out->working_dir && out->working_dir[0] != '/') {
    r = cap_error_set(err, EINVAL, "the image config's WorkingDir \"%s\" is not absolute",
                      out->working_dir);
    image_config_free(out);
    return r;
  }
  return 0;
}

/* ---- tar headers ---- */

static int64_t octal(const unsigned char *p, size_t n)
{
  int64_t v = 0;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\0'))
    i++;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
    if (v > (INT64_MAX >> 3))
      return -1;
    v = v * 8 + (p[i] - '0');
  }
  for (; i < n; i++)
    if (p[i] != ' ' && p[i] != '\0')
      return -1;
  return v;
}

static bool checksum_ok(const unsigned char *h)
{
  int64_t want = octal(h + 148, 8);
  int64_t sum = 0;
  for (size_t i = 0; i < 512; i++)
    sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return want == sum;
}

/* Reads header blocks through read_at, skipping member data without
 * reading it (an archive's blobs may be large). */
static int tar_scan(ssize_t (*read_at)(void *ctx, unsigned char *buf, size_t n, uint64_t off),
                    void *ctx, const char *name, uint64_t *ret_off, uint64_t *ret_size)
{
  uint64_t off = 0;
  bool any = false;
  unsigned char h[512];
  for (int n = 0; n < 1000000; n++) {
    ssize_t got = read_at(ctx, h, sizeof h, off);
    if (got < 0)
      return -EIO;
    if (got < 512)
      return any ? 0 : -EINVAL; /* the end, without its zero blocks */
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
      zero = h[i] == 0;
    if (zero)
      return any ? 0 : -EINVAL;
    if (!checksum_ok(h))
      return -EINVAL;
    any = true;
    char member[260];
    size_t plen = strnlen((const char *)h + 345, 155), nlen = strnlen((const char *)h, 100);
    if (plen && memcmp(h + 257, "ustar", 5) == 0)
      snprintf(member, sizeof member, "%.*s/%.*s", (int)plen, h + 345, (int)nlen, h);
    else
      snprintf(member, sizeof member, "%.*s", (int)nlen, h);
    const char *m = strncmp(member, "./", 2) == 0 ? member + 2 : member;
    int64_t size = octal(h + 124, 12);
    if (size < 0 || (uint64_t)size > (UINT64_MAX >> 2))
      return -EINVAL;
    if (strcmp(m, name) == 0 && (h[156] == '0' || h[156] == '\0')) {
      *ret_off = off + 512;
      *ret_size = (uint64_t)size;
      return 1;
    }
    off += 512 + ((uint64_t)size + 511) / 512 * 512;
  }
  return -EINVAL;
}

struct mem_src {
  const unsigned char *data;
  size_t len;
};

static ssize_t mem_read_at(void *ctx, unsigned char *buf, size_t n, uint64_t off)
{
  const struct mem_src *m = ctx;
  if (off >= m->len)
    return 0;
  size_t k = m->len - off < n ? (size_t)(m->len - off) : n;
  memcpy(buf, m->data + off, k);
  return (ssize_t)k;
}

static ssize_t fd_read_at(void *ctx, unsigned char *buf, size_t n, uint64_t off)
{
  size_t done = 0;
  while (done < n) {
    ssize_t k = pread(*(int *)ctx, buf + done, n - done, (off_t)(off + done));
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return -1;
    if (k == 0)
      break;
    done += (size_t)k;
  }
  return (ssize_t)done;
}

int image_tar_has_member(const unsigned char *data, size_t len, const char *name)
{
  struct mem_src m = {data, len};
  uint64_t off, size;
  return tar_scan(mem_read_at, &m, name, &off, &size);
}

char *image_tar_fd_read_member(int fd, const char *name, size_t max, size_t *len, int *r)
{
  uint64_t off = 0, size = 0;
  *r = tar_scan(fd_read_at, &fd, name, &off, &size);
  if (*r <= 0)
    return NULL;
  if (size > max) {
    *r = -EFBIG;
    return NULL;
  }
  char *data = cap_xmalloc((size_t)size + 1);
  ssize_t got = fd_read_at(&fd, (unsigned char *)data, (size_t)size, off);
  if (got != (ssize_t)size) {
    free(data);
    *r = -EIO;
    return NULL;
  }
  data[size] = '\0';
  *len = (size_t)size;
  return data;
}

char *image_docker_repo_tag(const char *json, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  char *tag = NULL;
  if (cap_json_parse(doc, json, len, "manifest.json", 32, &diags) == 0 && doc->root &&
      doc->root->kind == CAP_NODE_ARRAY && doc->root->u.arr.len == 1) {
    const struct cap_node *tags = doc->root->u.arr.items[0]->kind == CAP_NODE_OBJECT
                                      ? cap_node_get(doc->root->u.arr.items[0], "RepoTags")
                                      : NULL;
    if (tags && tags->kind == CAP_NODE_ARRAY && tags->u.arr.len &&
        tags->u.arr.items[0]->kind == CAP_NODE_STRING &&
        strlen(tags->u.arr.items[0]->u.str.ptr) == tags->u.arr.items[0]->u.str.len)
      tag = cap_xstrdup(tags->u.arr.items[0]->u.str.ptr);
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return tag;
}

char *image_index_ref_name(const char *json, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  char *name = NULL;
  if (cap_json_parse(doc, json, len, "index.json", 32, &diags) == 0 && doc->root &&
      doc->root->kind == CAP_NODE_OBJECT) {
    const struct cap_node *list = cap_node_get(doc->root, "manifests");
    if (list && list->kind == CAP_NODE_ARRAY && list->u.arr.len == 1) {
      const char *n = str_of(cap_node_get(list->u.arr.items[0], "annotations"),
                             "org.opencontainers.image.ref.name");
      /* a full reference, not a bare tag such as "latest" */
      if (n && (strchr(n, '/') || strchr(n, ':')))
        name = cap_xstrdup(n);
    }
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return name;
}
