/* sandstep-state-dir.c: where the state directory is (sandstep-state-dir.h). */
#include "sandstep-state-dir.h"

#include <limits.h>

#include "sandstep-trust-libc.h"

char *
sandstep_state_dir (void)
{
  char dir[PATH_MAX];

  if (sandstep_state_dir_default (dir, sizeof dir))
    return g_strdup (dir);
  return g_build_filename (g_get_user_state_dir (), "sandstep", NULL);
}
