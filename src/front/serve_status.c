/* `capsule serve`'s log lines (JSON, one per event, to opt->log) and its
 * status file (STATE/serve.json, what `capsule serve status` reads). */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "front/serve_core.h"

void serve_utc_at(const struct timespec *t, char out[32])
{
  struct tm tm;
  gmtime_r(&t->tv_sec, &tm);
  char s[24];
  strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 32, "%.19s.%03dZ", s, (int)(t->tv_nsec / 1000000) % 1000);
}

void serve_utc_now(char out[32])
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  serve_utc_at(&t, out);
}

/* A line stamped with when (NULL: now). */
static void log_line(const struct serve_options *opt, const struct timespec *when,
                     const char *level, const char *msg, const char *k1, const char *v1,
                     const char *k2, const char *v2)
{
  if (!opt->log)
    return;
  char now[32];
  if (when)
    serve_utc_at(when, now);
  else
    serve_utc_now(now);
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  const char *keys[] = {"time", "level", "msg", k1, k2};
  const char *values[] = {now, level, msg, v1, v2};
  for (size_t i = 0; i < 5; i++)
    if (keys[i] && values[i]) {
      cap_jw_key(&w, keys[i]);
      cap_jw_string(&w, values[i]);
    }
  cap_jw_end_object(&w);
  opt->log(opt->log_ctx, b.data);
  cap_buf_free(&b);
}

void serve_log(struct serve *sv, const char *level, const char *msg, const char *k1, const char *v1,
               const char *k2, const char *v2)
{
  log_line(sv->opt, NULL, level, msg, k1, v1, k2, v2);
}

void serve_log_at(struct serve *sv, const struct timespec *when, const char *level, const char *msg,
                  const char *k1, const char *v1, const char *k2, const char *v2)
{
  log_line(sv->opt, when, level, msg, k1, v1, k2, v2);
}

void serve_call_warn(void *ctx, const char *text)
{
  log_line(ctx, NULL, "warning", "this host cannot enforce", "detail", text, NULL, NULL);
}

char *serve_status_path(const char *state_dir) { return cap_xasprintf("%s/serve.json", state_dir); }

void serve_write_status(struct serve *sv)
{
  sv->status_dirty = false;
  size_t calls = __atomic_load_n(&sv->fast_in_flight, __ATOMIC_SEQ_CST);
  for (struct sess *x = sv->sessions; x; x = x->next)
    calls += mcp_session_busy(x->s);
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, true);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "pid");
  cap_jw_int(&w, getpid());
  cap_jw_key(&w, "started");
  cap_jw_string(&w, sv->started);
  cap_jw_key(&w, "socket");
  cap_jw_string(&w, sv->socket_path);
  cap_jw_key(&w, "mcp_http");
  cap_jw_string_or_null(&w, sv->http_addr);
  cap_jw_key(&w, "ui");
  cap_jw_string_or_null(&w, sv->ui_addr);
  cap_jw_key(&w, "caps");
  _cleanup_free_ char *caps = realpath(sv->cur->reg.dir, NULL);
  cap_jw_string_or_null(&w, caps);
  cap_jw_key(&w, "caps_watch");
  cap_jw_string(&w, sv->watch.rescan ? "rescan" : "inotify");
  cap_jw_key(&w, "caps_watch_error");
  cap_jw_string_or_null(&w, sv->watch.error);
  cap_jw_key(&w, "capabilities");
  cap_jw_int(&w, (int64_t)sv->cur->reg.n);
  cap_jw_key(&w, "sessions");
  cap_jw_int(&w, (int64_t)sv->n_sessions);
  cap_jw_key(&w, "calls_in_flight");
  cap_jw_int(&w, (int64_t)calls);
  cap_jw_key(&w, "state");
  cap_jw_string(&w, sv->stopping ? "draining" : "serving");
  cap_jw_end_object(&w);
  cap_buf_putc(&b, '\n');
  _cleanup_free_ char *tmp = cap_xasprintf("%s.tmp", sv->status_path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    bool ok = write(fd, b.data, b.len) == (ssize_t)b.len;
    close(fd);
    if (ok)
      rename(tmp, sv->status_path);
    else
      unlink(tmp);
  }
  cap_buf_free(&b);
}
