/* sandstep-init.c: pid 1 of a jail.
 *
 * Linked statically and kept free of libraries, so that exec'ing it costs
 * next to nothing; the helper execs it with execveat() on an fd, so it need
 * not be visible inside the jail.
 *
 *   sandstep-init REPORT-FD [--relay PORT SOCKET] [--try WORD... --] PROGRAM ARGS...
 *   sandstep-init REPORT-FD --serve FD
 *
 * With --try, init first execs WORD... through PATH, as a shell would run
 * that simple command, and falls back to PROGRAM if that fails.  With
 * --relay (network=allow), init also listens on 127.0.0.1:PORT inside the
 * jail's empty network namespace and relays each connection to the unix
 * SOCKET of the host-side egress proxy: the one way out.  With --serve,
 * the jail was built ahead of its command: init waits on FD for the
 * arguments after REPORT-FD, the environment and the command's stdin,
 * stdout and stderr (sandstep_jail_start()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-jail-init.h"
#include "sandstep-relay.h"

static void
report (int fd, int step, int errsv)
{
  SandstepJailFailure failure = { step, errsv };

  if (write (fd, &failure, sizeof failure) < 0)
    {
      /* the helper sees the jail end without a report */
    }
}

static int
listen_loopback (int port)
{
  struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons (port),
                                 .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int one = 1;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0 || setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind (fd, (struct sockaddr *) &address, sizeof address) < 0 || listen (fd, 64) < 0)
    return -1;
  return fd;
}

/* One relayed connection, in a child of init. */
static void
relay_one (int client, const char *socket_path)
{
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  int proxy = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  strncpy (address.sun_path, socket_path, sizeof address.sun_path - 1);
  if (proxy < 0 || connect (proxy, (struct sockaddr *) &address, sizeof address) < 0)
    _exit (1);
  sandstep_relay (client, proxy, NULL, 0);
  _exit (0);
}

/* One message on @fd: argc, the arguments and the environment as
 * NUL-terminated strings, with three fds that become 0, 1 and 2.
 * Returns the arguments; NULL when the sender went away.  @fd stays open,
 * close-on-exec, for the exit status. */
static char **
receive_command (int fd)
{
  union { char buf[CMSG_SPACE (3 * sizeof (int))]; struct cmsghdr align; } control;
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cmsg;
  ssize_t size, n;
  char *buf, *p, *end;
  char **argv, **envp;
  int argc, n_env = 0;

  do
    size = recv (fd, NULL, 0, MSG_PEEK | MSG_TRUNC);
  while (size < 0 && errno == EINTR);
  if (size <= 0 || (buf = malloc (size + 1)) == NULL)
    return NULL;
  iov.iov_base = buf;
  iov.iov_len = size;
  do
    n = recvmsg (fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  cmsg = CMSG_FIRSTHDR (&msg);
  if (n != size || cmsg == NULL || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len != CMSG_LEN (3 * sizeof (int)))
    return NULL;
  for (int i = 0; i < 3; i++)
    {
      int given;
      memcpy (&given, CMSG_DATA (cmsg) + i * sizeof (int), sizeof given);
      if (dup2 (given, i) < 0)
        return NULL;
      if (given > 2)
        close (given);
    }

  buf[size] = '\0';
  end = buf + size;
  argc = atoi (buf);
  for (p = buf + strlen (buf) + 1; p < end; p += strlen (p) + 1)
    n_env++;
  n_env -= argc;
  if (argc < 1 || n_env < 0 || (argv = calloc (argc + n_env + 2, sizeof (char *))) == NULL)
    return NULL;
  envp = argv + argc + 1;
  p = buf + strlen (buf) + 1;
  for (int i = 0; i < argc + n_env; i++, p += strlen (p) + 1)
    if (i < argc)
      argv[i] = p;
    else
      envp[i - argc] = p;
  environ = envp;
  return argv;
}

static int
exit_status (int status)
{
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return WEXITSTATUS (status);
}

/* Reaps and relays until the command ends. */
static int
serve_relay (pid_t command, int listener, int signal_fd, const char *socket_path)
{
  struct pollfd fds[2] = { { .fd = listener, .events = POLLIN }, { .fd = signal_fd, .events = POLLIN } };

  for (;;)
    {
      if (poll (fds, 2, -1) < 0 && errno != EINTR)
        return 125;
      if (fds[1].revents & POLLIN)
        {
          struct signalfd_siginfo info;
          int status;
          pid_t pid;
          if (read (signal_fd, &info, sizeof info) < 0)
            {
              /* drained by the loop below anyway */
            }
          while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
            if (pid == command)
              return exit_status (status);
        }
      if (fds[0].revents & POLLIN)
        {
          int client = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
          if (client < 0)
            continue;
          if (fork () == 0)
            relay_one (client, socket_path);
          close (client);
        }
    }
}

int
main (int argc, char **argv)
{
  int report_fd;
  int status = 0;
  pid_t command;
  posix_spawnattr_t attributes;
  int failed;
  char **direct = NULL;
  char **program = argv + 2;
  const char *relay_socket = NULL;
  int listener = -1, signal_fd = -1;
  int serve_fd = -1;

  if (argc < 3)
    return 125;
  report_fd = atoi (argv[1]);
  /* The command must not read or write init's memory through /proc/1. */
  prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (strcmp (program[0], "--serve") == 0)
    {
      serve_fd = atoi (program[1]);
      if (argc < 4 || fcntl (serve_fd, F_SETFD, FD_CLOEXEC) < 0 || (program = receive_command (serve_fd)) == NULL)
        return 125;
    }
  if (strcmp (program[0], "--relay") == 0)
    {
      sigset_t chld;
      if (argc < 6)
        return 125;
      relay_socket = program[2];
      /* Bound before the command starts, so nothing inside can take the port first. */
      listener = listen_loopback (atoi (program[1]));
      sigemptyset (&chld);
      sigaddset (&chld, SIGCHLD);
      if (listener < 0 || sigprocmask (SIG_BLOCK, &chld, NULL) < 0 ||
          (signal_fd = signalfd (-1, &chld, SFD_CLOEXEC)) < 0)
        {
          report (report_fd, SANDSTEP_JAIL_STEP_INIT, errno);
          return 125;
        }
      program += 3;
    }
  if (strcmp (program[0], "--try") == 0)
    {
      direct = program + 1;
      for (program = direct; *program != NULL && strcmp (*program, "--") != 0; program++)
        ;
      if (*program == NULL)
        return 125;
      *program++ = NULL;
    }
  /* The command must not inherit the report pipe: its exec closing it tells the helper all went well. */
  fcntl (report_fd, F_SETFD, FD_CLOEXEC);

  /* posix_spawn: a vfork, so no page table is copied, and it returns once the exec is done. */
  posix_spawnattr_init (&attributes);
  if (signal_fd >= 0)
    {
      sigset_t none;
      sigemptyset (&none);
      posix_spawnattr_setsigmask (&attributes, &none);
      posix_spawnattr_setflags (&attributes, POSIX_SPAWN_SETSIGMASK);
    }
  failed = direct != NULL ? posix_spawnp (&command, direct[0], NULL, &attributes, direct, environ) : ENOENT;
  if (failed != 0)
    failed = posix_spawn (&command, program[0], NULL, &attributes, program, environ);
  if (failed != 0)
    {
      report (report_fd, SANDSTEP_JAIL_STEP_EXEC, failed);
      return 127;
    }

  /* Hold nothing the command's readers wait on. */
  for (int fd = 0; fd < 3; fd++)
    close (fd);
  close (report_fd);

  if (relay_socket != NULL)
    return serve_relay (command, listener, signal_fd, relay_socket);
  for (;;)
    {
      pid_t pid = waitpid (-1, &status, 0);
      if (pid == command)
        break;
      if (pid < 0 && errno != EINTR)
        return 125;
    }
  if (serve_fd >= 0)
    {
      /* Tell the launcher now, not after the namespaces are torn down: once
       * every other process of the jail is gone, the command has ended. */
      int32_t code = exit_status (status);
      kill (-1, SIGKILL);
      while (waitpid (-1, NULL, 0) > 0 || errno == EINTR)
        ;
      if (send (serve_fd, &code, sizeof code, MSG_NOSIGNAL) < 0)
        return code;
    }
  return exit_status (status);
}
