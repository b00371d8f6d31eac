/* op-run.c: one shell command, a fresh process tree in the sandbox. */
#include "sandstep-operator.h"

#include "sandstep-error.h"
#include "sandstep-ending.h"

int
sandstep_run_report (const SandstepSpec *spec, const char *timeout_text, const SandstepRunResult *result,
                     GString *out)
{
  SandstepRunOutcome outcome;
  char text[2048];
  int exit_status;

  sandstep_run_outcome_fill (spec, result, &outcome);
  exit_status = sandstep_run_report_format (&outcome, timeout_text, text, sizeof text);

  g_string_append (out, text);
  return exit_status;
}

static void
print_notice (const char *message, gpointer user_data)
{
  g_autofree char *shown = sandstep_escape (message, -1, 0, SANDSTEP_ESCAPE_LINE);

  g_printerr ("sandstep run: %s\n", shown);
}

gboolean
sandstep_op_run (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autofree char *command = NULL;
  const char *timeout_text = sandstep_invocation_get (invocation, "timeout");
  SandstepRunRequest request = { .stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2, .on_notice = print_notice };
  SandstepRunResult result;

  if (invocation->operands->len == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no command given; write: sandstep run --handle=H -- COMMAND");
  g_ptr_array_add (invocation->operands, NULL);
  command = g_strjoinv (" ", (char **) invocation->operands->pdata);
  g_ptr_array_remove_index (invocation->operands, invocation->operands->len - 1);
  if (timeout_text != NULL && !sandstep_parse_seconds ("timeout", timeout_text, FALSE, &request.timeout_s, error))
    return FALSE;
  request.command = command;

  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  if (!sandstep_attachment_run_command (attachment, &request, &result, error))
    return FALSE;

  {
    g_autoptr(GString) report = g_string_new (NULL);
    *out_exit = sandstep_run_report (sandstep_attachment_spec (attachment), timeout_text, &result, report);
    if (report->len > 0)
      g_printerr ("%s", report->str);
  }
  return TRUE;
}
