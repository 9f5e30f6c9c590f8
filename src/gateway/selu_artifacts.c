/* Selu's artifacts as capsule hands them, the way the orchestrator's
 * agents/artifacts.rs does, over the orchestrator's contract only:
 *
 *  - in: each file of `capsule call --attach FILE` is uploaded
 *    (UploadInputArtifact) on the call's own instance and appended to the
 *    arguments' "attachments" array as {filename, mime_type, size_bytes,
 *    capability_artifact_id}, after validation, as Selu adds its own;
 *  - out: a result object's "artifact" and "artifacts" entries that name a
 *    capability_artifact_id are downloaded (DownloadOutputArtifact) into
 *    the call's artifacts directory (`--artifacts DIR`), and the entry says
 *    {..., path, size_bytes} instead of the capability's id.
 *
 * Everything here is the capability's (untrusted): a file name is reduced
 * to one safe path component, an existing file is never replaced, and the
 * whole download is bounded by the output cap. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/io.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/artifact_store.h"
#include "gateway/selu_int.h"

/* name reduced to one path component: its last part, without controls,
 * not hidden, at most 200 bytes; "artifact.bin" when nothing is left. */
static char *safe_name(const char *name)
{
  const char *base = name ? strrchr(name, '/') : NULL;
  base = base ? base + 1 : name ? name : "";
  struct cap_buf b = {0};
  for (size_t i = 0; base[i] && b.len < 200; i++) {
    unsigned char ch = (unsigned char)base[i];
    cap_buf_putc(&b, ch < 0x20 || ch == 0x7f || ch == '\\' || (b.len == 0 && ch == '.') ? '_'
                                                                                        : (char)ch);
  }
  if (!b.len)
    cap_buf_puts(&b, "artifact.bin");
  return cap_buf_steal(&b);
}

/* Writes data to a new file in dir (name, else N-name); *path is where. */
static int save_new(const char *dir, const char *name, const struct selu_artifact *a, char **path,
                    struct cap_error *err)
{
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return cap_error_errno(err, errno, "cannot create the artifacts directory %s", dir);
  _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return cap_error_errno(err, errno, "cannot open the artifacts directory %s", dir);
  _cleanup_free_ char *safe = safe_name(name);
  for (int n = 0; n < 1000; n++) {
    _cleanup_free_ char *file = n ? cap_xasprintf("%d-%s", n, safe) : cap_xstrdup(safe);
    int fd = openat(dfd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
      continue;
    if (fd < 0)
      return cap_error_errno(err, errno, "cannot create %s/%s", dir, file);
    int w = cap_write_all(fd, a->data, a->len, 0);
    if (w < 0) {
      close(fd);
      unlinkat(dfd, file, 0);
      return cap_error_errno(err, -w, "cannot write %s/%s", dir, file);
    }
    if (close(fd) < 0)
      return cap_error_errno(err, errno, "cannot write %s/%s", dir, file);
    *path = cap_xasprintf("%s/%s", dir, file);
    return 0;
  }
  return cap_error_set(err, EEXIST, "too many files named like %s in %s", safe, dir);
}

static const char *str_member(const struct cap_node *obj, const char *key)
{
  const struct cap_node *v = cap_node_get(obj, key);
  return v && v->kind == CAP_NODE_STRING ? v->u.str.ptr : NULL;
}

/* text parsed as JSON into a new document (the caller frees it); *root is
 * its value, NULL when it is not JSON. */
static struct cap_doc *parse_json(const char *text, const char *name, const struct cap_node **root)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, text, strlen(text), name, 0, &diags);
  cap_diags_free(&diags);
  *root = r == 0 ? doc->root : NULL;
  return doc;
}

/* Writes one entry: rewritten, or as it is. index is its place in its
 * array (0 for a lone entry). */
typedef int (*entry_fn)(void *ctx, struct cap_jw *w, const struct cap_node *item, size_t index,
                        struct cap_error *err);

/* root, an object, written into b anew: the value of its member `one`
 * (when one is not NULL) and each item of its member `many` (when an
 * array) through entry, the other members as they are. Stops at the first
 * entry that fails (b is then the caller's to drop). */
static int rewrite_entries(const struct cap_node *root, const char *one, const char *many,
                           entry_fn entry, void *ctx, struct cap_buf *b, struct cap_error *err)
{
  struct cap_jw w;
  cap_jw_init(&w, b, false);
  cap_jw_begin_object(&w);
  int r = 0;
  for (size_t i = 0; i < root->u.obj.len && r == 0; i++) {
    const struct cap_member *m = &root->u.obj.items[i];
    cap_jw_key(&w, m->key);
    if (one && strcmp(m->key, one) == 0) {
      r = entry(ctx, &w, m->value, 0, err);
    } else if (strcmp(m->key, many) == 0 && m->value->kind == CAP_NODE_ARRAY) {
      cap_jw_begin_array(&w);
      for (size_t k = 0; k < m->value->u.arr.len && r == 0; k++)
        r = entry(ctx, &w, m->value->u.arr.items[k], k, err);
      cap_jw_end_array(&w);
    } else {
      cap_jw_node(&w, m->value);
    }
  }
  cap_jw_end_object(&w);
  return r;
}

struct capture {
  struct selu_channel *ch;
  const char *dir;
  const char *store, *user, *origin; /* serve --grpc: into its artifact store instead */
  int timeout_ms;
  size_t n;
  char **stored; /* the store's ids written so far: removed when the capture fails */
  size_t n_stored;
  size_t output_cap; /* the store's: the result naming its ids must stay within it */
};

/* The artifact into the store (serve --grpc's): its new id (*id, owned). */
static int store_one(const struct capture *c, const char *name, const char *source_id,
                     const struct selu_artifact *a, char **id, struct cap_error *err)
{
  struct gw_artifact_writer *w = NULL;
  _cleanup_free_ char *safe = safe_name(name);
  int r = gw_artifact_begin(c->store, c->user, safe, a->mime_type, &w, err);
  if (r == 0 && (r = gw_artifact_write(w, a->data, a->len, err)) < 0)
    gw_artifact_abort(w);
  struct gw_artifact_meta meta;
  if (r == 0 && (r = gw_artifact_commit(w, c->origin, source_id, &meta, err)) == 0) {
    *id = cap_xstrdup(meta.id);
    gw_artifact_meta_free(&meta);
  }
  return r;
}

/* The result's artifacts stored before the capture failed: nobody is told
 * their ids, so they go. */
static void forget_stored(struct capture *c, bool remove)
{
  for (size_t i = 0; i < c->n_stored; i++) {
    if (remove)
      gw_artifact_remove(c->store, c->user, c->stored[i]);
    free(c->stored[i]);
  }
  free(c->stored);
  c->stored = NULL;
  c->n_stored = 0;
}

/* One entry: downloaded and written as {its fields but the id, path,
 * size_bytes}; one without a capability_artifact_id as it is. */
static int capture_one(void *ctx, struct cap_jw *w, const struct cap_node *item, size_t index,
                       struct cap_error *err)
{
  struct capture *c = ctx;
  (void)index;
  const char *id =
      item->kind == CAP_NODE_OBJECT ? str_member(item, "capability_artifact_id") : NULL;
  if (!id) {
    cap_jw_node(w, item);
    return 0;
  }
  struct selu_artifact a;
  int r = selu_artifact_download(c->ch, id, c->timeout_ms, &a, err);
  _cleanup_free_ char *path = NULL, *stored = NULL;
  if (r == 0) {
    const char *name = str_member(item, "filename");
    r = c->store ? store_one(c, name ? name : a.filename, id, &a, &stored, err)
                 : save_new(c->dir, name ? name : a.filename, &a, &path, err);
  }
  if (r < 0) {
    selu_artifact_free(&a);
    return cap_error_prefix(err, "artifact %s", id), r;
  }
  if (stored) {
    c->stored = cap_xrealloc(c->stored, (c->n_stored + 1) * sizeof *c->stored);
    c->stored[c->n_stored++] = cap_xstrdup(stored);
  }
  cap_jw_begin_object(w);
  for (size_t i = 0; i < item->u.obj.len; i++) {
    const struct cap_member *m = &item->u.obj.items[i];
    if (strcmp(m->key, "capability_artifact_id") == 0 || strcmp(m->key, "path") == 0 ||
        strcmp(m->key, "size_bytes") == 0)
      continue;
    cap_jw_key(w, m->key);
    cap_jw_node(w, m->value);
  }
  if (!cap_node_get(item, "mime_type") && a.mime_type) {
    cap_jw_key(w, "mime_type");
    cap_jw_string(w, a.mime_type);
  }
  cap_jw_key(w, stored ? "capability_artifact_id" : "path");
  cap_jw_string(w, stored ? stored : path);
  cap_jw_key(w, "size_bytes");
  cap_jw_int(w, (int64_t)a.len);
  cap_jw_end_object(w);
  selu_artifact_free(&a);
  c->n++;
  return 0;
}

/* The result's "artifact"/"artifacts" entries, each through capture_one. */
static int capture_result(struct capture *c, const char *result, char **out, struct cap_error *err)
{
  *out = NULL;
  if (!strstr(result, "capability_artifact_id")) /* names none: not parsed */
    return 0;
  const struct cap_node *root;
  struct cap_doc *doc = parse_json(result, "result", &root);
  if (!root || root->kind != CAP_NODE_OBJECT) { /* not JSON: judged later */
    cap_doc_free(doc);
    return 0;
  }
  struct cap_buf b = {0};
  int r = rewrite_entries(root, "artifact", "artifacts", capture_one, c, &b, err);
  cap_doc_free(doc);
  if (r == 0 && c->output_cap && b.len > c->output_cap) /* the call would fail for it, later */
    r = cap_error_set(err, EFBIG,
                      "the result naming its artifacts by capsule's ids is %zu bytes, more than "
                      "the output cap (%zu)",
                      b.len, c->output_cap);
  if (r == 0 && c->n)
    *out = cap_buf_steal(&b);
  cap_buf_free(&b);
  forget_stored(c, r < 0);
  return r;
}

int gw_selu_capture(struct selu_channel *ch, const struct gw_call *call, const char *result,
                    int timeout_ms, char **out, struct cap_error *err)
{
  struct capture c = {.ch = ch, .dir = call->artifacts_dir, .timeout_ms = timeout_ms};
  return capture_result(&c, result, out, err);
}

int gw_selu_capture_stored(struct selu_channel *ch, const struct gw_call *call, const char *result,
                           int timeout_ms, char **out, struct cap_error *err)
{
  _cleanup_free_ char *origin = cap_xasprintf("%s.%s", call->capability, call->tool);
  struct capture c = {.ch = ch,
                      .store = call->artifact_store,
                      .user = call->user ? call->user : "",
                      .origin = origin,
                      .timeout_ms = timeout_ms,
                      .output_cap = call->output_cap ? call->output_cap : GW_DEFAULT_OUTPUT_CAP};
  return capture_result(&c, result, out, err);
}

/* The attachments' entries, each file uploaded. */
static int upload_all(struct selu_channel *ch, const struct gw_call *call, int timeout_ms,
                      size_t max, struct cap_jw *w, struct cap_error *err)
{
  for (size_t i = 0; i < call->n_attach; i++) {
    char *data = NULL;
    size_t len = 0;
    int r = cap_read_file(call->attach[i], max, &data, &len, err);
    _cleanup_free_ char *name = safe_name(call->attach[i]);
    _cleanup_free_ char *id = NULL;
    if (r == 0)
      r = selu_artifact_upload(ch, name, "application/octet-stream", data, len, timeout_ms, &id,
                               err);
    free(data);
    if (r < 0)
      return cap_error_prefix(err, "attaching %s", call->attach[i]), r;
    cap_jw_begin_object(w);
    cap_jw_key(w, "filename");
    cap_jw_string(w, name);
    cap_jw_key(w, "mime_type");
    cap_jw_string(w, "application/octet-stream");
    cap_jw_key(w, "size_bytes");
    cap_jw_int(w, (int64_t)len);
    cap_jw_key(w, "capability_artifact_id");
    cap_jw_string(w, id);
    cap_jw_end_object(w);
  }
  return 0;
}

int gw_selu_attach(struct selu_channel *ch, const struct gw_call *call, const char *args,
                   int timeout_ms, size_t max, char **out, struct cap_error *err)
{
  *out = NULL;
  const struct cap_node *root;
  struct cap_doc *doc = parse_json(args, "args", &root);
  if (!root || root->kind != CAP_NODE_OBJECT) {
    cap_doc_free(doc);
    return cap_error_set(err, EINVAL, "--attach needs arguments that are a JSON object");
  }
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  const struct cap_node *had = cap_node_get(root, "attachments");
  for (size_t i = 0; i < root->u.obj.len; i++) {
    const struct cap_member *m = &root->u.obj.items[i];
    if (strcmp(m->key, "attachments") == 0)
      continue;
    cap_jw_key(&w, m->key);
    cap_jw_node(&w, m->value);
  }
  cap_jw_key(&w, "attachments");
  cap_jw_begin_array(&w);
  for (size_t i = 0; had && had->kind == CAP_NODE_ARRAY && i < had->u.arr.len; i++)
    cap_jw_node(&w, had->u.arr.items[i]);
  int r = upload_all(ch, call, timeout_ms, max, &w, err);
  cap_jw_end_array(&w);
  cap_jw_end_object(&w);
  cap_doc_free(doc);
  if (r == 0)
    *out = cap_buf_steal(&b);
  cap_buf_free(&b);
  return r;
}

struct attach_stored {
  struct selu_channel *ch;
  const struct gw_call *call;
  int timeout_ms;
};

/* One "attachments" entry naming an artifact of the store: its bytes
 * uploaded on ch, the entry rewritten with the capability's id for it;
 * any other entry as it is. */
static int attach_stored_one(void *ctx, struct cap_jw *w, const struct cap_node *item, size_t index,
                             struct cap_error *err)
{
  const struct attach_stored *x = ctx;
  const struct gw_call *call = x->call;
  const char *id =
      item->kind == CAP_NODE_OBJECT ? str_member(item, "capability_artifact_id") : NULL;
  if (!id) {
    cap_jw_node(w, item);
    return 0;
  }
  struct gw_artifact_meta meta;
  int fd = -1;
  int r = gw_artifact_open(call->artifact_store, call->user ? call->user : "", id, &meta, &fd, err);
  /* mapped, not read: calls at once would each hold up to 32 MiB of the
   * process's memory (the store's files are never written in place) */
  size_t len = r == 0 ? (size_t)meta.size : 0;
  void *data = NULL;
  if (r == 0 && len && (data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
    data = NULL;
    r = cap_error_errno(err, errno, "cannot read artifact %s", id);
  }
  if (fd >= 0)
    close(fd);
  _cleanup_free_ char *theirs = NULL;
  if (r == 0)
    r = selu_artifact_upload(x->ch, meta.filename, meta.mime_type, data ? data : "", len,
                             x->timeout_ms, &theirs, err);
  if (data)
    munmap(data, len);
  if (r < 0) {
    gw_artifact_meta_free(&meta);
    return cap_error_prefix(err, "attachments[%zu]", index), r;
  }
  cap_jw_begin_object(w);
  for (size_t i = 0; i < item->u.obj.len; i++) {
    const struct cap_member *m = &item->u.obj.items[i];
    if (strcmp(m->key, "capability_artifact_id") == 0 || strcmp(m->key, "filename") == 0 ||
        strcmp(m->key, "mime_type") == 0 || strcmp(m->key, "size_bytes") == 0)
      continue;
    cap_jw_key(w, m->key);
    cap_jw_node(w, m->value);
  }
  cap_jw_key(w, "filename");
  cap_jw_string(w, meta.filename);
  cap_jw_key(w, "mime_type");
  cap_jw_string(w, meta.mime_type);
  cap_jw_key(w, "size_bytes");
  cap_jw_int(w, (int64_t)len);
  cap_jw_key(w, "capability_artifact_id");
  cap_jw_string(w, theirs);
  cap_jw_end_object(w);
  gw_artifact_meta_free(&meta);
  return 0;
}

int gw_selu_attach_stored(struct selu_channel *ch, const struct gw_call *call, const char *args,
                          int timeout_ms, char **out, struct cap_error *err)
{
  *out = NULL;
  const struct cap_node *root;
  struct cap_doc *doc = parse_json(args, "args", &root);
  if (!root || gw_artifact_refs(root) == 0) { /* an object with stored ones, else as it is */
    cap_doc_free(doc);
    return 0;
  }
  struct cap_buf b = {0};
  struct attach_stored x = {.ch = ch, .call = call, .timeout_ms = timeout_ms};
  int r = rewrite_entries(root, NULL, "attachments", attach_stored_one, &x, &b, err);
  cap_doc_free(doc);
  if (r == 0)
    *out = cap_buf_steal(&b);
  cap_buf_free(&b);
  return r;
}

int gw_selu_attach_refused(const struct cap_spec *spec, const char *args, struct cap_error *err)
{
  const struct cap_node *root;
  struct cap_doc *doc = parse_json(args, "args", &root);
  size_t n = root ? gw_artifact_refs(root) : 0;
  cap_doc_free(doc);
  if (!n)
    return 0;
  return cap_error_set(err, ENOTSUP,
                       "%s speaks the seed's CapabilityService, which has no artifacts: the "
                       "arguments' attachments need the orchestrator's Capability service",
                       spec->id);
}
