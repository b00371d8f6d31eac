/* sandstep-process-state.h: a service's process state, not that of whoever started it.
 *
 * A supervisor, and the jail its starter clones for it, must not inherit the
 * caller's umask, groups, resource limits, scheduling or CPU affinity: the commands
 * of a sandbox would otherwise depend on which caller happened to start its
 * supervisor.  The system's defaults are pid 1's.
 *
 * Plain C: the static front uses it too.
 */
#pragma once

/* umask 022; as root, no supplementary groups; the default personality (address randomisation on), scheduling
 * policy and I/O priority; nice 0 (where allowed: a lowered priority only root can undo); every CPU; and pid 1's
 * resource limits (as close as allowed where a hard limit cannot be raised). */
void sandstep_process_state_reset (void);
