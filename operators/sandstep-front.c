/* sandstep-front.c: the `sandstep` command.
 *
 * Linked statically and free of libraries, so that it starts in about a
 * millisecond.  For `sandstep run` on a local sandbox whose launcher runs
 * (hooks/local/sandstep-launcher.h), it hands the command over and exits
 * with its status: no GLib, no JSON, no jail to build.  Everything else,
 * and every run the launcher sends back, it execs sandstep-core with the
 * same arguments, which does the work and says what goes wrong.
 *
 * It only takes the plain shapes of `run` it can read with certainty; any
 * other option, a value it would have to judge, a remote handle: the core.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandstep-exit.h"
#include "sandstep-handle-libc.h"
#include "sandstep-launch-wire.h"

static const char *const passthrough[] = { SANDSTEP_PASSTHROUGH_ENV };

typedef struct {
  const char *value[SANDSTEP_LAUNCH_FIELDS];
  char handle[SANDSTEP_HANDLE_LOCAL_LEN + 1];
  char *command;
} Request;

static __attribute__ ((noreturn)) void
exec_core (char **argv)
{
  char self[PATH_MAX];
  char core[PATH_MAX + 32];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  char *slash;

  if (n > 0)
    {
      self[n] = '\0';
      slash = strrchr (self, '/');
      if (slash != NULL)
        {
          *slash = '\0';
          snprintf (core, sizeof core, "%s/sandstep-core", self);
          execv (core, argv);
        }
    }
  execv (SANDSTEP_LIBEXECDIR "/sandstep-core", argv);
  fprintf (stderr, "sandstep: cannot run sandstep-core, beside '%s' or in '%s': %s; reinstall sandstep\n",
           n > 0 ? self : "sandstep", SANDSTEP_LIBEXECDIR, strerror (errno));
  exit (SANDSTEP_EXIT_INTERNAL);
}

/* The arguments after "run", when they have a shape this program reads
 * exactly as the core would; 0 otherwise. */
static int
parse_run (int argc, char **argv, Request *request)
{
  static const char *const names[] = { "handle", "owner", "holder", "wait", "timeout" };
  static const int fields[] = { SANDSTEP_LAUNCH_FIELD_HANDLE, SANDSTEP_LAUNCH_FIELD_OWNER,
                                SANDSTEP_LAUNCH_FIELD_HOLDER, SANDSTEP_LAUNCH_FIELD_WAIT,
                                SANDSTEP_LAUNCH_FIELD_TIMEOUT };
  const char *operands[256];
  int n_operands = 0, options_done = 0;
  size_t len = 0;

  for (int i = 0; i < argc; i++)
    {
      const char *arg = argv[i];
      int known = 0;

      if (options_done || arg[0] != '-' || arg[1] == '\0')
        {
          if (n_operands == (int) (sizeof operands / sizeof operands[0]))
            return 0;
          operands[n_operands++] = arg;
          continue;
        }
      if (strcmp (arg, "--") == 0)
        {
          options_done = 1;
          continue;
        }
      for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        {
          size_t n = strlen (names[k]);
          const char *value;
          if (strncmp (arg, "--", 2) != 0 || strncmp (arg + 2, names[k], n) != 0)
            continue;
          if (arg[2 + n] == '=')
            value = arg + 3 + n;
          else if (arg[2 + n] == '\0' && i + 1 < argc)
            value = argv[++i];
          else
            return 0;
          /* Given twice, or empty: the core's error, not ours. */
          if (request->value[fields[k]] != NULL || value[0] == '\0')
            return 0;
          request->value[fields[k]] = value;
          known = 1;
          break;
        }
      if (!known)
        return 0;
    }
  if (n_operands == 0 || request->value[SANDSTEP_LAUNCH_FIELD_HANDLE] == NULL ||
      !sandstep_handle_libc_resolve (request->value[SANDSTEP_LAUNCH_FIELD_HANDLE], request->handle))
    return 0;
  request->value[SANDSTEP_LAUNCH_FIELD_HANDLE] = request->handle;

  /* The command is the operands joined by spaces. */
  for (int i = 0; i < n_operands; i++)
    len += strlen (operands[i]) + 1;
  if (len > SANDSTEP_LAUNCH_MAX / 2 || (request->command = malloc (len)) == NULL)
    return 0;
  request->command[0] = '\0';
  for (int i = 0; i < n_operands; i++)
    {
      if (i > 0)
        strcat (request->command, " ");
      strcat (request->command, operands[i]);
    }
  request->value[SANDSTEP_LAUNCH_FIELD_COMMAND] = request->command;
  request->value[SANDSTEP_LAUNCH_FIELD_MAGIC] = SANDSTEP_LAUNCH_MAGIC;

  /* Identity: the option, else the environment, else the launcher's USER@HOST. */
  if (request->value[SANDSTEP_LAUNCH_FIELD_OWNER] == NULL)
    request->value[SANDSTEP_LAUNCH_FIELD_OWNER] = getenv ("SANDSTEP_OWNER");
  if (request->value[SANDSTEP_LAUNCH_FIELD_HOLDER] == NULL)
    request->value[SANDSTEP_LAUNCH_FIELD_HOLDER] = getenv ("SANDSTEP_HOLDER");
  for (int i = 0; i < SANDSTEP_LAUNCH_FIELDS; i++)
    if (request->value[i] == NULL)
      request->value[i] = "";
  return 1;
}

/* The sandbox's directory, as sandstep_store_default_dir() finds the state. */
static int
sandbox_dir (const char *handle, char *out, size_t size)
{
  const char *state = getenv ("SANDSTEP_STATE_DIR");
  const char *xdg = getenv ("XDG_STATE_HOME");
  const char *home = getenv ("HOME");
  int n;

  if (state != NULL && state[0] != '\0')
    n = snprintf (out, size, "%s/sandboxes/%s", state, handle);
  else if (getuid () == 0)
    n = snprintf (out, size, "/var/lib/sandstep/sandboxes/%s", handle);
  else if (xdg != NULL && xdg[0] != '\0')
    n = snprintf (out, size, "%s/sandstep/sandboxes/%s", xdg, handle);
  else if (home != NULL && home[0] == '/')
    n = snprintf (out, size, "%s/.local/state/sandstep/sandboxes/%s", home, handle);
  else
    return 0;
  return n > 0 && (size_t) n < size;
}

static int
connect_launcher (const char *handle)
{
  char dir[PATH_MAX];
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  int dir_fd, fd;

  if (!sandbox_dir (handle, dir, sizeof dir))
    return -1;
  /* Through the directory's fd, so a long state path still fits sun_path. */
  dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0)
    return -1;
  snprintf (address.sun_path, sizeof address.sun_path, "/proc/self/fd/%d/" SANDSTEP_LAUNCH_SOCKET, dir_fd);
  fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect (fd, (struct sockaddr *) &address, sizeof address) < 0)
    {
      close (fd);
      fd = -1;
    }
  close (dir_fd);
  return fd;
}

/* The request with our stdin, stdout and stderr attached; 0 if it could not go. */
static int
send_request (int fd, const Request *request)
{
  static char buf[SANDSTEP_LAUNCH_MAX];
  union { char buf[CMSG_SPACE (3 * sizeof (int))]; struct cmsghdr align; } control;
  struct iovec iov = { .iov_base = buf };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  int fds[3];
  size_t len = 0;

  for (int i = 0; i < SANDSTEP_LAUNCH_FIELDS; i++)
    {
      size_t n = strlen (request->value[i]) + 1;
      if (len + n > sizeof buf)
        return 0;
      memcpy (buf + len, request->value[i], n);
      len += n;
    }
  for (size_t i = 0; i < sizeof passthrough / sizeof passthrough[0]; i++)
    {
      const char *value = getenv (passthrough[i]);
      int n;
      if (value == NULL)
        continue;
      n = snprintf (buf + len, sizeof buf - len, "%s=%s", passthrough[i], value);
      if (n < 0 || len + n + 1 > sizeof buf)
        return 0;
      len += n + 1;
    }
  /* A closed standard stream reads as /dev/null in the jail, as in the core. */
  for (int i = 0; i < 3; i++)
    fds[i] = fcntl (i, F_GETFD) >= 0 ? i : open ("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
    return 0;
  iov.iov_len = len;
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (3 * sizeof (int));
  memcpy (CMSG_DATA (cmsg), fds, sizeof fds);
  return sendmsg (fd, &msg, MSG_NOSIGNAL) == (ssize_t) len;
}

int
main (int argc, char **argv)
{
  Request request = { { 0 } };
  const char *backend = getenv (SANDSTEP_BACKEND_ENV);
  SandstepLaunchReply reply;
  int started = 0;
  ssize_t n;
  int fd;

  /* $SANDSTEP_BACKEND names a sandstepd unless empty or "local", as in sandstep_backend_open(). */
  if (argc < 3 || strcmp (argv[1], "run") != 0 || !sandstep_backend_name_is_local (backend) ||
      !parse_run (argc - 2, argv + 2, &request))
    exec_core (argv);
  fd = connect_launcher (request.handle);
  if (fd < 0)
    exec_core (argv);
  if (!send_request (fd, &request))
    exec_core (argv);
  for (;;)
    {
      do
        n = recv (fd, &reply, sizeof reply, 0);
      while (n < 0 && errno == EINTR);
      if (n == (ssize_t) sizeof reply && reply.kind == SANDSTEP_LAUNCH_STARTED)
        started = 1;
      else if (n == (ssize_t) sizeof reply && reply.kind == SANDSTEP_LAUNCH_DONE)
        return reply.exit_status;
      else if ((n == (ssize_t) sizeof reply && reply.kind == SANDSTEP_LAUNCH_FALLBACK) || !started)
        {
          /* Nothing ran (the launcher said so, or ended before starting it). */
          close (fd);
          exec_core (argv);
        }
      else
        break;
    }
  fprintf (stderr, "sandstep run: the launcher of sandbox '%s' ended while the command ran (was the sandbox "
           "destroyed?); run the step again\n", request.handle);
  return SANDSTEP_EXIT_INTERNAL;
}
