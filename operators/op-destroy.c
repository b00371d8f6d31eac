/* op-destroy.c: destroy a sandbox at once, killing what runs in it. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_destroy (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; destroy takes only options",
                           (char *) invocation->operands->pdata[0]);
  if (!sandstep_backend_destroy (invocation->backend, invocation->handle, &invocation->who, error))
    return FALSE;
  /* As release says what became of the sandbox, so does destroy. */
  g_printerr ("sandstep destroy: destroyed sandbox '%s'\n", invocation->handle);
  *out_exit = 0;
  return TRUE;
}
