/* sandstep-teardown.c: a sandbox torn down whole; see sandstep-teardown.h. */
#include "sandstep-teardown.h"

#include "sandstep-cgroup.h"
#include "sandstep-image-root.h"
#include "sandstep-layers.h"
#include "sandstep-supervision.h"
#include "sandstep-uid-slots.h"

/* In the programs that link the image store (sandstep-image-root.h). */
#pragma weak sandstep_image_root_set_user

gboolean
sandstep_sandbox_destroy (SandstepStore *store, const char *handle, int claim_fd, GError **error)
{
  /* Read first, for the holder's entry; a damaged record has none to forget (gc sweeps those). */
  g_autoptr(SandstepRecord) record = sandstep_store_load (store, handle, NULL);

  /* What runs it first: its supervisor ends with its namespaces, and every process in them.  Then its cgroup,
   * while the sandbox is still there to be destroyed again: a destroy killed after it leaves no cgroup that
   * nothing would remove (a later supervisor makes it anew).  And once more when the sandbox is gone, for a
   * provision that made it meanwhile (it looks for the sandbox after, sandstep-supervision.c). */
  sandstep_supervisor_stop (store, handle);
  sandstep_cgroup_remove (handle);
  if (!sandstep_store_destroy (store, handle, claim_fd, error))
    return FALSE;
  sandstep_cgroup_remove (handle);
  if (record != NULL)
    {
      g_autoptr(GPtrArray) layers = sandstep_layers_of (record);

      sandstep_store_forget_holder (store, record->owner, record->holder, handle);
      sandstep_uid_slot_forget (store, record);
      /* Its layers go with their last user: a fork keeps what it shares with its parent. */
      sandstep_layers_drop_user (store, layers, handle);
    }
  /* The sandbox no longer keeps its image: `gc --images` may remove it.  A record that cannot be read does not
   * say which image: every image forgets the handle. */
  if (sandstep_image_root_set_user != NULL && (record == NULL || record->spec->image_digest != NULL))
    sandstep_image_root_set_user (record != NULL ? record->spec->image_digest : NULL, handle, FALSE, NULL);
  return TRUE;
}
