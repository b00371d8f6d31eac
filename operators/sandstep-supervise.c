/* sandstep-supervise.c: `sandstep --supervisor HANDLE`, a live sandbox's supervisor.
 *
 * Linked statically with GLib's core only, so that a sandbox's first
 * command does not pay for loading GIO, and a supervisor stays small for as
 * long as its sandbox lives.  The service itself is
 * hooks/local/sandstep-supervisor.c; it is started by the helper
 * (hooks/local/sandstep-supervision.c), which hands it its plan.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-supervisor.h"

int
main (int argc, char **argv)
{
  struct stat st;

  if (argc != 3 || strcmp (argv[1], "--supervisor") != 0)
    {
      fprintf (stderr, "usage: sandstep --supervisor HANDLE (started by 'sandstep run', not by hand)\n");
      return SANDSTEP_EXIT_USAGE;
    }
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
  /* Nothing else of its starter's: a make's jobserver pipe held for the sandbox's life would hang the make. */
  if (syscall (SYS_close_range, SANDSTEP_SUPERVISOR_CALLER_FD + 1, ~0U, 0) < 0)
    for (int fd = SANDSTEP_SUPERVISOR_CALLER_FD + 1; fd < 1024; fd++)
      close (fd);
  return sandstep_supervisor_main (argv[2]);
}
