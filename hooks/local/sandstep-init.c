/* sandstep-init.c: pid 1 of a jail.
 *
 * Linked statically and kept free of libraries, so that exec'ing it costs
 * next to nothing; the helper execs it with execveat() on an fd, so it need
 * not be visible inside the jail.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-jail-init.h"

static void
report (int fd, int step, int errsv)
{
  SandstepJailFailure failure = { step, errsv };

  if (write (fd, &failure, sizeof failure) < 0)
    {
      /* the helper sees the jail end without a report */
    }
}

int
main (int argc, char **argv)
{
  int report_fd;
  int status = 0;
  pid_t command;

  if (argc < 3)
    return 125;
  report_fd = atoi (argv[1]);
  /* The command must not inherit the report pipe: its exec closing it tells the helper all went well. */
  fcntl (report_fd, F_SETFD, FD_CLOEXEC);

  command = fork ();
  if (command < 0)
    {
      report (report_fd, SANDSTEP_JAIL_STEP_INIT, errno);
      return 125;
    }
  if (command == 0)
    {
      execve (argv[2], argv + 2, environ);
      report (report_fd, SANDSTEP_JAIL_STEP_EXEC, errno);
      _exit (127);
    }

  /* Hold nothing the command's readers wait on. */
  for (int fd = 0; fd < 3; fd++)
    close (fd);
  close (report_fd);

  for (;;)
    {
      pid_t pid = waitpid (-1, &status, 0);
      if (pid == command)
        break;
      if (pid < 0 && errno != EINTR)
        return 125;
    }
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return WEXITSTATUS (status);
}
