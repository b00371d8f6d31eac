/* op-describe.c: print a sandbox's record as JSON (secret values never appear). */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_describe (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *text = NULL;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; describe takes only options",
                           (char *) invocation->operands->pdata[0]);
  node = sandstep_backend_describe (invocation->backend, invocation->handle, &invocation->who, error);
  if (node == NULL)
    return FALSE;
  text = json_to_string (node, TRUE);
  g_print ("%s\n", text);
  *out_exit = 0;
  return TRUE;
}
