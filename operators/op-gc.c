/* op-gc.c: reclaim what failed DAGs and lifetimes left behind. */
#include "sandstep-operator.h"

#include "sandstep-error.h"

gboolean
sandstep_op_gc (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  const char *run = sandstep_invocation_get (invocation, "run");
  /* Without --run, only what has expired: gc never ends a live sandbox unasked. */
  gboolean expired_only = run == NULL || sandstep_invocation_has (invocation, "expired");
  g_autoptr(GPtrArray) destroyed = g_ptr_array_new_with_free_func (g_free);
  gboolean ok;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; gc takes only options", (char *) invocation->operands->pdata[0]);
  ok = sandstep_backend_gc (invocation->backend, run, NULL, expired_only,
                            sandstep_invocation_has (invocation, "broken"), destroyed, error);
  for (guint i = 0; i < destroyed->len; i++)
    g_print ("%s\n", (char *) destroyed->pdata[i]);
  g_printerr ("sandstep gc: reclaimed %u sandbox%s%s%s%s\n", destroyed->len, destroyed->len == 1 ? "" : "es",
              run != NULL ? " of run '" : "", run != NULL ? run : "", run != NULL ? "'" : "");
  *out_exit = 0;
  return ok;
}
