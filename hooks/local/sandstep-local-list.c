/* sandstep-local-list.c: the local backend's view of all its sandboxes: judge, list, gc. */
#include "sandstep-backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-error.h"
#include "sandstep-layers.h"
#include "sandstep-local.h"
#include "sandstep-local-private.h"
#include "sandstep-layers.h"
#include "sandstep-store.h"
#include "sandstep-teardown.h"

int
sandstep_local_open_dir (LocalBackend *local, const char *handle)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, NULL);

  return openat (local->store->dir_fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The run of an owner "<dag>/<run>" is its last component. */
static gboolean
owner_has_run (const char *owner, const char *run)
{
  const char *slash = strrchr (owner, '/');

  return g_strcmp0 (slash != NULL ? slash + 1 : owner, run) == 0;
}

gboolean
sandstep_local_judge (SandstepStore *store, const char *handle, SandstepCondition *out_condition, gboolean *out_over,
                      SandstepRecord **out_record, char **out_problem)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepRecord) record = sandstep_store_load (store, handle, &error);

  *out_record = NULL;
  *out_problem = NULL;
  if (record == NULL)
    {
      /* Destroyed since it was listed: nothing to judge. */
      if (g_error_matches (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND))
        return FALSE;
      *out_condition = SANDSTEP_CONDITION_BROKEN;
      *out_over = sandstep_store_is_over (store, handle, NULL);
      *out_problem = g_strdup (error->message);
      return TRUE;
    }
  *out_over = sandstep_store_is_over (store, handle, record);
  *out_condition = *out_over ? SANDSTEP_CONDITION_EXPIRED : SANDSTEP_CONDITION_IDLE;
  /* Released while a command ran (an orphaned one, say): it is destroyed when that command ends, so it is
   * running, not expired, and gc --expired leaves it to its command. */
  if (*out_over && record->released)
    {
      g_autofree char *claimed = sandstep_store_peek_holder (store, handle);
      if (claimed != NULL)
        *out_condition = SANDSTEP_CONDITION_RUNNING;
    }
  *out_record = g_steal_pointer (&record);
  return TRUE;
}

/* A cgroup this young may be about to take a process (sandstep_cgroup_sweep). */
#define ORPHAN_CGROUP_AGE_S 60

static gboolean
in_store (const char *name, gpointer data)
{
  SandstepStore *store = data;
  g_autofree char *rel = g_build_filename ("sandboxes", name, NULL);
  struct stat st;

  return fstatat (store->dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

gboolean
sandstep_local_gc (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
          gboolean broken, GPtrArray *destroyed, GError **error)
{
  LocalBackend *local = (LocalBackend *) backend;
  g_autoptr(GPtrArray) handles = sandstep_store_list (local->store);
  gboolean ok = TRUE;

  for (guint i = 0; i < handles->len; i++)
    {
      const char *handle = handles->pdata[i];
      g_autoptr(SandstepRecord) record = NULL;
      g_autofree char *problem = NULL;
      gboolean over = FALSE;
      g_autoptr(GError) local_error = NULL;
      SandstepCondition condition;

      if (!sandstep_local_judge (local->store, handle, &condition, &over, &record, &problem))
        continue;
      if (condition == SANDSTEP_CONDITION_BROKEN)
        {
          /* A damaged sandbox has no owner to match a run: reclaimed when asked, or once certainly over;
           * never by a gc for some owners only, as it may be anyone's. */
          if (owner_prefix != NULL || !(broken || over))
            continue;
        }
      else
        {
          if (run != NULL && !owner_has_run (record->owner, run))
            continue;
          if (owner_prefix != NULL && !g_str_has_prefix (record->owner, owner_prefix))
            continue;
          if (expired_only && condition != SANDSTEP_CONDITION_EXPIRED)
            continue;
        }
      if (sandstep_sandbox_destroy (local->store, handle, -1, &local_error))
        g_ptr_array_add (destroyed, g_strdup (handle));
      else if (ok)
        {
          ok = FALSE;
          g_propagate_error (error, g_steal_pointer (&local_error));
        }
    }
  sandstep_store_sweep (local->store, TRUE);
  sandstep_layers_sweep (local->store);
  /* Cgroups left by sandboxes that are gone, also those of state directories removed by hand; not on a gc for
   * some owners only (a tenant's, through sandstepd), which reaches no one else's. */
  if (owner_prefix == NULL)
    sandstep_cgroup_sweep (in_store, local->store, ORPHAN_CGROUP_AGE_S);
  return ok;
}

/* Who uses the sandbox now: its claim's holder (*out_running), or the
 * holder of a make recipe's hold between its lines; NULL for nobody. */
char *
sandstep_local_current_user (LocalBackend *local, const char *handle, gboolean *out_running)
{
  char holder[SANDSTEP_STEP_HOLDER_MAX];
  char *claimed = sandstep_store_peek_holder (local->store, handle);
  int dir;

  *out_running = claimed != NULL;
  if (claimed != NULL)
    return claimed;
  dir = sandstep_local_open_dir (local, handle);
  if (dir >= 0 && sandstep_step_held (dir, holder, sizeof holder, NULL))
    {
      close (dir);
      return g_strdup (holder);
    }
  if (dir >= 0)
    close (dir);
  return NULL;
}

/* A directory the walk of tree_size() is inside of: who it is, and where to read on in it. */
typedef struct {
  dev_t dev;
  ino_t ino;
  long next;  /* telldir() after the entry the walk went down into */
} SizeLevel;

/* Bytes of the regular files under @dir_fd (taken), at any depth, never following a link.  Iterative, with one
 * directory open at a time: a command may leave a chain of directories far deeper than the stack or the
 * descriptor limit.  The walk keeps 24 bytes per level it is below the top (each level costs the command an inode),
 * and goes back up through ".." only to the directory it came from (device and inode checked): a tree changed
 * under it ends the count there rather than lead it anywhere else. */
static guint64
tree_size (int dir_fd)
{
  g_autoptr(GArray) levels = g_array_new (FALSE, FALSE, sizeof (SizeLevel));
  DIR *dir = fdopendir (dir_fd);
  guint64 total = 0;

  if (dir == NULL)
    {
      close (dir_fd);
      return 0;
    }
  for (;;)
    {
      struct dirent *entry = readdir (dir);
      struct stat st;
      int fd;

      if (entry == NULL)
        {
          SizeLevel *up;

          if (levels->len == 0)
            break;
          up = &g_array_index (levels, SizeLevel, levels->len - 1);
          fd = openat (dirfd (dir), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
          closedir (dir);
          dir = NULL;
          if (fd < 0 || fstat (fd, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino ||
              (dir = fdopendir (fd)) == NULL)
            {
              if (fd >= 0)
                close (fd);
              return total;
            }
          seekdir (dir, up->next);
          g_array_set_size (levels, levels->len - 1);
          continue;
        }
      if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0 ||
          fstatat (dirfd (dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISREG (st.st_mode))
        total += st.st_size;
      else if (S_ISDIR (st.st_mode) &&
               (fd = openat (dirfd (dir), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
        {
          struct stat here;
          DIR *down;

          if (fstat (dirfd (dir), &here) < 0 || (down = fdopendir (fd)) == NULL)
            {
              close (fd);
              continue;
            }
          g_array_append_val (levels, ((SizeLevel) { .dev = here.st_dev, .ino = here.st_ino, .next = telldir (dir) }));
          closedir (dir);
          dir = down;
        }
    }
  closedir (dir);
  return total;
}

GPtrArray *
sandstep_local_list (SandstepBackend *backend, const char *run, const char *owner, GError **error)
{
  LocalBackend *local = (LocalBackend *) backend;
  g_autoptr(GPtrArray) handles = sandstep_store_list (local->store);
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_list_entry_free);

  for (guint i = 0; i < handles->len; i++)
    {
      const char *handle = handles->pdata[i];
      g_autoptr(SandstepRecord) record = NULL;
      g_autoptr(SandstepListEntry) entry = g_new0 (SandstepListEntry, 1);
      g_autofree char *tree = NULL;
      gboolean running = FALSE, over = FALSE;
      int fd;

      if (!sandstep_local_judge (local->store, handle, &entry->condition, &over, &record, &entry->problem))
        continue;
      if (record == NULL ? run != NULL || owner != NULL
                         : (run != NULL && !owner_has_run (record->owner, run)) ||
                             (owner != NULL && g_strcmp0 (record->owner, owner) != 0))
        continue;
      entry->handle = g_strdup (handle);
      if (record != NULL)
        {
          entry->owner = g_strdup (record->owner);
          entry->provisioned_by = g_strdup (record->holder);
          entry->created = record->created;
          entry->expires = record->expires;
          entry->image = g_strdup (record->spec->image);
          entry->image_digest = g_strdup (record->spec->image_digest);
          entry->parent = g_strdup (record->parent);
        }
      /* What it holds of its own: a layered sandbox's changes since its last fork or checkpoint. */
      tree = g_build_filename ("sandboxes", handle, record != NULL && record->layers != NULL ? "rw" : "tree", NULL);
      entry->held_by = sandstep_local_current_user (local, handle, &running);
      if (entry->condition == SANDSTEP_CONDITION_IDLE && entry->held_by != NULL)
        entry->condition = running ? SANDSTEP_CONDITION_RUNNING : SANDSTEP_CONDITION_HELD;
      fd = openat (local->store->dir_fd, tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0)
        entry->size = tree_size (fd);
      g_ptr_array_add (entries, g_steal_pointer (&entry));
    }
  return entries;
}
