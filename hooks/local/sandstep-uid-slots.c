/* sandstep-uid-slots.c: which sandbox of a state directory holds each uid; see sandstep-uid-slots.h. */
#include "sandstep-uid-slots.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-handle.h"
#include "sandstep-uids.h"

/* Which sandbox holds each uid slot: "uids/SLOT", a symbolic link to its handle, made at provision (under the
 * provision lock).  A link whose sandbox is gone (destroyed, or removed by hand) is a free slot.  So a provision
 * reads one link or a few, never every other sandbox's record. */
#define UIDS_DIR "uids"

/* A state directory of a build before the links: every record's slot, read once. */
static void
link_existing_uids (SandstepStore *store, int uids_fd, const SandstepUidRange *range)
{
  g_autoptr(GPtrArray) handles = sandstep_store_list (store);

  for (guint i = 0; i < handles->len; i++)
    {
      g_autoptr(SandstepRecord) other = sandstep_store_load (store, handles->pdata[i], NULL);
      char name[16];

      if (other == NULL || other->uid < range->uid_base || other->uid - range->uid_base >= range->count)
        continue;
      g_snprintf (name, sizeof name, "%u", other->uid - range->uid_base);
      if (symlinkat (other->handle, uids_fd, name) < 0)
        g_debug ("Could not note that sandbox '%s' holds uid slot %s: %s", other->handle, name, g_strerror (errno));
    }
}

/* Takes uid slot @name for @handle: TRUE if it was free (or its sandbox is gone), FALSE if another holds it or it
 * cannot be told (@out_failed then). */
static gboolean
take_uid_slot (SandstepStore *store, int uids_fd, const char *name, const char *handle, gboolean *out_failed)
{
  for (int attempt = 0; attempt < 2; attempt++)
    {
      char holder[128];
      ssize_t n;
      struct stat st;
      g_autofree char *rel = NULL;

      if (symlinkat (handle, uids_fd, name) == 0)
        return TRUE;
      if (errno != EEXIST || (n = readlinkat (uids_fd, name, holder, sizeof holder - 1)) < 0)
        break;
      holder[n] = '\0';
      rel = sandstep_handle_is_valid (holder) ? g_build_filename ("sandboxes", holder, NULL) : NULL;
      if (rel != NULL && fstatat (store->dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return FALSE;
      if ((rel == NULL || errno == ENOENT) && unlinkat (uids_fd, name, 0) == 0)
        continue;
      break;
    }
  *out_failed = TRUE;
  return FALSE;
}

void
sandstep_uid_slot_take (SandstepStore *store, SandstepRecord *record)
{
  g_autoptr(SandstepUidLeases) leases = NULL;
  g_autofree char *state_dir = NULL;
  SandstepUidRange range;
  gboolean failed = FALSE;
  guint32 slot;
  int uids_fd;

  if (geteuid () != 0 || !sandstep_uids_idmap_works (store->dir))
    return;
  range = sandstep_uids_range ();
  uids_fd = openat (store->dir_fd, UIDS_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (uids_fd < 0 && errno == ENOENT && mkdirat (store->dir_fd, UIDS_DIR, 0700) == 0 &&
      (uids_fd = openat (store->dir_fd, UIDS_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
    link_existing_uids (store, uids_fd, &range);
  if (uids_fd < 0)
    {
      g_debug ("No uid of its own for sandbox '%s': '%s/" UIDS_DIR "': %s", record->handle, store->dir,
               g_strerror (errno));
      return;
    }
  /* Start where the handle points, so that sandboxes rarely probe; the first slot after it that no sandbox of
   * this state directory holds, nor one of another (leased host-wide, sandstep-uids.h). */
  leases = sandstep_uids_leases_lock ();
  state_dir = g_canonicalize_filename (store->dir, NULL);
  slot = sandstep_uids_first_slot (g_str_hash (record->handle)) % range.count;
  for (guint32 tries = 0; tries < range.count && !failed; tries++, slot = (slot + 1) % range.count)
    {
      char name[16];

      g_snprintf (name, sizeof name, "%u", slot);
      if (!sandstep_uids_leases_held (leases, slot) && take_uid_slot (store, uids_fd, name, record->handle, &failed))
        {
          sandstep_uids_leases_write (leases, slot, state_dir, record->handle);
          record->uid = range.uid_base + slot;
          record->gid = range.gid_base + slot;
          break;
        }
    }
  close (uids_fd);
}

void
sandstep_uid_slot_forget (SandstepStore *store, const SandstepRecord *record)
{
  SandstepUidRange range = sandstep_uids_range ();
  g_autofree char *rel = NULL;
  char holder[128];
  ssize_t n;

  if (record->uid < range.uid_base || record->uid - range.uid_base >= range.count)
    return;
  rel = g_strdup_printf (UIDS_DIR "/%u", record->uid - range.uid_base);
  /* Only our own link: the slot may have been taken since, by a provision that found this sandbox gone. */
  n = readlinkat (store->dir_fd, rel, holder, sizeof holder - 1);
  if (n > 0 && (holder[n] = '\0', strcmp (holder, record->handle) == 0))
    unlinkat (store->dir_fd, rel, 0);
}
