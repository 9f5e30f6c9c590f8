/* libFuzzer target for what an imported image carries (image/oci.c): the
 * bytes of an image index, manifest or config, a `docker save`
 * manifest.json, a tar archive's headers and an image reference, all
 * hostile. Each reader either refuses with a message or yields values
 * that hold what the store relies on (digests of the one valid form,
 * absolute working directories), and frees cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void refused(int r, struct cap_error *err)
{
  if (r < 0 && !err->message)
    abort(); /* a refusal always says why */
  cap_error_clear(err);
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
