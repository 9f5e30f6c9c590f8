/* Errors as values (crun style): a fallible function takes a
 * `struct cap_error *err`, returns a negative errno-style code and fills the
 * error with an allocated message. Only the CLI prints. */
#ifndef CAPSULE_CORE_ERROR_H
#define CAPSULE_CORE_ERROR_H

struct cap_error {
  int code;      /* positive errno-style code, 0 when unset */
  char *message; /* owned, NULL when unset */
};

/* Sets err (if non-NULL and not already set) and returns -code. */
int cap_error_set(struct cap_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like cap_error_set, appending ": strerror(code)". */
int cap_error_errno(struct cap_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes context to an existing message ("context: message"). */
void cap_error_prefix(struct cap_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cap_error_clear(struct cap_error *err);

#endif
