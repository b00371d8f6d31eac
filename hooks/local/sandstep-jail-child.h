/* sandstep-jail-child.h: the child a jail is cloned into, as the builder sees it.
 *
 * sandstep-jail-child.c runs between clone3() and the exec of init: plain
 * system calls on what the plan already holds, each failure reported as a
 * step the builder (sandstep-jail.c) names.
 */
#pragma once

#include <linux/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-jail-private.h"

G_BEGIN_DECLS

#define NEWROOT SANDSTEP_JAIL_NEWROOT

/* Failure steps the child can report besides the ops (which are 0..n-1). */
enum {
  STEP_PARENT_GONE = -100,
  STEP_SETUID,
  STEP_CGROUP_NS,
  STEP_PRIVATE,
  STEP_PIVOT,
  STEP_ROOT_RDONLY,
  STEP_LOOPBACK,
  STEP_HOSTNAME,
  STEP_SETSID,
  STEP_RLIMIT,
  STEP_STDIO,
  STEP_CHDIR,
  STEP_SECUREBITS,
  STEP_CAPS,
  STEP_NNP,
  STEP_SECCOMP,
  STEP_INIT_FD,
};

typedef struct {
  SandstepJail *jail;
  int go;               /* the supervisor says when the maps are written (with the trees), then when it is in its cgroup */
  int report;
  int control;          /* init's end */
  int egress;           /* -1 unless network=allow */
  int others[3];        /* the supervisor's ends, which the child must not hold */
  char *const *argv;    /* init's */
} SandstepJailChildArgs;

/* Writes @data to @path in one write() and closes it, checking both: for /proc files. */
int sandstep_jail_write_file (const char *path, const void *data, gsize len, int open_flags, mode_t mode);

/* Never returns: execs init, or reports the failed step on args->report and exits 125. */
int sandstep_jail_child_main (SandstepJailChildArgs *args);

static inline int
sys_open_tree (int dfd, const char *path, unsigned flags)
{
  return syscall (SYS_open_tree, dfd, path, flags);
}

static inline int
sys_move_mount (int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags)
{
  return syscall (SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

static inline int
sys_mount_setattr (int dfd, const char *path, unsigned flags, struct mount_attr *attr)
{
  return syscall (SYS_mount_setattr, dfd, path, flags, attr, sizeof *attr);
}


G_END_DECLS
