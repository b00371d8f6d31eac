/* sandstep-programs-libc.c: the table of sandstep's programs and the one
 * search for them (sandstep-programs-libc.h). */
#include "sandstep-programs-libc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-paths.h"

typedef struct {
  const char *name;
  const char *installed_rel;  /* under the prefix (sandstep-paths.h) */
  const char *installed;      /* compiled in */
  const char *built;          /* under the build tree */
} Program;

/* Every other program (sandstep-core, sandstep-net, sandstep-supervise, sandstep-init) is the last row's. */
static const Program programs[] = {
  { "sandstep", SANDSTEP_BINDIR_REL, SANDSTEP_BINDIR, "programs" },
  { "sandstepd", SANDSTEP_SBINDIR_REL, SANDSTEP_SBINDIR, "daemon" },
  { "sandstep-remote.so", SANDSTEP_LIBEXECDIR_REL, SANDSTEP_LIBEXECDIR, "hooks/remote" },
  { NULL, SANDSTEP_LIBEXECDIR_REL, SANDSTEP_LIBEXECDIR, "programs" },
};

static const Program *
program_of (const char *name)
{
  const Program *program = programs;

  while (program->name != NULL && strcmp (program->name, name) != 0)
    program++;
  return program;
}

const char *
sandstep_program_installed_dir (const char *name)
{
  return program_of (name)->installed;
}

static int
written (int n, size_t size)
{
  return n > 0 && (size_t) n < size;
}

int
sandstep_program_candidate (int i, const char *from_dir, const char *name, char *out, size_t size)
{
  static const char *const install_rels[] = { SANDSTEP_BINDIR_REL, SANDSTEP_SBINDIR_REL, SANDSTEP_LIBEXECDIR_REL,
                                              SANDSTEP_PLUGINDIR_REL };
  const Program *program = program_of (name);

  switch (i)
    {
    case 0:
      return from_dir != NULL && written (snprintf (out, size, "%s/%s", from_dir, name), size);
    case 1:
#ifdef SANDSTEP_BUILD_ROOT
      if (from_dir != NULL && strncmp (from_dir, SANDSTEP_BUILD_ROOT "/", strlen (SANDSTEP_BUILD_ROOT "/")) == 0)
        return written (snprintf (out, size, "%s/%s/%s", SANDSTEP_BUILD_ROOT, program->built, name), size);
#endif
      return 0;
    case 2:
      for (size_t r = 0; from_dir != NULL && r < sizeof install_rels / sizeof install_rels[0]; r++)
        if (sandstep_relocate (from_dir, install_rels[r], program->installed_rel, name, out, size))
          return 1;
      return 0;
    case 3:
      return written (snprintf (out, size, "%s/%s", program->installed, name), size);
    default:
      return -1;
    }
}

char *
sandstep_program_path (const char *from_dir, const char *name)
{
  char self[PATH_MAX], path[PATH_MAX + 64];
  size_t len = strlen (name);
  /* A module is loaded, not run. */
  int module = len > 3 && strcmp (name + len - 3, ".so") == 0;
  int found;

  if (from_dir == NULL)
    {
      ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
      char *slash = n > 0 ? (self[n] = '\0', strrchr (self, '/')) : NULL;

      if (slash != NULL)
        {
          *slash = '\0';
          from_dir = self;
        }
    }
  for (int i = 0; (found = sandstep_program_candidate (i, from_dir, name, path, sizeof path)) >= 0; i++)
    if (found && access (path, module ? R_OK : X_OK) == 0)
      return strdup (path);
  snprintf (path, sizeof path, "%s/%s", program_of (name)->installed, name);
  return strdup (path);
}
