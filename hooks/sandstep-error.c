/* sandstep-error.c: error domains and their exit statuses. */
#include "sandstep-error.h"

#include <string.h>

G_DEFINE_QUARK (sandstep-usage-error-quark, sandstep_usage_error)
G_DEFINE_QUARK (sandstep-sandbox-error-quark, sandstep_sandbox_error)
G_DEFINE_QUARK (sandstep-jail-error-quark, sandstep_jail_error)
G_DEFINE_QUARK (sandstep-path-error-quark, sandstep_path_error)
G_DEFINE_QUARK (sandstep-export-error-quark, sandstep_export_error)

gboolean
sandstep_throw (GError **error, GQuark domain, int code, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (domain, code, format, args));
  va_end (args);
  return FALSE;
}

gboolean
sandstep_throw_errno (GError **error, GQuark domain, int code, int errsv, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, domain, code, "%s: %s", message, g_strerror (errsv));
  return FALSE;
}

SandstepExit
sandstep_error_exit_status (const GError *error)
{
  if (error == NULL)
    return SANDSTEP_EXIT_OK;

  if (error->domain == SANDSTEP_USAGE_ERROR)
    return SANDSTEP_EXIT_USAGE;

  if (error->domain == SANDSTEP_SANDBOX_ERROR)
    {
      switch ((SandstepSandboxError) error->code)
        {
        case SANDSTEP_SANDBOX_ERROR_BAD_HANDLE: return SANDSTEP_EXIT_BAD_HANDLE;
        case SANDSTEP_SANDBOX_ERROR_NOT_FOUND:  return SANDSTEP_EXIT_NO_SANDBOX;
        case SANDSTEP_SANDBOX_ERROR_NOT_OWNER:  return SANDSTEP_EXIT_NOT_OWNER;
        case SANDSTEP_SANDBOX_ERROR_EXPIRED:    return SANDSTEP_EXIT_EXPIRED;
        case SANDSTEP_SANDBOX_ERROR_BUSY:       return SANDSTEP_EXIT_BUSY;
        case SANDSTEP_SANDBOX_ERROR_STATE:      return SANDSTEP_EXIT_INTERNAL;
        }
    }

  if (error->domain == SANDSTEP_PATH_ERROR)
    return SANDSTEP_EXIT_PATH;

  if (error->domain == SANDSTEP_EXPORT_ERROR)
    return error->code == SANDSTEP_EXPORT_ERROR_BAD_URL ? SANDSTEP_EXIT_USAGE : SANDSTEP_EXIT_EXPORT;

  if (error->domain == SANDSTEP_JAIL_ERROR && error->code == SANDSTEP_JAIL_ERROR_TIMEOUT)
    return SANDSTEP_EXIT_TIMEOUT;

  return SANDSTEP_EXIT_INTERNAL;
}
