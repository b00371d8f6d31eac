/* sandstep-python-offer.c: what agent, mcp and call do to offer run_python. */
#include "sandstep-operator.h"

#include "sandstep-error.h"
#include "sandstep-tools.h"
#include "sandstep-units.h"

/* Details the model must not read, on the step's stderr. */
static void
print_notice (const char *line, gpointer user_data)
{
  g_autofree char *shown = sandstep_escape (line, -1, 0, SANDSTEP_ESCAPE_LINE);

  g_printerr ("sandstep %s: %s\n", (const char *) user_data, shown);
}

gboolean
sandstep_offer_python (SandstepToolbox *toolbox, SandstepAttachment *attachment, const char *budget,
                       const char *program, GError **error)
{
  SandstepPythonLimits limits;
  gboolean available = FALSE;

  sandstep_python_limits_init (&limits);
  if (budget != NULL && !sandstep_parse_seconds ("python-budget", budget, FALSE, &limits.budget_s, error))
    return FALSE;
  /* The session speaks over the command's stdin, which sandstepd's run does not carry yet. */
  if (g_strcmp0 (attachment->backend->klass->name, "local") != 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "run_python needs a local sandbox: '%s' is on a sandstepd server, whose commands get "
                           "no stdin, which the Python session speaks over; use run_command there (python3 "
                           "script.py), or a local sandbox", attachment->handle);
  if (!sandstep_python_available (attachment, &available, error))
    return FALSE;
  if (!available)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "run_python needs python3 in the sandbox, and sandbox '%s' has none on its PATH (a "
                           "local sandbox's /usr is the host's: install python3 there), or leave out --python",
                           attachment->handle);
  sandstep_toolbox_enable_python (toolbox, &limits);
  sandstep_toolbox_set_notice (toolbox, print_notice, (gpointer) program);
  return TRUE;
}
