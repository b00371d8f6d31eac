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

typedef struct {
  const char *timeout_text;
  int exit_status;
} RunReport;

static void
on_ran (const SandstepSpec *spec, const SandstepRunResult *result, gpointer data)
{
  RunReport *report = data;
  g_autoptr(GString) text = g_string_new (NULL);

  report->exit_status = sandstep_run_report (spec, report->timeout_text, result, text);
  if (text->len > 0)
    g_printerr ("%s", text->str);
}

gboolean
sandstep_op_run (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autofree char *command = NULL;
  const char *timeout_text = sandstep_invocation_get (invocation, "timeout");
  SandstepRunRequest request = { .stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2, .on_notice = print_notice };
  RunReport report = { timeout_text, 0 };

  if (invocation->operands->len == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no command given; write: sandstep run --handle=H -- COMMAND");
  g_ptr_array_add (invocation->operands, NULL);
  command = g_strjoinv (" ", (char **) invocation->operands->pdata);
  g_ptr_array_remove_index (invocation->operands, invocation->operands->len - 1);
  if (timeout_text != NULL && !sandstep_parse_seconds ("timeout", timeout_text, FALSE, &request.timeout_s, error))
    return FALSE;
  request.command = command;

  /* Claim, command and release: one request to a sandstepd. */
  if (!sandstep_invocation_run_step (invocation, &request, on_ran, &report, error))
    return FALSE;
  *out_exit = report.exit_status;
  return TRUE;
}
