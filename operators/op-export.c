/* op-export.c: copy files out of the sandbox to file:// URLs, all or none. */
#include "sandstep-operator.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-units.h"
#include "sandstep-export.h"
#include "sandstep-output.h"

static void
print_staged (const char *path, const char *dest, gint64 bytes, gpointer data)
{
  g_autofree char *size = sandstep_format_size ((guint64) bytes);

  g_printerr ("sandstep export: staged %s for %s (%s)\n", path, dest, size);
}

gboolean
sandstep_op_export (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  const char *max_text = sandstep_invocation_get (invocation, "max-bytes");
  guint64 max_bytes = SANDSTEP_DEFAULT_EXPORT_MAX;

  if (max_text != NULL && !sandstep_parse_size (max_text, &max_bytes, error))
    return FALSE;
  /* Bad destinations are refused before the sandbox is claimed. */
  for (guint i = 0; i < invocation->operands->len; i++)
    {
      const char *eq = strchr (invocation->operands->pdata[i], '=');
      g_autofree char *dest = eq != NULL ? sandstep_export_destination (eq + 1, error) : NULL;
      if (eq != NULL && dest == NULL)
        return FALSE;
    }
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL ||
      !sandstep_export_files (attachment, invocation->operands, max_bytes, print_staged, NULL, error))
    return FALSE;
  g_printerr ("sandstep export: published %u file%s\n", invocation->operands->len,
              invocation->operands->len == 1 ? "" : "s");
  *out_exit = 0;
  return TRUE;
}
