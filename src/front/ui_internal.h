/* What the dashboard's page files share (ui_pages.c: the frame, the
 * routes, capabilities, policies and approvals; ui_audit.c: the audit
 * log; ui_lists.c: the listings of the other ecosystems). Called on an
 * HTTP thread with the state lock held (serve_lock_state). */
#ifndef CAPSULE_FRONT_UI_INTERNAL_H
#define CAPSULE_FRONT_UI_INTERNAL_H

#include "core/buf.h"
#include "front/serve_core.h"
#include "front/ui.h"

/* s escaped for HTML (NULL as nothing). */
void ui_h(struct cap_buf *b, const char *s);
/* The page's head, its navigation and its title; ui_end closes it. */
void ui_begin(struct ui_response *out, const struct ui_request *rq, const char *title);
void ui_end(struct ui_response *out);
/* A page that only says what went wrong. */
void ui_fail(struct ui_response *out, const struct ui_request *rq, int status, const char *msg);
/* The hidden CSRF field every form carries. */
void ui_csrf(struct cap_buf *b, const struct ui_request *rq);
/* A table's header row from a NULL-terminated list of column names. */
void ui_thead(struct cap_buf *b, const char *const *cols);
/* Milliseconds since the epoch as "2026-11-25T22:00:00Z". */
void ui_time(int64_t ms, char out[32]);

typedef void (*ui_page_fn)(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
void ui_page_audit(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
/* The newest audit record's seq (0: none), what the live stream reports
 * (state lock held). */
int64_t ui_audit_head(struct serve *sv);
void ui_page_egress(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
void ui_page_talos(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
void ui_page_covenant(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
void ui_page_rollback(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
void ui_page_images(struct serve *sv, const struct ui_request *rq, struct ui_response *out);

#endif
