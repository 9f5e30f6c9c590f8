/* What the image store's files share (store.c, import.c). Internal to
 * src/image. */
#ifndef CAPSULE_IMAGE_IMAGE_INTERNAL_H
#define CAPSULE_IMAGE_IMAGE_INTERNAL_H

#include <stddef.h>

#include "core/error.h"
#include "image/image.h"

#define IMAGE_JSON_MAX (4u << 20) /* an index, manifest or config */

/* A regular file's whole content (at most max bytes), NUL-terminated;
 * NULL with errno set. */
char *image_read_file(int dirfd, const char *path, size_t max, size_t *len);
/* Writes data to dir/name through a temporary file and rename. */
int image_write_atomic(const char *dir, const char *name, const char *data, size_t len,
                       struct cap_error *err);
/* STORE/blobs/sha256/HEX for a "sha256:HEX" digest (allocated). */
char *image_blob_path(const char *dir, const char *digest);
/* The stored config of a manifest digest. */
int image_store_load(const char *store, const char *digest, struct image_info *out,
                     struct cap_error *err);
/* Runs argv (a program found on PATH) with stdout and stdin on /dev/null,
 * collecting the last line of its stderr into why. Returns its exit
 * status, or -ENOENT when the program is missing. */
int image_run_tool(char *const *argv, char *why, size_t why_size);
/* Takes the store's lock (flock on STORE/lock): held until the fd closes. */
int image_store_lock(const char *store, struct cap_error *err);
/* The ref's file name under STORE/refs, and back. */
char *image_ref_encode(const char *ref);
char *image_ref_decode(const char *name);

/* capsule's layer applier (layer_apply.c): a new root at root (made
 * here, 0700 until finished), each layer applied in order with
 * image_unpack_layer (blob: the layer's file; copy: where its bytes are
 * copied as they are read, or -1; the digest and size checked once it is
 * read: a mismatch is -EBADMSG and the root must be thrown away), then
 * image_unpack_finish (directories' modes and times). The root is the
 * caller's to remove on failure. */
struct image_unpack;
int image_unpack_begin(const char *root, struct image_unpack **ret, struct cap_error *err);
int image_unpack_layer(struct image_unpack *u, int blob, int copy, const struct image_layer *layer,
                       size_t index, struct cap_error *err);
int image_unpack_finish(struct image_unpack *u, struct cap_error *err);
void image_unpack_free(struct image_unpack *u);

#endif
