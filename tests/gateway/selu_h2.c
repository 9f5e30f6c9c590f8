/* The Selu client's transport (runtime/selu_h2.c, through selu_rpc.h)
 * against a gRPC server it did not write: tests/gateway/selu_fault, on
 * gRPC's C core, started here on loopback. One channel carries calls from
 * eight threads at once, each answer its own; a call past its deadline,
 * a cancelled call, an answer over the cap and a refused method each fail
 * as such and leave the channel usable; both contracts and StreamInvoke
 * answer; a server that dies mid-call fails the call and the channel.
 * Usage: selu_h2 SELU_FAULT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cancel.h"
#include "runtime/selu_rpc.h"
#include "../unit/unit.h"

int unit_failures, unit_checks;

static uint16_t port;

static int dial(void)
{
  for (int i = 0; i < 200; i++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
      return fd;
    if (fd >= 0)
      close(fd);
    nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
  }
  return -1;
}

static struct selu_channel *channel(size_t cap)
{
  struct selu_channel *ch = NULL;
  struct cap_error err = {0};
  int fd = dial();
  if (fd < 0 || selu_channel_open(fd, cap, &ch, &err) < 0) {
    fprintf(stderr, "selu_h2: cannot reach the server: %s\n",
            err.message ? err.message : "connect");
    exit(1);
  }
  return ch;
}

/* One call: its errno (0 on success, *out the result then). */
static int call(struct selu_channel *ch, enum selu_protocol proto, bool stream, const char *tool,
                const char *args, int timeout_ms, struct cap_cancel *cancel, char **out, char **msg)
{
  struct selu_invoke_args a = {
      .tool = tool, .args_json = args, .session_id = "s", .user_id = "u", .cancel = cancel};
  struct selu_response resp = {0};
  struct cap_error err = {0};
  int r = selu_invoke(ch, proto, stream, &a, timeout_ms, &resp, &err);
  if (r == 0 && !resp.success)
    r = -EIO;
  if (out)
    *out = r == 0 ? strdup(resp.result) : NULL;
  if (msg)
    *msg = strdup(err.message ? err.message : resp.error ? resp.error : "");
  selu_response_free(&resp);
  cap_error_clear(&err);
  return -r;
}

struct worker {
  struct selu_channel *ch;
  int id, bad;
};

static void *many(void *arg)
{
  struct worker *w = arg;
  for (int i = 0; i < 40; i++) {
    char args[64], want[64], *out = NULL;
    snprintf(args, sizeof args, "{\"w\":%d,\"i\":%d}", w->id, i);
    snprintf(want, sizeof want, "\"parameters\":{\"w\":%d,\"i\":%d}", w->id, i);
    int e = call(w->ch, i % 2 ? SELU_PROTOCOL_CAPABILITY : SELU_PROTOCOL_SERVICE, i % 4 == 1,
                 "echo", args, 10000, NULL, &out, NULL);
    if (e || !out || !strstr(out, want))
      w->bad++;
    free(out);
  }
  return NULL;
}

struct canceller {
  struct cap_cancel *c;
};

static void *cancel_soon(void *arg)
{
  nanosleep(&(struct timespec){.tv_nsec = 200000000}, NULL);
  cap_cancel_fire(((struct canceller *)arg)->c);
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: selu_h2 SELU_FAULT\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
      getsockname(s, (struct sockaddr *)&a, &al) < 0)
    return perror("selu_h2: a free port"), 1;
  port = ntohs(a.sin_port);
  close(s);
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
  pid_t server = fork();
  if (server == 0) {
    execl(argv[1], argv[1], addr, (char *)NULL);
    _exit(127);
  }

  struct selu_channel *ch = channel(1 << 20);
  enum selu_protocol proto = SELU_PROTOCOL_UNKNOWN;
  bool healthy = false;
  struct cap_error err = {0};
  CHECKF(selu_health(ch, 5000, &proto, &healthy, &err) == 0 && healthy &&
             proto == SELU_PROTOCOL_CAPABILITY,
         "health: %s", err.message ? err.message : "not healthy");
  cap_error_clear(&err);

  /* eight threads on one channel: every answer its own call's */
  struct worker w[8];
  pthread_t t[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (struct worker){.ch = ch, .id = i};
    pthread_create(&t[i], NULL, many, &w[i]);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(t[i], NULL);
    CHECKF(w[i].bad == 0, "thread %d: %d of 40 answers wrong or failed", i, w[i].bad);
  }

  char *out = NULL, *msg = NULL;
  int e =
      call(ch, SELU_PROTOCOL_CAPABILITY, false, "sleep", "{\"ms\":3000}", 300, NULL, NULL, &msg);
  CHECKF(e == ETIMEDOUT && strstr(msg, "deadline"), "deadline: errno %d, %s", e, msg);
  free(msg);
  CHECKF(selu_channel_usable(ch), "the channel is unusable after a deadline");

  struct cap_cancel cancel;
  cap_cancel_init(&cancel);
  struct canceller cc = {.c = &cancel};
  pthread_t ct;
  pthread_create(&ct, NULL, cancel_soon, &cc);
  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "sleep", "{\"ms\":5000}", 20000, &cancel, NULL,
           &msg);
  pthread_join(ct, NULL);
  CHECKF(e == ECANCELED && strstr(msg, "cancelled"), "cancel: errno %d, %s", e, msg);
  free(msg);
  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "ok", "{}", 5000, &cancel, NULL, &msg);
  CHECKF(e == ECANCELED, "a call with a fired token started: errno %d, %s", e, msg);
  free(msg);
  cap_cancel_destroy(&cancel);

  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "big", "{\"bytes\":3000000}", 10000, NULL, NULL,
           &msg);
  CHECKF(e == EFBIG && strstr(msg, "output cap"), "over the cap: errno %d, %s", e, msg);
  free(msg);
  e = call(ch, SELU_PROTOCOL_CAPABILITY, true, "big", "{\"bytes\":3000000}", 10000, NULL, NULL,
           &msg);
  CHECKF(e == EFBIG, "a stream over the cap: errno %d, %s", e, msg);
  free(msg);
  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "big", "{\"bytes\":500000}", 10000, NULL, &out,
           &msg);
  CHECKF(e == 0 && out && strlen(out) >= 500000, "under the cap: errno %d, %s", e, msg);
  free(out);
  free(msg);
  e = call(ch, SELU_PROTOCOL_CAPABILITY, true, "echo", "{\"x\":1}", 10000, NULL, &out, &msg);
  CHECKF(e == 0 && out && strstr(out, "\"streamed\":true"), "StreamInvoke: errno %d, %s", e, msg);
  free(out);
  free(msg);
  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "fail", "{}", 10000, NULL, NULL, &msg);
  CHECKF(e == EIO && *msg, "a tool's failure: errno %d, %s", e, msg);
  free(msg);
  CHECKF(selu_channel_usable(ch), "the channel is unusable after refused calls");

  char *id = NULL;
  const char text[] = "artifact bytes";
  int r = selu_artifact_upload(ch, "a.txt", "text/plain", text, sizeof text - 1, 10000, &id, &err);
  CHECKF(r == -ENOSYS || r == 0, "upload: %d %s", r, err.message ? err.message : "");
  cap_error_clear(&err);
  free(id);

  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "crash", "{}", 10000, NULL, NULL, &msg);
  CHECKF(e == ECONNRESET && strstr(msg, "went away"), "crash: errno %d, %s", e, msg);
  free(msg);
  CHECKF(!selu_channel_usable(ch), "the channel is usable after its server died");
  e = call(ch, SELU_PROTOCOL_CAPABILITY, false, "ok", "{}", 2000, NULL, NULL, &msg);
  CHECKF(e == ECONNRESET, "a call on a dead channel: errno %d, %s", e, msg);
  free(msg);
  selu_channel_close(ch);

  kill(server, SIGKILL);
  waitpid(server, NULL, 0);
  if (unit_failures)
    fprintf(stderr, "selu_h2: %d failed\n", unit_failures);
  else
    printf("selu_h2: all passed\n");
  return unit_failures ? 1 : 0;
}
