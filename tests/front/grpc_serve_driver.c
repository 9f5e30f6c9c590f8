/* A host for the gRPC server module with a handler of the test's own:
 * `grpc_serve_driver ADDRESS TOKEN [CERT KEY]` serves until SIGTERM,
 * printing "port N" once it listens. A call without the token is
 * UNAUTHENTICATED (the server's authenticate, and the handler's check); HealthCheck is healthy;
 * Invoke of "echo" answers {"tool":...,"parameters":...,"context":{...}}, of "fail" a tool error,
 * of "slow" the same after 300 ms, anything else NOT_FOUND; UploadInputArtifact answers the chunks'
 * count and first name and the bytes' sum, DownloadOutputArtifact of "N" sends N chunks; a stream
 * idle 1 s is cancelled. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/json.h"
#include "front/grpc_serve.h"

static const char *token;

/* the server's own check, before a call's body: a call without the token
 * is refused there (and past 32 refusals its connection ends) */
static char *authenticate(void *arg, const char *bearer)
{
  (void)arg;
  return bearer && strcmp(bearer, token) == 0 ? strdup("user") : NULL;
}

static void handler(void *arg, const struct grpc_serve_call *call, struct grpc_serve_answer *a)
{
  (void)arg;
  if (!call->bearer || strcmp(call->bearer, token) != 0) {
    a->status = GRPC_SERVE_UNAUTHENTICATED;
    a->status_message = cap_xstrdup("a bearer token is needed");
    return;
  }
  if (call->health) { /* either service's */
    a->success = true;
    return;
  }
  if (call->method == GRPC_SERVE_CAP_UPLOAD) { /* the chunks counted and summed */
    struct grpc_serve_chunk c;
    int n = 0, got;
    char first[128] = "";
    while ((got = call->recv_chunk(call->stream, &c)) > 0) {
      if (!n++)
        snprintf(first, sizeof first, "%s %s", c.filename, c.mime_type);
      a->size += c.len;
    }
    if (got < 0) {
      printf("upload failed after %d chunks\n", n); /* the stall test waits for this line */
      fflush(stdout);
      a->status = GRPC_SERVE_INVALID_ARGUMENT;
      a->status_message = cap_xstrdup("the stream failed");
      return;
    }
    a->result = cap_xasprintf("%d chunks, first %s", n, first);
    return;
  }
  if (call->method == GRPC_SERVE_CAP_DOWNLOAD && strcmp(call->artifact_id, "big") == 0) {
    static uint8_t block[256 << 10]; /* "big": 64 chunks of 256 KiB, chunk i all bytes i */
    for (int i = 0; i < 64; i++) {
      memset(block, i, sizeof block);
      struct grpc_serve_chunk c = {.data = block, .len = sizeof block, .done = i == 63};
      if (!call->send_chunk(call->stream, &c))
        break;
    }
    return;
  }
  if (call->method == GRPC_SERVE_CAP_DOWNLOAD) { /* "N": N chunks "0".."N-1", the last done */
    int n = atoi(call->artifact_id);
    for (int i = 0; i < n; i++) {
      char d[16];
      snprintf(d, sizeof d, "%d", i);
      struct grpc_serve_chunk c = {.data = (const uint8_t *)d,
                                   .len = strlen(d),
                                   .filename = i ? "" : "n.txt",
                                   .mime_type = i ? "" : "text/plain",
                                   .done = i == n - 1};
      if (!call->send_chunk(call->stream, &c))
        break;
    }
    if (n <= 0) {
      struct grpc_serve_chunk e = {.done = true, .error = "no such artifact"};
      call->send_chunk(call->stream, &e);
    }
    return;
  }
  if (strcmp(call->tool_name, "slow") == 0) {
    printf("handling slow\n"); /* the drain test waits for this line */
    fflush(stdout);
    usleep(300000);
  }
  if (strcmp(call->tool_name, "echo") == 0 || strcmp(call->tool_name, "slow") == 0) {
    struct cap_buf b = {0};
    cap_buf_puts(&b, "{\"tool\":");
    cap_json_quote(&b, call->tool_name, strlen(call->tool_name));
    cap_buf_puts(&b, ",\"parameters\":");
    cap_json_quote(&b, call->parameters, strlen(call->parameters));
    cap_buf_puts(&b, ",\"context\":{");
    for (size_t i = 0; i < call->n_context; i++) {
      cap_buf_puts(&b, i ? "," : "");
      cap_json_quote(&b, call->context_keys[i], strlen(call->context_keys[i]));
      cap_buf_putc(&b, ':');
      cap_json_quote(&b, call->context_values[i], strlen(call->context_values[i]));
    }
    cap_buf_puts(&b, "}}");
    a->result = b.data;
    a->success = true;
  } else if (strcmp(call->tool_name, "fail") == 0) {
    a->error = cap_xstrdup("the tool failed on purpose");
  } else {
    a->status = GRPC_SERVE_NOT_FOUND;
    a->status_message = cap_xasprintf("no tool %s", call->tool_name);
  }
}

int main(int argc, char **argv)
{
  if (argc != 3 && argc != 5) {
    fprintf(stderr, "usage: %s ADDRESS TOKEN [CERT KEY]\n", argv[0]);
    return 2;
  }
  token = argv[2];
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* the server's threads inherit it */
  struct grpc_serve_options opt = {.address = argv[1],
                                   .tls_cert = argc == 5 ? argv[3] : NULL,
                                   .tls_key = argc == 5 ? argv[4] : NULL,
                                   .max_calls = 8,
                                   .max_message = 1 << 20,
                                   .stream_idle_ms = 1000, /* the stall tests' */
                                   .handler = handler,
                                   .authenticate = authenticate};
  struct grpc_serve *s = NULL;
  struct cap_error err = {0};
  int port = 0;
  if (grpc_serve_start(&opt, &s, &port, &err) < 0) {
    fprintf(stderr, "grpc_serve_driver: %s\n", err.message);
    cap_error_clear(&err);
    return 1;
  }
  printf("port %d\n", port);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  grpc_serve_stop(s, 2000);
  printf("stopped\n");
  return 0;
}
