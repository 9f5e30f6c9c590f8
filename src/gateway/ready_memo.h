/* Readiness remembered: gw_ready's answer for each capability of one
 * registry, kept for a while, so a server that builds a tool table per
 * session (serve: every sessionless request is one) does not start a dry
 * run sandbox per capability per request. At most one dry run per
 * capability runs at a time; a caller asking meanwhile waits for its
 * answer. An answer older than ttl_ms is checked again; a new registry
 * (a reload) gets a new memo. Thread-safe. */
#ifndef CAPSULE_GATEWAY_READY_MEMO_H
#define CAPSULE_GATEWAY_READY_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/call.h"
#include "manifest/model.h"

#define GW_READY_MEMO_TTL_MS 5000

struct gw_ready_memo;

/* n: the registry's capabilities, indexed as in it */
struct gw_ready_memo *gw_ready_memo_new(size_t n, int64_t ttl_ms);
void gw_ready_memo_free(struct gw_ready_memo *m);

/* gw_ready (gateway/ready.h) for the registry's capability i, remembered.
 * m NULL or i out of range: gw_ready itself. */
enum gw_outcome gw_ready_memo_get(struct gw_ready_memo *m, size_t i, const struct cap_spec *spec,
                                  const char *image_dir, const char *const *hidden, size_t n_hidden,
                                  struct cap_error *why);

#endif
