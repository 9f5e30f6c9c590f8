/* Third-party MCP servers as capabilities: a server that speaks MCP over
 * stdio (x-capsule.mcp_server: its command) is started in the
 * capability's sandbox for each exchange (or, for the front doors' calls,
 * reached warm through its keeper: gateway/mcp_keeper.c, *_warm/_on
 * below); capsule is its client:
 * initialize, then one request (tools/list, tools/call, resources/read...),
 * then the sandbox is stopped. With call->relay (an MCP front door), what
 * the server sends besides its answer (notifications: progress, logging;
 * requests: sampling, elicitation, roots) goes to the front door's client
 * and the client's answers come back; without one, its requests are
 * answered "not supported" and its notifications dropped. Nothing here prints; outcomes are
 * typed (gateway/call.h) and err says why. */
#ifndef CAPSULE_RUNTIME_MCP_CLIENT_H
#define CAPSULE_RUNTIME_MCP_CLIENT_H

#include <stddef.h>

#include "gateway/call.h"
#include "manifest/model.h"

/* The MCP protocol revision capsule asks for as a client. */
#define MCP_CLIENT_PROTOCOL "2025-11-25"
/* The id of capsule's one request to the server (the one a relayed
 * notifications/cancelled names) */
#define MCP_CLIENT_REQUEST_ID 2
/* The longest line the front door relays to the server */
#define MCP_CLIENT_MAX_RELAYED (8u << 20)

/* One request to the capability's MCP server: method and its params (a
 * JSON object's text); *result (allocated) is the JSON text of the
 * response's result. A JSON-RPC error answer is GW_OUTCOME_FAILED with
 * the server's message. */
enum gw_outcome mcp_client_request(const struct gw_call *call, const struct cap_spec *spec,
                                   const char *method, const char *params, char *const *env,
                                   size_t n_env, char **result, struct cap_error *err);

/* tools/call of call->tool with call->args; *result (allocated) is the
 * tool's result as capsule returns it: structuredContent when the server
 * gave one, else the text of its content (JSON when it parses, else a
 * JSON string). A result with isError is GW_OUTCOME_FAILED with its text. */
enum gw_outcome mcp_client_call(const struct gw_call *call, const struct cap_spec *spec,
                                char *const *env, size_t n_env, char **result,
                                struct cap_error *err);

/* The same on a warm server: fd is a connection to its keeper
 * (gateway/mcp_keeper.c), which initialized it; the caller owns fd.
 * mcp_client_call_on with warm_fd -1 is mcp_client_call. A keeper that
 * ended before it took the call (nothing of it reached the server) is
 * GW_OUTCOME_FAILED with err->code ECONNABORTED: the caller may try again.
 * reusable (or NULL) tells whether fd may carry the keeper's next call:
 * the answer came, nothing else was asked on it nor read past it.
 * *ack (or NULL) is the connection's take pipe (gateway/mcp_keeper.c):
 * -1 on a new connection, whose keeper hands one over with its first
 * "taken" (*ack then gets it); a kept connection's, read for this call's
 * take instead of a "taken" line. The caller owns it and keeps it with fd. */
enum gw_outcome mcp_client_request_warm(const struct gw_call *call, int fd, int *ack,
                                        const char *method, const char *params, char **result,
                                        bool *reusable, struct cap_error *err);
enum gw_outcome mcp_client_call_on(const struct gw_call *call, const struct cap_spec *spec,
                                   int warm_fd, int *ack, char *const *env, size_t n_env,
                                   char **result, bool *reusable, struct cap_error *err);

#endif
