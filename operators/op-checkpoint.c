/* op-checkpoint.c: name the sandbox's files as they are now, for a later rollback; or list the names. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_checkpoint (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  gboolean list = sandstep_invocation_has (invocation, "list");

  if (invocation->operands->len != (list ? 0 : 1))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           list ? "checkpoint --list takes no NAME" :
                                  "checkpoint takes one NAME, got %u; write: sandstep checkpoint --handle=H NAME",
                           invocation->operands->len);
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  if (list)
    {
      g_autoptr(GPtrArray) names = sandstep_attachment_checkpoints (attachment, error);
      if (names == NULL)
        return FALSE;
      for (guint i = 0; i < names->len; i++)
        g_print ("%s\n", (char *) names->pdata[i]);
    }
  else if (!sandstep_attachment_checkpoint (attachment, invocation->operands->pdata[0], error))
    return FALSE;
  *out_exit = 0;
  return TRUE;
}
