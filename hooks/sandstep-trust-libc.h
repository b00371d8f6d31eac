/* sandstep-trust-libc.h: whose state directory and whose sockets a caller trusts, in plain C.
 *
 * A state directory decides what a command's stdin, stdout and stderr are
 * handed to (its sandboxes' supervisor.sock), so another user who can write
 * it, or any directory above it, can serve every command of the caller.
 * As ssh's StrictModes: the state directory must be the caller's and no one
 * else's to write; every directory above it must be root's or the caller's,
 * and writable by no one else, unless it is root's and sticky (/tmp), where
 * no one else can rename or remove what the caller made.  And a socket
 * there is spoken to only when the process behind it (SO_PEERCRED) is the
 * caller's own.  The core (sandstep-state-dir.c, hooks/local/sandstep-store.c,
 * sandstep-run-client.c) and the static front (programs/sandstep-front.c)
 * call these, so both read a state directory the same way.
 */
#pragma once

#include <stddef.h>

/* Where the state directory is: $SANDSTEP_STATE_DIR, else /var/lib/sandstep for root, else
 * $XDG_STATE_HOME/sandstep, else ~/.local/state/sandstep (as written, not resolved).  1 with it in @out, or 0
 * when no place is known (no HOME) or it does not fit. */
int sandstep_state_dir_default (char *out, size_t size);

/* 1 when the state directory @dir (existing; links resolved here) is
 * trusted by the rule above, else 0 with one line in @why (@why_size
 * bytes) naming the directory at fault, its owner or mode, and what to do. */
int sandstep_state_dir_trusted (const char *dir, char *why, size_t why_size);

/* 1 when the peer of the connected unix socket @sock runs as this process's
 * effective uid; 0 otherwise (errno EPERM), or when it cannot be told. */
int sandstep_socket_peer_trusted (int sock);
