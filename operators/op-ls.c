/* op-ls.c: list a directory of the sandbox, sorted, directories with a trailing '/', names escaped. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_ls (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  const char *path = invocation->operands->len > 0 ? invocation->operands->pdata[0] : "/workspace";

  if (invocation->operands->len > 1)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "ls takes at most one PATH, got %u", invocation->operands->len);
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  entries = sandstep_attachment_list_directory (attachment, path, error);
  if (entries == NULL)
    return FALSE;
  for (guint i = 0; i < entries->len; i++)
    {
      const SandstepDirEntry *entry = entries->pdata[i];
      /* A name is the sandbox's to choose: escaped, it is one line and sends nothing to the terminal. */
      g_autofree char *name = sandstep_escape (entry->name, -1, 0, SANDSTEP_ESCAPE_VALUE);

      g_print ("%s%s\n", name, entry->is_dir ? "/" : "");
    }
  *out_exit = 0;
  return TRUE;
}
