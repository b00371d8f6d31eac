/* sandstep-cgroup-warm.c: a no-op cgroup move, to start the kernel's wait early; see the header. */
#include "sandstep-cgroup-warm.h"
#include "sandstep-read-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* "0" in cgroup.procs is the writer's own process. */
static int
write_self (const char *mount, const char *path)
{
  char file[4096];
  int fd, ok;

  if (snprintf (file, sizeof file, "%s%s/cgroup.procs", mount, path) >= (int) sizeof file)
    return 0;
  fd = open (file, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ok = write (fd, "0", 1) == 1;
  close (fd);
  return ok;
}

/* Moves this process into its own cgroup: the first writable of its unified (v2) cgroup and its v1 pids
 * cgroup.  Blocks for the kernel's wait; 1 when a move was made. */
static int
move_self (void)
{
  char text[8192];
  char *line, *next;
  ssize_t n = sandstep_read_small ("/proc/self/cgroup", text, sizeof text);

  if (n <= 0)
    return 0;
  /* A line cut short by the buffer could name an ancestor: only whole lines count. */
  if (text[n - 1] != '\n')
    {
      char *last = strrchr (text, '\n');
      if (last == NULL)
        return 0;
      last[1] = '\0';
    }
  /* Lines "ID:CONTROLLERS:PATH"; the unified hierarchy's has no controllers. */
  for (line = text; *line != '\0'; line = next)
    {
      char *controllers, *path;

      next = strchr (line, '\n');
      next = next != NULL ? (*next = '\0', next + 1) : line + strlen (line);
      controllers = strchr (line, ':');
      path = controllers != NULL ? strchr (controllers + 1, ':') : NULL;
      if (path == NULL || path[1] != '/')
        continue;
      *path++ = '\0';
      controllers++;
      if (controllers[0] == '\0' && (write_self ("/sys/fs/cgroup", path) || write_self ("/sys/fs/cgroup/unified", path)))
        return 1;
      if (strcmp (controllers, "pids") == 0 && write_self ("/sys/fs/cgroup/pids", path))
        return 1;
    }
  return 0;
}

/* Whether a mount of a cgroup file system in @line (of /proc/self/mountinfo) has favordynmods. */
static int
favors_dynmods (const char *line)
{
  /* "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER_OPTIONS" */
  const char *dash = strstr (line, " - ");
  const char *type, *options;

  if (dash == NULL)
    return 0;
  type = dash + 3;
  if (strncmp (type, "cgroup2 ", 8) != 0 && strncmp (type, "cgroup ", 7) != 0)
    return 0;
  options = strrchr (type, ' ');
  return options != NULL && strstr (options, "favordynmods") != NULL;
}

int
sandstep_cgroup_moves_wait_in (const char *mountinfo)
{
  FILE *mounts = fopen (mountinfo, "re");
  char *line = NULL;
  size_t size = 0;
  int favored = 0;

  if (mounts == NULL)
    return 1;
  /* The kernel keeps one lock for the moves of every hierarchy: one mount that favors them favors all. */
  while (!favored && getline (&line, &size, mounts) > 0)
    favored = favors_dynmods (line);
  free (line);
  fclose (mounts);
  return !favored;
}

int
sandstep_cgroup_moves_wait (void)
{
  static int known = -1;

  if (known < 0)
    known = sandstep_cgroup_moves_wait_in ("/proc/self/mountinfo");
  return known;
}

int
sandstep_cgroup_v1_writable (void)
{
  return access ("/sys/fs/cgroup/memory", W_OK) == 0 && access ("/sys/fs/cgroup/pids", W_OK) == 0;
}

void
sandstep_cgroup_warm_up (void)
{
  pid_t child;

  if (!sandstep_cgroup_moves_wait () || sandstep_cgroup_v1_writable ())
    return;
  child = fork ();

  if (child == 0)
    {
      /* The grandchild's parent ends at once: nobody reaps it or waits on its descriptors. */
      if (fork () == 0)
        {
          if (syscall (SYS_close_range, 0, ~0U, 0) < 0)
            for (int fd = 0; fd < 1024; fd++)
              close (fd);
          move_self ();
        }
      _exit (0);
    }
  if (child > 0)
    while (waitpid (child, NULL, 0) < 0 && errno == EINTR)
      ;
}
