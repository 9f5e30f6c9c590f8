/* Approvals: when policy says `ask` and there is no terminal, a call leaves
 * a pending approval that the operator lists (`capsule approvals`), then
 * approves or denies by its id; an approved one allows exactly one call
 * with the same capability, tool, user and arguments. Ids are 8 random hex
 * digits (not guessable from earlier ones). An approval lapses after its
 * time to live (pending: from when it was asked; approved: from when it was
 * approved) and is void when its binding changes: a digest of the tool's
 * package (gw_spec_digest: code, manifest, grants) and the effective
 * policy, taken when the call asked and checked when it runs. A policy
 * change also voids the capability's and tool's outstanding approvals
 * (gw_approval_void_for). The rows live in the state database
 * (gw_state_db), table approval_requests. Nothing here prints. */
#ifndef CAPSULE_GATEWAY_APPROVAL_H
#define CAPSULE_GATEWAY_APPROVAL_H

#include <stdbool.h>
#include <sys/types.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/state.h"

#define GW_APPROVAL_TTL_MS_DEFAULT (10 * 60 * 1000)

enum gw_approval_status {
  GW_APPROVAL_NONE,
  GW_APPROVAL_PENDING,
  GW_APPROVAL_APPROVED,
  GW_APPROVAL_DENIED,
  GW_APPROVAL_USED,    /* an approved or denied one, spent on its call */
  GW_APPROVAL_EXPIRED, /* its time to live passed */
  GW_APPROVAL_VOID,    /* the tool's code, grants or policy changed */
};
const char *gw_approval_status_name(enum gw_approval_status s);

/* One approval as stored; strings owned (gw_approval_clear). */
struct gw_approval {
  char id[9];
  char *capability, *tool, *user; /* user: on whose behalf the call asked (--user) */
  char *asked_by;                 /* the process that asked: "uid N (login)" */
  char *args;                     /* the arguments as sent (JSON text) */
  char *args_hash;
  char *binding;
  int64_t created_ms, expires_ms; /* Unix time, ms */
  int64_t ttl_ms;
  enum gw_approval_status status;
};
void gw_approval_clear(struct gw_approval *a);

/* The call being decided. binding: see above (64 hex digits). */
struct gw_approval_call {
  const char *capability, *tool, *user, *args, *args_hash, *binding;
  int64_t ttl_ms; /* 0: GW_APPROVAL_TTL_MS_DEFAULT */
};

/* The newest live approval for exactly this call. An approved or denied
 * one is spent (it decides one call). One that lapsed or whose binding
 * changed is marked so, *status is GW_APPROVAL_NONE and *lapsed says why
 * (GW_APPROVAL_EXPIRED or GW_APPROVAL_VOID; else GW_APPROVAL_NONE), with
 * its id in lapsed_id. */
int gw_approval_take(struct gw_state *st, const struct gw_approval_call *call,
                     enum gw_approval_status *status, char id[9], enum gw_approval_status *lapsed,
                     char lapsed_id[9], struct cap_error *err);
int gw_approval_create(struct gw_state *st, const struct gw_approval_call *call, char id[9],
                       struct cap_error *err);

/* pending -> approved or denied. *was: the approval's status before
 * (GW_APPROVAL_NONE when id names none; it changed only when it was
 * GW_APPROVAL_PENDING, and one past its time to live is marked expired
 * instead); *out is the approval as it is now. */
int gw_approval_resolve(struct gw_state *st, const char *id, bool approve,
                        enum gw_approval_status *was, struct gw_approval *out,
                        struct cap_error *err);

/* Waits up to timeout_ms for approval id to be decided; *status its
 * status then (still GW_APPROVAL_PENDING on timeout, GW_APPROVAL_EXPIRED
 * once past its time to live). On PostgreSQL a decision on any gateway
 * wakes it (LISTEN/NOTIFY on GW_APPROVAL_CHANNEL), and it looks again
 * every second besides; on SQLite it looks five times a second. A new
 * approval is announced on the same channel (the dashboard's stream). */
#define GW_APPROVAL_CHANNEL "capsule_approvals"
int gw_approval_wait(struct gw_state *st, const char *id, int64_t timeout_ms,
                     enum gw_approval_status *status, struct cap_error *err);

typedef void (*gw_approval_fn)(void *arg, const struct gw_approval *a);
/* The pending approvals that have not expired, oldest first. */
int gw_approval_list_pending(struct gw_state *st, gw_approval_fn fn, void *arg,
                             struct cap_error *err);

/* Voids the outstanding (pending or approved) approvals of cap.tool, after
 * its policy changed. */
int gw_approval_void_for(struct gw_state *st, const char *cap, const char *tool,
                         struct cap_error *err);

/* Approvals and policy changes come from the operator, never from inside
 * a sandbox: -EPERM (err says how it was told) when this process runs in
 * a capsule sandbox. The sign is kernel state a sandboxed process cannot
 * undo, all of it at once: a user and a UTS namespace other than the
 * host's, the hostname "capsule" (sethostname is refused inside),
 * no_new_privs and a seccomp filter (both irrevocable); or the
 * CAPSULE_SANDBOX variable the sandbox sets (a tool may unset it; the
 * kernel signs remain). The state directory being invisible in every
 * sandbox is the main defence; this is the second. */
int gw_require_operator(const char *what, struct cap_error *err);
/* The same of another process, pid (serve's unix socket's peer, as
 * SO_PEERCRED names it): -EPERM when its environment has CAPSULE_SANDBOX,
 * when it runs in other user and UTS namespaces than this process with
 * no_new_privs and a seccomp filter (what a capsule sandbox gives the
 * command it runs), or when it cannot be read (it left). */
int gw_require_operator_peer(pid_t pid, const char *what, struct cap_error *err);

/* True when id is 8 lower-case hex digits. */
bool gw_approval_id_valid(const char *id);

#endif
