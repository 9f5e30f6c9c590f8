/* Errors as values (crun style): a fallible function takes a
 * `struct cap_error *err`, returns a negative errno-style code and fills the
 * error with an allocated message. Only the CLI prints. */
#ifndef CAPSULE_CORE_ERROR_H
#define CAPSULE_CORE_ERROR_H

/* What a failure means to whoever acts on it, beyond its errno: set by the
 * code that knows (after cap_error_set, with cap_error_outcome); only
 * src/cli maps it to an exit status. Never decided from message text. */
enum cap_outcome {
  CAP_OUTCOME_FAILED = 0, /* did not work: invalid input, I/O, setup (the default) */
  CAP_OUTCOME_HOST,       /* the host cannot enforce what is required */
  CAP_OUTCOME_DENIED,     /* denied by policy, or awaiting approval */
  CAP_OUTCOME_LIMIT,      /* killed by a limit capsule enforces */
  CAP_OUTCOME_NOT_FOUND,  /* the command to run is missing or cannot be executed */
};

struct cap_error {
  int code;      /* positive errno-style code, 0 when unset */
  char *message; /* owned, NULL when unset */
  enum cap_outcome outcome;
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
/* Records what the failure in err means; returns -err->code (or -EINVAL)
 * for tail calls: `return cap_error_outcome(err, CAP_OUTCOME_HOST);`. */
int cap_error_outcome(struct cap_error *err, enum cap_outcome outcome);

#endif
