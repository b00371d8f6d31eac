/* op-run.c: one shell command in a fresh jail over the sandbox's files. */
#include "sandstep-operator.h"

#include <math.h>
#include <signal.h>

#include "sandstep-error.h"
#include "sandstep-limits.h"

int
sandstep_run_report (const SandstepSpec *spec, const char *timeout_text, const SandstepRunResult *result,
                     GString *out)
{
  SandstepLimits limits = sandstep_limits_resolve (&spec->limits);
  g_autofree char *memory = sandstep_format_size_option (limits.memory);
  g_autofree char *disk = sandstep_format_size_option (limits.disk);

  /* One line per limit the command ran into, so a killed command says why. */
  if (result->memory_limit_hit)
    g_string_append_printf (out, "sandstep run: the command hit the sandbox's memory limit (memory=%s) and the kernel "
                            "killed the process using the most; provision with a larger memory= if it needs more\n",
                            memory);
  if (result->pids_limit_hit)
    g_string_append_printf (out, "sandstep run: the command hit the sandbox's process limit (pids=%" G_GINT64_FORMAT
                            "): further forks failed; provision with a larger pids= if it needs more\n", limits.pids);
  if (!result->timed_out && result->exit_status == 128 + SIGXCPU)
    g_string_append_printf (out, "sandstep run: a process of the command used up its CPU time (cpu-time=%"
                            G_GINT64_FORMAT "s) and was killed\n", limits.cpu_time_s);
  if (!result->timed_out && result->exit_status == 128 + SIGXFSZ)
    g_string_append_printf (out, "sandstep run: the command tried to write a file larger than the sandbox's disk "
                            "limit (disk=%s) and was killed\n", disk);
  if (!result->timed_out)
    return result->exit_status;

  {
    g_autofree char *budget = g_strdup_printf ("%g", round (result->applied_timeout_s * 10) / 10);
    if (!result->clamped)
      g_string_append_printf (out, "sandstep run: the command ran out of its %ss budget (--timeout=%s) and was "
                              "killed, with everything it started\n", budget, timeout_text);
    else if (timeout_text != NULL)
      g_string_append_printf (out, "sandstep run: the command ran out of its %ss budget (the sandbox's remaining "
                              "lifetime, shorter than --timeout=%s) and was killed, with everything it started\n",
                              budget, timeout_text);
    else
      g_string_append_printf (out, "sandstep run: the command ran out of its %ss budget (the sandbox's remaining "
                              "lifetime) and was killed, with everything it started\n", budget);
  }
  return SANDSTEP_EXIT_TIMEOUT;
}

static void
print_notice (const char *message, gpointer user_data)
{
  g_printerr ("sandstep run: %s\n", message);
}

gboolean
sandstep_op_run (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autofree char *command = NULL;
  const char *timeout_text = sandstep_invocation_get (invocation, "timeout");
  SandstepRunRequest request = { .stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2, .on_notice = print_notice,
                                 .warm = TRUE };
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
