/* sandstep-host-addresses.h: the host's own addresses, which a --network=open sandbox must not reach.
 *
 * An open sandbox's traffic leaves through pasta, whose sockets are the host's: a connection to the host's
 * address on another interface (a second NIC, docker0, a VPN) would reach the host's services.  The starter
 * reads those addresses as it starts the jail, and the jail's child routes each to "unreachable" in the
 * sandbox's own network namespace, where the sandbox's commands, which hold no capability, cannot change a
 * route.  Plain C: the static front starts jails too.
 */
#pragma once

#include <netinet/in.h>
#include <stdint.h>

/* More than any host has but a router; past it a start fails, saying so, rather than leave one reachable. */
#define SANDSTEP_HOST_ADDRESSES_MAX 256

typedef struct {
  uint32_t n4, n6;
  struct in_addr v4[SANDSTEP_HOST_ADDRESSES_MAX];
  struct in6_addr v6[SANDSTEP_HOST_ADDRESSES_MAX];
} SandstepHostAddresses;

/* The host's addresses but loopback's and IPv6 link-local ones (pasta never routes those to the host).
 * 0, or -1 with errno (E2BIG: more than SANDSTEP_HOST_ADDRESSES_MAX of one family). */
int sandstep_host_addresses_read (SandstepHostAddresses *out);

/* In the calling process's network namespace, a host route of type unreachable to each of @addresses: a
 * connection gets EHOSTUNREACH at once.  0, or -1 with errno. */
int sandstep_host_addresses_unroute (const SandstepHostAddresses *addresses);
