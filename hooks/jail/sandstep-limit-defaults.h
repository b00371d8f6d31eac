/* sandstep-limit-defaults.h: a sandbox's limits when its spec sets none.
 *
 * Plain C: the static front reads them too, to name a limit a remote
 * command hit (programs/sandstep-front-remote.c).
 */
#pragma once

#define SANDSTEP_DEFAULT_MEMORY (2ULL << 30)
#define SANDSTEP_DEFAULT_PIDS 1024
#define SANDSTEP_DEFAULT_CPU_TIME_S (60 * 60)
#define SANDSTEP_DEFAULT_DISK (8ULL << 30)
#define SANDSTEP_DEFAULT_NOFILE 4096
/* A sandbox's I/O weight among the other sandboxes: the kernel's default (io.weight, blkio.bfq.weight), so that
 * the default costs no write and no cgroup of its own. */
#define SANDSTEP_DEFAULT_IO_WEIGHT 100
/* The weights of the group that holds every sandbox (sandstep/ under the root), against the host's other groups
 * and, on cgroup v1, each of the root's own processes: half the kernel's default (cpu.weight 100, cpu.shares
 * 1024, io.weight 100): against one busy group of the host, all sandboxes together get a third of the CPU and
 * disk however many there are, and all of it when the host is idle (weights bound nobody who is alone). */
#define SANDSTEP_GROUP_CPU_WEIGHT 50
#define SANDSTEP_GROUP_IO_WEIGHT 50
/* A sandbox's share of its caller's inotify instances and watches: the kernel counts those per user, host-wide
 * (fs.inotify.max_user_instances, 128 by default), and charges a sandbox's to whoever made its user namespace;
 * this bounds them in that namespace (/proc/sys/user/max_inotify_*). */
#define SANDSTEP_DEFAULT_INOTIFY_INSTANCES 16
#define SANDSTEP_DEFAULT_INOTIFY_WATCHES 16384
