/* The supervisor of the command's syscalls, by seccomp user notification.
 * Two duties, one listener (the kernel gives a task one):
 * - exec_strategy "supervised" (spec->process.expand_opens,
 *   supervise_open.c): every open is trapped; one whose path is not in the
 *   sandbox's view but exists on the host as a regular file is put to the
 *   operator (sandbox_options.expand_ask), and on approval capsule opens
 *   it and injects the descriptor (SECCOMP_IOCTL_NOTIF_ADDFD); every other
 *   open continues in the kernel, under the mount tree and Landlock.
 * - The unix-socket supervisor: below Landlock ABI 9, which cannot tell a
 * host's pathname unix socket inside a grant from the sandbox's own, the
 * command's connect() calls are trapped by a seccomp user-notification
 * filter and performed here, in capsule's process, on the tool's socket
 * (pidfd_getfd), after resolving the address inside the sandbox's root.
 * Only sockets the manifest grants explicitly (a grant whose path is the
 * socket itself, with write access) and sockets on the sandbox's private
 * tmpfs are reached. Lifecycle, all in spawn.c's sandbox_run:
 *   supervise_prepare (before clone) -> supervise_in_child (child) ->
 *   supervise_start (parent, once setup succeeded) -> supervise_fd /
 *   supervise_serve (the supervise loop, until the first notification
 *   starts the pool of threads that serves them from then on) ->
 *   supervise_free.
 * A NULL supervisor (ABI 9 and later: Landlock holds it, and no open
 * supervised) makes every call a no-op. Not thread-safe: one thread drives
 * it; the connects and opens it serves run in its pool's threads (an open
 * waiting for the operator in a thread of its own). */
#ifndef CAPSULE_SANDBOX_SUPERVISE_H
#define CAPSULE_SANDBOX_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "manifest/model.h"

struct supervise;

/* The Landlock ABI that controls pathname unix sockets itself. */
#define SUPERVISE_LANDLOCK_UNIX_ABI 9

/* In the command: the fd the seccomp listener travels on (-1: not
 * supervised; seccomp_apply then loads no notification rules), and what
 * the filter's notification rules trap. */
#define SUPERVISE_TRAP_CONNECT 1u /* connect, and unix datagram sockets refused */
#define SUPERVISE_TRAP_OPEN 2u    /* open, openat, openat2, creat */
extern int supervise_pass_fd;
extern unsigned supervise_traps;

/* Before the clone: *ret is NULL when this kernel's Landlock holds pathname
 * unix sockets itself and no open is to be supervised; else the supervisor
 * with its hand-over channel. tool_uid/tool_gid: the host ids the command
 * runs as, whose file permissions the supervisor's connects obey; opt: the
 * expansion's hooks and the state paths never expanded to. Returns 0 or
 * -errno. */
int supervise_prepare(struct supervise **ret, const struct cap_spec *spec,
                      const struct sandbox_options *opt, uid_t tool_uid, gid_t tool_gid,
                      struct cap_error *err);

/* In the child, before pid 1 forks the command. */
void supervise_in_child(struct supervise *sup);

/* In the parent once the command has exec'd: takes the listener it sent. */
int supervise_start(struct supervise *sup, struct cap_error *err);

/* The listener for the supervise loop to poll for POLLIN until the first
 * notification (-1 from then on, or without a supervisor): a run whose
 * tool never makes a trapped call makes no thread. */
int supervise_fd(const struct supervise *sup);

/* With what poll said of supervise_fd: starts the pool, which serves that
 * notification and every later one. */
void supervise_serve(struct supervise *sup, short revents);

/* The sandbox's egress proxy, before proxy_start (NULL detaches it, before
 * proxy_stop): when this supervisor performs the tool's connects in a
 * network namespace of the sandbox's own, the thread that made a connection
 * to one of the proxy's listeners serves it itself (proxy_connected), and
 * the proxy is told so (proxy_expect_supervisor). */
struct proxy;
void supervise_attach_proxy(struct supervise *sup, struct proxy *px);

/* Stops the pool and releases the supervisor; connects and opens still in
 * flight finish on their own. */
void supervise_free(struct supervise *sup);

/* landlock.c: whether a grant is a pathname unix socket granted itself
 * (write or read-write access): the manifest's way to let a tool connect. */
bool sandbox_grant_is_unix_socket(const struct cap_fs_grant *g);

/* landlock.c: the TCP ports the tool may connect to where Landlock handles
 * TCP (every mode but unrestricted, ABI 4 on); writes up to max, returns
 * how many. */
size_t landlock_connect_ports(const struct cap_spec *spec, uint16_t *out, size_t max);

/* The command's side, called by seccomp_apply (seccomp.c) once it has
 * loaded the filter holding the notification rules: sends its listener
 * over supervise_pass_fd (and closes that). Return 0 or -errno. */
int supervise_send_listener(int listener, struct cap_error *err);

#endif
