/* The messages of the services capsule-grpc-serve.so serves (internal to
 * the module): the method a request's path names, a request decoded into
 * struct grpc_serve_call, an answer encoded. The seed's CapabilityService
 * and the orchestrator's Capability share the package selu.capability.v1
 * on the wire; their C names differ (proto/meson.build). */
#ifndef CAPSULE_FRONT_GRPC_SERVE_MSG_H
#define CAPSULE_FRONT_GRPC_SERVE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "front/grpc_serve.h"

/* A decoded request: what struct grpc_serve_call's strings point into. */
struct grpc_serve_request {
  enum grpc_serve_method method;
  void *msg; /* the unpacked message (NULL for a health check) */
  const char **keys, **values;
  char *args; /* the orchestrator's args_json, NUL-terminated */
};

/* The method the path ("/selu.capability.v1.Capability/Invoke") names;
 * false for one capsule does not serve. */
bool grpc_serve_method_of(const char *path, size_t len, enum grpc_serve_method *method);
/* Decodes data into *req and call (whose strings then point into req);
 * false for bytes that are not a request of the method, or arguments with
 * a NUL byte. */
bool grpc_serve_decode(enum grpc_serve_method method, const uint8_t *data, size_t len,
                       struct grpc_serve_request *req, struct grpc_serve_call *call);
void grpc_serve_request_free(struct grpc_serve_request *req);
/* An UploadInputArtifactChunk decoded into c, whose strings and data point
 * into *msg (freed with grpc_serve_chunk_free); false for bytes that are
 * not one. */
bool grpc_serve_decode_chunk(const uint8_t *data, size_t len, struct grpc_serve_chunk *c,
                             void **msg);
void grpc_serve_chunk_free(void *msg);
/* An ArtifactChunk's message (malloc'd, *len bytes). */
uint8_t *grpc_serve_encode_chunk(const struct grpc_serve_chunk *c, size_t *len);
/* The answer's message (malloc'd, *len bytes), the method's response;
 * NULL for DownloadOutputArtifact, whose chunks are sent as they come. */
uint8_t *grpc_serve_encode(enum grpc_serve_method method, const struct grpc_serve_answer *a,
                           size_t *len);

/* The message encodings a request may come in (grpc-encoding), as
 * grpc-accept-encoding lists them in every answer */
enum grpc_serve_encoding { GRPC_ENC_IDENTITY, GRPC_ENC_GZIP, GRPC_ENC_DEFLATE, GRPC_ENC_OTHER };
#define GRPC_SERVE_ACCEPT_ENCODING "identity,deflate,gzip"
enum grpc_serve_encoding grpc_serve_encoding_of(const uint8_t *v, size_t n);
/* A compressed message (gzip, or deflate's zlib stream) inflated into out
 * (emptied first): 0, -E2BIG past max bytes (inflated no further: a
 * small message that expands a thousandfold costs max at most), or
 * -EINVAL for bytes that are not one whole stream. */
int grpc_serve_inflate(const uint8_t *in, size_t n, size_t max, struct cap_buf *out);

#endif
