/* libFuzzer target for what an imported image carries (image/oci.c,
 * image/layer_apply.c): the bytes of an image index, manifest or config, a
 * `docker save` manifest.json, a tar archive's headers, a layer (tar or
 * gzip) and an image reference, all hostile. Each reader either refuses with a message or yields
 * values that hold what the store relies on (digests of the one valid form, absolute working
 * directories), and frees cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "image/image.h"
#include "image/image_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void refused(int r, struct cap_error *err)
{
  if (r < 0 && !err->message)
    abort(); /* a refusal always says why */
  cap_error_clear(err);
}

/* data applied as a layer (image/layer_apply.c) onto an empty root under
 * a fresh directory, which must then hold only that root. */
static void apply_layer(const uint8_t *data, size_t size, const char *media_type)
{
  char dir[] = "/tmp/fuzz-image.XXXXXX";
  if (!mkdtemp(dir))
    return;
  char root[sizeof dir + 8];
  snprintf(root, sizeof root, "%s/root", dir);
  int fd = memfd_create("layer", MFD_CLOEXEC);
  struct cap_error err = {0};
  struct image_unpack *u = NULL;
  if (fd >= 0 && write(fd, data, size) == (ssize_t)size && lseek(fd, 0, SEEK_SET) == 0 &&
      image_unpack_begin(root, &u, &err) == 0) {
    struct image_layer layer = {.media_type = (char *)media_type, .size = -1};
    int r = image_unpack_layer(u, fd, -1, &layer, 1, &err);
    if (r == 0)
      r = image_unpack_finish(u, &err);
    refused(r, &err);
    image_unpack_free(u);
  }
  cap_error_clear(&err);
  if (fd >= 0)
    close(fd);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "root"))
      abort(); /* written beside the root */
  if (d)
    closedir(d);
  image_rmtree(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;
  struct cap_error err = {0};
  char digest[IMAGE_DIGEST_LEN + 1];
  bool nested;
  int r = image_index_pick(text, size, "example.org/a:1", digest, &nested, &err);
  if (r == 0 && !image_digest_valid(digest))
    abort();
  refused(r, &err);
  struct image_manifest m;
  r = image_manifest_parse(text, size, &m, &err);
  if (r == 0) {
    if (!image_digest_valid(m.config_digest))
      abort();
    for (size_t i = 0; i < m.n_layers; i++)
      if (!image_digest_valid(m.layers[i].digest) || m.layers[i].size < 0)
        abort();
    image_manifest_free(&m);
  }
  refused(r, &err);
  struct image_config c;
  r = image_config_parse(text, size, &c, &err);
  if (r == 0) {
    if (c.working_dir && c.working_dir[0] != '/')
      abort();
    image_config_free(&c);
  }
  refused(r, &err);
  free(image_docker_repo_tag(text, size));
  free(image_index_ref_name(text, size));
  (void)image_tar_has_member(data, size, "manifest.json");
  /* a layer, as a tar, a gzip and a zstd stream: checked, then applied
   * into a directory of its own (nothing may land outside it) */
  static const char *const types[] = {"application/vnd.oci.image.layer.v1.tar",
                                      "application/vnd.oci.image.layer.v1.tar+gzip",
                                      "application/vnd.oci.image.layer.v1.tar+zstd"};
  for (size_t i = 0; i < 3; i++) {
    r = image_layer_check_mem(data, size, types[i], 1, &err);
    refused(r, &err);
    apply_layer(data, size, types[i]);
  }
  char *ref = malloc(size + 1);
  memcpy(ref, data, size);
  ref[size] = '\0';
  char *norm = image_ref_normalize(ref, &err);
  if (norm) {
    /* normalising is idempotent */
    char *again = image_ref_normalize(norm, &err);
    if (!again || strcmp(again, norm) != 0)
      abort();
    free(again);
  }
  refused(norm ? 0 : -1, &err);
  free(norm);
  free(ref);
  return 0;
}
