/* The artifact store of serve --grpc (gateway/artifact_store.h). */
#include "gateway/artifact_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/escape.h"
#include "core/io.h"
#include "core/json.h"
#include "core/node.h"
#include "gateway/state.h"

#define META_MAX 16384
#define NOT_FOUND "artifact %s not found or expired (artifacts live 6 hours, for their user only)"

/* The bytes a writer reserves at a time: its part file is grown to them
 * (sparse) under the user's lock, so that writers at once see each
 * other's room in the directory's sizes */
#define RESERVE_STEP ((uint64_t)4 << 20)

struct gw_artifact_writer {
  int dfd, fd;
  char id[GW_ARTIFACT_ID_LEN + 1];
  char part[GW_ARTIFACT_ID_LEN + 8];
  char *user, *filename, *mime_type;
  uint64_t size, reserved;
};

void gw_artifact_meta_free(struct gw_artifact_meta *m)
{
  free(m->user);
  free(m->filename);
  free(m->mime_type);
  free(m->origin);
  free(m->source_id);
  memset(m, 0, sizeof *m);
}

char *gw_artifact_store_dir(const char *state_dir)
{
  return cap_xasprintf("%s/run/artifacts", state_dir);
}

bool gw_artifact_id_valid(const char *id)
{
  size_t p = sizeof GW_ARTIFACT_ID_PREFIX - 1;
  if (!id || strncmp(id, GW_ARTIFACT_ID_PREFIX, p) != 0 || strlen(id) != GW_ARTIFACT_ID_LEN)
    return false;
  for (const char *c = id + p; *c; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
      return false;
  return true;
}

/* ---- the meta file ---- */

char *gw_artifact_meta_format(const struct gw_artifact_meta *m)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  const char *keys[] = {"user", "filename", "mime_type", "origin"};
  const char *vals[] = {m->user, m->filename, m->mime_type, m->origin};
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    cap_jw_key(&w, keys[i]);
    cap_jw_string(&w, vals[i] ? vals[i] : "");
  }
  cap_jw_key(&w, "source_id");
  cap_jw_string_or_null(&w, m->source_id);
  cap_jw_key(&w, "size");
  cap_jw_int(&w, (int64_t)m->size);
  cap_jw_key(&w, "created");
  cap_jw_int(&w, m->created);
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

/* A string member without a NUL in it (malloc'd copy), or NULL. */
static char *str_of(const struct cap_node *obj, const char *key)
{
  const struct cap_node *v = cap_node_get(obj, key);
  if (!v || v->kind != CAP_NODE_STRING || memchr(v->u.str.ptr, '\0', v->u.str.len))
    return NULL;
  return cap_xstrndup(v->u.str.ptr, v->u.str.len);
}

bool gw_artifact_meta_parse(const char *text, size_t len, struct gw_artifact_meta *m)
{
  char id[sizeof m->id];
  memcpy(id, m->id, sizeof id);
  memset(m, 0, sizeof *m);
  memcpy(m->id, id, sizeof id);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  bool ok = cap_json_parse(doc, text, len, "artifact meta", 4, &diags) == 0 && doc->root &&
            doc->root->kind == CAP_NODE_OBJECT;
  cap_diags_free(&diags);
  if (ok) {
    const struct cap_node *r = doc->root, *size = cap_node_get(r, "size"),
                          *created = cap_node_get(r, "created"),
                          *source = cap_node_get(r, "source_id");
    m->user = str_of(r, "user");
    m->filename = str_of(r, "filename");
    m->mime_type = str_of(r, "mime_type");
    m->origin = str_of(r, "origin");
    m->source_id = str_of(r, "source_id");
    ok = m->user && m->filename && m->mime_type && m->origin && size &&
         size->kind == CAP_NODE_INT && size->u.num.i >= 0 && created &&
         created->kind == CAP_NODE_INT &&
         (!source || source->kind == CAP_NODE_NULL || m->source_id);
    if (ok) {
      m->size = (uint64_t)size->u.num.i;
      m->created = created->u.num.i;
    }
  }
  cap_doc_free(doc);
  if (!ok)
    gw_artifact_meta_free(m);
  return ok;
}

size_t gw_artifact_refs(const struct cap_node *args)
{
  const struct cap_node *list =
      args && args->kind == CAP_NODE_OBJECT ? cap_node_get(args, "attachments") : NULL;
  size_t n = 0;
  for (size_t i = 0; list && list->kind == CAP_NODE_ARRAY && i < list->u.arr.len; i++) {
    const struct cap_node *item = list->u.arr.items[i];
    const struct cap_node *id =
        item->kind == CAP_NODE_OBJECT ? cap_node_get(item, "capability_artifact_id") : NULL;
    n += id && id->kind == CAP_NODE_STRING;
  }
  return n;
}

/* ---- the user's directory ---- */

static int mkdir_0700(const char *path)
{
  return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

/* The user's directory (its fd), made when create; -ENOENT without. */
static int user_dir(const char *store, const char *user, bool create, struct cap_error *err)
{
  char key[65];
  gw_sha256_hex(user, strlen(user), key);
  key[32] = '\0';
  _cleanup_free_ char *path = cap_xasprintf("%s/%s", store, key);
  if (create) {
    _cleanup_free_ char *parent = cap_xstrdup(store);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent)
      *slash = '\0';
    int r = mkdir_0700(parent);
    if (r == 0)
      r = mkdir_0700(store);
    if (r == 0)
      r = mkdir_0700(path);
    if (r < 0)
      return cap_error_errno(err, -r, "cannot make the artifact store %s", path);
  }
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? -ENOENT : cap_error_errno(err, errno, "cannot open %s", path);
  return fd;
}

/* The meta file of id ("ID.meta") read and parsed into m: 0, -EBADMSG for
 * one read whole that is not a record (malformed, or past what a record
 * is), else the -errno of its open or read (-ENOENT: gone; -EACCES, -EIO:
 * not known to be anything). */
static int meta_load(int dfd, const char *id, struct gw_artifact_meta *m)
{
  char name[GW_ARTIFACT_ID_LEN + 8];
  snprintf(name, sizeof name, "%s.meta", id);
  _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ELOOP ? -EBADMSG : -errno; /* a link is nothing the store made */
  char buf[META_MAX];
  size_t got;
  int r = cap_read_upto(fd, buf, sizeof buf, &got);
  if (r < 0)
    return r;
  snprintf(m->id, sizeof m->id, "%s", id);
  return got < sizeof buf && gw_artifact_meta_parse(buf, got, m) ? 0 : -EBADMSG;
}

static bool meta_read(int dfd, const char *id, struct gw_artifact_meta *m)
{
  return meta_load(dfd, id, m) == 0;
}

static void remove_artifact(int dfd, const char *id)
{
  char name[GW_ARTIFACT_ID_LEN + 8];
  snprintf(name, sizeof name, "%s.data", id);
  unlinkat(dfd, name, 0);
  snprintf(name, sizeof name, "%s.meta", id);
  unlinkat(dfd, name, 0);
}

static bool expired(const struct gw_artifact_meta *m, time_t now)
{
  return m->created > (int64_t)now + 60 || (int64_t)now - m->created > GW_ARTIFACT_TTL_S;
}

/* The id of "ID.SUFFIX", or false. */
static bool name_id(const char *name, const char *suffix, char id[GW_ARTIFACT_ID_LEN + 1])
{
  size_t n = strlen(name), s = strlen(suffix);
  if (n != GW_ARTIFACT_ID_LEN + s || strcmp(name + GW_ARTIFACT_ID_LEN, suffix) != 0)
    return false;
  memcpy(id, name, GW_ARTIFACT_ID_LEN);
  id[GW_ARTIFACT_ID_LEN] = '\0';
  return gw_artifact_id_valid(id);
}

/* Removes the expired artifacts and those whose record is malformed (and
 * anything else older than their life: a half-written one), and counts
 * the live ones and their bytes (those being written included, as their
 * room reserved). A record it cannot read (EACCES, EIO: perhaps for a
 * moment) is kept, counted as live and told in report (when not NULL).
 * Called with the user's lock (flock on the directory) held. */
static void sweep(int dfd, size_t *count, uint64_t *bytes, struct gw_artifact_sweep_report *report)
{
  *count = 0;
  *bytes = 0;
  int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0)
      close(dup_fd);
    return;
  }
  time_t now = time(NULL);
  char id[GW_ARTIFACT_ID_LEN + 1];
  for (struct dirent *e; (e = readdir(d));) {
    struct gw_artifact_meta m = {0};
    if (!name_id(e->d_name, ".meta", id))
      continue;
    int r = meta_load(dfd, id, &m);
    if (r == -EBADMSG || (r == 0 && expired(&m, now))) {
      remove_artifact(dfd, id);
    } else if (r == 0) {
      (*count)++;
    } else if (r != -ENOENT) { /* kept: not known to be expired */
      (*count)++;
      if (report && report->unreadable++ == 0) {
        report->error = -r;
        snprintf(report->id, sizeof report->id, "%s", id);
      }
    }
    gw_artifact_meta_free(&m);
  }
  rewinddir(d);
  for (struct dirent *e; (e = readdir(d));) {
    struct stat st;
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
      continue;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (now - st.st_mtime > GW_ARTIFACT_TTL_S + 60) { /* an orphan, or a write abandoned */
      unlinkat(dfd, e->d_name, 0);
    } else if (S_ISREG(st.st_mode)) {
      *bytes += (uint64_t)st.st_size;
      *count += e->d_name[0] == '.' && name_id(e->d_name + 1, ".part", id); /* being written */
    }
  }
  closedir(d);
}

/* ---- writing ---- */

#define NAME_MAX_BYTES 200

/* A file name as the store keeps it: its last path component, not
 * hidden, at most NAME_MAX_BYTES (whole UTF-8 characters), each control,
 * bidi or invisible formatting character and each byte that is not UTF-8
 * (core/escape.h's) replaced by '_', so that it is text every reader takes
 * (a PostgreSQL audit record, a protobuf string) and shows as it is;
 * "artifact.bin" when nothing is left. */
char *gw_artifact_clean_name(const char *name)
{
  const char *base = name ? name : "";
  for (const char *c = base; *c; c++)
    if (*c == '/' || *c == '\\')
      base = c + 1;
  size_t n = strlen(base);
  if (n > NAME_MAX_BYTES) {
    n = NAME_MAX_BYTES;
    while (n && ((unsigned char)base[n] & 0xc0) == 0x80)
      n--;
  }
  struct cap_buf b = {0};
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    enum cap_text_kind kind;
    size_t u = cap_escape_scan(base + i, n - i, &cp, &kind);
    if (kind != CAP_TEXT_PLAIN || (i == 0 && base[i] == '.'))
      cap_buf_putc(&b, '_');
    else
      cap_buf_append(&b, base + i, u);
    i += u;
  }
  if (!b.len)
    cap_buf_puts(&b, "artifact.bin");
  return cap_buf_steal(&b);
}

/* A media type, or application/octet-stream for one that is not
 * printable ASCII of at most 127 bytes with a '/'. */
static const char *clean_mime(const char *mime)
{
  size_t n = mime ? strlen(mime) : 0;
  bool ok = n > 2 && n < 128 && strchr(mime, '/');
  for (size_t i = 0; ok && i < n; i++)
    ok = mime[i] >= 0x20 && mime[i] < 0x7f && mime[i] != '"' && mime[i] != '\\';
  return ok ? mime : "application/octet-stream";
}

static int new_id(char id[GW_ARTIFACT_ID_LEN + 1], struct cap_error *err)
{
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
    return cap_error_errno(err, errno ? errno : EIO, "cannot draw an artifact id");
  int n = snprintf(id, GW_ARTIFACT_ID_LEN + 1, "%s", GW_ARTIFACT_ID_PREFIX);
  for (size_t i = 0; i < sizeof b; i++)
    n += snprintf(id + n, GW_ARTIFACT_ID_LEN + 1 - (size_t)n, "%02x", b[i]);
  return 0;
}

int gw_artifact_begin(const char *store, const char *user, const char *filename,
                      const char *mime_type, struct gw_artifact_writer **ret, struct cap_error *err)
{
  *ret = NULL;
  int dfd = user_dir(store, user, true, err);
  if (dfd < 0)
    return dfd;
  size_t count;
  uint64_t bytes;
  flock(dfd,
        LOCK_EX); /* the count and the part file made at once: uploads at once see each other */
  sweep(dfd, &count, &bytes, NULL);
  if (count >= GW_ARTIFACT_USER_COUNT || bytes >= GW_ARTIFACT_USER_BYTES) {
    close(dfd); /* and its lock */
    return cap_error_set(err, EDQUOT,
                         "%s holds %zu artifacts of %llu bytes, the most capsule keeps for a user "
                         "(%d, %llu bytes); they expire %d hours after they were stored",
                         user, count, (unsigned long long)bytes, GW_ARTIFACT_USER_COUNT,
                         (unsigned long long)GW_ARTIFACT_USER_BYTES, GW_ARTIFACT_TTL_S / 3600);
  }
  struct gw_artifact_writer *w = cap_xcalloc(1, sizeof *w);
  w->dfd = dfd;
  int r = new_id(w->id, err);
  if (r == 0) {
    snprintf(w->part, sizeof w->part, ".%s.part", w->id);
    w->fd = openat(dfd, w->part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w->fd < 0)
      r = cap_error_errno(err, errno, "cannot write into the artifact store %s", store);
  }
  flock(dfd, LOCK_UN);
  if (r < 0) {
    close(dfd);
    free(w);
    return r;
  }
  w->user = cap_xstrdup(user);
  w->filename = gw_artifact_clean_name(filename);
  w->mime_type = cap_xstrdup(clean_mime(mime_type));
  *ret = w;
  return 0;
}

/* Room for the artifact to hold need bytes, taken under the user's lock
 * against what the user's other artifacts, stored and being written,
 * hold: the part file grown (sparse) to the room reserved, RESERVE_STEP
 * at a time. */
static int reserve(struct gw_artifact_writer *w, uint64_t need, struct cap_error *err)
{
  flock(w->dfd, LOCK_EX);
  size_t count;
  uint64_t bytes, mine = 0;
  sweep(w->dfd, &count, &bytes, NULL);
  struct stat st;
  if (fstat(w->fd, &st) == 0)
    mine = (uint64_t)st.st_size;
  uint64_t others = bytes > mine ? bytes - mine : 0;
  uint64_t room = others < GW_ARTIFACT_USER_BYTES ? GW_ARTIFACT_USER_BYTES - others : 0;
  if (room > GW_ARTIFACT_MAX_BYTES)
    room = GW_ARTIFACT_MAX_BYTES;
  uint64_t want = (need + RESERVE_STEP - 1) / RESERVE_STEP * RESERVE_STEP;
  int r = 0;
  if (need > room)
    r = cap_error_set(err, EFBIG,
                      "the artifact is larger than %llu bytes, the most capsule keeps (%llu a "
                      "file, %llu for all of a user's)",
                      (unsigned long long)room, (unsigned long long)GW_ARTIFACT_MAX_BYTES,
                      (unsigned long long)GW_ARTIFACT_USER_BYTES);
  else if (ftruncate(w->fd, (off_t)(want < room ? want : room)) < 0)
    r = cap_error_errno(err, errno, "cannot write the artifact");
  else
    w->reserved = want < room ? want : room;
  flock(w->dfd, LOCK_UN);
  return r;
}

int gw_artifact_write(struct gw_artifact_writer *w, const void *data, size_t len,
                      struct cap_error *err)
{
  if (len > GW_ARTIFACT_MAX_BYTES - w->size)
    return cap_error_set(
        err, EFBIG, "the artifact is larger than %llu bytes, the most capsule keeps for a file",
        (unsigned long long)GW_ARTIFACT_MAX_BYTES);
  int r = w->size + len > w->reserved ? reserve(w, w->size + len, err) : 0;
  if (r < 0)
    return r;
  r = cap_write_all(w->fd, data, len, 0);
  if (r < 0)
    return cap_error_errno(err, -r, "cannot write the artifact");
  w->size += len;
  return 0;
}

static void writer_free(struct gw_artifact_writer *w)
{
  if (w->fd >= 0)
    close(w->fd);
  close(w->dfd);
  free(w->user);
  free(w->filename);
  free(w->mime_type);
  free(w);
}

void gw_artifact_abort(struct gw_artifact_writer *w)
{
  if (!w)
    return;
  unlinkat(w->dfd, w->part, 0);
  writer_free(w);
}

/* The meta's text into "ID.meta", by a rename (never half-written). */
static int meta_write(int dfd, const struct gw_artifact_meta *m, struct cap_error *err)
{
  _cleanup_free_ char *text = gw_artifact_meta_format(m);
  if (strlen(text) >= META_MAX) /* meta_read would not take it: stored, then never found */
    return cap_error_set(err, ENAMETOOLONG,
                         "the artifact's record is %zu bytes, more than the store keeps (%d): "
                         "the tool's name or its own id for the artifact is too long",
                         strlen(text), META_MAX);
  char part[GW_ARTIFACT_ID_LEN + 16], name[GW_ARTIFACT_ID_LEN + 8];
  snprintf(part, sizeof part, ".%s.mpart", m->id);
  snprintf(name, sizeof name, "%s.meta", m->id);
  int fd = openat(dfd, part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot write the artifact's record");
  size_t len = strlen(text);
  bool ok = write(fd, text, len) == (ssize_t)len;
  ok = close(fd) == 0 && ok;
  if (!ok || renameat(dfd, part, dfd, name) < 0) {
    int e = errno ? errno : EIO;
    unlinkat(dfd, part, 0);
    return cap_error_errno(err, e, "cannot write the artifact's record");
  }
  return 0;
}

int gw_artifact_commit(struct gw_artifact_writer *w, const char *origin, const char *source_id,
                       struct gw_artifact_meta *meta, struct cap_error *err)
{
  memset(meta, 0, sizeof *meta);
  int r = 0;
  char data[GW_ARTIFACT_ID_LEN + 8];
  snprintf(data, sizeof data, "%s.data", w->id);
  if (ftruncate(w->fd, (off_t)w->size) < 0) /* the room reserved past its bytes */
    r = cap_error_errno(err, errno, "cannot write the artifact");
  if (close(w->fd) < 0 && r == 0)
    r = cap_error_errno(err, errno, "cannot write the artifact");
  w->fd = -1;
  if (r == 0 && renameat(w->dfd, w->part, w->dfd, data) < 0)
    r = cap_error_errno(err, errno, "cannot store the artifact");
  struct gw_artifact_meta m = {.user = w->user,
                               .filename = w->filename,
                               .mime_type = w->mime_type,
                               .origin = (char *)(origin ? origin : "upload"),
                               .source_id = (char *)source_id,
                               .size = w->size,
                               .created = (int64_t)time(NULL)};
  memcpy(m.id, w->id, sizeof m.id);
  if (r == 0 && (r = meta_write(w->dfd, &m, err)) < 0)
    unlinkat(w->dfd, data, 0);
  if (r < 0) {
    gw_artifact_abort(w);
    return r;
  }
  *meta = m;
  meta->origin = cap_xstrdup(m.origin);
  meta->source_id = source_id ? cap_xstrdup(source_id) : NULL;
  w->user = w->filename = w->mime_type = NULL; /* now meta's */
  writer_free(w);
  return 0;
}

/* ---- reading ---- */

int gw_artifact_open(const char *store, const char *user, const char *id,
                     struct gw_artifact_meta *meta, int *fd, struct cap_error *err)
{
  memset(meta, 0, sizeof *meta);
  *fd = -1;
  if (!gw_artifact_id_valid(id))
    return cap_error_set(err, ENOENT, NOT_FOUND, "(an id capsule did not issue)");
  struct cap_error ignored = {0};
  _cleanup_close_ int dfd = user_dir(store, user, false, &ignored);
  cap_error_clear(&ignored);
  struct gw_artifact_meta m = {0};
  if (dfd < 0 || !meta_read(dfd, id, &m))
    return cap_error_set(err, ENOENT, NOT_FOUND, id);
  if (strcmp(m.user, user) != 0 || expired(&m, time(NULL))) {
    if (strcmp(m.user, user) == 0)
      remove_artifact(dfd, id);
    gw_artifact_meta_free(&m);
    return cap_error_set(err, ENOENT, NOT_FOUND, id);
  }
  char name[GW_ARTIFACT_ID_LEN + 8];
  snprintf(name, sizeof name, "%s.data", id);
  int f = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != m.size) {
    if (f >= 0)
      close(f);
    gw_artifact_meta_free(&m);
    return cap_error_set(err, ENOENT, NOT_FOUND, id);
  }
  *meta = m;
  *fd = f;
  return 0;
}

int gw_artifact_read(const char *store, const char *user, const char *id,
                     struct gw_artifact_meta *meta, char **data, size_t *len, struct cap_error *err)
{
  *data = NULL;
  *len = 0;
  int fd;
  int r = gw_artifact_open(store, user, id, meta, &fd, err);
  if (r < 0)
    return r;
  char *buf = cap_xmalloc(meta->size + 1);
  r = cap_read_all(fd, buf, meta->size);
  if (r < 0)
    cap_error_errno(err, -r, "cannot read artifact %s", id);
  close(fd);
  if (r < 0) {
    free(buf);
    gw_artifact_meta_free(meta);
    return r;
  }
  buf[meta->size] = '\0';
  *data = buf;
  *len = meta->size;
  return 0;
}

void gw_artifact_remove(const char *store, const char *user, const char *id)
{
  if (!gw_artifact_id_valid(id))
    return;
  struct cap_error ignored = {0};
  _cleanup_close_ int dfd = user_dir(store, user, false, &ignored);
  cap_error_clear(&ignored);
  struct gw_artifact_meta m = {0};
  if (dfd >= 0 && meta_read(dfd, id, &m) && strcmp(m.user, user) == 0)
    remove_artifact(dfd, id);
  gw_artifact_meta_free(&m);
}

void gw_artifact_sweep_all(const char *store, struct gw_artifact_sweep_report *report)
{
  *report = (struct gw_artifact_sweep_report){0};
  int sfd = open(store, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = sfd >= 0 ? fdopendir(sfd) : NULL;
  if (!d) {
    if (sfd >= 0)
      close(sfd);
    return;
  }
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    int dfd = openat(sfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
      continue;
    size_t count;
    uint64_t bytes;
    flock(dfd, LOCK_EX);
    sweep(dfd, &count, &bytes, report); /* the directory stays: an upload may be opening it */
    close(dfd);                         /* and its lock */
  }
  closedir(d);
}
