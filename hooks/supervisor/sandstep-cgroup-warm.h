/* sandstep-cgroup-warm.h: the kernel's wait before a sandbox's first cgroup move, started early.
 *
 * The first move of a process into a cgroup after a quiet spell waits for an
 * RCU grace period (the kernel's cgroup_threadgroup_rwsem, one for every
 * hierarchy; 5 to 15 ms on this project's VMs), and a move right after
 * another costs nothing.  So whoever is about to start a supervisor first
 * makes a move of its own, of a process into the cgroup it is already in (a
 * no-op), and the kernel's wait runs while the supervisor starts.
 *
 * Plain C: the static front calls it too.  Where no cgroup file is
 * writable, nothing happens.
 */
#pragma once

/* Moves this process into its own cgroup: the first writable of its
 * unified (v2) cgroup and its v1 pids cgroup.  Blocks for the kernel's
 * wait; 1 when a move was made. */
int sandstep_cgroup_move_self (void);

/* The same from a detached grandchild with no descriptor of ours, which
 * nobody waits for: returns at once.  For a single-threaded caller (the
 * front): the children do more than a forked thread may. */
void sandstep_cgroup_warm_up_detached (void);
