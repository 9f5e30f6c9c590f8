/* Shared by instance.c (leases, the keeper) and instance_status.c
 * (listing, stopping): internal to src/gateway. */
#ifndef CAPSULE_GATEWAY_INSTANCE_INT_H
#define CAPSULE_GATEWAY_INSTANCE_INT_H

#include <stdint.h>
#include <sys/un.h>

/* Connects to the keeper at sa by deadline (a full backlog is waited out),
 * and only to one run by this user: returns the socket, or -EPERM for a
 * socket planted by someone else, or -errno. */
int gw_instance_connect(const struct sockaddr_un *sa, uint64_t deadline);

#endif
