/* The artifacts `serve --grpc` holds for the orchestrator's artifact calls
 * (the Capability service's UploadInputArtifact and DownloadOutputArtifact):
 * files in STATE/run/artifacts, one directory per user, each artifact its
 * bytes (ID.data) and what capsule knows of it (ID.meta, one JSON object),
 * so that every process of serve (the gRPC process, its call children)
 * reaches the same store.
 *
 * An id is "capsule-artifact-" and 32 hex digits drawn from getrandom (128
 * bits: unguessable), and names an artifact to its user only: another
 * user's id, an expired one and an unknown one are the same "not found".
 * Bounded: GW_ARTIFACT_MAX_BYTES an artifact, GW_ARTIFACT_USER_BYTES and
 * GW_ARTIFACT_USER_COUNT a user; an artifact lives GW_ARTIFACT_TTL_S (what
 * Selu's orchestrator keeps its own), swept when the user stores another
 * (and every user's now and then) and refused when opened past it. */
#ifndef CAPSULE_GATEWAY_ARTIFACT_STORE_H
#define CAPSULE_GATEWAY_ARTIFACT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define GW_ARTIFACT_MAX_BYTES ((uint64_t)32 << 20)
#define GW_ARTIFACT_USER_BYTES ((uint64_t)256 << 20)
#define GW_ARTIFACT_USER_COUNT 256
#define GW_ARTIFACT_TTL_S (6 * 3600)
#define GW_ARTIFACT_ID_PREFIX "capsule-artifact-"
#define GW_ARTIFACT_ID_LEN (sizeof GW_ARTIFACT_ID_PREFIX - 1 + 32)

struct gw_artifact_meta {
  char id[GW_ARTIFACT_ID_LEN + 1];
  char *user;
  char *filename, *mime_type;
  char *origin;    /* "upload", or the CAPABILITY.TOOL whose result it was */
  char *source_id; /* the capability's own id for it, or NULL */
  uint64_t size;
  int64_t created; /* unix seconds */
};
void gw_artifact_meta_free(struct gw_artifact_meta *m);

/* STATE/run/artifacts (malloc'd). */
char *gw_artifact_store_dir(const char *state_dir);
/* Whether id has the form of one this store issues. */
bool gw_artifact_id_valid(const char *id);

/* An artifact being written, named filename (kept as its last path
 * component, as gw_artifact_clean_name keeps it) of mime_type (one that
 * is not printable ASCII with a '/': application/octet-stream). begin sweeps the user's expired
 * artifacts and refuses (-EDQUOT, err saying which bound) a user at its count or bytes; write
 * refuses (-EFBIG) bytes past GW_ARTIFACT_MAX_BYTES or the user's bytes left; commit names it
 * (meta, filled) and frees w; abort removes what was written and frees w. */
struct gw_artifact_writer;
/* The name as begin keeps it (malloc'd): its last path component, not
 * hidden, at most 200 bytes, what core/escape.h escapes (controls, bidi,
 * bytes that are not UTF-8) replaced by '_'. */
char *gw_artifact_clean_name(const char *name);
int gw_artifact_begin(const char *store, const char *user, const char *filename,
                      const char *mime_type, struct gw_artifact_writer **w, struct cap_error *err);
int gw_artifact_write(struct gw_artifact_writer *w, const void *data, size_t len,
                      struct cap_error *err);
int gw_artifact_commit(struct gw_artifact_writer *w, const char *origin, const char *source_id,
                       struct gw_artifact_meta *meta, struct cap_error *err);
void gw_artifact_abort(struct gw_artifact_writer *w);

/* The user's artifact id: its meta and a descriptor on its bytes (*fd,
 * O_CLOEXEC); -ENOENT with err saying "not found or expired" otherwise. */
int gw_artifact_open(const char *store, const char *user, const char *id,
                     struct gw_artifact_meta *meta, int *fd, struct cap_error *err);
/* The same, its bytes read whole (*data, malloc'd, *len). */
int gw_artifact_read(const char *store, const char *user, const char *id,
                     struct gw_artifact_meta *meta, char **data, size_t *len,
                     struct cap_error *err);

struct cap_node;
/* How many of the arguments' "attachments" entries name an artifact (an
 * object with a string "capability_artifact_id"), as Selu's orchestrator
 * hands a capability its attachments. */
size_t gw_artifact_refs(const struct cap_node *args);

/* What a sweep kept without knowing: the records it could not read (an
 * EACCES or EIO may pass), counted as live; the first one's errno and id. */
struct gw_artifact_sweep_report {
  size_t unreadable;
  int error;
  char id[GW_ARTIFACT_ID_LEN + 1];
};

/* Every user's expired artifacts removed, and those whose record is
 * malformed (read, and not a record): what serve --grpc does at its first
 * upload and every 10 minutes of uploads after, so that a user who stores
 * nothing more does not keep them on disk. A record it cannot read is
 * kept, and told in report. */
void gw_artifact_sweep_all(const char *store, struct gw_artifact_sweep_report *report);

/* Removes the user's artifact id (nothing when it is not the user's). */
void gw_artifact_remove(const char *store, const char *user, const char *id);

/* An ID.meta's text, and back: parse fills m (the id is the caller's) and
 * returns false for text that is not one format wrote (missing or mistyped
 * members, a NUL in a string, a negative size). */
char *gw_artifact_meta_format(const struct gw_artifact_meta *m);
bool gw_artifact_meta_parse(const char *text, size_t len, struct gw_artifact_meta *m);

#endif
