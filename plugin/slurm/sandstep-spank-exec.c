/* sandstep-spank-exec.c: the helper as the job's user, output captured.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-spank-exec.h"

/* What a helper may say on either stream before the rest is dropped: its
 * handle or one message line, with room to spare. */
#define OUTPUT_MAX (64 * 1024)

G_DEFINE_QUARK (sandstep-spank-error-quark, sandstep_spank_error)

/* In the child: only async-signal-safe calls until execve. */
static void G_GNUC_NORETURN
child_exec (const SandstepSpankUser *user, const char *const *argv, const char *const *envp, int out_fd, int err_fd)
{
  sigset_t all;
  int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  static const char become_failed[] = "sandstep-spank: could not become the job's user\n";

  /* Nothing of slurmstepd's: its signal mask and ignored signals, its
   * descriptors, its working directory (a spool the user may not enter). */
  sigemptyset (&all);
  sigprocmask (SIG_SETMASK, &all, NULL);
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      signal (sig, SIG_DFL);
  if (null_fd < 0 || dup2 (null_fd, STDIN_FILENO) < 0 || dup2 (out_fd < 0 ? null_fd : out_fd, STDOUT_FILENO) < 0 ||
      dup2 (err_fd < 0 ? null_fd : err_fd, STDERR_FILENO) < 0)
    _exit (127);
  close_range (3, ~0U, 0);
  if (chdir ("/") < 0)
    _exit (127);

  /* slurmstepd's user_init runs with the user's effective ids and root's
   * real and saved ones: take root back, then drop it for good. */
  if (geteuid () != 0 && getuid () == 0)
    (void) seteuid (0);
  if (getuid () == 0 || geteuid () == 0)
    {
      if (setgroups (user->groups != NULL ? (size_t) user->n_groups : 0, user->groups) < 0 ||
          setresgid (user->gid, user->gid, user->gid) < 0 || setresuid (user->uid, user->uid, user->uid) < 0)
        {
          (void) !write (STDERR_FILENO, become_failed, sizeof become_failed - 1);
          _exit (127);
        }
    }
  if (getuid () != user->uid || geteuid () != user->uid)
    {
      (void) !write (STDERR_FILENO, become_failed, sizeof become_failed - 1);
      _exit (127);
    }
  execve (argv[0], (char *const *) argv, (char *const *) envp);
  _exit (127);
}

/* Appends what @fd has to @into (up to OUTPUT_MAX); FALSE at EOF. */
static gboolean
drain (int fd, GString *into)
{
  char buf[4096];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return TRUE;
  if (n <= 0)
    return FALSE;
  if (into != NULL && into->len < OUTPUT_MAX)
    g_string_append_len (into, buf, MIN ((gsize) n, OUTPUT_MAX - into->len));
  return TRUE;
}

gboolean
sandstep_spank_run_as (const SandstepSpankUser *user, const char *const *argv, const char *const *envp,
                       GString *out, GString *err, int *out_status, GError **error)
{
  int out_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
  pid_t pid;
  struct pollfd fds[2];
  int status;

  if (pipe2 (out_pipe, O_CLOEXEC) < 0 || pipe2 (err_pipe, O_CLOEXEC) < 0)
    {
      int saved = errno;
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED,
                   "could not make a pipe for '%s': %s", argv[0], g_strerror (saved));
      for (int i = 0; i < 2; i++)
        if (out_pipe[i] >= 0)
          close (out_pipe[i]);
      return FALSE;
    }
  pid = fork ();
  if (pid < 0)
    {
      int saved = errno;
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED, "could not fork to run '%s': %s",
                   argv[0], g_strerror (saved));
      close (out_pipe[0]), close (out_pipe[1]), close (err_pipe[0]), close (err_pipe[1]);
      return FALSE;
    }
  if (pid == 0)
    child_exec (user, argv, envp, out_pipe[1], err_pipe[1]);
  close (out_pipe[1]);
  close (err_pipe[1]);

  fds[0] = (struct pollfd) { .fd = out_pipe[0], .events = POLLIN };
  fds[1] = (struct pollfd) { .fd = err_pipe[0], .events = POLLIN };
  while (fds[0].fd >= 0 || fds[1].fd >= 0)
    {
      if (poll (fds, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          break;
        }
      for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
            !drain (fds[i].fd, i == 0 ? out : err))
          {
            close (fds[i].fd);
            fds[i].fd = -1;
          }
    }
  for (int i = 0; i < 2; i++)
    if (fds[i].fd >= 0)
      close (fds[i].fd);

  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      {
        int saved = errno;
        g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED, "could not wait for '%s': %s",
                     argv[0], g_strerror (saved));
        return FALSE;
      }
  *out_status = status;
  return TRUE;
}

char *
sandstep_spank_describe_status (int status)
{
  if (WIFEXITED (status))
    return g_strdup_printf ("exited with status %d", WEXITSTATUS (status));
  if (WIFSIGNALED (status))
    return g_strdup_printf ("was killed by signal %d (%s)", WTERMSIG (status), g_strsignal (WTERMSIG (status)));
  return g_strdup_printf ("ended with wait status %d", status);
}

char *
sandstep_spank_last_line (const GString *text)
{
  g_auto(GStrv) lines = g_strsplit (text->str, "\n", -1);

  for (gssize i = (gssize) g_strv_length (lines) - 1; i >= 0; i--)
    if (g_strstrip (lines[i])[0] != '\0')
      return g_strdup (lines[i]);
  return g_strdup ("(it printed nothing)");
}
