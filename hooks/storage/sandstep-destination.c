/* sandstep-destination.c: what every destination shares (the table of them: sandstep-destinations.c). */
#include "sandstep-destination.h"

SandstepDestination *
sandstep_destination_init (SandstepDestination *dest, const SandstepDestinationClass *klass, const char *path,
                           const char *shown, SandstepExportContext *context)
{
  dest->klass = klass;
  dest->context = context;
  dest->path = g_strdup (path);
  dest->shown = g_strdup (shown);
  dest->rank = klass->commit_rank;
  return dest;
}

void
sandstep_destination_free (SandstepDestination *dest)
{
  if (dest == NULL)
    return;
  g_free (dest->path);
  g_free (dest->shown);
  dest->klass->free (dest);
}
