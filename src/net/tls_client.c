/* The verified TLS client (tls_client.h), in the proxy's module. */
#include "net/tls_client.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>

#include "core/clock.h"
#include "net/tls.h"

struct tls_client {
  SSL_CTX *ctx;
  SSL *ssl;
};

static int left_ms(uint64_t deadline)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  return now >= deadline ? 0 : deadline - now > 600000 ? 600000 : (int)(deadline - now);
}

static SSL_CTX *client_ctx(const char *ca_file, struct cap_error *err)
{
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  char buf[256];
  if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_default_verify_paths(ctx) != 1) {
    SSL_CTX_free(ctx);
    cap_error_set(err, EPROTO, "cannot set up TLS: %s", tls_last_error(buf, sizeof buf));
    return NULL;
  }
  if (ca_file && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
    SSL_CTX_free(ctx);
    cap_error_set(err, ENOENT, "cannot read the CA file %s (PEM certificates): %s", ca_file,
                  tls_last_error(buf, sizeof buf));
    return NULL;
  }
  /* a server closing after its answer without close_notify: the HTTP
   * framing (Content-Length, chunks) tells a whole answer from a cut one */
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  return ctx;
}

/* Why the handshake failed: the certificate's verdict first. */
static int handshake_error(struct tls_client *c, const char *host, struct cap_error *err)
{
  long v = SSL_get_verify_result(c->ssl);
  char buf[256];
  if (v != X509_V_OK) {
    ERR_clear_error();
    return cap_error_set(err, EACCES, "the certificate of %s is not trusted: %s", host,
                         X509_verify_cert_error_string(v));
  }
  return cap_error_set(err, EPROTO, "the TLS handshake with %s failed: %s", host,
                       tls_last_error(buf, sizeof buf));
}

int tls_client_open(int fd, const char *host, const char *ca_file, uint64_t deadline,
                    struct tls_client **ret, struct cap_error *err)
{
  *ret = NULL;
  struct tls_client *c = calloc(1, sizeof *c);
  if (!c)
    return cap_error_set(err, ENOMEM, "out of memory");
  c->ctx = client_ctx(ca_file, err);
  if (!c->ctx) {
    int code = err->code;
    tls_client_free(c);
    return -code;
  }
  c->ssl = SSL_new(c->ctx);
  if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1 || tls_client_expect_host(c->ssl, host) < 0) {
    tls_client_free(c);
    return cap_error_set(err, EPROTO, "cannot set up TLS for %s", host);
  }
  for (;;) {
    int r = SSL_connect(c->ssl);
    if (r == 1)
      break;
    int e = SSL_get_error(c->ssl, r);
    struct pollfd p = {fd, e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, 0};
    if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
        poll(&p, 1, left_ms(deadline)) != 1) {
      int rc = e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE
                   ? cap_error_set(err, ETIMEDOUT,
                                   "the TLS handshake with %s did not finish in "
                                   "time",
                                   host)
                   : handshake_error(c, host, err);
      tls_client_free(c);
      return rc;
    }
  }
  *ret = c;
  return 0;
}

ssize_t tls_client_read(struct tls_client *c, void *buf, size_t len)
{
  int n = SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  if (n > 0)
    return n;
  int e = SSL_get_error(c->ssl, n);
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return -EAGAIN;
  return e == SSL_ERROR_ZERO_RETURN ? 0 : -EPROTO;
}

ssize_t tls_client_write(struct tls_client *c, const void *buf, size_t len)
{
  int n = SSL_write(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  if (n > 0)
    return n;
  int e = SSL_get_error(c->ssl, n);
  ERR_clear_error();
  return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -EAGAIN : -EPIPE;
}

size_t tls_client_pending(const struct tls_client *c) { return (size_t)SSL_pending(c->ssl); }

void tls_client_free(struct tls_client *c)
{
  if (!c)
    return;
  SSL_free(c->ssl);
  SSL_CTX_free(c->ctx);
  free(c);
}
