/* The Covenant runtime: an agent gets one JSON request line on stdin and
 * answers with one JSON object on one line of stdout, in its sandbox, with
 * the call's deadline and output cap. covenant_run_line is that exchange
 * for any command (the Talos shim speaks it too). Nothing here prints;
 * outcomes are typed (gateway/call.h) and err says why. */
#ifndef CAPSULE_RUNTIME_COVENANT_H
#define CAPSULE_RUNTIME_COVENANT_H

#include <stddef.h>

#include "core/buf.h"
#include "core/node.h"
#include "gateway/call.h"
#include "manifest/model.h"

/* Runs cmd (NULL-terminated) in spec's sandbox with line on stdin; *result
 * (allocated) is the one JSON object it wrote on one line of stdout. */
enum gw_outcome covenant_run_line(const struct gw_call *call, const struct cap_spec *spec,
                                  char *const *cmd, const struct cap_buf *line, char *const *env,
                                  size_t n_env, char **result, struct cap_error *err);

/* A Covenant agent's dispatch: args is the JSON object of the call (text,
 * priority?, parent?); capsule fills id, issuer and issued_at. */
enum gw_outcome covenant_run(const struct gw_call *call, const struct cap_spec *spec,
                             const struct cap_node *args, char *const *env, size_t n_env,
                             char **result, struct cap_error *err);

#endif
