/* op-destroy.c: destroy a sandbox at once, killing what runs in it; with --with-forks, its forks too. */
#include "sandstep-operator.h"

#include "sandstep-error.h"
#include "sandstep-handle.h"

/* The forks of @local (a handle as its server knows it) among @entries, and theirs, each after its parent.  A
 * server's list names its sandboxes with the server; their parents it names as it knows them. */
static void
add_forks (GPtrArray *entries, const char *local, GPtrArray *out)
{
  for (guint i = 0; i < entries->len; i++)
    {
      const SandstepListEntry *entry = entries->pdata[i];
      g_autofree char *server = NULL, *entry_local = NULL;

      if (g_strcmp0 (entry->parent, local) != 0 ||
          g_ptr_array_find_with_equal_func (out, entry->handle, g_str_equal, NULL))
        continue;
      if (!sandstep_handle_split (entry->handle, &server, &entry_local))
        entry_local = g_strdup (entry->handle);
      g_ptr_array_add (out, g_strdup (entry->handle));
      add_forks (entries, entry_local, out);
    }
}

static gboolean
destroy_one (SandstepInvocation *invocation, const char *handle, GError **error)
{
  if (!sandstep_backend_destroy (invocation->backend, handle, &invocation->who, error))
    return FALSE;
  /* As release says what became of the sandbox, so does destroy. */
  g_printerr ("sandstep destroy: destroyed sandbox '%s'\n", handle);
  return TRUE;
}

gboolean
sandstep_op_destroy (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(GPtrArray) forks = g_ptr_array_new_with_free_func (g_free);

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; destroy takes only options",
                           (char *) invocation->operands->pdata[0]);
  if (sandstep_invocation_has (invocation, "with-forks"))
    {
      /* Of the same owner, as forks are: another owner's sandboxes are never listed, nor destroyed. */
      g_autoptr(GPtrArray) entries = sandstep_backend_list (invocation->backend, NULL, invocation->who.owner, error);
      if (entries == NULL)
        return FALSE;
      g_autofree char *server = NULL, *local = NULL;

      if (!sandstep_handle_split (invocation->handle, &server, &local))
        local = g_strdup (invocation->handle);
      add_forks (entries, local, forks);
    }
  if (!destroy_one (invocation, invocation->handle, error))
    return FALSE;
  for (guint i = 0; i < forks->len; i++)
    if (!destroy_one (invocation, forks->pdata[i], error))
      return FALSE;
  *out_exit = 0;
  return TRUE;
}
