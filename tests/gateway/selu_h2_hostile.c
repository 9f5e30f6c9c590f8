/* The Selu client's transport (runtime/selu_h2.c) against a hostile
 * server: raw HTTP/2 written by a thread on a socketpair, whatever the
 * client sends. A flood of empty messages (each a 5-byte prefix, no
 * payload) fails the call past the output cap, unary or streamed, rather
 * than piling up in the call; a header block that HPACK expands far past
 * 64 KiB (a few bytes for each long header) fails the call too; a frame
 * that breaks HTTP/2 fails the call at once (not at its deadline) and the
 * connection. Each
 * server ends with a well-formed OK: a client that took it all would
 * report success. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/selu_h2.h"
#include "../unit/unit.h"

int unit_failures, unit_checks;

#define CAP 1024 /* the output cap: the floods are a thousand times that */

static void frame(struct cap_buf *b, uint8_t type, uint8_t flags, const void *p, size_t n)
{
  uint8_t stream = type == 4 ? 0 : 1; /* SETTINGS on the connection, the rest on the call's */
  uint8_t h[9] = {(uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n, type, flags, 0, 0, 0, stream};
  cap_buf_append(b, (const char *)h, 9);
  cap_buf_append(b, p, n);
}

/* HPACK's literal without indexing, a new name (both under 127 bytes) */
static void literal(struct cap_buf *b, const char *name, const char *value)
{
  cap_buf_putc(b, 0);
  cap_buf_putc(b, (char)strlen(name));
  cap_buf_append(b, name, strlen(name));
  cap_buf_putc(b, (char)strlen(value));
  cap_buf_append(b, value, strlen(value));
}

/* A header block on stream 1: HEADERS, then CONTINUATIONs of 16 KiB. */
static void headers(struct cap_buf *b, const struct cap_buf *block, bool end_stream)
{
  size_t off = 0;
  do {
    size_t n = block->len - off > 16384 ? 16384 : block->len - off;
    bool last = off + n == block->len;
    uint8_t flags = (uint8_t)((last ? 4 : 0) | (off == 0 && end_stream ? 1 : 0));
    frame(b, off == 0 ? 1 : 9, flags, block->data + off, n);
    off += n;
  } while (off < block->len);
}

static void answer_headers(struct cap_buf *b)
{
  struct cap_buf block = {0};
  literal(&block, ":status", "200");
  literal(&block, "content-type", "application/grpc");
  headers(b, &block, false);
  cap_buf_free(&block);
}

static void ok_trailers(struct cap_buf *b)
{
  struct cap_buf block = {0};
  literal(&block, "grpc-status", "0");
  headers(b, &block, true);
  cap_buf_free(&block);
}

/* One answer, then 2 MiB of empty messages, then OK. */
static void empty_flood(struct cap_buf *b)
{
  answer_headers(b);
  frame(b, 0, 0, "\0\0\0\0\2\x0a\0", 7);
  static uint8_t empties[16380]; /* 3276 empty messages */
  for (int i = 0; i < 128; i++)
    frame(b, 0, 0, empties, sizeof empties);
  ok_trailers(b);
}

/* One answer, then trailers whose header block HPACK expands to 64 MiB:
 * a 4000-byte header put in the dynamic table, then named by one byte
 * each 16000 times. */
static void header_bomb(struct cap_buf *b)
{
  answer_headers(b);
  frame(b, 0, 0, "\0\0\0\0\2\x0a\0", 7);
  struct cap_buf block = {0};
  literal(&block, "grpc-status", "0");
  cap_buf_append(&block, "\x40\x05x-pad\x7f\xa1\x1e", 10); /* indexed as 62, 4000 bytes */
  for (int i = 0; i < 4000; i++)
    cap_buf_putc(&block, 'a');
  for (int i = 0; i < 16000; i++)
    cap_buf_putc(&block, (char)(0x80 | 62));
  headers(b, &block, true);
  cap_buf_free(&block);
}

/* One answer's headers, then SETTINGS on the call's stream: a connection
 * error (RFC 9113 6.5) that nghttp2 answers with GOAWAY, not an error of
 * its mem_recv's. */
static void broken(struct cap_buf *b)
{
  answer_headers(b);
  uint8_t h[9] = {0, 0, 0, 4, 0, 0, 0, 0, 1};
  cap_buf_append(b, (const char *)h, 9);
}

struct server {
  int fd;
  struct cap_buf bytes;
};

static void *serve(void *arg) /* writes until done or the client closed */
{
  struct server *s = arg;
  for (size_t off = 0; off < s->bytes.len;) {
    ssize_t n = send(s->fd, s->bytes.data + off, s->bytes.len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    off += (size_t)n;
  }
  return NULL;
}

static void *drain(void *arg) /* reads what the client sends, so it never blocks */
{
  int fd = *(int *)arg;
  char buf[16384];
  while (read(fd, buf, sizeof buf) > 0)
    ;
  return NULL;
}

/* One call against the server's bytes: its errno (0: the call succeeded)
 * and how many messages it returned. */
static int against(void (*server)(struct cap_buf *), bool stream, long *messages, char *why,
                   size_t whylen, bool *usable)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  int peer = dup(sv[1]);
  struct server s = {.fd = sv[1]};
  frame(&s.bytes, 4, 0, "", 0); /* the server's SETTINGS */
  server(&s.bytes);
  pthread_t writer, reader;
  pthread_create(&writer, NULL, serve, &s);
  pthread_create(&reader, NULL, drain, &peer);
  struct h2_conn *c = NULL;
  struct cap_error err = {0};
  if (h2_open(sv[0], CAP, &c, &err) < 0)
    abort();
  struct h2_call *k = h2_call_start(c, "/selu.capability.v1.Capability/Invoke", 30000, NULL);
  int r = h2_call_send(k, (const uint8_t *)"\x0a\x01x", 3, true, &err);
  struct cap_buf msg = {0};
  *messages = 0;
  while (r == 0) {
    int got = h2_call_recv(k, &msg, &err);
    if (got <= 0) {
      r = got;
      break;
    }
    ++*messages;
    if (!stream)
      break;
  }
  int code = -1;
  const char *text = "";
  if (r == 0 && h2_call_status(k, &code, &text, &err) == 0)
    r = code == H2_GRPC_OK ? 0 : -EPROTO;
  else if (r == 0)
    r = -err.code;
  snprintf(why, whylen, "%s", err.message ? err.message : "");
  cap_error_clear(&err);
  cap_buf_free(&msg);
  h2_call_free(k);
  if (usable)
    *usable = h2_usable(c);
  h2_close(c); /* the writer's send fails now, the reader's read ends */
  shutdown(peer, SHUT_RDWR);
  pthread_join(writer, NULL);
  pthread_join(reader, NULL);
  close(peer);
  close(sv[1]);
  cap_buf_free(&s.bytes);
  return -r;
}

int main(void)
{
  char why[200];
  long n = 0;
  int e = against(empty_flood, false, &n, why, sizeof why, NULL);
  CHECKF(e == EFBIG && strstr(why, "output cap"), "unary, empty messages: errno %d, %s", e, why);
  e = against(empty_flood, true, &n, why, sizeof why, NULL);
  CHECKF(e == EFBIG && n <= CAP / 5 + 1, "streamed, empty messages: errno %d after %ld, %s", e, n,
         why);
  e = against(header_bomb, false, &n, why, sizeof why, NULL);
  CHECKF(e == EPROTO && strstr(why, "headers"), "a header bomb: errno %d, %s", e, why);
  bool usable = true;
  e = against(broken, false, &n, why, sizeof why, &usable);
  CHECKF(e == ECONNRESET && strstr(why, "broke HTTP/2") && !usable,
         "a connection error: errno %d, %s, the connection %s", e, why,
         usable ? "still usable" : "unusable");
  if (unit_failures) {
    fprintf(stderr, "selu_h2_hostile: %d failure(s)\n", unit_failures);
    return 1;
  }
  printf("selu_h2_hostile: ok\n");
  return 0;
}
