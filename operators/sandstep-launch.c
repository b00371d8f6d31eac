/* sandstep-launch.c: `sandstep --launcher HANDLE`, a sandbox's launcher.
 *
 * The service itself is hooks/local/sandstep-launcher.c; this file gives it
 * what `sandstep run` decides: who asks, which budget, what to say after.
 * Anything the ordinary path would refuse goes back to it, so that its
 * message is the one the caller reads.
 */
#include "sandstep-operator.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-launcher.h"
#include "sandstep-store.h"

#define REPORT_PATIENCE_MS 2000

static gboolean
value_ok (const SandstepOperator *run, const char *name, const char *value)
{
  return value[0] == '\0' || sandstep_option_check (sandstep_option_lookup (run, name), value, NULL);
}

static gboolean
accept_request (const SandstepLaunchRequest *request, char **out_owner, char **out_holder, double *out_timeout_s,
                gpointer user_data)
{
  const SandstepOperator *run = user_data;

  if (!value_ok (run, "wait", request->wait) || !value_ok (run, "timeout", request->timeout) ||
      (request->timeout[0] != '\0' && !sandstep_parse_seconds ("timeout", request->timeout, FALSE, out_timeout_s, NULL)))
    return FALSE;
  /* The caller resolved --owner and $SANDSTEP_OWNER; empty means neither was given. */
  *out_owner = request->owner[0] != '\0' ? g_strdup (request->owner) : sandstep_identity_fallback ("");
  *out_holder = request->holder[0] != '\0' ? g_strdup (request->holder) : sandstep_identity_fallback ("/cli");
  return TRUE;
}

static int
report (int err_fd, const SandstepSpec *spec, const SandstepLaunchRequest *request, const SandstepRunResult *result,
        gpointer user_data)
{
  g_autoptr(GString) text = g_string_new (NULL);
  int exit_status = sandstep_run_report (spec, request->timeout[0] != '\0' ? request->timeout : NULL, result, text);
  gsize done = 0;

  /* A launcher serves more than this caller: a stderr nobody drains loses the lines, not the launcher. */
  while (done < text->len)
    {
      struct pollfd pfd = { .fd = err_fd, .events = POLLOUT };
      ssize_t n;
      if (poll (&pfd, 1, REPORT_PATIENCE_MS) <= 0)
        break;
      n = write (err_fd, text->str + done, text->len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      done += n;
    }
  return exit_status;
}

int
sandstep_launch_main (const char *handle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepStore) store = NULL;
  g_autofree char *dir = sandstep_store_default_dir ();
  SandstepLauncherHooks hooks = { accept_request, report, (gpointer) sandstep_operator_lookup ("run") };
  struct stat st;

  if (!sandstep_handle_is_valid (handle) || sandstep_handle_is_remote (handle))
    {
      g_printerr ("sandstep --launcher: '%s' is not a local sandbox handle\n", handle);
      return SANDSTEP_EXIT_USAGE;
    }
  /* Started by sandstep_launcher_ensure() only: the store and the held lock come as fds. */
  if (fstat (SANDSTEP_LAUNCHER_STORE_FD, &st) < 0 || !S_ISDIR (st.st_mode) ||
      fcntl (SANDSTEP_LAUNCHER_LOCK_FD, F_SETFD, FD_CLOEXEC) < 0 ||
      fcntl (SANDSTEP_LAUNCHER_STORE_FD, F_SETFD, FD_CLOEXEC) < 0)
    {
      g_printerr ("sandstep --launcher: a launcher is started by 'sandstep run', which hands it the state "
                  "directory and its lock; run a command in the sandbox instead\n");
      return SANDSTEP_EXIT_USAGE;
    }
  store = sandstep_store_adopt (SANDSTEP_LAUNCHER_STORE_FD, dir);
  if (!sandstep_launcher_serve (store, handle, &hooks, &error))
    {
      /* Nobody reads this (stderr is /dev/null when run by sandstep run); for whoever starts one by hand. */
      g_printerr ("sandstep --launcher: %s\n", error->message);
      return sandstep_error_exit_status (error);
    }
  return 0;
}
