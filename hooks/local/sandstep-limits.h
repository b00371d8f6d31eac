/* sandstep-limits.h: a sandbox's resource limits and their defaults.
 *
 * Memory and processes are limited for the whole sandbox through its
 * cgroup (sandstep-cgroup.h) where one can be made, else per process
 * through rlimits; CPU time and file size are rlimits.  RLIMIT_NPROC is set
 * in every case: counted per user, and the sandbox's uid is its own, it
 * bounds the sandbox's processes even without a cgroup.
 */
#pragma once

#include <glib.h>

#include "sandstep-spec.h"

G_BEGIN_DECLS

#define SANDSTEP_DEFAULT_MEMORY (2ULL << 30)
#define SANDSTEP_DEFAULT_PIDS 1024
#define SANDSTEP_DEFAULT_CPU_TIME_S (60 * 60)
#define SANDSTEP_DEFAULT_DISK (8ULL << 30)
#define SANDSTEP_DEFAULT_NOFILE 4096

/* @limits with every 0 replaced by its default. */
SandstepLimits sandstep_limits_resolve (const SandstepLimits *limits);

G_END_DECLS
