/* Where the gRPC server listens (grpc_serve_h2.h): gRPC's address forms
 * ("host:port", "[v6]:port", "unix:/path") bound, and its TLS context
 * (TLS 1.2 or later, ALPN h2, no renegotiation). */
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "front/grpc_serve_h2.h"

static int alpn_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
  (void)ssl, (void)arg;
  for (unsigned i = 0; i < inlen; i += 1u + in[i]) {
    if (in[i] == 2 && i + 3 <= inlen && memcmp(in + i + 1, "h2", 2) == 0) {
      *out = in + i + 1;
      *outlen = 2;
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL; /* gRPC is HTTP/2 only */
}

static bool readable(const char *path, struct cap_error *err)
{
  FILE *f = fopen(path, "re");
  if (!f) {
    cap_error_errno(err, errno, "cannot read %s", path);
    return false;
  }
  fclose(f);
  return true;
}

int gs_tls_new(const struct grpc_serve_options *opt, SSL_CTX **ret, struct cap_error *err)
{
  *ret = NULL;
  if (!opt->tls_cert && !opt->tls_key)
    return 0;
  if (!opt->tls_cert || !opt->tls_key)
    return cap_error_set(err, EINVAL, "TLS needs both --tls-cert and --tls-key");
  if (!readable(opt->tls_cert, err) || !readable(opt->tls_key, err))
    return -(err->code ? err->code : EACCES);
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  bool ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
            SSL_CTX_use_certificate_chain_file(ctx, opt->tls_cert) == 1 &&
            SSL_CTX_use_PrivateKey_file(ctx, opt->tls_key, SSL_FILETYPE_PEM) == 1 &&
            SSL_CTX_check_private_key(ctx) == 1;
  if (!ok) {
    unsigned long e = ERR_get_error();
    char why[160] = "";
    if (e)
      ERR_error_string_n(e, why, sizeof why);
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return cap_error_set(err, EINVAL, "cannot use %s and %s as TLS certificate and key%s%s",
                         opt->tls_cert, opt->tls_key, *why ? ": " : "", why);
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_alpn_select_cb(ctx, alpn_h2, NULL);
  *ret = ctx;
  return 0;
}

static int listen_unix(struct grpc_serve *s, const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    return -ENAMETOOLONG;
  memcpy(a.sun_path, path, strlen(path) + 1);
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) /* a socket left by an earlier server */
    unlink(path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  s->lfd[s->n_lfd++] = fd;
  s->unix_path = cap_xstrdup(path);
  return 0;
}

/* host and port of "host:port" or "[v6]:port" (malloc'd host) */
static bool split(const char *address, char **host, char **port)
{
  const char *colon = strrchr(address, ':');
  if (!colon || !colon[1])
    return false;
  const char *h = address;
  size_t hl = (size_t)(colon - address);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  *host = cap_xstrndup(h, hl);
  *port = cap_xstrdup(colon + 1);
  return true;
}

/* Binds each address the host names, all on one port (the first's, for
 * ":0"): *port */
static int listen_tcp(struct grpc_serve *s, const char *address, int *port)
{
  char *host = NULL, *service = NULL;
  if (!split(address, &host, &service))
    return -EINVAL;
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int g = getaddrinfo(*host ? host : NULL, service, &hints, &res);
  free(host);
  free(service);
  if (g != 0)
    return -EADDRNOTAVAIL;
  int bound = 0, e = 0;
  for (struct addrinfo *ai = res; ai && s->n_lfd < GS_MAX_LISTEN; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6)
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bound) /* the same port on each */
      ((struct sockaddr_in *)ai->ai_addr)->sin_port = htons((uint16_t)bound);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      e = errno;
      close(fd);
      continue;
    }
    struct sockaddr_storage got;
    socklen_t len = sizeof got;
    if (!bound && getsockname(fd, (struct sockaddr *)&got, &len) == 0)
      bound = ntohs(((struct sockaddr_in *)&got)->sin_port); /* sin6_port sits at the same offset */
    s->lfd[s->n_lfd++] = fd;
  }
  freeaddrinfo(res);
  if (!s->n_lfd)
    return -(e ? e : EADDRNOTAVAIL);
  *port = bound;
  return 0;
}

int gs_listen(struct grpc_serve *s, struct cap_error *err, int *port)
{
  const char *address = s->opt.address;
  *port = 0;
  int r = strncmp(address, "unix://", 7) == 0 ? listen_unix(s, address + 7)
          : strncmp(address, "unix:", 5) == 0 ? listen_unix(s, address + 5)
                                              : listen_tcp(s, address, port);
  if (r == -EINVAL || r == -ENAMETOOLONG)
    return cap_error_set(err, EINVAL,
                         "cannot listen for gRPC on %s: %s (give HOST:PORT, [IPV6]:PORT or "
                         "unix:PATH)",
                         address, r == -EINVAL ? "no port" : "the socket's path is too long");
  if (r < 0)
    return cap_error_set(err, EADDRNOTAVAIL,
                         "cannot listen for gRPC on %s (in use, or not an address of this host)",
                         address);
  return 0;
}

void gs_close_listeners(struct grpc_serve *s)
{
  for (size_t i = 0; i < s->n_lfd; i++)
    close(s->lfd[i]);
  s->n_lfd = 0;
  if (s->unix_path)
    unlink(s->unix_path);
  free(s->unix_path);
  s->unix_path = NULL;
}
