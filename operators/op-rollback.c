/* op-rollback.c: the sandbox's files as a checkpoint named them. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_rollback (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;

  if (invocation->operands->len != 1)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "rollback takes one NAME, got %u; write: sandstep rollback --handle=H NAME",
                           invocation->operands->len);
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL || !sandstep_attachment_rollback (attachment, invocation->operands->pdata[0], error))
    return FALSE;
  g_printerr ("sandstep rollback: sandbox '%s' is back at checkpoint '%s'\n", invocation->handle,
              (char *) invocation->operands->pdata[0]);
  *out_exit = 0;
  return TRUE;
}
