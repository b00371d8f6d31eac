/* sandstep-tool-options.c: the options of the operators that serve the agent tools. */
#include "sandstep-tool-options.h"

#include "sandstep-error.h"
#include "sandstep-units.h"

/* Parses the two timeouts into @limits' (left as they are where a text is NULL), then checks their order; a
 * refusal names them as they were written. */
static gboolean
parse_timeouts (const char *default_text, const char *max_text, SandstepToolLimits *limits, GError **error)
{
  g_autofree char *default_shown = NULL;
  g_autofree char *max_shown = NULL;

  /* Each value was checked by its kind already; a bad one is refused there. */
  if (default_text != NULL &&
      !sandstep_parse_seconds ("command-timeout", default_text, FALSE, &limits->default_timeout_s, error))
    return FALSE;
  if (max_text != NULL &&
      !sandstep_parse_seconds ("max-command-timeout", max_text, FALSE, &limits->max_timeout_s, error))
    return FALSE;
  if (limits->default_timeout_s <= limits->max_timeout_s)
    return TRUE;
  default_shown = default_text != NULL ? g_strdup (default_text)
                                       : g_strdup_printf ("%g, the default", limits->default_timeout_s);
  max_shown = max_text != NULL ? g_strdup (max_text) : g_strdup_printf ("%g, the default", limits->max_timeout_s);
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "command-timeout (%s) must not exceed max-command-timeout (%s); lower command-timeout or "
                         "raise max-command-timeout", default_shown, max_shown);
}

gboolean
sandstep_tool_timeouts_check (const char *default_text, const char *max_text, GError **error)
{
  SandstepToolLimits limits;

  sandstep_tool_limits_init (&limits);
  return parse_timeouts (default_text, max_text, &limits, error);
}

gboolean
sandstep_tool_options_parse (SandstepInvocation *invocation, SandstepToolLimits *limits, GError **error)
{
  const char *default_text = sandstep_invocation_get (invocation, "command-timeout");
  const char *max_text = sandstep_invocation_get (invocation, "max-command-timeout");
  const char *lines_text = sandstep_invocation_get (invocation, "max-output-lines");
  const char *bytes_text = sandstep_invocation_get (invocation, "max-output-bytes");
  const char *read_text = sandstep_invocation_get (invocation, "max-read-bytes");
  guint64 n;

  sandstep_tool_limits_init (limits);
  if (!parse_timeouts (default_text, max_text, limits, error))
    return FALSE;
  if (lines_text != NULL)
    {
      if (!sandstep_parse_count (lines_text, G_MAXINT, &n))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "option 'max-output-lines' must be a whole number of 1 or more, got '%s'", lines_text);
      limits->max_output_lines = n;
    }
  if (bytes_text != NULL)
    {
      if (!sandstep_parse_size (bytes_text, &n, error))
        return FALSE;
      limits->max_output_bytes = n;
    }
  if (read_text != NULL)
    {
      if (!sandstep_parse_size (read_text, &n, error))
        return FALSE;
      limits->max_read_bytes = n;
    }
  limits->prefix = sandstep_invocation_get (invocation, "prefix");
  return sandstep_tool_limits_check (limits, error);
}
