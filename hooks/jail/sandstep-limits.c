/* sandstep-limits.c: the defaults of a sandbox's limits. */
#include "sandstep-limits.h"

SandstepLimits
sandstep_limits_resolve (const SandstepLimits *limits)
{
  SandstepLimits out = *limits;

  if (out.memory == 0)
    out.memory = SANDSTEP_DEFAULT_MEMORY;
  if (out.pids == 0)
    out.pids = SANDSTEP_DEFAULT_PIDS;
  if (out.cpu_time_s == 0)
    out.cpu_time_s = SANDSTEP_DEFAULT_CPU_TIME_S;
  if (out.disk == 0)
    out.disk = SANDSTEP_DEFAULT_DISK;
  if (out.io_weight == 0)
    out.io_weight = SANDSTEP_DEFAULT_IO_WEIGHT;
  return out;
}
