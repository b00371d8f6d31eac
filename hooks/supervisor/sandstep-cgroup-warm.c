/* sandstep-cgroup-warm.c: a no-op cgroup move, to start the kernel's wait early; see the header. */
#include "sandstep-cgroup-warm.h"
#include "sandstep-read-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

int
sandstep_cgroup_move_self (void)
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

void
sandstep_cgroup_warm_up_detached (void)
{
  pid_t child = fork ();

  if (child == 0)
    {
      /* The grandchild's parent ends at once: nobody reaps it or waits on its descriptors. */
      if (fork () == 0)
        {
          if (syscall (SYS_close_range, 0, ~0U, 0) < 0)
            for (int fd = 0; fd < 1024; fd++)
              close (fd);
          sandstep_cgroup_move_self ();
        }
      _exit (0);
    }
  if (child > 0)
    while (waitpid (child, NULL, 0) < 0 && errno == EINTR)
      ;
}
