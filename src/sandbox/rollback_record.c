/* Rollback records: one JSON file a run, STORE/records/ID.json, written to
 * a temporary name and renamed; ids sort by time (UTC, then a random tail). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "manifest/load.h"
#include "sandbox/rollback.h"
#include "sandbox/rollback_internal.h"

#define RB_RECORD_MAX (512u << 20)

static const char *const type_names[] = {"file", "dir", "symlink"};

static void write_strv(struct cap_jw *w, const char *key, const struct cap_strv *v)
{
  cap_jw_key(w, key);
  cap_jw_begin_array(w);
  for (size_t i = 0; i < v->len; i++)
    cap_jw_string(w, v->v[i]);
  cap_jw_end_array(w);
}

static void write_tree(struct cap_jw *w, const char *key, const struct rb_tree *t)
{
  cap_jw_key(w, key);
  cap_jw_begin_object(w);
  cap_jw_key(w, "root");
  cap_jw_string(w, t->root);
  write_strv(w, "unstable", &t->unstable);
  cap_jw_key(w, "entries");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < t->len; i++) {
    const struct rb_entry *e = &t->v[i];
    cap_jw_begin_object(w);
    cap_jw_key(w, "path");
    cap_jw_string(w, e->path);
    cap_jw_key(w, "type");
    cap_jw_string(w, type_names[e->type]);
    cap_jw_key(w, "mode");
    cap_jw_int(w, e->mode);
    cap_jw_key(w, "uid");
    cap_jw_int(w, e->uid);
    cap_jw_key(w, "gid");
    cap_jw_int(w, e->gid);
    cap_jw_key(w, "size");
    cap_jw_int(w, (int64_t)e->size);
    cap_jw_key(w, "hash");
    cap_jw_string(w, e->hash);
    if (e->target) {
      cap_jw_key(w, "target");
      cap_jw_string(w, e->target);
    }
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
  cap_jw_end_object(w);
}

int rb_record_save(const char *store, struct rb_record *rec, struct cap_error *err)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char stamp[32], when[32];
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  free(rec->id);
  free(rec->time);
  /* microseconds in the id: two runs in one second still list in order */
  rec->id = cap_xasprintf("%s%06ldZ-%04x", stamp, ts.tv_nsec / 1000,
                          (unsigned)(randombytes_random() & 0xffff));
  rec->time = cap_xstrdup(when);
  _cleanup_free_ char *dir = cap_xasprintf("%s/records", store);
  int r = rb_mkdirs(dir, 0700);
  if (r < 0)
    return cap_error_errno(err, -r, "rollback: cannot create %s", dir);
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, true);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "id");
  cap_jw_string(&w, rec->id);
  cap_jw_key(&w, "time");
  cap_jw_string(&w, rec->time);
  write_strv(&w, "command", &rec->command);
  write_strv(&w, "paths", &rec->paths);
  write_strv(&w, "exclude_patterns", &rec->patterns);
  write_strv(&w, "exclude_globs", &rec->globs);
  write_tree(&w, "before", &rec->before);
  if (rec->has_after)
    write_tree(&w, "after", &rec->after);
  cap_jw_end_object(&w);
  cap_buf_printf(&out, "\n");
  _cleanup_free_ char *path = cap_xasprintf("%s/%s.json", dir, rec->id);
  _cleanup_free_ char *tmp = cap_xasprintf("%s.tmp", path);
  _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write(fd, out.data, out.len) == (ssize_t)out.len && fsync(fd) == 0;
  int e = errno;
  free(out.data);
  if (!ok || rename(tmp, path) < 0) {
    e = ok ? errno : e;
    unlink(tmp);
    return cap_error_errno(err, e, "rollback: cannot write the record %s", path);
  }
  return 0;
}

static void read_strv(const struct cap_node *obj, const char *key, struct cap_strv *out)
{
  const struct cap_node *a = cap_node_get(obj, key);
  for (size_t i = 0; a && a->kind == CAP_NODE_ARRAY && i < a->u.arr.len; i++)
    if (a->u.arr.items[i]->kind == CAP_NODE_STRING)
      cap_strv_push(out, a->u.arr.items[i]->u.str.ptr);
}

static const char *str_of(const struct cap_node *obj, const char *key)
{
  const struct cap_node *n = cap_node_get(obj, key);
  return n && n->kind == CAP_NODE_STRING ? n->u.str.ptr : NULL;
}

static bool read_tree(const struct cap_node *obj, struct rb_tree *t)
{
  const char *root = str_of(obj, "root");
  const struct cap_node *entries = cap_node_get(obj, "entries");
  if (!root || strlen(root) != 64 || !entries || entries->kind != CAP_NODE_ARRAY)
    return false;
  memcpy(t->root, root, 65);
  read_strv(obj, "unstable", &t->unstable);
  t->v = cap_xcalloc(entries->u.arr.len + 1, sizeof *t->v);
  for (size_t i = 0; i < entries->u.arr.len; i++) {
    const struct cap_node *e = entries->u.arr.items[i];
    const char *path = str_of(e, "path"), *type = str_of(e, "type"), *hash = str_of(e, "hash");
    const struct cap_node *mode = cap_node_get(e, "mode"), *size = cap_node_get(e, "size");
    if (!path || path[0] != '/' || !type || !hash || strlen(hash) != 64 || !mode ||
        mode->kind != CAP_NODE_INT || !size || size->kind != CAP_NODE_INT)
      return false;
    struct rb_entry *x = &t->v[t->len++];
    x->path = cap_xstrdup(path);
    x->type = strcmp(type, "dir") == 0 ? RB_DIR : strcmp(type, "symlink") == 0 ? RB_LINK : RB_FILE;
    x->mode = (uint32_t)mode->u.num.i & 07777;
    x->size = (uint64_t)size->u.num.i;
    const struct cap_node *uid = cap_node_get(e, "uid"), *gid = cap_node_get(e, "gid");
    x->uid = uid && uid->kind == CAP_NODE_INT ? (uint32_t)uid->u.num.i : (uint32_t)-1;
    x->gid = gid && gid->kind == CAP_NODE_INT ? (uint32_t)gid->u.num.i : (uint32_t)-1;
    memcpy(x->hash, hash, 65);
    const char *target = str_of(e, "target");
    x->target = target ? cap_xstrdup(target) : NULL;
    if (x->type == RB_LINK && !target)
      return false;
  }
  return true;
}

static bool valid_id(const char *id)
{
  if (!*id || strlen(id) > 64)
    return false;
  for (const char *s = id; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
          *s == '-'))
      return false;
  return true;
}

int rb_record_load(const char *store, const char *id, struct rb_record *rec, struct cap_error *err)
{
  *rec = (struct rb_record){0};
  if (!valid_id(id))
    return cap_error_set(err, EINVAL,
                         "\"%s\" is not a rollback id; `capsule rollback list` shows them", id);
  _cleanup_free_ char *path = cap_xasprintf("%s/records/%s.json", store, id);
  _cleanup_free_ char *data = NULL;
  size_t len = 0;
  int r = cap_read_file(path, RB_RECORD_MAX, &data, &len, err);
  if (r == -ENOENT) {
    cap_error_clear(err);
    return cap_error_set(err, ENOENT, "no rollback %s in %s; `capsule rollback list` shows them",
                         id, store);
  }
  if (r < 0)
    return r;
  struct cap_diags diags = {0};
  struct cap_doc *doc = cap_doc_new();
  bool ok = cap_json_parse(doc, data, len, path, 0, &diags) >= 0 &&
            doc->root->kind == CAP_NODE_OBJECT && str_of(doc->root, "id") &&
            str_of(doc->root, "time");
  if (ok) {
    rec->id = cap_xstrdup(str_of(doc->root, "id"));
    rec->time = cap_xstrdup(str_of(doc->root, "time"));
    read_strv(doc->root, "command", &rec->command);
    read_strv(doc->root, "paths", &rec->paths);
    read_strv(doc->root, "exclude_patterns", &rec->patterns);
    read_strv(doc->root, "exclude_globs", &rec->globs);
    ok = read_tree(cap_node_get(doc->root, "before"), &rec->before);
    const struct cap_node *after = cap_node_get(doc->root, "after");
    if (ok && after)
      ok = rec->has_after = read_tree(after, &rec->after);
  }
  cap_doc_free(doc);
  cap_diags_free(&diags);
  if (!ok) {
    rb_record_free(rec);
    return cap_error_set(err, EINVAL, "rollback: the record %s is damaged", path);
  }
  return 0;
}

static int by_string(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int rb_record_ids(const char *store, struct cap_strv *ids, struct cap_error *err)
{
  _cleanup_free_ char *dir = cap_xasprintf("%s/records", store);
  DIR *d = opendir(dir);
  if (!d)
    return errno == ENOENT ? 0 : cap_error_errno(err, errno, "rollback: cannot read %s", dir);
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0) {
      _cleanup_free_ char *id = cap_xstrndup(e->d_name, n - 5);
      if (valid_id(id))
        cap_strv_push(ids, id);
    }
  }
  closedir(d);
  if (ids->len)
    qsort(ids->v, ids->len, sizeof *ids->v, by_string);
  return 0;
}

void rb_record_free(struct rb_record *rec)
{
  free(rec->id);
  free(rec->time);
  cap_strv_free(&rec->command);
  cap_strv_free(&rec->paths);
  cap_strv_free(&rec->patterns);
  cap_strv_free(&rec->globs);
  rb_tree_free(&rec->before);
  rb_tree_free(&rec->after);
  *rec = (struct rb_record){0};
}
