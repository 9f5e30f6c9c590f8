/* libFuzzer target for what a gRPC client sends capsule's server
 * (front/grpc_serve_conn.c and grpc_serve_call.c over nghttp2): the input
 * is the client's side of a connection (its preface and frames; its end
 * once all is read and answered), read by the connection's reader; each
 * request that becomes ready is answered on this thread by an echoing handler (Invoke and health
 * checks, the artifact streams' chunks). Its first byte picks a small or
 * a large message cap, whether a token is needed and whether the bodies
 * held are bounded to 256 bytes. Whatever comes, the
 * connection ends, every stream is freed, and nothing leaks. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "front/grpc_serve_h2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *authenticate(void *arg, const char *bearer)
{
  (void)arg;
  return bearer && strcmp(bearer, "t0k") == 0 ? strdup("fuzz") : NULL;
}

/* Echoes what the request says; streams every chunk it is given back. */
static void handler(void *arg, const struct grpc_serve_call *call, struct grpc_serve_answer *a)
{
  (void)arg;
  if (call->recv_chunk) {
    struct grpc_serve_chunk ch;
    uint64_t n = 0;
    while (call->recv_chunk(call->stream, &ch) > 0)
      n += ch.len;
    a->result = strdup("id");
    a->size = n;
    return;
  }
  if (call->send_chunk) {
    struct grpc_serve_chunk ch = {.filename = "f",
                                  .mime_type = "text/plain",
                                  .data = (const uint8_t *)"abc",
                                  .len = 3,
                                  .done = true};
    call->send_chunk(call->stream, &ch);
    return;
  }
  a->success = true;
  a->result = strdup(call->parameters ? call->parameters : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  static struct grpc_serve s;
  static bool once;
  if (!once) {
    once = true;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.idle, NULL);
    pthread_cond_init(&s.work, NULL);
    s.tail = &s.head;
    s.opt.handler = handler;
    s.opt.max_calls = 8;
  }
  s.lim = (struct gs_limits){.max_message = data[0] & 1 ? 64 : 1 << 20,
                             .held_max = data[0] & 4 ? 256 : SIZE_MAX, /* bodies past it refused */
                             .stream_idle_ms = 1,
                             .authenticate = data[0] & 2 ? authenticate : NULL};
  s.opt.authenticate = s.lim.authenticate;
  data++, size--;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  int big = 1 << 20;
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big); /* the answers, never read */
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  for (size_t off = 0; off < size;) { /* the client's bytes, then its end */
    ssize_t n = write(sv[1], data + off, size - off);
    if (n <= 0)
      abort();
    off += (size_t)n;
  }
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  struct gs_conn *c = gs_conn_new(&s, sv[0], NULL, "fuzz");
  if (!c)
    abort();
  c->refs = 1; /* the reader's, this thread's */
  s.list = c;
  s.conns = 1;
  bool ended = false;
  for (int round = 0; round < 1000; round++) {
    bool alive = gs_conn_pump(c, 0);       /* under c->mu on return */
    if (!ended && !c->ready && !c->more) { /* all read and answered: the client's end */
      shutdown(sv[1], SHUT_WR);
      ended = true;
    }
    if (alive)
      gs_conn_sweep(c, cap_now_us(CLOCK_MONOTONIC));
    struct gs_stream *ready = c->ready;
    c->ready = NULL;
    c->ready_tail = &c->ready;
    for (struct gs_stream *k = ready; k; k = k->ready_next) {
      k->dispatched = true;
      c->refs++;
      c->calls++;
    }
    pthread_mutex_unlock(&c->mu);
    for (struct gs_stream *k = ready, *next; k; k = next) {
      next = k->ready_next;
      gs_answer(k);
    }
    if (!alive)
      break;
  }
  pthread_mutex_lock(&c->mu);
  gs_conn_kill(c, "the input ended");
  gs_conn_unref_locked(c); /* frees it: nothing else refers to it */
  /* held: every body's count went back */
  if (s.conns != 0 || s.calls != 0 || s.held != 0)
    abort();
  close(sv[1]);
  return 0;
}
