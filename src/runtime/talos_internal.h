/* What the Talos runtime's files share (talos.c, talos_push.c). Internal
 * to src/runtime. */
#ifndef CAPSULE_RUNTIME_TALOS_INTERNAL_H
#define CAPSULE_RUNTIME_TALOS_INTERNAL_H

#include "core/buf.h"
#include "gateway/call.h"
#include "manifest/model.h"

/* Called from the reader thread with each line the shim writes (NUL-
 * terminated, without its newline). */
typedef void talos_line_fn(void *arg, const char *line);

/* Runs cmd in run_spec's sandbox with line on stdin and hands each line of
 * its stdout to fn until it exits (talos_push.c). */
enum gw_outcome talos_stream_run(const struct gw_call *call, const struct cap_spec *run_spec,
                                 char *const *cmd, const struct cap_buf *line, talos_line_fn *fn,
                                 void *arg, struct cap_error *err);

#endif
