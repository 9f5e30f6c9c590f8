/* The verified TLS client (tls_client.h), in the proxy's module. */
#include "net/tls_client.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"
#include "net/tls.h"

struct tls_client {
  SSL_CTX *ctx;
  SSL *ssl;
  bool asked; /* the server asked for a certificate and the client had none */
};

static int left_ms(uint64_t deadline)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  return now >= deadline ? 0 : deadline - now > 600000 ? 600000 : (int)(deadline - now);
}

/* The client's certificate and key: both or neither, the key private
 * (like ssh's identity files: one others may read is refused). */
static int client_identity(SSL_CTX *ctx, const struct tls_client_files *f, struct cap_error *err)
{
  char buf[256];
  struct stat sb;
  if (!f->cert_file != !f->key_file)
    return cap_error_set(err, ENOKEY,
                         "a client certificate needs its key and a key its certificate: "
                         "give both (%s is missing)",
                         f->cert_file ? "the key" : "the certificate");
  if (stat(f->key_file, &sb) == 0 && (sb.st_mode & 077))
    return cap_error_set(err, ENOKEY,
                         "%s is a private key that others may read or write (mode %04o); "
                         "`chmod 600 %s`",
                         f->key_file, (unsigned)(sb.st_mode & 07777), f->key_file);
  if (SSL_CTX_use_certificate_chain_file(ctx, f->cert_file) != 1)
    return cap_error_set(err, ENOKEY, "cannot read the client certificate %s (PEM): %s",
                         f->cert_file, tls_last_error(buf, sizeof buf));
  unsigned long e = 0; /* a key that is not the certificate's: said below */
  if (SSL_CTX_use_PrivateKey_file(ctx, f->key_file, SSL_FILETYPE_PEM) != 1 &&
      (e = ERR_peek_last_error(),
       ERR_GET_LIB(e) != ERR_LIB_X509 || ERR_GET_REASON(e) != X509_R_KEY_VALUES_MISMATCH))
    return cap_error_set(err, ENOKEY, "cannot read the client key %s (PEM): %s", f->key_file,
                         tls_last_error(buf, sizeof buf));
  ERR_clear_error();
  if (SSL_CTX_check_private_key(ctx) != 1)
    return cap_error_set(err, ENOKEY, "the client key %s is not the key of the certificate %s",
                         f->key_file, f->cert_file);
  return 0;
}

/* The server asked for a certificate the client does not have: noted, so
 * a refusal can say what is missing (a server may also take none). */
static int no_certificate(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
  (void)x509, (void)pkey;
  struct tls_client *c = SSL_get_app_data(ssl);
  if (c)
    c->asked = true;
  return 0;
}

static SSL_CTX *client_ctx(const struct tls_client_files *f, struct cap_error *err)
{
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  char buf[256];
  if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_default_verify_paths(ctx) != 1) {
    SSL_CTX_free(ctx);
    cap_error_set(err, EPROTO, "cannot set up TLS: %s", tls_last_error(buf, sizeof buf));
    return NULL;
  }
  if (f->ca_file && SSL_CTX_load_verify_locations(ctx, f->ca_file, NULL) != 1) {
    SSL_CTX_free(ctx);
    cap_error_set(err, ENOENT, "cannot read the CA file %s (PEM certificates): %s", f->ca_file,
                  tls_last_error(buf, sizeof buf));
    return NULL;
  }
  if ((f->cert_file || f->key_file) && client_identity(ctx, f, err) < 0) {
    SSL_CTX_free(ctx);
    return NULL;
  }
  if (!f->cert_file)
    SSL_CTX_set_client_cert_cb(ctx, no_certificate);
  /* a server closing after its answer without close_notify: the HTTP
   * framing (Content-Length, chunks) tells a whole answer from a cut one */
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  return ctx;
}

/* Did the server end the connection over the client's certificate? Its
 * alert says so (TLS 1.3: certificate_required; a certificate it does not
 * take: bad_certificate, unknown_ca, certificate_unknown...), or a bare
 * handshake failure after it asked for one the client did not have. */
static bool certificate_refused(const struct tls_client *c)
{
  unsigned long e = ERR_peek_last_error();
  if (ERR_GET_LIB(e) != ERR_LIB_SSL)
    return false;
  switch (ERR_GET_REASON(e)) {
  case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
  case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
  case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
  case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
  case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
  case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
  case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
  case SSL_R_TLSV1_ALERT_ACCESS_DENIED: return true;
  case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE: return c->asked;
  default: return false;
  }
}

/* Why the handshake failed: the certificate's verdict first. */
static int handshake_error(struct tls_client *c, const char *host, struct cap_error *err)
{
  long v = SSL_get_verify_result(c->ssl);
  char buf[256];
  if (certificate_refused(c)) {
    return cap_error_set(
        err, EKEYREJECTED,
        "%s refused the handshake over the client's "
        "certificate (%s): %s",
        host, c->asked ? "it asks for one and none is set" : "it does not take the one given",
        tls_last_error(buf, sizeof buf));
  }
  if (v != X509_V_OK) {
    ERR_clear_error();
    return cap_error_set(err, EACCES, "the certificate of %s is not trusted: %s", host,
                         X509_verify_cert_error_string(v));
  }
  return cap_error_set(err, EPROTO, "the TLS handshake with %s failed: %s", host,
                       tls_last_error(buf, sizeof buf));
}

int tls_client_open(int fd, const char *host, const struct tls_client_files *files,
                    uint64_t deadline, struct tls_client **ret, struct cap_error *err)
{
  *ret = NULL;
  static const struct tls_client_files none;
  struct tls_client *c = calloc(1, sizeof *c);
  if (!c)
    return cap_error_set(err, ENOMEM, "out of memory");
  c->ctx = client_ctx(files ? files : &none, err);
  if (!c->ctx) {
    int code = err->code;
    tls_client_free(c);
    return -code;
  }
  c->ssl = SSL_new(c->ctx);
  if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1 || SSL_set_app_data(c->ssl, c) != 1 ||
      tls_client_expect_host(c->ssl, host) < 0) {
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
  bool refused = e == SSL_ERROR_SSL && certificate_refused(c);
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return -EAGAIN;
  return e == SSL_ERROR_ZERO_RETURN ? 0 : refused ? -EKEYREJECTED : -EPROTO;
}

ssize_t tls_client_write(struct tls_client *c, const void *buf, size_t len)
{
  int n = SSL_write(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  if (n > 0)
    return n;
  int e = SSL_get_error(c->ssl, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    return -EAGAIN;
  }
  if (e != SSL_ERROR_SSL) { /* the server may have said why before it closed: read its alert */
    char byte;
    ERR_clear_error();
    e = SSL_get_error(c->ssl, SSL_read(c->ssl, &byte, 1));
  }
  bool refused = e == SSL_ERROR_SSL && certificate_refused(c);
  ERR_clear_error();
  return refused ? -EKEYREJECTED : -EPIPE;
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
