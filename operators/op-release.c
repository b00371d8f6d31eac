/* op-release.c: the DAG is done with a sandbox.
 *
 * A release never fails a finished step for a passing reason: it retries
 * three times, one second apart, then warns and succeeds.  A wrong handle or
 * owner is still an error: that is a mistake in the DAG, not bad luck.
 */
#include "sandstep-operator.h"

#include "sandstep-error.h"

#define RELEASE_ATTEMPTS 3

gboolean
sandstep_op_release (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  const char *keep_text = sandstep_invocation_get (invocation, "keep");
  gint64 keep_s = 0;
  g_autoptr(GError) last_error = NULL;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; release takes only options",
                           (char *) invocation->operands->pdata[0]);
  if (keep_text != NULL && !sandstep_parse_duration (keep_text, TRUE, &keep_s, error))
    return FALSE;

  *out_exit = 0;
  for (int attempt = 1; attempt <= RELEASE_ATTEMPTS; attempt++)
    {
      gboolean destroyed = FALSE;

      g_clear_error (&last_error);
      if (sandstep_backend_release (invocation->backend, invocation->handle, &invocation->who, keep_s,
                                               &destroyed, &last_error))
        {
          if (destroyed)
            g_printerr ("sandstep release: destroyed sandbox '%s'\n", invocation->handle);
          else if (keep_s > 0)
            g_printerr ("sandstep release: sandbox '%s' is kept for %" G_GINT64_FORMAT "s for inspection; "
                        "'sandstep gc --expired' reclaims it after that\n", invocation->handle, keep_s);
          else
            g_printerr ("sandstep release: sandbox '%s' is destroyed as soon as its running command ends\n",
                        invocation->handle);
          return TRUE;
        }
      if (g_error_matches (last_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND))
        {
          g_printerr ("sandstep release: sandbox '%s' has ended already; nothing to release\n", invocation->handle);
          return TRUE;
        }
      if (!g_error_matches (last_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE))
        {
          g_propagate_error (error, g_steal_pointer (&last_error));
          return FALSE;
        }
      if (attempt < RELEASE_ATTEMPTS)
        g_usleep (G_USEC_PER_SEC);
    }
  {
    g_autofree char *why = sandstep_escape (last_error->message, -1, 0, SANDSTEP_ESCAPE_LINE);

    g_printerr ("sandstep release: warning: could not release sandbox '%s' after %d attempts (%s); its lifetime "
                "still ends it, and 'sandstep gc' reclaims it\n",
                invocation->handle, RELEASE_ATTEMPTS, why);
  }
  return TRUE;
}
