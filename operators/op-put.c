/* op-put.c: copy a host file or directory tree into the sandbox. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_put (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;

  if (invocation->operands->len != 2)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "put takes SRC and DEST, got %u argument%s; write: sandstep put --handle=H src/ /workspace/src/",
                           invocation->operands->len, invocation->operands->len == 1 ? "" : "s");
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL ||
      !sandstep_attachment_put (attachment, invocation->operands->pdata[0], invocation->operands->pdata[1],
                                        error))
    return FALSE;
  *out_exit = 0;
  return TRUE;
}
