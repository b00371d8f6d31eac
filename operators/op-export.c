/* op-export.c: copy files out of the sandbox to file://, s3:// and https:// URLs, all or none. */
#include "sandstep-operator.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-units.h"
#include "sandstep-export.h"
#include "sandstep-meter.h"
#include "sandstep-output.h"

static void
print_staged (const char *path, const char *dest, gint64 bytes, gpointer data)
{
  g_autofree char *size = sandstep_format_size ((guint64) bytes);
  g_autofree char *shown_path = sandstep_escape (path, -1, 0, SANDSTEP_ESCAPE_VALUE);
  g_autofree char *shown_dest = sandstep_escape (dest, -1, 0, SANDSTEP_ESCAPE_VALUE);
  g_autofree char *line = g_strdup_printf ("sandstep export: staged %s for %s (%s)", shown_path, shown_dest, size);

  sandstep_meter_say (data, line);
}

static gboolean
parse_options (SandstepInvocation *invocation, SandstepExportOptions *options, GError **error)
{
  const char *max_text = sandstep_invocation_get (invocation, "max-bytes");
  const char *timeout_text = sandstep_invocation_get (invocation, "read-timeout");

  memset (options, 0, sizeof *options);
  options->max_bytes = SANDSTEP_DEFAULT_EXPORT_MAX;
  if (max_text != NULL && !sandstep_parse_size (max_text, &options->max_bytes, error))
    return FALSE;
  if (timeout_text != NULL &&
      !sandstep_parse_seconds ("read-timeout", timeout_text, FALSE, &options->read_timeout_s, error))
    return FALSE;
  options->no_clobber = sandstep_invocation_has (invocation, "no-clobber");
  return TRUE;
}

gboolean
sandstep_op_export_needs_net (SandstepInvocation *invocation)
{
  return sandstep_export_needs_net (invocation->operands);
}

gboolean
sandstep_op_export (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  SandstepExportOptions options;
  SandstepMeter *meter;
  gboolean ok;

  if (!parse_options (invocation, &options, error))
    return FALSE;
  /* Bad destinations are refused before the sandbox is claimed. */
  if (!sandstep_export_check (invocation->operands, &options, error))
    return FALSE;
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  meter = sandstep_meter_start ("export", 0, FALSE);
  ok = sandstep_export_files (attachment, invocation->operands, &options, print_staged, meter, error);
  sandstep_meter_finish (meter, ok);
  if (!ok)
    return FALSE;
  g_printerr ("sandstep export: published %u file%s\n", invocation->operands->len,
              invocation->operands->len == 1 ? "" : "s");
  *out_exit = 0;
  return TRUE;
}
