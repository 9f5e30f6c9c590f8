/* serve --grpc's artifact calls (front/serve_grpc_artifacts.h). */
#include "front/serve_grpc_artifacts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/io.h"
#include "core/json.h"
#include "core/node.h"
#include "front/serve_internal.h"
#include "gateway/artifact_store.h"
#include "gateway/state.h"

#define CHUNK_BYTES (256u << 10) /* what Selu's orchestrator sends */
#define SWEEP_EVERY_S 600

static void audit(const struct serve_grpc_artifacts *x, const char *kind, const char *user,
                  const char *capability, const char *id, const char *what)
{
  struct cap_error err = {0};
  pthread_mutex_lock(x->mu);
  gw_audit_change(x->st, kind, user, capability ? capability : "", id ? id : "", what, &err);
  pthread_mutex_unlock(x->mu);
  cap_error_clear(&err); /* the artifact is stored or sent either way; serve's log has the state */
}

static void refuse(struct grpc_serve_answer *a, const char *why) { a->error = cap_xstrdup(why); }

/* A name or a tool's id in a record's text, set apart from capsule's own
 * words: JSON-quoted (malloc'd), so no name reads as another event. */
static char *q(const char *s)
{
  struct cap_buf b = {0};
  cap_json_quote(&b, s ? s : "", s ? strlen(s) : 0);
  return cap_buf_steal(&b);
}

/* An upload whose answer may not reach its client */
struct unsent {
  const struct serve_grpc_artifacts *x;
  char *user, *id;
};

/* The client cancelled before it got the id (a client may end its stream
 * and cancel at once): nobody can name the artifact, so it goes. */
static void upload_finish(void *ctx, bool delivered)
{
  struct unsent *u = ctx;
  if (!delivered) {
    gw_artifact_remove(u->x->store, u->user, u->id);
    audit(u->x, "artifact-upload", u->user, u->x->only, u->id,
          "removed: the client cancelled before it had the id");
  }
  free(u->user);
  free(u->id);
  free(u);
}

/* Every user's expired artifacts go at most every SWEEP_EVERY_S (an
 * upload sweeps its own user's as it starts); records the sweep could not
 * read stay, said in serve's log. */
static void sweep_now_and_then(const struct serve_grpc_artifacts *x)
{
  static int64_t last; /* unix seconds of the last sweep */
  int64_t now = (int64_t)time(NULL), was = __atomic_load_n(&last, __ATOMIC_RELAXED);
  if (now - was < SWEEP_EVERY_S ||
      !__atomic_compare_exchange_n(&last, &was, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return;
  struct gw_artifact_sweep_report rep;
  gw_artifact_sweep_all(x->store, &rep);
  if (!rep.unreadable)
    return;
  _cleanup_free_ char *n = cap_xasprintf("%zu", rep.unreadable);
  _cleanup_free_ char *first = cap_xasprintf("%s: %s", rep.id, strerror(rep.error));
  serve_log(x->sv, "warning",
            "artifact records the sweep cannot read are kept until it can (fix the store's "
            "permissions or disk)",
            "records", n, "first", first);
}

static void serve_grpc_upload(const struct serve_grpc_artifacts *x,
                              const struct grpc_serve_call *call, const char *user,
                              struct grpc_serve_answer *a)
{
  sweep_now_and_then(x);
  struct grpc_serve_chunk c;
  int got = call->recv_chunk(call->stream, &c);
  if (got < 0) {
    a->status = GRPC_SERVE_INVALID_ARGUMENT;
    a->status_message = cap_xstrdup("UploadInputArtifact: the stream is not one of "
                                    "UploadInputArtifactChunk messages, or stalled");
    return;
  }
  /* the first chunk names the file (Selu: "required on first chunk") */
  _cleanup_free_ char *name = cap_xstrdup(got && *c.filename ? c.filename : "upload.bin");
  _cleanup_free_ char *mime = cap_xstrdup(got ? c.mime_type : "");
  struct cap_error err = {0};
  struct gw_artifact_writer *w = NULL;
  int r = gw_artifact_begin(x->store, user, name, mime, &w, &err);
  uint64_t size = 0;
  while (r == 0 && got > 0) {
    if ((r = gw_artifact_write(w, c.data, c.len, &err)) < 0)
      break;
    size += c.len;
    got = call->recv_chunk(call->stream, &c);
  }
  if (r == 0 && got < 0) {
    gw_artifact_abort(w);
    a->status = GRPC_SERVE_INVALID_ARGUMENT;
    a->status_message = cap_xstrdup("UploadInputArtifact: the stream failed or stalled before "
                                    "its end; nothing was stored");
    return;
  }
  struct gw_artifact_meta meta = {0};
  if (r == 0)
    r = gw_artifact_commit(w, "upload", NULL, &meta, &err);
  else if (w)
    gw_artifact_abort(w);
  if (r < 0) {
    _cleanup_free_ char *clean = gw_artifact_clean_name(name), *qn = q(clean);
    _cleanup_free_ char *what = cap_xasprintf("refused %s: %s", qn, err.message);
    audit(x, "artifact-upload", user, x->only, NULL, what);
    refuse(a, err.message);
    a->size = size;
    cap_error_clear(&err);
    return;
  }
  _cleanup_free_ char *qn = q(meta.filename);
  _cleanup_free_ char *what =
      cap_xasprintf("stored %s (%s, %" PRIu64 " bytes)", qn, meta.mime_type, meta.size);
  audit(x, "artifact-upload", user, x->only, meta.id, what);
  a->result = cap_xstrdup(meta.id);
  a->size = meta.size;
  struct unsent *u = cap_xcalloc(1, sizeof *u);
  *u = (struct unsent){.x = x, .user = cap_xstrdup(user), .id = cap_xstrdup(meta.id)};
  a->finish = upload_finish;
  a->finish_ctx = u;
  gw_artifact_meta_free(&meta);
}

/* The artifact's bytes as chunks: false when the client is gone. */
static bool send_all(const struct grpc_serve_call *call, const struct gw_artifact_meta *m, int fd,
                     struct cap_error *err)
{
  _cleanup_free_ uint8_t *buf = cap_xmalloc(CHUNK_BYTES);
  uint64_t sent = 0;
  bool first = true;
  for (;;) {
    size_t want = m->size - sent < CHUNK_BYTES ? (size_t)(m->size - sent) : CHUNK_BYTES;
    int r = cap_read_all(fd, buf, want);
    if (r < 0) {
      cap_error_errno(err, -r, "cannot read artifact %s", m->id);
      struct grpc_serve_chunk e = {.done = true, .error = err->message};
      call->send_chunk(call->stream, &e);
      return false;
    }
    sent += want;
    struct grpc_serve_chunk c = {.data = buf,
                                 .len = want,
                                 .filename = first ? m->filename : "",
                                 .mime_type = first ? m->mime_type : "",
                                 .done = sent == m->size};
    if (!call->send_chunk(call->stream, &c))
      return cap_error_set(err, ECONNRESET, "the client went away"), false;
    first = false;
    if (c.done)
      return true;
  }
}

static void serve_grpc_download(const struct serve_grpc_artifacts *x,
                                const struct grpc_serve_call *call, const char *user,
                                struct grpc_serve_answer *a)
{
  (void)a; /* the answer is the chunks; the status OK */
  const char *id = call->artifact_id ? call->artifact_id : "";
  struct gw_artifact_meta meta;
  int fd = -1;
  struct cap_error err = {0};
  if (gw_artifact_open(x->store, user, id, &meta, &fd, &err) < 0) {
    struct grpc_serve_chunk e = {.done = true, .error = err.message};
    call->send_chunk(call->stream, &e);
    _cleanup_free_ char *what = cap_xasprintf("refused: %s", err.message);
    audit(x, "artifact-download", user, x->only, gw_artifact_id_valid(id) ? id : NULL, what);
    cap_error_clear(&err);
    return;
  }
  bool ok = send_all(call, &meta, fd, &err);
  close(fd);
  _cleanup_free_ char *qn = q(meta.filename);
  _cleanup_free_ char *what =
      ok ? cap_xasprintf("sent %s (%s, %" PRIu64 " bytes)", qn, meta.mime_type, meta.size)
         : cap_xasprintf("not sent: %s", err.message);
  audit(x, "artifact-download", user, x->only, meta.id, what);
  cap_error_clear(&err);
  gw_artifact_meta_free(&meta);
}

/* One more stream of user's: false when it has SERVE_GRPC_USER_STREAMS. */
static bool stream_take(struct serve_grpc_streams *s, const char *user)
{
  pthread_mutex_lock(&s->mu);
  size_t i = 0;
  while (i < s->n_users && strcmp(s->users[i].user, user) != 0)
    i++;
  bool room = i == s->n_users || s->users[i].n < SERVE_GRPC_USER_STREAMS;
  if (room && i == s->n_users) {
    s->users = cap_xrealloc(s->users, (s->n_users + 1) * sizeof *s->users);
    s->users[s->n_users++] = (struct serve_grpc_user_streams){.user = cap_xstrdup(user)};
  }
  if (room)
    s->users[i].n++;
  pthread_mutex_unlock(&s->mu);
  return room;
}

static void stream_give(struct serve_grpc_streams *s, const char *user)
{
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_users; i++) {
    if (strcmp(s->users[i].user, user) != 0)
      continue;
    if (--s->users[i].n == 0) {
      free(s->users[i].user);
      s->users[i] = s->users[--s->n_users];
    }
    break;
  }
  pthread_mutex_unlock(&s->mu);
}

void serve_grpc_artifact_stream(const struct serve_grpc_artifacts *x,
                                const struct grpc_serve_call *call, const char *user,
                                struct grpc_serve_answer *a)
{
  bool up = call->method == GRPC_SERVE_CAP_UPLOAD;
  if (!stream_take(x->streams, user)) {
    a->status = GRPC_SERVE_RESOURCE_EXHAUSTED;
    a->status_message = cap_xasprintf(
        "%s: this user has %d artifact streams open (uploads and downloads), the most one user "
        "may have at once; retry when one has ended",
        up ? "UploadInputArtifact" : "DownloadOutputArtifact", SERVE_GRPC_USER_STREAMS);
    audit(x, up ? "artifact-upload" : "artifact-download", user, x->only, NULL, a->status_message);
    return;
  }
  (up ? serve_grpc_upload : serve_grpc_download)(x, call, user, a);
  stream_give(x->streams, user);
}

static struct cap_doc *parse(const char *text)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, text, strlen(text), "arguments", 0, &diags) < 0 || !doc->root ||
      doc->root->kind != CAP_NODE_OBJECT) {
    cap_doc_free(doc);
    doc = NULL;
  }
  cap_diags_free(&diags);
  return doc;
}

static const char *id_of(const struct cap_node *item)
{
  const struct cap_node *v =
      item->kind == CAP_NODE_OBJECT ? cap_node_get(item, "capability_artifact_id") : NULL;
  return v && v->kind == CAP_NODE_STRING ? v->u.str.ptr : NULL;
}

bool serve_grpc_artifacts_in(const struct serve_grpc_artifacts *x,
                             const struct grpc_serve_call *call, const char *user,
                             struct grpc_serve_answer *a)
{
  if (!call->parameters || !strstr(call->parameters, "capability_artifact_id"))
    return true;
  struct cap_doc *doc = parse(call->parameters);
  const struct cap_node *list = doc ? cap_node_get(doc->root, "attachments") : NULL;
  bool ok = true;
  size_t refs = doc ? gw_artifact_refs(doc->root) : 0;
  if (refs > GW_ARTIFACT_USER_COUNT) { /* a user has no more: some named twice */
    a->error = cap_xasprintf("attachments: %zu entries name artifacts, more than a user holds "
                             "(%d); name each once",
                             refs, GW_ARTIFACT_USER_COUNT);
    audit(x, "artifact-in", user, call->tool_name, NULL, a->error);
    ok = false;
    list = NULL;
  }
  for (size_t i = 0; ok && list && list->kind == CAP_NODE_ARRAY && i < list->u.arr.len; i++) {
    const char *id = id_of(list->u.arr.items[i]);
    if (!id)
      continue;
    struct gw_artifact_meta meta;
    int fd = -1;
    struct cap_error err = {0};
    ok = gw_artifact_open(x->store, user, id, &meta, &fd, &err) == 0;
    _cleanup_free_ char *qn = ok ? q(meta.filename) : NULL;
    _cleanup_free_ char *what = ok ? cap_xasprintf("%s (%s, %" PRIu64 " bytes) in the arguments",
                                                   qn, meta.mime_type, meta.size)
                                   : cap_xasprintf("refused: %s", err.message);
    audit(x, "artifact-in", user, call->tool_name, gw_artifact_id_valid(id) ? id : NULL, what);
    if (!ok)
      a->error =
          cap_xasprintf("attachments[%zu]: %s; upload it with UploadInputArtifact", i, err.message);
    if (fd >= 0)
      close(fd);
    gw_artifact_meta_free(&meta);
    cap_error_clear(&err);
  }
  cap_doc_free(doc);
  return ok;
}

static void audit_out(const struct serve_grpc_artifacts *x, const struct grpc_serve_call *call,
                      const char *user, const struct cap_node *item)
{
  const char *id = id_of(item);
  struct gw_artifact_meta meta;
  int fd = -1;
  struct cap_error err = {0};
  if (id && gw_artifact_open(x->store, user, id, &meta, &fd, &err) == 0) {
    close(fd);
    if (strcmp(meta.origin, "upload") != 0) {
      _cleanup_free_ char *qn = q(meta.filename), *qs = q(meta.source_id);
      _cleanup_free_ char *what =
          cap_xasprintf("stored %s (%s, %" PRIu64 " bytes) from %s's artifact %s", qn,
                        meta.mime_type, meta.size, meta.origin, qs);
      audit(x, "artifact-out", user, call->tool_name, meta.id, what);
    }
    gw_artifact_meta_free(&meta);
  }
  cap_error_clear(&err);
}

void serve_grpc_artifacts_out(const struct serve_grpc_artifacts *x,
                              const struct grpc_serve_call *call, const char *user,
                              const char *result)
{
  if (!result || !strstr(result, GW_ARTIFACT_ID_PREFIX))
    return;
  struct cap_doc *doc = parse(result);
  const struct cap_node *one = doc ? cap_node_get(doc->root, "artifact") : NULL;
  const struct cap_node *list = doc ? cap_node_get(doc->root, "artifacts") : NULL;
  if (one)
    audit_out(x, call, user, one);
  for (size_t i = 0; list && list->kind == CAP_NODE_ARRAY && i < list->u.arr.len; i++)
    audit_out(x, call, user, list->u.arr.items[i]);
  cap_doc_free(doc);
}
