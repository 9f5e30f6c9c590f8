/* A verified TLS client over a connected socket, for capsule's own
 * outgoing connections (the Hermes runtime's endpoint): TLS 1.2 or later,
 * the peer's certificate checked against the system's trust store (and
 * SSL_CERT_FILE / SSL_CERT_DIR, as OpenSSL reads them) plus an optional
 * PEM file of extra CAs, and its name (or IP literal) against host; a
 * client certificate and key (PEM) for a server that asks for one (mutual
 * TLS). It
 * lives in the egress proxy's module with the rest of OpenSSL
 * (proxy_load.c opens it on first use), so a process that never speaks TLS
 * never maps libssl. The socket stays the caller's; one thread at a time
 * per client. */
#ifndef CAPSULE_NET_TLS_CLIENT_H
#define CAPSULE_NET_TLS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

struct tls_client;

/* The files a client uses; each may be NULL. cert_file and key_file go
 * together (a certificate chain and its private key, PEM). */
struct tls_client_files {
  const char *ca_file;   /* CAs trusted besides the system's */
  const char *cert_file; /* the client's certificate (chain) */
  const char *key_file;  /* its private key: not readable by others */
};

/* Handshakes over fd (non-blocking) until deadline (CLOCK_MONOTONIC ms).
 * -EACCES when the certificate is not trusted or not host's (err says
 * which: OpenSSL's verify reason), -ETIMEDOUT, -ENOENT when ca_file
 * cannot be read, -ENOKEY when the client's certificate or key cannot be
 * used (unreadable, mismatched, readable by others, one without the
 * other), -EKEYREJECTED when the server refused the handshake over the
 * client's certificate (none sent where it asks for one, or one it does
 * not trust), -EPROTO for any other failure. files may be NULL. */
int tls_client_open(int fd, const char *host, const struct tls_client_files *files,
                    uint64_t deadline, struct tls_client **ret, struct cap_error *err);
/* Bytes read (> 0), 0 at the end of the stream, -EAGAIN when the socket
 * must be waited for first, -EKEYREJECTED when the server ended it over
 * the client's certificate (TLS 1.3 checks it after the client's side of
 * the handshake is done), -EPROTO when the stream is broken otherwise. */
ssize_t tls_client_read(struct tls_client *c, void *buf, size_t len);
/* Bytes written (> 0), -EAGAIN, -EKEYREJECTED (as for read), or -EPIPE. */
ssize_t tls_client_write(struct tls_client *c, const void *buf, size_t len);
/* Decrypted bytes waiting in the client (read them before polling). */
size_t tls_client_pending(const struct tls_client *c);
void tls_client_free(struct tls_client *c);

#endif
