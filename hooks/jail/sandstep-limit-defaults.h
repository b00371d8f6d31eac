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
/* A sandbox's share of its caller's inotify instances and watches: the kernel counts those per user, host-wide
 * (fs.inotify.max_user_instances, 128 by default), and charges a sandbox's to whoever made its user namespace;
 * this bounds them in that namespace (/proc/sys/user/max_inotify_*). */
#define SANDSTEP_DEFAULT_INOTIFY_INSTANCES 16
#define SANDSTEP_DEFAULT_INOTIFY_WATCHES 16384
