/* One Selu Invoke straight to a capability's server, without capsule: the
 * baseline bench/call/run.sh sets beside `capsule call` (a new process and
 * connection per call, like each `capsule call`).
 * Usage: selu_call PORT TOOL JSON   (the server on 127.0.0.1:PORT) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/selu_rpc.h"

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: selu_call PORT TOOL JSON\n");
    return 2;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("selu_call: connect");
    return 1;
  }
  struct selu_channel *ch = NULL;
  struct selu_response resp = {0};
  struct cap_error err = {0};
  struct selu_invoke_args args = {
      .tool = argv[2], .args_json = argv[3], .session_id = "bench", .user_id = "bench"};
  int r = selu_channel_open(fd, 16 << 20, &ch, &err);
  if (r == 0)
    r = selu_invoke(ch, SELU_PROTOCOL_SERVICE, false, &args, 120000, &resp, &err);
  selu_channel_close(ch);
  if (r < 0 || !resp.success) {
    fprintf(stderr, "selu_call: %s\n", r < 0 ? err.message : resp.error);
    return 1;
  }
  printf("%s\n", resp.result);
  selu_response_free(&resp);
  return 0;
}
