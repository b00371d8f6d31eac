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

#include "sandstep-limit-defaults.h"
#include "sandstep-spec.h"

G_BEGIN_DECLS

/* @limits with every 0 replaced by its default. */
SandstepLimits sandstep_limits_resolve (const SandstepLimits *limits);

G_END_DECLS
