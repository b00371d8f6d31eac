/* sandstep-jail-start.h: cloning a jail's child and starting it on its image.
 *
 * The one way a live sandbox's namespaces are made, by the supervisor
 * (sandstep-jail.c) or, for a sandbox's first command, by the front's
 * go-between just before it becomes the supervisor (sandstep-supervisor-start.h),
 * so that the child builds the sandbox's root while the supervisor starts.
 * One clone3() makes the user, mount, pid, ipc and uts namespaces, owned by
 * the sandbox's host uid; the child makes its network namespace itself (a
 * third of a millisecond, meanwhile), waits for its uid and gid maps and
 * its trees, builds its root (sandstep-jail-child.c) and then waits to be told
 * that it is in the sandbox's cgroup before it drops every privilege and
 * execs init.  Given the cgroup (v2), the child is born in it instead
 * (clone3's CLONE_INTO_CGROUP), and no process of the sandbox is ever moved.
 *
 * Plain C: the static front links it.
 */
#pragma once

#include <sched.h>
#include <sys/types.h>

#include "sandstep-jail-image.h"

typedef struct {
  pid_t pid;       /* in the starter's pid namespace */
  int pidfd;
  int go;          /* the starter's end: sandstep_jail_start_in_cgroup() */
  int report;      /* EOF once init runs, else one SandstepJailFailure (sandstep-jail-init.h) */
  int control;     /* the starter's end of init's control socket */
  int born_in_cgroup;  /* in the cgroup given from its birth: nothing to move */
} SandstepJailStart;

/* Where a start failed. */
typedef enum {
  SANDSTEP_JAIL_START_SOCKETS = 1,
  SANDSTEP_JAIL_START_HOST_ADDRESSES, /* --network=open: reading the host's addresses */
  SANDSTEP_JAIL_START_TAKE_UID,     /* as root: taking the sandbox's uid to create its namespaces */
  SANDSTEP_JAIL_START_CLONE,
  SANDSTEP_JAIL_START_SETGROUPS,
  SANDSTEP_JAIL_START_UID_MAP,
  SANDSTEP_JAIL_START_GID_MAP,
  SANDSTEP_JAIL_START_USERNS,       /* opening the child's user namespace for the idmapped trees */
  SANDSTEP_JAIL_START_TREE,         /* .index: the tree */
  SANDSTEP_JAIL_START_GO,
} SandstepJailStartStage;

typedef struct {
  SandstepJailStartStage stage;
  int index;
  int errsv;
} SandstepJailStartFailure;

/* Clones @image's child, writes its maps, makes its trees and tells it to build.  @init_fd: sandstep-init, opened
 * O_PATH; @egress_fd: -1 unless network=allow; @cgroup_fd: the sandbox's cgroup v2 directory (O_PATH), which the
 * child is born in where the kernel allows (out->born_in_cgroup says so; elsewhere the caller moves it), or -1;
 * @cpus: the caller's CPUs, which the child takes once told to go (NULL: this process's).  The caller is
 * single-threaded; as root it briefly takes the sandbox's uid as its effective one.  0, or -1 with *@failure;
 * either way *@out holds what was made, for sandstep_jail_start_abandon() once it is not wanted. */
int sandstep_jail_start (const SandstepJailImage *image, int init_fd, int egress_fd, int cgroup_fd,
                         const cpu_set_t *cpus, SandstepJailStart *out, SandstepJailStartFailure *failure);

/* Whether this process starts a child in a given cgroup: 1 until the kernel refused once (a kernel before 5.7,
 * a directory not of cgroup v2, a caller that may not write there), then 0 for the rest of the process, so that
 * no start pays a failed clone3 where it cannot work. */
int sandstep_jail_start_clones_into_cgroup (void);

/* The child is in the sandbox's cgroup (or it has none), or moves itself in with the @n_fds files of @fds (the
 * `tasks` files of its v1 cgroups, opened for writing: sandstep_cgroup_open_moves()), which are sent, not taken:
 * then it may exec init.  0, or -1 with errno (EPIPE: it ended, and its report says why). */
int sandstep_jail_start_in_cgroup (SandstepJailStart *start, const int *fds, unsigned n_fds);

/* Kills the child if there is one, reaps it, and closes every fd of @start. */
void sandstep_jail_start_abandon (SandstepJailStart *start);
