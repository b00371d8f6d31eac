/* cgroup-move.c: how long the kernel takes for the first move of a process into a cgroup after a quiet spell.
 *
 *   cgroup-move ROUNDS
 *
 * Prints the median, in ms, of ROUNDS moves of a sleeping child into a new cgroup (v1: under the pids
 * hierarchy's "sandstep"; v2: under /sys/fs/cgroup/sandstep), each after 0.2 s of quiet.  On most hosts
 * this write waits for an RCU grace period (the kernel's cgroup_threadgroup_rwsem), which is most of a
 * sandbox's first command there; a host whose cgroup file system is mounted with favordynmods (or booted
 * with cgroup_favordynmods=1) moves without it.  bench/run prints it beside the first-command rows, so
 * that they read right on either kind of host.  Needs root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int
compare (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

int
main (int argc, char **argv)
{
  const char *parent = access ("/sys/fs/cgroup/pids", W_OK) == 0 ? "/sys/fs/cgroup/pids/sandstep"
                                                                  : "/sys/fs/cgroup/sandstep";
  int rounds = argc > 1 ? atoi (argv[1]) : 7;
  double *ms;
  char dir[256], procs[300];

  if (rounds < 1 || (ms = calloc (rounds, sizeof *ms)) == NULL)
    {
      fprintf (stderr, "usage: cgroup-move ROUNDS\n");
      return 2;
    }
  snprintf (dir, sizeof dir, "%s/bench-move-%d", parent, (int) getpid ());
  snprintf (procs, sizeof procs, "%s/cgroup.procs", dir);
  if ((mkdir (parent, 0755) < 0 && errno != EEXIST) || mkdir (dir, 0755) < 0)
    {
      fprintf (stderr, "cgroup-move: cannot make '%s': %s\n", dir, strerror (errno));
      return 1;
    }
  for (int i = 0; i < rounds; i++)
    {
      struct timespec before, after;
      char text[32];
      pid_t child;
      int fd;

      usleep (200 * 1000);
      child = fork ();
      if (child == 0)
        {
          pause ();
          _exit (0);
        }
      snprintf (text, sizeof text, "%d", (int) child);
      fd = open (procs, O_WRONLY | O_CLOEXEC);
      clock_gettime (CLOCK_MONOTONIC, &before);
      if (fd < 0 || write (fd, text, strlen (text)) < 0)
        fprintf (stderr, "cgroup-move: cannot move into '%s': %s\n", dir, strerror (errno));
      clock_gettime (CLOCK_MONOTONIC, &after);
      if (fd >= 0)
        close (fd);
      ms[i] = (after.tv_sec - before.tv_sec) * 1e3 + (after.tv_nsec - before.tv_nsec) / 1e6;
      kill (child, SIGKILL);
      waitpid (child, NULL, 0);
    }
  while (rmdir (dir) < 0 && errno == EBUSY)
    usleep (1000);
  qsort (ms, rounds, sizeof *ms, compare);
  printf ("%.3f\n", ms[rounds / 2]);
  return 0;
}
