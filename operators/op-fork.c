/* op-fork.c: copy-on-write copies of a sandbox, printed as handles. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_fork (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(GPtrArray) handles = g_ptr_array_new_with_free_func (g_free);
  const char *count_text = sandstep_invocation_get (invocation, "count");
  guint64 count = 1;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; fork takes only options (--count=N for several)",
                           (char *) invocation->operands->pdata[0]);
  if (count_text != NULL && !g_ascii_string_to_unsigned (count_text, 10, 1, G_MAXUINT, &count, NULL))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--count='%s' is not a whole number from 1 up", count_text);
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL ||
      !sandstep_attachment_fork (attachment, &invocation->who, (guint) count, handles, error))
    return FALSE;
  /* One handle a line, for a make target's handle file (or several). */
  for (guint i = 0; i < handles->len; i++)
    g_print ("%s\n", (char *) handles->pdata[i]);
  *out_exit = 0;
  return TRUE;
}
