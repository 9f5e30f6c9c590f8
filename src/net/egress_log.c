#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/escape.h"
#include "core/json.h"
#include "net/proxy_internal.h"

/* -v: the denial on stderr, a terminal most often. The host, method and
 * path are what the tool sent, escaped so they cannot forge a line. */
static void log_denial(const struct event *ev, const char *why)
{
  struct cap_buf b = {0};
  cap_buf_puts(&b, "capsule: egress denied: ");
  const char *parts[] = {ev->method ? ev->method : "CONNECT", " ", ev->host ? ev->host : "?"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    cap_escape_text(&b, parts[i], strlen(parts[i]));
  cap_buf_printf(&b, ":%u", ev->port);
  if (ev->path) {
    cap_buf_putc(&b, ' ');
    cap_escape_text(&b, ev->path, strlen(ev->path));
  }
  cap_buf_puts(&b, ": ");
  cap_escape_text(&b, why, strlen(why));
  cap_buf_putc(&b, '\n');
  fwrite(b.data, 1, b.len, stderr);
  cap_buf_free(&b);
}

void proxy_log_event(struct proxy *px, const struct event *ev, bool allowed, const char *why)
{
  if (px->opt.verbose && !allowed)
    log_denial(ev, why);
  if (!px->opt.log)
    return;
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char when[40];
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "time");
  cap_jw_string(&w, when);
  cap_jw_key(&w, "decision");
  cap_jw_string(&w, allowed ? "allow" : "deny");
  cap_jw_key(&w, "kind");
  cap_jw_string(&w, ev->kind);
  cap_jw_key(&w, "host");
  cap_jw_string_or_null(&w, ev->host);
  cap_jw_key(&w, "port");
  cap_jw_int(&w, ev->port);
  cap_jw_key(&w, "method");
  cap_jw_string_or_null(&w, ev->method);
  cap_jw_key(&w, "path");
  cap_jw_string_or_null(&w, ev->path);
  cap_jw_key(&w, "credential");
  cap_jw_string_or_null(&w, ev->route);
  cap_jw_key(&w, "reason");
  cap_jw_string(&w, why);
  cap_jw_key(&w, "bytes_up");
  cap_jw_int(&w, ev->bytes_up);
  cap_jw_key(&w, "bytes_down");
  cap_jw_int(&w, ev->bytes_down);
  cap_jw_end_object(&w);
  cap_buf_putc(&b, '\n');
  pthread_mutex_lock(&px->log_lock);
  fwrite(b.data, 1, b.len, px->opt.log);
  fflush(px->opt.log);
  pthread_mutex_unlock(&px->log_lock);
  cap_buf_free(&b);
}

void proxy_respond(struct stream *s, const char *status, const char *why)
{
  char buf[768];
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\ncapsule: %s\n",
                   status, strlen(why) + 10, why);
  if (n > 0)
    proxy_stream_write(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Denies: the answer to the tool, the log line. */
void proxy_deny(struct proxy *px, struct stream *s, struct event *ev, const char *status,
                const char *why)
{
  proxy_log_event(px, ev, false, why);
  proxy_respond(s, status, why);
}
