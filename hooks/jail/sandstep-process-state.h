/* sandstep-process-state.h: a service's process state, not that of whoever started it.
 *
 * A supervisor, and the jail its starter clones for it, must not inherit the
 * caller's umask, groups, resource limits or scheduling: the commands of a
 * sandbox would otherwise depend on which caller happened to start its
 * supervisor.  The system's defaults are pid 1's.  The caller's CPUs are the
 * exception: `taskset`, `numactl` and Slurm's CPU binding confine a sandbox
 * as they confine the step that started it.
 *
 * Plain C: the static front uses it too.
 */
#pragma once

#include <sched.h>
#include <sys/types.h>

/* umask 022; as root, no supplementary groups; the default personality (address randomisation on), scheduling
 * policy and I/O priority; nice 0 (where allowed: a lowered priority only root can undo); and pid 1's resource
 * limits (as close as allowed where a hard limit cannot be raised).  The CPUs stay the caller's. */
void sandstep_process_state_reset (void);

/* Moves @pid, just forked, to the CPU of @cpus (the caller's) that follows this one, where there is one: a
 * child waits for its parent's CPU on hosts that pack tasks onto few CPUs (a VM's scheduler may, to spare its
 * host), and the two would take turns where they could run at once.  The next CPU, not a fixed one, so that
 * many first commands at once (make -j64) spread as their callers are spread.  The child must take back @cpus
 * itself at a point that comes after this call (the jail's child once told to go), or be given them back by
 * whoever next may (the supervisor, first thing, from its --cpus=). */
void sandstep_process_start_elsewhere (pid_t pid, const cpu_set_t *cpus);

/* A CPU set as text (hex, lowest CPU last, as taskset prints a mask) and back; the text needs
 * SANDSTEP_CPUS_TEXT_MAX bytes.  Parsing returns 0 for text that is not such a mask, or names no CPU. */
#define SANDSTEP_CPUS_TEXT_MAX (CPU_SETSIZE / 4 + 1)
void sandstep_cpus_format (const cpu_set_t *cpus, char *out);
int sandstep_cpus_parse (const char *text, cpu_set_t *out);
