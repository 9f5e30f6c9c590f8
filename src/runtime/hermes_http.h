/* A small HTTP/1.1 client for the Hermes runtime (runtime/hermes.c): one
 * request per connection ("Connection: close"), plain TCP or, for an
 * https:// endpoint, TLS with the server's certificate verified
 * (net/tls_client.h: the system's CA store plus the operator's CA file,
 * the endpoint's name or address), responses read
 * through libhttp-parser (Content-Length, chunked or until close), every
 * read and write bounded by a deadline. Before connecting, the endpoint is
 * checked against the agent's network grant as capsule's egress proxy
 * checks a tool's connections (net/rules.h): blocked allows nothing, proxy
 * mode its allowlist (names and ports), and the addresses the proxy never
 * connects to (link-local, metadata) are refused in every mode; loopback
 * and private addresses only when the grant is unrestricted. Nothing here
 * prints. */
#ifndef CAPSULE_RUNTIME_HERMES_HTTP_H
#define CAPSULE_RUNTIME_HERMES_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "manifest/model.h"
#include "net/http.h"

struct tls_client;
struct tls_client_files;

struct hermes_http {
  int fd;
  struct tls_client *tls;               /* an https:// endpoint's session, else NULL */
  const struct tls_client_files *files; /* its files (the caller's), or NULL */
  http_parser parser;
  http_parser_settings settings;
  int status;
  bool headers_done, complete, event_stream;
  struct cap_buf body; /* the body read so far (chunk framing removed) */
  size_t body_cap;     /* more is an error */
};

/* Connects to url's host:port (after the egress check) and sends one
 * request: method, url->path + suffix, "Authorization: Bearer KEY" when
 * key, each extra header ("Name: value"), the JSON body when given.
 * tls: an https:// endpoint's extra CAs (PEM) its certificate may chain
 * to, and capsule's client certificate and key for mutual TLS (each
 * NULL when not set; a client certificate with an http:// URL is an
 * error). deadline: CLOCK_MONOTONIC ms. An untrusted certificate, or one
 * for another name: -EACCES, nothing sent; a server refusing capsule's
 * client certificate (or its lack): -EKEYREJECTED. */
int hermes_http_send(struct hermes_http *h, const struct cap_network *net,
                     const struct http_url *url, const struct tls_client_files *tls,
                     const char *method, const char *suffix, const char *key,
                     const char *const *headers, const char *body, uint64_t deadline,
                     struct cap_error *err);
/* Reads what arrived (waiting up to wait_ms, and never past deadline):
 * 0 and more of the body (or the response complete), -ETIMEDOUT when
 * nothing came, another -errno when the response is broken or too big. */
int hermes_http_read(struct hermes_http *h, int wait_ms, uint64_t deadline, struct cap_error *err);
/* Sends and reads the whole response. */
int hermes_http_call(struct hermes_http *h, const struct cap_network *net,
                     const struct http_url *url, const struct tls_client_files *tls,
                     const char *method, const char *suffix, const char *key,
                     const char *const *headers, const char *body, uint64_t deadline,
                     struct cap_error *err);
void hermes_http_close(struct hermes_http *h);

/* Server-sent events: calls fn with the data of each whole frame in
 * buf[0..len) (its "data:" lines joined by newlines; comments and other
 * fields skipped; frames end at a blank line, LF or CRLF) and returns how
 * many bytes those frames took (the rest is an unfinished frame). */
size_t hermes_sse_take(const char *buf, size_t len,
                       void (*fn)(void *arg, const char *data, size_t len), void *arg);

#endif
