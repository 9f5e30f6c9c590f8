/* libFuzzer target for what a warm MCP server's keeper passes between its
 * connections and the server (src/gateway/mcp_keeper_route.c): the input,
 * cut at newlines, is lines from the server ('S...'), from a call's
 * connection ('1...', '2...') and from a third connection that asks to
 * watch ('W...'). Every line the keeper sends a connection must be one
 * JSON object; every line it sends the server too. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/json.h"
#include "gateway/mcp_keeper_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each full line read from fd is a JSON object, or abort */
static void check_lines(int fd, struct cap_buf *pending)
{
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    cap_buf_append(pending, buf, (size_t)n);
  char *nl;
  while (pending->len && (nl = memchr(pending->data, '\n', pending->len))) {
    size_t k = (size_t)(nl - pending->data);
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags d = {0};
    if (cap_json_parse(doc, pending->data, k, "line", 0, &d) != 0 ||
        doc->root->kind != CAP_NODE_OBJECT)
      abort();
    cap_diags_free(&d);
    cap_doc_free(doc);
    memmove(pending->data, nl + 1, pending->len - k - 1);
    pending->len -= k + 1;
  }
}

static void pair(int fds[2])
{
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    abort();
  fcntl(fds[0], F_SETFL, O_NONBLOCK); /* the keeper's end: a full buffer drops, never blocks */
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  int server[2], a[2], b[2], w[2];
  pair(server);
  pair(a);
  pair(b);
  pair(w);
  struct keeper k = {.in_w = server[0], .next_id = 1};
  keeper_route_init(&k, "/nonexistent/run", "fuzz", "fuzz"); /* no spool file can be made */
  keeper_conn_add(&k, a[0], -1);
  keeper_conn_add(&k, b[0], -1);
  keeper_conn_add(&k, w[0], -1);
  struct keeper_conn *conn[3] = {k.conns[0], k.conns[1], k.conns[2]};
  keeper_from_conn(&k, conn[2], "{\"keeper\":\"watch\"}");
  struct cap_buf out[4] = {{0}};
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char *line = len ? strndup(p + 1, len - 1) : NULL;
    if (line && p[0] == 'S')
      keeper_from_server(&k, line);
    else if (line && (p[0] == '1' || p[0] == '2' || p[0] == 'W'))
      keeper_from_conn(&k, conn[p[0] == '1' ? 0 : p[0] == '2' ? 1 : 2], line);
    free(line);
    check_lines(server[1], &out[0]);
    check_lines(a[1], &out[1]);
    check_lines(b[1], &out[2]);
    check_lines(w[1], &out[3]);
    p += len + (nl ? 1 : 0);
  }
  keeper_route_end(&k); /* what a call left in flight is cancelled */
  check_lines(server[1], &out[0]);
  pthread_mutex_destroy(&k.egress_lock);
  for (int i = 0; i < 4; i++)
    cap_buf_free(&out[i]);
  close(server[0]);
  close(server[1]);
  close(a[1]);
  close(b[1]);
  close(w[1]);
  return 0;
}
