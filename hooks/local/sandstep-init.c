/* sandstep-init.c: pid 1 of a jail.
 *
 * Linked statically and kept free of libraries, so that exec'ing it costs
 * next to nothing; the helper execs it with execveat() on an fd, so it need
 * not be visible inside the jail.
 *
 *   sandstep-init REPORT-FD [--try WORD... --] PROGRAM ARGS...
 *
 * With --try, init first execs WORD... through PATH, as a shell would run
 * that simple command, and falls back to PROGRAM if that fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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
  char **direct = NULL;
  char **program = argv + 2;

  if (argc < 3)
    return 125;
  report_fd = atoi (argv[1]);
  if (strcmp (argv[2], "--try") == 0)
    {
      direct = argv + 3;
      for (program = direct; *program != NULL && strcmp (*program, "--") != 0; program++)
        ;
      if (*program == NULL)
        return 125;
      *program++ = NULL;
    }
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
      if (direct != NULL)
        execvpe (direct[0], direct, environ);
      execve (program[0], program, environ);
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
