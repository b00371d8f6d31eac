/* cgroup-move.c: how long the kernel takes for the first move of a process into a cgroup after a quiet spell.
 *
 *   cgroup-move ROUNDS [self]
 *
 * Prints the median, in ms, of ROUNDS moves of a sleeping child into a new cgroup (v1: under the pids
 * hierarchy's "sandstep"; v2: under /sys/fs/cgroup/sandstep), each after 0.2 s of quiet.  On most hosts
 * this write waits for an RCU grace period (the kernel's cgroup_threadgroup_rwsem), which is most of a
 * sandbox's first command there; a host whose cgroup file system is mounted with favordynmods (or booted
 * with cgroup_favordynmods=1) moves without it.  bench/run prints it beside the first-command rows, so
 * that they read right on either kind of host.  With "self", the way a
 * sandbox's first process enters its cgroup instead, which takes no such
 * wait: v1: the child moves its one thread itself ("0" in the `tasks` file,
 * opened by the parent); v2: a clone3() with CLONE_INTO_CGROUP, timed whole.
 * Needs root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int
compare (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

static double
elapsed_ms (const struct timespec *before, const struct timespec *after)
{
  return (after->tv_sec - before->tv_sec) * 1e3 + (after->tv_nsec - before->tv_nsec) / 1e6;
}

/* One entry of a new process into @dir as sandstep's jail makes it; its time in ms. */
static double
self_move (const char *dir, int v1)
{
  char path[320];
  struct timespec before, after;
  double ms = -1;
  int fd, pipe_fds[2];
  pid_t child;

  snprintf (path, sizeof path, "%s/%s", dir, v1 ? "tasks" : "");
  fd = open (path, v1 ? O_WRONLY | O_CLOEXEC : O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || pipe2 (pipe_fds, O_CLOEXEC) < 0)
    {
      fprintf (stderr, "cgroup-move: cannot open '%s': %s\n", path, strerror (errno));
      exit (1);
    }
  if (v1)
    {
      child = fork ();
      if (child == 0)
        {
          clock_gettime (CLOCK_MONOTONIC, &before);
          if (write (fd, "0", 1) != 1)
            _exit (1);
          clock_gettime (CLOCK_MONOTONIC, &after);
          ms = elapsed_ms (&before, &after);
          _exit (write (pipe_fds[1], &ms, sizeof ms) == sizeof ms ? 0 : 1);
        }
      close (pipe_fds[1]);
      if (read (pipe_fds[0], &ms, sizeof ms) != sizeof ms)
        fprintf (stderr, "cgroup-move: the child could not move itself into '%s'\n", dir);
    }
  else
    {
      struct clone_args args = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = (uint64_t) fd };
      clock_gettime (CLOCK_MONOTONIC, &before);
      child = syscall (SYS_clone3, &args, sizeof args);
      if (child == 0)
        _exit (0);
      clock_gettime (CLOCK_MONOTONIC, &after);
      if (child < 0)
        fprintf (stderr, "cgroup-move: clone3 into '%s': %s\n", dir, strerror (errno));
      ms = elapsed_ms (&before, &after);
      close (pipe_fds[1]);
    }
  close (pipe_fds[0]);
  close (fd);
  if (child > 0)
    waitpid (child, NULL, 0);
  return ms;
}

int
main (int argc, char **argv)
{
  const char *parent = access ("/sys/fs/cgroup/pids", W_OK) == 0 ? "/sys/fs/cgroup/pids/sandstep"
                                                                  : "/sys/fs/cgroup/sandstep";
  int rounds = argc > 1 ? atoi (argv[1]) : 7;
  int self = argc > 2 && strcmp (argv[2], "self") == 0;
  int v1 = strncmp (parent, "/sys/fs/cgroup/pids", 19) == 0;
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
      if (self)
        {
          ms[i] = self_move (dir, v1);
          continue;
        }
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
