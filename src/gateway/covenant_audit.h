/* capsule's audit log in Covenant's format (covenant-audit): DIR/events.jsonl,
 * one AuditEvent a line ({"id", "timestamp_ms", "issuer": {"display",
 * "pubkey"}, "kind": {"type", ...}}), and DIR/events.chain.jsonl, one
 * anchor a line ({"index", "event_id", "timestamp_ms", "event_hash_hex",
 * "previous_hash_hex", "chain_hash_hex"}), where event_hash_hex is the
 * SHA-256 of the event's line and chain_hash_hex = SHA-256(previous_hex +
 * "\n" + event_hex), the first previous being 64 zeros. Export maps the
 * records that have a Covenant kind (dispatches, capability checks, token
 * grants and revocations, spent budgets) and leaves the rest out; verify
 * reads any such pair, Covenant's own too. Nothing here prints. */
#ifndef CAPSULE_GATEWAY_COVENANT_AUDIT_H
#define CAPSULE_GATEWAY_COVENANT_AUDIT_H

#include <stddef.h>

#include "core/error.h"
#include "gateway/state.h"
#include "manifest/model.h"

/* Writes the pair into dir (made when missing; refused when it holds
 * either file already). *exported and *left_out count the records. */
int gw_covenant_export(struct gw_state *st, const char *dir, size_t *exported, size_t *left_out,
                       struct cap_error *err);

struct gw_covenant_report {
  size_t events, anchors;
  char root[65];            /* the last chain hash (64 zeros when empty) */
  struct cap_strv failures; /* empty when the pair verifies */
};
/* 0 with *rep filled (rep->failures says whether it verified), or -errno
 * when the files cannot be read. */
int gw_covenant_verify(const char *dir, struct gw_covenant_report *rep, struct cap_error *err);
void gw_covenant_report_free(struct gw_covenant_report *rep);

#endif
