/* The OCI image store: a content-addressed store under the state
 * directory (STATE/images) that `capsule image` fills and Selu
 * capabilities run from, with no container daemon and no root.
 *
 *   blobs/sha256/HEX     every blob, verified against its digest
 *   rootfs/HEX/          the image whose manifest digest is HEX, unpacked
 *                        rootless (umoci raw unpack --rootless), shared by
 *                        every capability that names it; mounted read-only
 *   refs/ENCODED-REF     "sha256:HEX\n": a reference's manifest
 *   tmp/                 imports in progress; nothing outside tmp/ is ever
 *                        half-written (a rootfs appears by rename, a ref by
 *                        rename, once every blob is verified and unpacked)
 *
 * Strings returned are the caller's; nothing here prints. Not thread-safe
 * per store; concurrent processes serialise their commits on STORE/lock. */
#ifndef CAPSULE_IMAGE_IMAGE_H
#define CAPSULE_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define IMAGE_DIGEST_LEN 71 /* "sha256:" + 64 hex */

/* The parts of an image's configuration that say how it runs (OCI image
 * config `config`), as NULL-terminated string vectors (NULL when absent). */
struct image_config {
  char **entrypoint;
  char **cmd;
  char **env;
  char *working_dir; /* NULL when unset */
  char *user;        /* as written; capsule runs Selu's 1000:1000 whatever it says */
  char *architecture, *os;
  char *created; /* RFC 3339, or NULL */
};
void image_config_free(struct image_config *c);

struct image_layer {
  char digest[IMAGE_DIGEST_LEN + 1];
  char *media_type;
  int64_t size;
};

/* An image manifest (OCI or Docker schema 2). */
struct image_manifest {
  char config_digest[IMAGE_DIGEST_LEN + 1];
  int64_t config_size;
  struct image_layer *layers;
  size_t n_layers;
};
void image_manifest_free(struct image_manifest *m);

/* One stored image as `ls` and `inspect` show it. */
struct image_info {
  char *ref;                                /* normalised; NULL for an untagged rootfs */
  char digest[IMAGE_DIGEST_LEN + 1];        /* the manifest's */
  char config_digest[IMAGE_DIGEST_LEN + 1]; /* the image id */
  int64_t size;                             /* the layers' sizes, as stored */
  struct image_config config;
  char *rootfs; /* the unpacked root, or NULL when it is missing */
};
void image_info_free(struct image_info *info);
void image_infos_free(struct image_info *list, size_t n);

/* ---- readers (oci.c): bounded, never trusting what they read ---- */

/* "sha256:<64 lowercase hex>" and nothing else. */
bool image_digest_valid(const char *s);
/* An image index (index.json) or a manifest list: the manifest for
 * want_ref (the org.opencontainers.image.ref.name annotation, matched as
 * written or as its last ":tag"), else the only one, else the host
 * platform's. *nested is set when the chosen descriptor is itself an
 * index. Returns 0 or -errno with err naming the problem. */
int image_index_pick(const char *json, size_t len, const char *want_ref, char digest[72],
                     bool *nested, struct cap_error *err);
int image_manifest_parse(const char *json, size_t len, struct image_manifest *out,
                         struct cap_error *err);
int image_config_parse(const char *json, size_t len, struct image_config *out,
                       struct cap_error *err);
/* Whether a tar archive (in memory, or an open file) has a regular file
 * named name (a leading "./" ignored): 1, 0, or -EINVAL when it is not a
 * tar archive (a bad header checksum), -EIO. How an OCI archive
 * (oci-layout) is told from a `docker save` one (manifest.json). */
int image_tar_has_member(const unsigned char *data, size_t len, const char *name);
/* The content of the regular file name in the tar archive open at fd
 * (at most max bytes); NULL with *r = 0 (no such member), -EINVAL (not a
 * tar archive), -EFBIG or -EIO. */
char *image_tar_fd_read_member(int fd, const char *name, size_t max, size_t *len, int *r);
/* A `docker save` archive's manifest.json: the RepoTags[0] of its only
 * image (allocated), or NULL. */
char *image_docker_repo_tag(const char *json, size_t len);
/* An OCI index.json's only image's org.opencontainers.image.ref.name when
 * it is a full reference (it holds a '/' or ':'; a bare "latest" is not),
 * or NULL. */
char *image_index_ref_name(const char *json, size_t len);

/* A layer's entries checked as the applier checks them (layer_apply.c),
 * without applying them: 0, or a negative errno with err naming the entry
 * whose path, hard-link target or whiteout target climbs out of the
 * image's root (-EXDEV), an entry type capsule does not apply, a corrupt
 * stream. index numbers the layer in messages. Plain tar, gzip and zstd
 * (the media type says which). The fuzz target's entry point. */
int image_layer_check_mem(const unsigned char *data, size_t len, const char *media_type,
                          size_t index, struct cap_error *err);

/* ---- references ---- */

/* Docker's normalisation: "alpine" -> "docker.io/library/alpine:latest",
 * "ghcr.io/x/y" -> "ghcr.io/x/y:latest"; a digest reference ("@sha256:")
 * is kept. NULL with err set when ref is not a reference. */
char *image_ref_normalize(const char *ref, struct cap_error *err);

/* ---- the store (store.c) ---- */

/* STATE/images (allocated). */
char *image_store_dir(const char *state_dir);
/* The stored image for ref: its manifest digest and unpacked root.
 * -ENOENT (err says which command provides it) when it is not stored. */
int image_store_resolve(const char *store, const char *ref, struct image_info *out,
                        struct cap_error *err);
int image_store_list(const char *store, struct image_info **ret, size_t *n, struct cap_error *err);
/* Removes ref; then every rootfs and blob no reference needs. */
int image_store_remove(const char *store, const char *ref, struct cap_error *err);

/* ---- import and pull (import.c) ---- */

/* Imports an OCI image layout directory, an OCI archive or a `docker save`
 * archive at path, tagged tag (a reference; NULL: the layout's or
 * archive's own full reference name, if any). *ret_info describes what was
 * stored; warnings (say, an entrypoint the rootfs lacks) go to
 * ret_warning (allocated, or NULL). -ENOTSUP with the outcome "host" when
 * umoci or skopeo is missing. */
int image_import(const char *store, const char *path, const char *tag, struct image_info *ret_info,
                 char **ret_warning, struct cap_error *err);
/* `skopeo copy docker://REF`, then as image_import. */
int image_pull(const char *store, const char *ref, struct image_info *ret_info, char **ret_warning,
               struct cap_error *err);

/* ---- running ---- */

/* The argv an image runs (Entrypoint + Cmd) and whether argv[0] exists in
 * rootfs (looked up on the image's PATH when it has no '/'). NULL with err
 * set when the image names no command or it is missing. */
char **image_command(const struct image_info *info, struct cap_error *err);
void image_strv_free(char **v);
/* The PATH an image's Env names, else the default a container runtime
 * gives (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin). */
const char *image_config_path(const struct image_config *c);
/* Removes path and everything below it (directories made writable first:
 * an unpacked rootfs has read-only ones). Missing is not an error. */
int image_rmtree(const char *path);
/* The same for name in the directory parent. */
int image_rmtree_at(int parent, const char *name);
/* The image's unpacked root as dest (new): hard links into the store where
 * the filesystem allows, else a copy (`capsule export oci`). */
int image_rootfs_copy(const struct image_info *info, const char *dest, struct cap_error *err);

#endif
