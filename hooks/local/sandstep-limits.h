/* sandstep-limits.h: resource limits of one command.
 *
 * Memory and process counts are enforced for the whole command through a
 * cgroup made for it (cgroup v1 controllers, or v2 where the helper may
 * delegate), else per process through rlimits; CPU time and file size are
 * rlimits.  RLIMIT_NPROC is set in every case: counted per user namespace,
 * it bounds the command's processes even without a cgroup.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "sandstep-spec.h"

G_BEGIN_DECLS

#define SANDSTEP_DEFAULT_MEMORY (2ULL << 30)
#define SANDSTEP_DEFAULT_PIDS 1024
#define SANDSTEP_DEFAULT_CPU_TIME_S (60 * 60)
#define SANDSTEP_DEFAULT_DISK (8ULL << 30)
#define SANDSTEP_DEFAULT_NOFILE 4096

/* @limits with every 0 replaced by its default. */
SandstepLimits sandstep_limits_resolve (const SandstepLimits *limits);

typedef struct _SandstepCgroup SandstepCgroup;

typedef enum {
  SANDSTEP_CGROUP_NONE,     /* no cgroup can be made here: rlimits only */
  SANDSTEP_CGROUP_V1,
  SANDSTEP_CGROUP_V2,
} SandstepCgroupKind;

/* What this process can use, found once. */
SandstepCgroupKind sandstep_cgroup_kind (void);

/* Moves this process into the sandbox's cgroup @name (made with the memory
 * and pids limits on first use), so a jail cloned next is born inside.  One
 * cgroup serves every command of a sandbox: its commands never overlap.
 * NULL (no error) when no cgroup can be made here. */
SandstepCgroup *sandstep_cgroup_enter (const char *name, guint64 memory, gint64 pids, GError **error);

/* The same for the calling thread alone where the hierarchy allows it
 * (cgroup v1's tasks), so that the process's other threads stay out; on
 * cgroup v2 the whole process moves. */
SandstepCgroup *sandstep_cgroup_enter_thread (const char *name, guint64 memory, gint64 pids, GError **error);

/* Moves this process (or thread) back out; reports whether the memory or the pids limit
 * was hit since it entered. */
void sandstep_cgroup_leave (SandstepCgroup *cgroup, gboolean *out_memory_hit, gboolean *out_pids_hit);

/* The cgroup @name as seen from where this process is now, without
 * entering or making it; NULL when no cgroup can be made here. */
SandstepCgroup *sandstep_cgroup_find (const char *name);
void sandstep_cgroup_free (SandstepCgroup *cgroup);

/* Its count of OOM kills and of forks refused at its pids limit (0 for
 * NULL): a command that ran while they grew hit them. */
void sandstep_cgroup_counters (SandstepCgroup *cgroup, guint64 *out_oom_kills, guint64 *out_pids_max);

/* Removes the sandbox's cgroup once its last process is gone. */
void sandstep_cgroup_remove (const char *name);

G_END_DECLS
