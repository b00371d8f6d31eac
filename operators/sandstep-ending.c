/* sandstep-ending.c: the lines after a run_command result's exit code. */
#include "sandstep-ending.h"

#include <string.h>

#include "sandstep-egress.h"
#include "sandstep-limits.h"

void
sandstep_run_outcome_fill (const SandstepSpec *spec, const SandstepRunResult *result, SandstepRunOutcome *outcome)
{
  SandstepLimits limits = sandstep_limits_resolve (spec != NULL ? &spec->limits : &(SandstepLimits) { 0 });

  *outcome = (SandstepRunOutcome) {
    .exit_status = result->exit_status, .timed_out = result->timed_out, .clamped = result->clamped,
    .memory_hit = result->memory_limit_hit, .pids_hit = result->pids_limit_hit,
    .applied_timeout_s = result->applied_timeout_s,
    .memory = limits.memory, .pids = limits.pids, .cpu_time_s = limits.cpu_time_s, .disk = limits.disk,
  };
}

struct _SandstepNotices {
  GMutex lock;
  GPtrArray *lines;      /* the first SANDSTEP_NOTICES_SHOWN distinct model lines, in order */
  GHashTable *seen;      /* every distinct line */
};

SandstepNotices *
sandstep_notices_new (void)
{
  SandstepNotices *notices = g_new0 (SandstepNotices, 1);

  g_mutex_init (&notices->lock);
  notices->lines = g_ptr_array_new ();
  notices->seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return notices;
}

void
sandstep_notices_free (SandstepNotices *notices)
{
  if (notices == NULL)
    return;
  g_ptr_array_unref (notices->lines);
  g_hash_table_unref (notices->seen);
  g_mutex_clear (&notices->lock);
  g_free (notices);
}

void
sandstep_notices_add (SandstepNotices *notices, const char *notice)
{
  g_autofree char *line = sandstep_egress_notice_for_model (notice);

  if (line == NULL)
    return;
  g_mutex_lock (&notices->lock);
  /* A retrying client repeats the same refusal: once is enough. */
  if (!g_hash_table_contains (notices->seen, line))
    {
      if (notices->lines->len < SANDSTEP_NOTICES_SHOWN)
        g_ptr_array_add (notices->lines, line);
      g_hash_table_add (notices->seen, g_steal_pointer (&line));
    }
  g_mutex_unlock (&notices->lock);
}

char *
sandstep_command_ending (const SandstepSpec *spec, const SandstepRunResult *result, SandstepNotices *notices,
                         const char *out, const char *err)
{
  GString *text = g_string_new (NULL);
  SandstepRunOutcome outcome;
  char line[512];
  g_autofree char *hint = NULL;

  sandstep_run_outcome_fill (spec, result, &outcome);
  sandstep_run_report_model_line (&outcome, line, sizeof line);
  if (line[0] != '\0')
    g_string_append_printf (text, "\n%s", line);
  if (notices != NULL)
    {
      g_mutex_lock (&notices->lock);
      for (guint i = 0; i < notices->lines->len; i++)
        g_string_append_printf (text, "\n%s", (const char *) notices->lines->pdata[i]);
      if (g_hash_table_size (notices->seen) > notices->lines->len)
        g_string_append_printf (text, "\n[network: %u more refused]",
                                g_hash_table_size (notices->seen) - notices->lines->len);
      g_mutex_unlock (&notices->lock);
    }
  hint = sandstep_recovery_hint (out, err, result->timed_out ? -1 : result->exit_status,
                                 spec != NULL ? spec->network : SANDSTEP_NETWORK_NONE);
  if (hint != NULL)
    g_string_append_printf (text, "\n%s", hint);
  return g_string_free (text, FALSE);
}
