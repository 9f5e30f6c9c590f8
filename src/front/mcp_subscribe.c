/* resources/subscribe and resources/unsubscribe for a third-party MCP
 * server's resources (mcp_internal.h). A subscription is relayed to the
 * server like resources/read, on its warm server (gateway/mcp_keeper.c);
 * when the server accepts it, the session keeps that call's connection to
 * the keeper as a watcher's, on which the server's
 * notifications/resources/updated (and its resources' and prompts'
 * list_changed) arrive between calls, and sends the client those for the
 * URIs it subscribed to. Unsubscribing ends the session's interest: the
 * server's subscription is the server's, shared by every session on it,
 * so it is not told (an update nobody watches is dropped here); the
 * watcher is closed with the session's last subscription on that server.
 * Without a warm server (CAPSULE_MCP_COLD, the keepers' bound reached) a
 * subscription is accepted by the server but no update can come between
 * calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"

static const char *uri_of(const struct cap_node *params)
{
  const struct cap_node *uri = cap_node_get(params, "uri");
  return uri && uri->kind == CAP_NODE_STRING ? uri->u.str.ptr : NULL;
}

/* The capability whose server has uri: the served one, or the one the
 * gathered resources/list routed it to. */
const char *mcp_subscribe_cap(const struct mcp_session *s, const char *uri)
{
  const struct cap_spec *served = mcp_served_server(s);
  if (served)
    return served->id;
  return mcp_gather_listed(s, uri); /* none where two servers list it */
}

static void empty_result(struct mcp_session *s, const char *id)
{
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}

void mcp_resources_subscribe(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const char *uri = uri_of(params);
  if (!uri)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "resources/subscribe needs params.uri, a resource's URI", NULL);
  const char *cap = mcp_subscribe_cap(s, uri);
  if (!cap)
    return mcp_send_error(s, id, -32002,
                          "Resource not found: resources/list names the resources capsule serves",
                          NULL);
  size_t n = 0;
  for (size_t i = 0; i < MCP_MAX_SUBSCRIPTIONS; i++)
    n += s->subs[i].uri != NULL;
  if (n == MCP_MAX_SUBSCRIPTIONS)
    return mcp_send_error(s, id, MCP_INTERNAL_ERROR,
                          "this session has subscribed to 64 resources; unsubscribe from one first",
                          NULL);
  struct cap_buf a = {0};
  struct cap_jw w;
  cap_jw_init(&w, &a, false);
  cap_jw_node(&w, params);
  struct mcp_run *r = mcp_relayed_run(s, id, cap_buf_steal(&a), "resources/subscribe", cap);
  if (!r)
    return;
  r->want_watch = true;
  mcp_run_start(s, r, GW_ANSWER_NONE);
}

static struct mcp_watch *watch_of(struct mcp_session *s, const char *cap)
{
  for (size_t i = 0; i < MCP_MAX_WATCHES; i++)
    if (s->watches[i].cap && strcmp(s->watches[i].cap, cap) == 0)
      return &s->watches[i];
  return NULL;
}

static void watch_close(struct mcp_watch *w)
{
  if (w->fd >= 0)
    close(w->fd);
  free(w->cap);
  cap_buf_free(&w->in);
  *w = (struct mcp_watch){.fd = -1};
}

bool mcp_watching(const struct mcp_session *s, const char *cap)
{
  for (size_t i = 0; i < MCP_MAX_WATCHES; i++)
    if (s->watches[i].cap && s->watches[i].fd >= 0 && strcmp(s->watches[i].cap, cap) == 0)
      return true;
  return false;
}

static bool same(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

void mcp_watch_keep(struct mcp_session *s, struct mcp_run *r, const char *uri, const char *listen)
{
  bool known = false;
  struct mcp_subscription *free_slot = NULL;
  for (size_t i = 0; uri && i < MCP_MAX_SUBSCRIPTIONS; i++) {
    struct mcp_subscription *sub = &s->subs[i];
    if (!sub->uri)
      free_slot = free_slot ? free_slot : sub;
    else if (strcmp(sub->uri, uri) == 0 && strcmp(sub->cap, r->cap) == 0 &&
             same(sub->listen, listen))
      known = true;
  }
  if (uri && !known && free_slot)
    *free_slot = (struct mcp_subscription){.cap = cap_xstrdup(r->cap),
                                           .uri = cap_xstrdup(uri),
                                           .listen = listen ? cap_xstrdup(listen) : NULL};
  struct mcp_watch *w = watch_of(s, r->cap);
  if (r->watch_fd < 0 || (w && w->fd >= 0))
    return; /* none came, or one is kept already (run_free closes this one) */
  for (size_t i = 0; i < MCP_MAX_WATCHES && !w; i++)
    if (!s->watches[i].cap)
      w = &s->watches[i];
  if (!w)
    return;
  if (!w->cap)
    w->cap = cap_xstrdup(r->cap);
  fcntl(r->watch_fd, F_SETFL, O_NONBLOCK);
  w->fd = r->watch_fd;
  r->watch_fd = -1;
}

/* The server accepted r's subscription: recorded, and its connection
 * kept when the session watches that server on none yet. */
void mcp_watch_subscribed(struct mcp_session *s, struct mcp_run *r, const char *listen)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const char *uri = cap_json_parse(doc, r->args, strlen(r->args), "params", 0, &d) == 0
                        ? uri_of(doc->root)
                        : NULL;
  cap_diags_free(&d);
  mcp_watch_keep(s, r, uri, listen);
  cap_doc_free(doc);
}

static void sub_drop(struct mcp_subscription *sub)
{
  free(sub->cap);
  free(sub->uri);
  free(sub->listen);
  *sub = (struct mcp_subscription){0};
}

/* cap's watcher closed when no subscription needs it any more */
static void watch_unneeded(struct mcp_session *s, const char *cap)
{
  for (size_t k = 0; k < MCP_MAX_SUBSCRIPTIONS; k++)
    if (s->subs[k].cap && strcmp(s->subs[k].cap, cap) == 0)
      return;
  struct mcp_watch *w = watch_of(s, cap);
  if (w)
    watch_close(w);
}

void mcp_watch_forget(struct mcp_session *s, const char *listen)
{
  for (size_t i = 0; i < MCP_MAX_SUBSCRIPTIONS; i++) {
    struct mcp_subscription *sub = &s->subs[i];
    if (!sub->uri || !sub->listen || strcmp(sub->listen, listen) != 0)
      continue;
    _cleanup_free_ char *cap = cap_xstrdup(sub->cap);
    sub_drop(sub);
    watch_unneeded(s, cap);
  }
}

void mcp_resources_unsubscribe(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const char *uri = uri_of(params);
  if (!uri)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "resources/unsubscribe needs params.uri, a resource's URI", NULL);
  for (size_t i = 0; i < MCP_MAX_SUBSCRIPTIONS; i++) {
    struct mcp_subscription *sub = &s->subs[i];
    if (!sub->uri || sub->listen || strcmp(sub->uri, uri) != 0)
      continue;
    _cleanup_free_ char *cap = cap_xstrdup(sub->cap);
    sub_drop(sub);
    watch_unneeded(s, cap);
  }
  empty_result(s, id);
}

size_t mcp_watch_poll(struct mcp_session *s, struct pollfd *fds, size_t max)
{
  size_t n = 0;
  for (size_t i = 0; i < MCP_MAX_WATCHES && n < max; i++)
    if (s->watches[i].cap && s->watches[i].fd >= 0)
      fds[n++] = (struct pollfd){.fd = s->watches[i].fd, .events = POLLIN};
  return n;
}

static bool subscribed(const struct mcp_session *s, const char *cap, const struct cap_node *m)
{
  const char *uri = uri_of(cap_node_get(m, "params"));
  for (size_t i = 0; uri && i < MCP_MAX_SUBSCRIPTIONS; i++)
    if (s->subs[i].uri && !s->subs[i].listen && strcmp(s->subs[i].uri, uri) == 0 &&
        strcmp(s->subs[i].cap, cap) == 0)
      return true;
  return false;
}

/* Whether the session's resources/subscribe took one of cap's resources */
static bool subscribed_any(const struct mcp_session *s, const char *cap)
{
  for (size_t i = 0; i < MCP_MAX_SUBSCRIPTIONS; i++)
    if (s->subs[i].uri && !s->subs[i].listen && strcmp(s->subs[i].cap, cap) == 0)
      return true;
  return false;
}

/* One line from cap's watcher: to the client when it is for the session */
static void watched(struct mcp_session *s, const char *cap, const char *line, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *m =
      cap_json_parse(doc, line, len, "server", 64, &d) == 0 && doc->root->kind == CAP_NODE_OBJECT
          ? doc->root
          : NULL;
  cap_diags_free(&d);
  const struct cap_node *method = m ? cap_node_get(m, "method") : NULL;
  const char *name = method && method->kind == CAP_NODE_STRING ? method->u.str.ptr : "";
  bool send = strcmp(name, "notifications/resources/updated") == 0
                  ? subscribed(s, cap, m)
                  : (strcmp(name, "notifications/resources/list_changed") == 0 ||
                     strcmp(name, "notifications/prompts/list_changed") == 0) &&
                        subscribed_any(s, cap);
  if (m && !cap_node_get(m, "id"))
    mcp_listen_watched(s, cap, name, uri_of(cap_node_get(m, "params")));
  if (send && !cap_node_get(m, "id")) {
    struct cap_buf b = {0};
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    cap_jw_node(&w, m); /* written anew: the client gets JSON capsule wrote */
    mcp_send_buf(s, NULL, false, &b);
  }
  cap_doc_free(doc);
}

void mcp_watch_events(struct mcp_session *s, const struct pollfd *fds, size_t n)
{
  (void)fds;
  (void)n;
  for (size_t i = 0; i < MCP_MAX_WATCHES; i++) {
    struct mcp_watch *w = &s->watches[i];
    if (!w->cap || w->fd < 0)
      continue;
    char buf[65536];
    ssize_t got;
    while ((got = read(w->fd, buf, sizeof buf)) > 0) {
      cap_buf_append(&w->in, buf, (size_t)got);
      char *nl;
      while (w->in.len && (nl = memchr(w->in.data, '\n', w->in.len))) {
        size_t k = (size_t)(nl - w->in.data);
        watched(s, w->cap, w->in.data, k);
        memmove(w->in.data, nl + 1, w->in.len - k - 1);
        w->in.len -= k + 1;
      }
      if (w->in.len > MCP_MAX_MESSAGE) /* no notification is that long */
        w->in.len = 0;
    }
    if (got == 0 || (errno != EAGAIN && errno != EINTR)) { /* the keeper is gone */
      close(w->fd);
      w->fd = -1; /* the next subscribe on that server watches again */
    }
  }
}

void mcp_watch_free(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_WATCHES; i++)
    if (s->watches[i].cap)
      watch_close(&s->watches[i]);
  for (size_t i = 0; i < MCP_MAX_SUBSCRIPTIONS; i++)
    sub_drop(&s->subs[i]);
}
