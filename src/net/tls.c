#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/secret.h"
#include "core/text.h"

#define LEAF_CACHE 64
#define CA_DAYS 30

struct leaf {
  char *host;
  SSL_CTX *ctx;
};

struct tls_ca {
  EVP_PKEY *key; /* the CA's */
  X509 *cert;
  EVP_PKEY *leaf_key; /* one key for every leaf of the session */
  SSL_CTX *client;
  pthread_mutex_t lock;
  struct leaf leaves[LEAF_CACHE];
  size_t n_leaves;
};

const char *tls_last_error(char *buf, size_t size)
{
  unsigned long e = ERR_get_error();
  if (!e)
    snprintf(buf, size, "TLS handshake failed");
  else
    ERR_error_string_n(e, buf, size);
  ERR_clear_error();
  return buf;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
  if (!ext)
    return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

/* A certificate with a random serial, valid from an hour ago (clock skew)
 * for CA_DAYS, for subject CN cn, carrying pub. */
static X509 *new_cert(const char *cn, EVP_PKEY *pub)
{
  X509 *cert = X509_new();
  if (!cert)
    return NULL;
  unsigned char serial[16];
  BIGNUM *bn = NULL;
  ASN1_INTEGER *sn = NULL;
  bool ok = RAND_bytes(serial, sizeof serial) == 1;
  serial[0] &= 0x7f; /* positive */
  ok = ok && (bn = BN_bin2bn(serial, sizeof serial, NULL)) && (sn = BN_to_ASN1_INTEGER(bn, NULL)) &&
       X509_set_version(cert, 2) == 1 && X509_set_serialNumber(cert, sn) == 1 &&
       X509_gmtime_adj(X509_getm_notBefore(cert), -3600) &&
       X509_gmtime_adj(X509_getm_notAfter(cert), 60L * 60 * 24 * CA_DAYS) &&
       X509_set_pubkey(cert, pub) == 1;
  X509_NAME *name = X509_get_subject_name(cert);
  ok = ok &&
       X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"capsule", -1, -1,
                                  0) &&
       X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0);
  ASN1_INTEGER_free(sn);
  BN_free(bn);
  if (!ok) {
    X509_free(cert);
    return NULL;
  }
  return cert;
}

int tls_ca_create(struct tls_ca **ret, struct cap_error *err)
{
  cap_secret_hold(); /* the process holding the CA key is not dumpable, from before it exists */
  struct tls_ca *ca = cap_xcalloc(1, sizeof *ca);
  pthread_mutex_init(&ca->lock, NULL);
  unsigned char id[6];
  char cn[64];
  RAND_bytes(id, sizeof id);
  snprintf(cn, sizeof cn, "capsule session CA %02x%02x%02x%02x%02x%02x", id[0], id[1], id[2], id[3],
           id[4], id[5]);
  ca->key = EVP_EC_gen("P-256");
  ca->leaf_key = EVP_EC_gen("P-256");
  ca->cert = ca->key ? new_cert(cn, ca->key) : NULL;
  bool ok = ca->cert && ca->leaf_key &&
            X509_set_issuer_name(ca->cert, X509_get_subject_name(ca->cert)) == 1 &&
            add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
            add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") &&
            add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") &&
            X509_sign(ca->cert, ca->key, EVP_sha256()) > 0;
  if (ok) {
    ca->client = SSL_CTX_new(TLS_client_method());
    ok = ca->client && SSL_CTX_set_min_proto_version(ca->client, TLS1_2_VERSION) == 1 &&
         SSL_CTX_set_default_verify_paths(ca->client) == 1 &&
         SSL_CTX_set_alpn_protos(ca->client, (const unsigned char *)"\x08http/1.1", 9) == 0;
    if (ok)
      SSL_CTX_set_verify(ca->client, SSL_VERIFY_PEER, NULL);
  }
  if (!ok) {
    char buf[256];
    tls_ca_free(ca);
    return cap_error_set(err, EPROTO, "cannot create the session's TLS authority: %s",
                         tls_last_error(buf, sizeof buf));
  }
  *ret = ca;
  return 0;
}

void tls_ca_free(struct tls_ca *ca)
{
  if (!ca)
    return;
  for (size_t i = 0; i < ca->n_leaves; i++) {
    free(ca->leaves[i].host);
    SSL_CTX_free(ca->leaves[i].ctx);
  }
  SSL_CTX_free(ca->client);
  X509_free(ca->cert);
  EVP_PKEY_free(ca->key);
  EVP_PKEY_free(ca->leaf_key);
  pthread_mutex_destroy(&ca->lock);
  free(ca);
}

void tls_ca_bundle(const struct tls_ca *ca, struct cap_buf *out)
{
  const char *env = getenv(X509_get_default_cert_file_env());
  const char *system = env && *env ? env : X509_get_default_cert_file();
  char *text = NULL;
  size_t len = 0;
  struct cap_error ignored = {0};
  if (cap_read_file(system, 8u << 20, &text, &len, &ignored) == 0) {
    cap_buf_append(out, text, len);
    if (len && text[len - 1] != '\n')
      cap_buf_puts(out, "\n");
    free(text);
  }
  BIO *bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, ca->cert);
  char *pem;
  long n = BIO_get_mem_data(bio, &pem);
  cap_buf_append(out, pem, (size_t)n);
  BIO_free(bio);
}

static int alpn_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
  (void)ssl;
  (void)arg;
  static const unsigned char h11[] = "\x08http/1.1";
  unsigned char *sel;
  if (SSL_select_next_proto(&sel, outlen, h11, sizeof h11 - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK; /* no ALPN: HTTP/1.1 is assumed */
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *mint(struct tls_ca *ca, const char *host)
{
  unsigned char ip[16];
  bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
  char san[300];
  snprintf(san, sizeof san, "%s:%s", is_ip ? "IP" : "DNS", host);
  char cn[65]; /* a CN holds at most 64 characters; the SAN carries the full name */
  snprintf(cn, sizeof cn, "%s", host);
  X509 *leaf = new_cert(cn, ca->leaf_key);
  bool ok = leaf && X509_set_issuer_name(leaf, X509_get_subject_name(ca->cert)) == 1 &&
            add_ext(leaf, ca->cert, NID_basic_constraints, "critical,CA:FALSE") &&
            add_ext(leaf, ca->cert, NID_key_usage, "critical,digitalSignature") &&
            add_ext(leaf, ca->cert, NID_ext_key_usage, "serverAuth") &&
            add_ext(leaf, ca->cert, NID_subject_alt_name, san) &&
            add_ext(leaf, ca->cert, NID_authority_key_identifier, "keyid") &&
            X509_sign(leaf, ca->key, EVP_sha256()) > 0;
  SSL_CTX *ctx = ok ? SSL_CTX_new(TLS_server_method()) : NULL;
  ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
       SSL_CTX_use_certificate(ctx, leaf) == 1 && SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) == 1 &&
       SSL_CTX_add1_chain_cert(ctx, ca->cert) == 1;
  X509_free(leaf);
  if (!ok) {
    SSL_CTX_free(ctx);
    return NULL;
  }
  SSL_CTX_set_alpn_select_cb(ctx, alpn_http11, NULL);
  return ctx;
}

SSL_CTX *tls_ca_server_ctx(struct tls_ca *ca, const char *host)
{
  pthread_mutex_lock(&ca->lock);
  SSL_CTX *ctx = NULL;
  for (size_t i = 0; i < ca->n_leaves && !ctx; i++)
    if (strcasecmp(ca->leaves[i].host, host) == 0)
      ctx = ca->leaves[i].ctx;
  if (!ctx) {
    ctx = mint(ca, host);
    if (ctx && ca->n_leaves < LEAF_CACHE) {
      ca->leaves[ca->n_leaves++] = (struct leaf){.host = cap_xstrdup(host), .ctx = ctx};
    } else if (ctx) { /* cache full: evict the oldest; SSL objects hold their own reference */
      free(ca->leaves[0].host);
      SSL_CTX_free(ca->leaves[0].ctx);
      memmove(ca->leaves, ca->leaves + 1, (LEAF_CACHE - 1) * sizeof ca->leaves[0]);
      ca->leaves[LEAF_CACHE - 1] = (struct leaf){.host = cap_xstrdup(host), .ctx = ctx};
    }
  }
  if (ctx)
    SSL_CTX_up_ref(ctx); /* the caller's reference */
  pthread_mutex_unlock(&ca->lock);
  return ctx;
}

SSL_CTX *tls_client_ctx(struct tls_ca *ca) { return ca->client; }

int tls_client_expect_host(SSL *ssl, const char *host)
{
  unsigned char ip[16];
  if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1)
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -1;
  if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
    return -1;
  return 0;
}
