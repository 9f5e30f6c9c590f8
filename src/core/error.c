#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int error_setv(struct cap_error *err, int code, const char *suffix, const char *fmt,
                      va_list ap) __attribute__((format(printf, 4, 0)));

static int error_setv(struct cap_error *err, int code, const char *suffix, const char *fmt,
                      va_list ap)
{
  if (code <= 0)
    code = EINVAL;
  if (!err || err->message)
    return -code;
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0)
    msg = NULL;
  if (msg && suffix) {
    char *joined = NULL;
    if (asprintf(&joined, "%s: %s", msg, suffix) >= 0) {
      free(msg);
      msg = joined;
    }
  }
  err->code = code;
  err->message = msg ? msg : strdup("out of memory");
  return -code;
}

int cap_error_set(struct cap_error *err, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int ret = error_setv(err, code, NULL, fmt, ap);
  va_end(ap);
  return ret;
}

int cap_error_errno(struct cap_error *err, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int ret = error_setv(err, code, strerror(code > 0 ? code : EINVAL), fmt, ap);
  va_end(ap);
  return ret;
}

void cap_error_prefix(struct cap_error *err, const char *fmt, ...)
{
  if (!err || !err->message)
    return;
  char *prefix = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&prefix, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  char *joined = NULL;
  if (asprintf(&joined, "%s: %s", prefix, err->message) >= 0) {
    free(err->message);
    err->message = joined;
  }
  free(prefix);
}

void cap_error_clear(struct cap_error *err)
{
  if (!err)
    return;
  free(err->message);
  err->message = NULL;
  err->code = 0;
  err->outcome = CAP_OUTCOME_FAILED;
}

int cap_error_outcome(struct cap_error *err, enum cap_outcome outcome)
{
  if (!err)
    return -EINVAL;
  err->outcome = outcome;
  return err->code > 0 ? -err->code : -EINVAL;
}
