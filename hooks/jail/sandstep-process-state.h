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

#include <sched.h>
#include <sys/types.h>

/* umask 022; as root, no supplementary groups; the default personality (address randomisation on), scheduling
 * policy and I/O priority; nice 0 (where allowed: a lowered priority only root can undo); every CPU; and pid 1's
 * resource limits (as close as allowed where a hard limit cannot be raised). */
void sandstep_process_state_reset (void);

/* Every CPU, as an affinity: what a service's processes run on. */
void sandstep_process_every_cpu (cpu_set_t *out);

/* Moves @pid, just forked, to a CPU of @cpus other than this one, where there is one.  A child waits for its
 * parent's CPU on hosts that pack tasks onto few CPUs (a VM's scheduler may, to spare its host): the two would
 * take turns where they could run at once.  The child must take back every CPU itself at a point that comes
 * after this call (the jail's child once told to go), or be given them back by whoever next may (the
 * supervisor, first thing). */
void sandstep_process_start_elsewhere (pid_t pid, const cpu_set_t *cpus);
