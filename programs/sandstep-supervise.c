/* sandstep-supervise.c: `sandstep --supervisor HANDLE`, a live sandbox's supervisor.
 *
 * Linked statically with GLib's core only, so that a sandbox's first
 * command does not pay for loading GIO, and a supervisor stays small for as
 * long as its sandbox lives.  The service itself is
 * hooks/supervisor/sandstep-supervisor.c; it is started by the helper
 * (hooks/local/sandstep-supervision.c), which hands it its plan, or by the
 * front with the kept plan and the jail it started on it
 * (hooks/supervisor/sandstep-supervisor-start.h).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-process-state.h"
#include "sandstep-read-libc.h"
#include "sandstep-supervisor.h"

/* The pid of the jail its starter gave it (sandstep-supervisor-start.h): fd 8 a pidfd of our own child, which only
 * the jail can be as we start; 0: none (fds from 8 on are then nothing of ours). */
static int
given_jail (void)
{
  char path[64], text[4096];
  const char *line;
  int pid = 0;

  snprintf (path, sizeof path, "/proc/self/fdinfo/%d", SANDSTEP_SUPERVISOR_JAIL_PIDFD_FD);
  if (sandstep_read_small (path, text, sizeof text) <= 0 || (line = strstr (text, "\nPid:\t")) == NULL ||
      (pid = atoi (line + 6)) <= 0)
    return 0;
  snprintf (path, sizeof path, "/proc/%d/stat", pid);
  if (sandstep_read_small (path, text, sizeof text) <= 0)
    return 0;
  {
    /* "PID (COMM) STATE PPID ...": the comm may hold anything but the last ')'. */
    const char *after = strrchr (text, ')');
    int ppid = 0;
    if (after == NULL || sscanf (after + 1, " %*c %d", &ppid) != 1 || ppid != getpid ())
      return 0;
  }
  for (int jail_fd = SANDSTEP_SUPERVISOR_JAIL_PIDFD_FD; jail_fd <= SANDSTEP_SUPERVISOR_JAIL_CONTROL_FD; jail_fd++)
    if (fcntl (jail_fd, F_SETFD, FD_CLOEXEC) < 0)
      return 0;
  return pid;
}

int
main (int argc, char **argv)
{
  struct stat st;
  int jail = 0;

  cpu_set_t cpus;

  /* --cpus=MASK: the caller's CPUs, where the starter put this process on one of them. */
  if (argc < 3 || argc > 4 || strcmp (argv[1], "--supervisor") != 0 ||
      (argc == 4 && (strncmp (argv[3], "--cpus=", 7) != 0 || !sandstep_cpus_parse (argv[3] + 7, &cpus))))
    {
      fprintf (stderr, "usage: sandstep --supervisor HANDLE [--cpus=MASK] (started by 'sandstep run', not by "
                       "hand)\n");
      return SANDSTEP_EXIT_USAGE;
    }
  if (argc == 4)
    sched_setaffinity (0, sizeof cpus, &cpus);
  /* Started by a sandbox's first command only (sandstep-supervisor-start.h): the store, the lock, the plan, the
   * ready pipe and the starter's connection come as fds (the last one not from an older starter). */
  for (int fd = SANDSTEP_SUPERVISOR_STORE_FD; fd <= SANDSTEP_SUPERVISOR_READY_FD; fd++)
    if (fstat (fd, &st) < 0 || fcntl (fd, F_SETFD, FD_CLOEXEC) < 0)
      {
        fprintf (stderr, "sandstep --supervisor: a supervisor is started by 'sandstep run', which hands it the "
                         "sandbox's plan; run a command in the sandbox instead\n");
        return SANDSTEP_EXIT_USAGE;
      }
  if (fcntl (SANDSTEP_SUPERVISOR_CALLER_FD, F_SETFD, FD_CLOEXEC) < 0 &&
      open ("/dev/null", O_RDONLY | O_CLOEXEC) != SANDSTEP_SUPERVISOR_CALLER_FD)
    return SANDSTEP_EXIT_INTERNAL;
  jail = given_jail ();
  /* Nothing else of its starter's: a make's jobserver pipe held for the sandbox's life would hang the make. */
  {
    int first = jail > 0 ? SANDSTEP_SUPERVISOR_JAIL_CONTROL_FD + 1 : SANDSTEP_SUPERVISOR_CALLER_FD + 1;
    if (syscall (SYS_close_range, first, ~0U, 0) < 0)
      for (int fd = first; fd < 1024; fd++)
        close (fd);
  }
  return sandstep_supervisor_main (argv[2], jail);
}
