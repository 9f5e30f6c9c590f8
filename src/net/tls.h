/* TLS for the egress proxy's interception: a per-session certificate
 * authority made in memory (its key never leaves capsule's process and is
 * gone when the session ends), leaf certificates minted per host on first
 * use, and the client side that re-encrypts to the real upstream with
 * normal verification (the system's trust store; SSL_CERT_FILE and
 * SSL_CERT_DIR in capsule's own environment are honoured, as OpenSSL does). */
#ifndef CAPSULE_NET_TLS_H
#define CAPSULE_NET_TLS_H

#include <openssl/ssl.h>

#include "core/buf.h"
#include "core/error.h"

struct tls_ca;

int tls_ca_create(struct tls_ca **ret, struct cap_error *err);
void tls_ca_free(struct tls_ca *ca);

/* The bundle the sandbox trusts: the host's system certificates (so end to
 * end tunnels still verify) followed by the session CA. */
void tls_ca_bundle(const struct tls_ca *ca, struct cap_buf *out);

/* A server context presenting a leaf for host (a DNS name or an IP
 * literal), minted on first use and cached; the caller gets a reference of
 * its own (SSL_CTX_free it). NULL on failure. Thread-safe. */
SSL_CTX *tls_ca_server_ctx(struct tls_ca *ca, const char *host);

/* The upstream side: TLS 1.2+, peer verified, ALPN http/1.1. Owned by the CA. */
SSL_CTX *tls_client_ctx(struct tls_ca *ca);

/* Prepares ssl to verify that the peer is host (name or IP literal) and
 * sends SNI for names. Returns 0, or -1. */
int tls_client_expect_host(SSL *ssl, const char *host);

/* The reason of the last TLS failure on this thread, for logs. */
const char *tls_last_error(char *buf, size_t size);

#endif
