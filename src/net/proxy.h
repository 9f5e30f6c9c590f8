/* The egress proxy: the only way out of a sandbox in `proxy` network mode.
 * It listens on a socket made inside the sandbox's network namespace (the
 * sandbox's pid 1 creates it and hands the fd over) and runs in threads of
 * capsule's supervisor in the host namespace. It serves
 *  - CONNECT host:port: the allowlist checked, the name resolved by the
 *    proxy itself, forbidden addresses refused whatever they resolve from
 *    (rules.h), then an end-to-end tunnel; for hosts with L7 rules or a
 *    credential route, TLS is terminated with a per-session CA (tls.h), each
 *    request checked and credentials injected, and re-encrypted upstream;
 *  - absolute-form plain-HTTP requests (GET http://host/path), checked the
 *    same way;
 *  - the reverse-proxy form /<credential-name>/path, forwarded to that
 *    route's upstream with the secret injected;
 *  - ports.localhost: a listener per port inside the sandbox, each
 *    connection relayed to the same port on the host's loopback;
 *  - the transparent path (egress_plan.h): the sandbox's resolver, and a
 *    listener per allowed name and port on the name's synthetic address,
 *    whose connections are checked like CONNECT and then spliced (SNI
 *    checked) or, for hosts with rules or routes, intercepted.
 * Secrets are read on the host side and never enter the sandbox; a route
 * with env_var gives the tool a random phantom token in that variable,
 * which the proxy requires in the request and swaps for the secret. Every
 * decision goes to the egress log. */
#ifndef CAPSULE_NET_PROXY_H
#define CAPSULE_NET_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "core/error.h"
#include "manifest/model.h"

#define PROXY_PORT 3128       /* inside the sandbox: 127.0.0.1:3128 */
#define PROXY_MAX_FORWARDS 32 /* ports.localhost entries forwarded into a sandbox */
/* every listener a sandbox hands over: the proxy's, the forwards, the
 * resolver's two, the transparent path's and its capture listener
 * (net/egress_plan.h's EGRESS_MAX_LISTENERS + 1) */
#define PROXY_MAX_LISTENERS (1 + PROXY_MAX_FORWARDS + 2 + 64 + 1)
/* inside the sandbox: the trust bundle's folder, a small read-only tmpfs of
 * its own on the sandbox's /dev (always capsule's own, whatever is granted:
 * a grant of / must not make capsule write into the host's root) */
#define PROXY_CA_DIR "/dev/.capsule"
#define PROXY_CA_FILE PROXY_CA_DIR "/ca-bundle.pem"

struct proxy;

/* Where bare-name credential sources (nono's "system keystore") are read:
 * capsule's credential store, system scope. lookup sets *value (malloc'd,
 * the caller wipes it) and *found. */
struct proxy_store {
  int (*lookup)(void *arg, const char *name, char **value, bool *found, struct cap_error *err);
  void *arg;
};

/* --resolve HOST:ADDR: the host side resolves host to addr (still checked
 * like any address it resolves to). */
struct proxy_resolve {
  const char *host; /* compared without case, a trailing dot ignored */
  const char *addr; /* an IPv4 or IPv6 literal */
};

/* One egress decision as the log records it, for a sink beside the file
 * (the gateway's state: gateway/egress_store.h). Strings are the log's
 * escaped forms (printable, each at most about 1 KiB), valid only during
 * the call; NULL where a field does not apply. A "suppressed" decision
 * sums up count denials the log coalesced or dropped. */
enum proxy_decision { PROXY_ALLOW, PROXY_DENY, PROXY_SUPPRESSED };
struct proxy_egress_event {
  enum proxy_decision decision;
  int64_t time_ms; /* CLOCK_REALTIME */
  const char *kind, *host;
  unsigned port;
  const char *method, *path, *credential, *reason;
  long long count, bytes_up, bytes_down;
};
/* Called under the log's lock, from the proxy's threads: it must only
 * copy the event somewhere (a batch written later), never block on I/O.
 * It sees what the file sees, after the same coalescing and rate limit. */
struct proxy_egress_sink {
  void (*event)(void *arg, const struct proxy_egress_event *ev);
  void *arg;
};

struct proxy_options {
  const struct proxy_store *store;     /* NULL: bare-name sources are refused */
  const struct proxy_resolve *resolve; /* n_resolve entries; outlive the proxy */
  size_t n_resolve;
  bool allow_private;                   /* reach loopback and private ranges (development, tests) */
  FILE *log;                            /* egress decisions as JSON lines, or NULL */
  const struct proxy_egress_sink *sink; /* the same decisions, or NULL; outlives the proxy */
  bool verbose;                         /* denials on stderr as they happen */
  bool pool; /* the capture redirect is loaded: patterns' names get on-demand addresses */
};

/* Reads the credential routes' secrets and, when any host needs TLS
 * interception, creates the session CA. spec and opt->log must outlive it. */
int proxy_new(const struct cap_spec *spec, const struct proxy_options *opt, struct proxy **ret,
              struct cap_error *err);

/* The PEM bundle the sandbox must trust (system CAs + the session CA), or
 * NULL when nothing is intercepted. */
const char *proxy_ca_bundle(const struct proxy *p, size_t *len);

/* "VAR=phantom" strings for routes with env_var; *n set. */
char *const *proxy_tool_env(const struct proxy *p, size_t *n);

/* Wipes the secrets from this copy of the proxy (a forked child's). */
void proxy_scrub(struct proxy *p);

/* Serves the listeners (taken over, closed even on failure) until
 * proxy_stop: fds[0] is the proxy's; fds[1 + i] forwards to the host's
 * 127.0.0.1:spec->network.localhost.v[i] (ports.localhost); then the
 * resolver's UDP and TCP sockets and one listener per entry of the
 * egress plan's listeners[] (egress_plan.h), when n says they are there. */
int proxy_start(struct proxy *p, const int *fds, size_t n, struct cap_error *err);

/* CPU time (ms) the proxy's workers (and the connect supervisor's threads
 * while they serve a connection they made) have spent so far on this
 * proxy's connections, user and system (the splice and socket calls they
 * make included), for the sandbox's CPU budget: every worker of a proxy
 * serves that one sandbox. Not counted: the thread that accepts ports.localhost
 * connections (an accept each) and kernel work done outside the workers'
 * own calls (softirq packet processing). 0 for NULL. */
int64_t proxy_cpu_ms(struct proxy *p);

/* Connections capsule's connect supervisor makes (sandbox/supervise.h):
 * below Landlock ABI 9 every connect of the tool is performed by a thread
 * of capsule's, which then serves the connection it made itself (no other
 * thread woken, no hand-off). proxy_expect_supervisor, before proxy_start,
 * says so: then no worker waits on the listeners, and the poll thread
 * sweeps them every PROXY_SWEEP_MS for a connection made otherwise (TCP
 * Fast Open's sendto) or left behind. */
#define PROXY_SWEEP_MS 100
void proxy_expect_supervisor(struct proxy *p);
/* A hold on p for proxy_connected: false when p is not serving (not
 * started yet, or stopping). proxy_stop waits until every hold is
 * released. */
bool proxy_hold(struct proxy *p);
/* Releases the hold, after the tool's connect to dest (inside the
 * sandbox's namespace) was made and answered: accepts that connection
 * from the listener at dest and serves it on the calling thread to its
 * end, or queues it for a worker when PROXY_MAX_HELD threads already
 * serve so. Nothing when dest is no listener of p's. *made: capsule's
 * copy of the socket the connect was made on, closed here (set to -1)
 * before the connection is served; its type is read only when nothing
 * waits at the listener (a UDP connect, say to the resolver's 127.0.0.53,
 * has nothing to accept, and is not waited for). */
#define PROXY_MAX_HELD 8
void proxy_connected(struct proxy *p, const struct sockaddr *dest, socklen_t len, int *made);

/* Stops serving (when started), ends every connection, frees p. */
void proxy_stop(struct proxy *p);

#endif
