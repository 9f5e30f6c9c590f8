/* capsule serve's unix socket (serve_core.h): newline-delimited JSON-RPC,
 * the caller who SO_PEERCRED says, a session per connection; and the
 * check that no other serve runs on the state. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/text.h"
#include "front/serve_core.h"

/* STATE/serve.key (0600): a random key `capsule approve` reads and
 * presents with capsule/approve. The state directory is invisible in
 * every sandbox: a process that can read the key could decide alone, as
 * the CLI alone opens the state (a tool a socket grant lets reach the
 * socket, whose connect capsule's supervisor makes, cannot). */
static int write_key(struct serve *sv, struct cap_error *err)
{
  unsigned char raw[32];
  randombytes_buf(raw, sizeof raw);
  sodium_bin2hex(sv->operator_key, sizeof sv->operator_key, raw, sizeof raw);
  sv->key_path = cap_xasprintf("%s/serve.key", sv->opt->state_dir);
  unlink(sv->key_path);
  int fd = open(sv->key_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write(fd, sv->operator_key, 64) == 64;
  if (fd >= 0)
    close(fd);
  return ok ? 0 : cap_error_errno(err, errno, "cannot write %s", sv->key_path);
}

int serve_listen_unix(struct serve *sv, struct cap_error *err)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(sv->socket_path) >= sizeof a.sun_path)
    return cap_error_set(err, ENAMETOOLONG, "the socket path %s is too long", sv->socket_path);
  strcpy(a.sun_path, sv->socket_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return cap_error_errno(err, errno, "socket");
  unlink(sv->socket_path); /* a stale one: the status file says whether one runs */
  mode_t old = umask(0177);
  int r = bind(fd, (struct sockaddr *)&a, sizeof a);
  umask(old);
  if (r < 0 || chmod(sv->socket_path, 0600) < 0 || listen(fd, 64) < 0) {
    r = cap_error_errno(err, errno, "cannot listen on %s", sv->socket_path);
    close(fd);
    return r;
  }
  sv->listen_fd = fd;
  sv->bound = true;
  return write_key(sv, err);
}

/* Another serve on this state: its status file names a live process. */
int serve_check_alone(struct serve *sv, struct cap_error *err)
{
  char *text = NULL;
  size_t len = 0;
  struct cap_error ignored = {0};
  if (cap_read_file(sv->status_path, 65536, &text, &len, &ignored) < 0) {
    cap_error_clear(&ignored);
    return 0;
  }
  const char *p = strstr(text, "\"pid\":");
  long pid = p ? strtol(p + 6, NULL, 10) : 0;
  free(text);
  if (pid > 0 && pid != getpid() && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
    return cap_error_set(err, EADDRINUSE,
                         "capsule serve already runs on this state (pid %ld); `capsule serve "
                         "status` shows it",
                         pid);
  return 0;
}

void serve_accept_unix(struct serve *sv)
{
  int fd = accept4(sv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || !serve_sess_room(sv)) {
    close(fd);
    return;
  }
  struct passwd *pw = getpwuid(cred.uid);
  char uid[32];
  snprintf(uid, sizeof uid, "%u", (unsigned)cred.uid);
  struct sess *x = serve_sess_new(sv, false, fd, pw ? pw->pw_name : uid);
  x->cfg.peer_pid = cred.pid; /* capsule/approve checks who asks (mcp_local.c) */
  x->cfg.operator_key = sv->operator_key;
  serve_log(sv, "info", "session started", "socket", sv->socket_path, "user", x->user);
}

void serve_read_unix(struct sess *x)
{
  char buf[65536];
  ssize_t n = read(x->fd, buf, sizeof buf);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    x->dead = true;
    return;
  }
  for (ssize_t i = 0; i < n;) {
    char *nl = memchr(buf + i, '\n', (size_t)(n - i));
    size_t end = nl ? (size_t)(nl - buf) : (size_t)n;
    if (!x->skipping)
      cap_buf_append(&x->line, buf + i, end - (size_t)i);
    if (!x->skipping && x->line.len > MCP_MAX_MESSAGE) {
      mcp_session_receive(x->s, x->line.data, x->line.len); /* the size error */
      cap_buf_free(&x->line);
      x->skipping = true;
    }
    if (nl) {
      if (!x->skipping && x->line.len)
        mcp_session_receive(x->s, x->line.data, x->line.len);
      cap_buf_free(&x->line);
      x->skipping = false;
    }
    i = (ssize_t)end + (nl ? 1 : 0);
  }
}
