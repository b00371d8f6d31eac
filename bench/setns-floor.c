/* setns-floor.c: the floor the kernel allows for a command in a live sandbox.
 *
 *   setns-floor PID PROGRAM [ARGS...]
 *
 * Joins the user, mount, net, ipc, uts and pid namespaces of PID (a
 * sandbox's init), vforks, execs PROGRAM there and waits for it: only the
 * system calls a command in existing namespaces cannot do without.  No
 * claim, no limits, no seccomp, no stdio care: a floor, not a sandbox.
 * bench/run builds it statically and measures it beside sandstep.  Needs root.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  static const char *const names[] = { "user", "mnt", "net", "ipc", "uts", "pid" };
  int fds[6];
  pid_t child;
  int status;

  if (argc < 3)
    {
      fprintf (stderr, "usage: setns-floor PID PROGRAM [ARGS...]\n");
      return 2;
    }
  for (int i = 0; i < 6; i++)
    {
      char path[64];
      snprintf (path, sizeof path, "/proc/%s/ns/%s", argv[1], names[i]);
      if ((fds[i] = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        {
          perror (path);
          return 1;
        }
    }
  for (int i = 0; i < 6; i++)
    if (setns (fds[i], 0) < 0)
      {
        perror ("setns");
        return 1;
      }
  child = vfork ();
  if (child == 0)
    {
      execv (argv[2], argv + 2);
      _exit (127);
    }
  if (child < 0 || waitpid (child, &status, 0) < 0)
    return 1;
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}
