/* A layer blob as a stream of tar bytes (layer_read.c), shared by the
 * applier (layer_apply.c). Internal to src/image.
 *
 * The reader reads the blob once, in 1 MiB reads: every raw byte is
 * hashed and, when copy >= 0, written there too (the staged layout's copy
 * of the blob, so that what is verified is what is stored); the bytes
 * are then inflated (gzip, zstd) or taken as they are (plain tar).
 * layer_get hands out pointers into its own buffer, valid until the next
 * call. Errors are negative errnos: -EPIPE the stream ends too early,
 * -EBADMSG it is not valid gzip or zstd, others a read or write failure
 * (fault says which; copy_fault when it was the copy's write). */
#ifndef CAPSULE_IMAGE_LAYER_INTERNAL_H
#define CAPSULE_IMAGE_LAYER_INTERNAL_H

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

#include "core/error.h"

enum layer_codec { LAYER_PLAIN, LAYER_GZIP, LAYER_ZSTD };

struct layer_reader {
  int fd, copy;             /* the blob; where its bytes are copied, or -1 */
  const unsigned char *mem; /* the blob in memory instead of fd (the fuzz target) */
  size_t mem_len, mem_off;
  enum layer_codec codec;
  crypto_hash_sha256_state sha;
  int64_t raw_bytes; /* read so far */
  z_stream z;
  bool z_ready;
  ZSTD_DStream *zs;
  bool zstd_left; /* a zstd frame is unfinished */
  unsigned char *in, *out;
  size_t in_len, in_off, out_len, out_off;
  bool raw_eof, stream_end, copy_fault;
  int fault;
};

/* The codec from the layer's media type ("...tar", "+gzip", "+zstd").
 * -ENOMEM when the decompressor cannot start. */
int layer_reader_init(struct layer_reader *r, int fd, int copy, const unsigned char *mem,
                      size_t mem_len, const char *media_type);
void layer_reader_free(struct layer_reader *r);
/* Up to want tar bytes at *p; 0 at the end of the stream, or an error. */
ssize_t layer_get(struct layer_reader *r, size_t want, const unsigned char **p);
int layer_read_exact(struct layer_reader *r, void *buf, size_t n);
int layer_skip(struct layer_reader *r, uint64_t n);
/* Reads (hashes, copies) the rest of the raw blob and gives its digest
 * "sha256:HEX"; 0, or the read error that stopped it. */
int layer_drain(struct layer_reader *r, char digest[72]);

/* One tar entry (layer_tar.c). */
struct layer_entry {
  char type;  /* '0' file, '1' hard link, '2' symlink, '5' directory, ... */
  char *path; /* cleaned (layer_clean_path) */
  char *link; /* a hard link's target cleaned; a symlink's as written */
  uint64_t size;
  mode_t mode; /* without setuid and setgid */
  struct timespec mtime;
  bool consumed; /* set by the applier when it read the entry's data */
};

/* path's components without "", "." and leading slashes, joined by '/'
 * (allocated); *climbs when a ".." goes above the root. */
char *layer_clean_path(const char *path, bool *climbs);

/* Called for each entry; 0 to go on, or a negative errno with err set. */
typedef int layer_entry_fn(void *arg, struct layer_entry *e, struct layer_reader *r, size_t index,
                           struct cap_error *err);
/* The tar stream of r, entry by entry, until its end (two zero blocks or
 * the end of the stream). 0, a negative errno with err set (an entry
 * refused: -EXDEV), or the reader's fault (err not set). */
int layer_walk(struct layer_reader *r, size_t index, layer_entry_fn *apply, void *arg,
               struct cap_error *err);

#endif
