#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/json.h"
#include "net/proxy_internal.h"

void proxy_log_event(struct proxy *px, const struct event *ev, bool allowed, const char *why)
{
  if (px->opt.verbose && !allowed)
    fprintf(stderr, "capsule: egress denied: %s %s:%u%s%s: %s\n",
            ev->method ? ev->method : "CONNECT", ev->host ? ev->host : "?", ev->port,
            ev->path ? " " : "", ev->path ? ev->path : "", why);
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
