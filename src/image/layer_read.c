/* A layer blob read once (layer_internal.h): raw bytes in large reads,
 * each hashed (SHA-256, for the digest check) and copied into the staged
 * layout as it passes, then decompressed (gzip with zlib, zstd with
 * libzstd, or plain tar) into an output buffer the tar walker takes its
 * headers and file data from without another copy. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/io.h"
#include "image/layer_internal.h"

#define IN_CHUNK (1u << 20)
#define OUT_CHUNK (1u << 20)

int layer_reader_init(struct layer_reader *r, int fd, int copy, const unsigned char *mem,
                      size_t mem_len, const char *media_type)
{
  *r = (struct layer_reader){.fd = fd,
                             .copy = copy,
                             .mem = fd < 0 && !mem ? (const unsigned char *)"" : mem,
                             .mem_len = mem_len};
  r->codec = strstr(media_type, "zstd")   ? LAYER_ZSTD
             : strstr(media_type, "gzip") ? LAYER_GZIP
                                          : LAYER_PLAIN;
  crypto_hash_sha256_init(&r->sha);
  r->out = cap_xmalloc(OUT_CHUNK);
  if (r->codec == LAYER_PLAIN)
    return 0;
  r->in = cap_xmalloc(IN_CHUNK);
  if (r->codec == LAYER_GZIP) {
    if (inflateInit2(&r->z, 15 + 32) != Z_OK)
      return -ENOMEM;
    r->z_ready = true;
    return 0;
  }
  r->zs = ZSTD_createDStream();
  return r->zs && !ZSTD_isError(ZSTD_initDStream(r->zs)) ? 0 : -ENOMEM;
}

void layer_reader_free(struct layer_reader *r)
{
  if (r->z_ready)
    inflateEnd(&r->z);
  if (r->zs)
    ZSTD_freeDStream(r->zs);
  free(r->in);
  free(r->out);
  r->in = r->out = NULL;
  r->z_ready = false;
  r->zs = NULL;
}

/* Up to n raw bytes of the blob into buf, hashed and copied; 0 at its end. */
static ssize_t raw_read(struct layer_reader *r, unsigned char *buf, size_t n)
{
  ssize_t k;
  if (r->mem) {
    k = (ssize_t)(r->mem_len - r->mem_off < n ? r->mem_len - r->mem_off : n);
    memcpy(buf, r->mem + r->mem_off, (size_t)k);
    r->mem_off += (size_t)k;
  } else {
    while ((k = read(r->fd, buf, n)) < 0 && errno == EINTR)
      ;
    if (k < 0)
      return r->fault = -errno;
  }
  if (k == 0) {
    r->raw_eof = true;
    return 0;
  }
  crypto_hash_sha256_update(&r->sha, buf, (size_t)k);
  r->raw_bytes += k;
  if (r->copy >= 0) {
    int w = cap_write_all(r->copy, buf, (size_t)k, 0);
    if (w < 0)
      return r->fault = w, r->copy_fault = true, w;
  }
  return k;
}

static bool refill_in(struct layer_reader *r)
{
  if (r->in_off < r->in_len || r->raw_eof)
    return r->in_off < r->in_len;
  ssize_t k = raw_read(r, r->in, IN_CHUNK);
  r->in_len = k > 0 ? (size_t)k : 0;
  r->in_off = 0;
  return k > 0;
}

static int inflate_some(struct layer_reader *r)
{
  r->z.next_out = r->out;
  r->z.avail_out = OUT_CHUNK;
  while (r->z.avail_out == OUT_CHUNK && !r->stream_end) {
    if (!refill_in(r))
      return r->fault ? r->fault : (r->fault = -EPIPE); /* ends mid-stream */
    r->z.next_in = r->in + r->in_off;
    r->z.avail_in = (uInt)(r->in_len - r->in_off);
    int z = inflate(&r->z, Z_NO_FLUSH);
    r->in_off = r->in_len - r->z.avail_in;
    if (z == Z_STREAM_END) { /* another gzip member may follow */
      if (!refill_in(r))
        r->stream_end = true;
      else if (inflateReset(&r->z) != Z_OK)
        return r->fault = -EBADMSG;
    } else if (z != Z_OK && !(z == Z_BUF_ERROR && r->z.avail_in == 0)) {
      return r->fault = -EBADMSG;
    }
  }
  r->out_len = OUT_CHUNK - r->z.avail_out;
  return 0;
}

static int zstd_some(struct layer_reader *r)
{
  ZSTD_outBuffer o = {r->out, OUT_CHUNK, 0};
  while (o.pos == 0 && !r->stream_end) {
    if (!refill_in(r)) {
      if (r->fault)
        return r->fault;
      if (r->zstd_left)
        return r->fault = -EPIPE; /* a frame cut short */
      r->stream_end = true;
      break;
    }
    ZSTD_inBuffer i = {r->in, r->in_len, r->in_off};
    size_t z = ZSTD_decompressStream(r->zs, &o, &i);
    r->in_off = i.pos;
    if (ZSTD_isError(z))
      return r->fault = -EBADMSG;
    r->zstd_left = z != 0;
  }
  r->out_len = o.pos;
  return 0;
}

ssize_t layer_get(struct layer_reader *r, size_t want, const unsigned char **p)
{
  if (r->out_off == r->out_len) {
    r->out_off = r->out_len = 0;
    int k = 0;
    if (r->codec == LAYER_PLAIN) {
      ssize_t n = raw_read(r, r->out, OUT_CHUNK);
      k = n < 0 ? (int)n : 0;
      r->out_len = n > 0 ? (size_t)n : 0;
    } else if (!r->stream_end) {
      k = r->codec == LAYER_GZIP ? inflate_some(r) : zstd_some(r);
    }
    if (k < 0)
      return k;
  }
  size_t n = r->out_len - r->out_off < want ? r->out_len - r->out_off : want;
  *p = r->out + r->out_off;
  r->out_off += n;
  return (ssize_t)n;
}

int layer_read_exact(struct layer_reader *r, void *buf, size_t n)
{
  for (size_t done = 0; done < n;) {
    const unsigned char *p;
    ssize_t k = layer_get(r, n - done, &p);
    if (k <= 0)
      return k < 0 ? (int)k : -EPIPE;
    memcpy((char *)buf + done, p, (size_t)k);
    done += (size_t)k;
  }
  return 0;
}

int layer_skip(struct layer_reader *r, uint64_t n)
{
  while (n) {
    const unsigned char *p;
    ssize_t k = layer_get(r, n < OUT_CHUNK ? (size_t)n : OUT_CHUNK, &p);
    if (k <= 0)
      return k < 0 ? (int)k : -EPIPE;
    n -= (uint64_t)k;
  }
  return 0;
}

int layer_drain(struct layer_reader *r, char digest[72])
{
  unsigned char *buf = r->in ? r->in : r->out;
  size_t n = r->in ? IN_CHUNK : OUT_CHUNK;
  while (!r->raw_eof && !r->fault)
    raw_read(r, buf, n);
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&r->sha, h);
  memcpy(digest, "sha256:", 7);
  sodium_bin2hex(digest + 7, 65, h, sizeof h);
  return r->raw_eof ? 0 : r->fault ? r->fault : -EIO;
}
