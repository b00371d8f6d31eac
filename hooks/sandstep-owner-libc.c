/* sandstep-owner-libc.c: the owner of a step's run, with libc alone (see the header). */
#include "sandstep-owner-libc.h"

#include <stdio.h>
#include <string.h>

/* As plugin/sandstep-identity.c's RUN_ID_MAX. */
#define RUN_ID_MAX 128

static int
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == '\v';
}

static int
run_is_valid (const char *run)
{
  size_t len = strlen (run);

  if (len == 0 || len > RUN_ID_MAX || run[0] == '.' || run[0] == '-')
    return 0;
  for (const char *p = run; *p != '\0'; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr ("._:@+-", *p) != NULL))
      return 0;
  return 1;
}

SandstepRunOwner
sandstep_run_owner (const char *run, const char *dag, const char *top, char *out, size_t size)
{
  const char *name;
  size_t len;
  int n;

  if (run == NULL || run[0] == '\0')
    return SANDSTEP_RUN_OWNER_NONE;
  if (!run_is_valid (run))
    return SANDSTEP_RUN_OWNER_BAD_RUN;
  if (dag != NULL && dag[0] != '\0')
    {
      /* g_strstrip()ped, as the plugin does. */
      while (is_space (*dag))
        dag++;
      name = dag;
      len = strlen (dag);
      while (len > 0 && is_space (dag[len - 1]))
        len--;
    }
  else if (top != NULL && top[0] != '\0')
    {
      /* g_path_get_basename(): the last component, trailing slashes aside. */
      len = strlen (top);
      while (len > 1 && top[len - 1] == '/')
        len--;
      name = top + len;
      while (name > top && name[-1] != '/')
        name--;
      len = (size_t) (top + len - name);
      if (len == 0)
        name = "/", len = 1;
    }
  else
    return SANDSTEP_RUN_OWNER_NO_DAG;
  if (len == 0 || (len == 1 && (name[0] == '/' || name[0] == '.')))
    name = "root", len = 4;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char) name[i] < 0x20 || name[i] == 0x7f || name[i] == '/')
      return SANDSTEP_RUN_OWNER_BAD_DAG;
  n = snprintf (out, size, "%.*s/%s", (int) len, name, run);
  return n > 0 && (size_t) n < size ? SANDSTEP_RUN_OWNER_OK : SANDSTEP_RUN_OWNER_BAD_DAG;
}

SandstepRunOwner
sandstep_step_owner (const char *owner, const char *run, const char *dag, const char *top, char *out, size_t size)
{
  if (owner != NULL && owner[0] != '\0')
    {
      size_t len = strlen (owner);

      if (len >= size)
        return SANDSTEP_RUN_OWNER_TOO_LONG;
      memcpy (out, owner, len + 1);
      return SANDSTEP_RUN_OWNER_OK;
    }
  return sandstep_run_owner (run, dag, top, out, size);
}
