/* sandstep-jail-child.h: the child a jail is cloned into, as its starter sees it.
 *
 * sandstep-jail-child.c runs between clone3() and the exec of init: plain
 * system calls on what the jail's image already holds, each failure reported
 * as a step the builder (sandstep-jail.c) names.
 *
 * Plain C.
 */
#pragma once

#include "sandstep-host-addresses.h"

#include <linux/mount.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "sandstep-jail-image.h"
#include "sandstep-jail-init.h"

typedef struct {
  const SandstepJailImage *image;
  int init_fd;          /* sandstep-init */
  int last_cap;
  int go;               /* the maps are written (with the trees), then: it is in its cgroup */
  int report;
  int control;          /* init's end */
  int egress;           /* -1 unless network=allow */
  int others[3];        /* the starter's ends, which the child must not hold */
  char *const *argv;    /* init's */
  cpu_set_t cpus;       /* the starter's: the child's once it runs (empty: leave it) */
  const SandstepHostAddresses *unreachable;  /* --network=open: the host's addresses, routed nowhere */
} SandstepJailChildArgs;

/* Writes @data to @path in one write() and closes it, checking both: for /proc files.  0 or -1 with errno. */
int sandstep_jail_write_file (const char *path, const void *data, size_t len, int open_flags, mode_t mode);

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
