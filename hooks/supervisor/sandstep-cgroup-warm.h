/* sandstep-cgroup-warm.h: the kernel's wait before a sandbox's first cgroup move, started early.
 *
 * The first move of a process into a cgroup after a quiet spell waits for an
 * RCU grace period (the kernel's cgroup_threadgroup_rwsem, one for every
 * hierarchy; 5 to 15 ms on this project's VMs), and a move right after
 * another costs nothing.  So whoever is about to start a supervisor first
 * makes a move of its own, of a process into the cgroup it is already in (a
 * no-op), and the kernel's wait runs while the supervisor starts.
 *
 * Only where a sandbox's first process is moved by its pid, and moves wait:
 * a jail the supervisor builds is born in its cgroup on cgroup v2 (clone3's
 * CLONE_INTO_CGROUP) and moves itself in on v1 (a thread that moves itself
 * takes none of the wait: sandstep_cgroup_open_moves()), and there a warm-up
 * would only hold the kernel's cgroup lock while those come.  So its one
 * caller is the go-between, whose jail, started before the supervisor runs,
 * is moved by its pid on v2.  Plain C: the static front links it.  Where no
 * cgroup file is writable, nothing happens.
 */
#pragma once

/* The host property the warm-up depends on: 1 when a first cgroup move waits for the kernel here (no cgroup
 * file system is mounted with favordynmods, nor the kernel booted with cgroup_favordynmods=1), 0 when moves
 * cost nothing.  Read once per process from /proc/self/mountinfo. */
int sandstep_cgroup_moves_wait (void);
/* The same from a mountinfo file of the caller's choosing (unreadable: 1). */
int sandstep_cgroup_moves_wait_in (const char *mountinfo);

/* Whether sandboxes' cgroups here are cgroup v1's: its memory and pids hierarchies are writable to this process
 * (sandstep_cgroup_kind()'s first rule). */
int sandstep_cgroup_v1_writable (void);

/* Where moves wait, on cgroup v2: a no-op move of a detached grandchild with no descriptor of ours, which nobody
 * waits for, into the cgroups this process is in (its unified one and its v1 pids one, the first writable);
 * returns at once.  Elsewhere nothing.  Safe in a threaded caller: the grandchild makes only system calls and string
 * calls that take no lock. */
void sandstep_cgroup_warm_up (void);
