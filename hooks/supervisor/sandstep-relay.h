/* sandstep-relay.h: copy bytes both ways between two connected sockets.
 *
 * Plain C, no GLib: the jail's static init relays with it too.  An end of
 * stream on one side is passed on as a half-close (shutdown SHUT_WR), and
 * the relay returns when both directions are done or either side fails.
 */
#pragma once

#include <stddef.h>

/* @pending: bytes already read from @a, written to @b first. */
void sandstep_relay (int a, int b, const char *pending, size_t pending_len);
