/* sandstep-layers.c: frozen layers, for forks and checkpoints (see the header). */
#include "sandstep-layers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-handle.h"
#include "sandstep-host-files.h"

#define INTENT "freezing"

char *
sandstep_layers_path (SandstepStore *store, const char *id)
{
  return g_build_filename (store->dir, "layers", id, NULL);
}

static char *
new_id (void)
{
  return g_strdup_printf ("%08x%08x%08x%08x", g_random_int (), g_random_int (), g_random_int (), g_random_int ());
}

static gboolean
exists_at (int dir_fd, const char *path)
{
  struct stat st;

  return fstatat (dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static gboolean
layer_error (GError **error, int errsv, const char *handle, const char *what)
{
  return sandstep_throw_write_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                     "Could not %s of sandbox '%s'", what, handle);
}

/* Where @record's writable files are, relative to the state directory: its own tree and an image root's
 * writable layer as provisioned, or the writable layers of a layered sandbox. */
static void
writable_paths (const SandstepRecord *record, char **out_tree, char **out_root)
{
  if (record->layers != NULL)
    {
      *out_tree = g_build_filename ("sandboxes", record->handle, "rw", "tree", NULL);
      *out_root = g_build_filename ("sandboxes", record->handle, "rw", "root", NULL);
    }
  else
    {
      *out_tree = g_build_filename ("sandboxes", record->handle, "tree", NULL);
      *out_root = g_build_filename ("sandboxes", record->handle, "root", "upper", NULL);
    }
}

/* Empty writable files for a sandbox that is layered from now on (its rw/ made whole, what it had beside). */
static gboolean
fresh_writable (SandstepStore *store, const SandstepRecord *record, gboolean was_layered)
{
  g_autofree char *dir = g_build_filename ("sandboxes", record->handle, NULL);
  int fd = openat (store->dir_fd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  if (was_layered)
    /* Its work directories stay: overlayfs empties them when it mounts. */
    ok = (mkdirat (fd, "rw/tree", 0700) == 0 || errno == EEXIST) &&
         (mkdirat (fd, "rw/tree/workspace", 0755) == 0 || errno == EEXIST) &&
         (mkdirat (fd, "rw/tree/tmp", 0755) == 0 || errno == EEXIST) &&
         (mkdirat (fd, "rw/root", 0755) == 0 || errno == EEXIST);
  else
    {
      if (exists_at (fd, "rw"))
        sandstep_remove_tree_at (fd, "rw");
      ok = sandstep_store_make_rw (fd, "rw");
    }
  close (fd);
  return ok;
}

/* The layer a freeze was making; NULL with *@out_present saying whether an intent file (then unreadable or
 * damaged) is there at all: the common case, none, costs one failed open. */
static char *
read_intent (SandstepStore *store, const char *handle, gboolean *out_present)
{
  g_autofree char *path = sandstep_store_sandbox_path (store, handle, INTENT);
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;

  *out_present = TRUE;
  if (!g_file_get_contents (path, &text, NULL, &error))
    {
      *out_present = !g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
      return NULL;
    }
  g_strstrip (text);
  return sandstep_layer_id_is_valid (text) ? g_steal_pointer (&text) : NULL;
}

static void
forget_intent (SandstepStore *store, const char *handle)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, INTENT, NULL);

  unlinkat (store->dir_fd, rel, 0);
}

/* Leftovers of a sandbox made layered: its provisioned tree/ and root/ (overlayfs's work) are empty or gone. */
static void
remove_provisioned (SandstepStore *store, const char *handle)
{
  g_autofree char *tree = g_build_filename ("sandboxes", handle, "tree", NULL);
  g_autofree char *root = g_build_filename ("sandboxes", handle, "root", NULL);

  sandstep_remove_tree_at (store->dir_fd, tree);
  sandstep_remove_tree_at (store->dir_fd, root);
}

gboolean
sandstep_layers_recover (SandstepStore *store, SandstepRecord *record, GError **error)
{
  gboolean present;
  g_autofree char *id = read_intent (store, record->handle, &present);
  g_autofree char *tree = NULL, *root = NULL, *layer = NULL, *tmp = NULL;
  g_autofree char *layer_tree = NULL, *layer_root = NULL;

  if (id == NULL)
    {
      /* A damaged intent names no layer: nothing moved can be found by it. */
      if (present)
        forget_intent (store, record->handle);
      return TRUE;
    }
  if (record->layers != NULL && g_strcmp0 (record->layers[0], id) == 0)
    {
      /* Saved: the freeze was done but for its tidying. */
      if (!fresh_writable (store, record, TRUE))
        return layer_error (error, errno, record->handle, "finish freezing the files");
      remove_provisioned (store, record->handle);
      forget_intent (store, record->handle);
      return TRUE;
    }
  /* Not saved: the files go back where the record says they are. */
  writable_paths (record, &tree, &root);
  layer = g_build_filename ("layers", id, NULL);
  tmp = g_strdup_printf ("layers/.tmp-%s", id);
  if (!exists_at (store->dir_fd, layer))
    {
      g_free (layer);
      layer = g_strdup (tmp);
    }
  layer_tree = g_build_filename (layer, "tree", NULL);
  layer_root = g_build_filename (layer, "root", NULL);
  if (exists_at (store->dir_fd, layer_tree))
    {
      /* An empty tree made after the move, which nothing can have used: the claim was the freezer's. */
      sandstep_remove_tree_at (store->dir_fd, tree);
      if (renameat (store->dir_fd, layer_tree, store->dir_fd, tree) < 0)
        return layer_error (error, errno, record->handle, "restore the files of an interrupted fork or checkpoint");
    }
  if (exists_at (store->dir_fd, layer_root) && record->spec->image_digest != NULL && !record->spec->root_readonly)
    {
      sandstep_remove_tree_at (store->dir_fd, root);
      if (renameat (store->dir_fd, layer_root, store->dir_fd, root) < 0)
        return layer_error (error, errno, record->handle, "restore the files of an interrupted fork or checkpoint");
    }
  {
    /* Nobody else can use it: a fork names a layer only once its parent's record does. */
    g_autofree char *users = g_strdup_printf ("layers/%s.users", id);
    sandstep_remove_tree_at (store->dir_fd, layer);
    sandstep_remove_tree_at (store->dir_fd, users);
  }
  forget_intent (store, record->handle);
  return TRUE;
}

gboolean
sandstep_layers_add_user (SandstepStore *store, char **layers, const char *handle, GError **error)
{
  for (gsize i = 0; layers != NULL && layers[i] != NULL; i++)
    {
      g_autofree char *users = g_strdup_printf ("layers/%s.users", layers[i]);
      g_autofree char *entry = g_build_filename (users, handle, NULL);
      int fd;

      if (mkdirat (store->dir_fd, users, 0700) < 0 && errno != EEXIST)
        return layer_error (error, errno, handle, "name the sandbox among its layers' users");
      fd = openat (store->dir_fd, entry, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0)
        return layer_error (error, errno, handle, "name the sandbox among its layers' users");
      close (fd);
    }
  return TRUE;
}

/* Whether directory @rel holds nothing but @allowed (NULL-terminated) entries, each empty in turn. */
static gboolean
holds_only (int dir_fd, const char *rel, const char *const *allowed)
{
  int fd = openat (dir_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *entry;
  gboolean only = dir != NULL;

  if (dir == NULL && fd >= 0)
    close (fd);
  while (only && (entry = readdir (dir)) != NULL)
    if (strcmp (entry->d_name, ".") != 0 && strcmp (entry->d_name, "..") != 0)
      only = allowed != NULL && g_strv_contains (allowed, entry->d_name);
  if (dir != NULL)
    closedir (dir);
  return only;
}

gboolean
sandstep_layers_unchanged (SandstepStore *store, const SandstepRecord *record)
{
  static const char *const tree_entries[] = { "workspace", "tmp", NULL };
  g_autofree char *rw = g_build_filename ("sandboxes", record->handle, "rw", NULL);
  g_autofree char *tree = g_build_filename (rw, "tree", NULL);
  g_autofree char *workspace = g_build_filename (tree, "workspace", NULL);
  g_autofree char *tmp = g_build_filename (tree, "tmp", NULL);
  g_autofree char *root = g_build_filename (rw, "root", NULL);

  /* An opaque directory or a whiteout is an entry too: only nothing at all is no change. */
  return record->layers != NULL && holds_only (store->dir_fd, tree, tree_entries) &&
         holds_only (store->dir_fd, workspace, NULL) && holds_only (store->dir_fd, tmp, NULL) &&
         holds_only (store->dir_fd, root, NULL);
}

gboolean
sandstep_layers_freeze (SandstepStore *store, SandstepRecord *record, GError **error)
{
  g_autofree char *id = new_id ();
  g_autofree char *tmp = g_strdup_printf ("layers/.tmp-%s", id);
  g_autofree char *final = g_build_filename ("layers", id, NULL);
  g_autofree char *tmp_tree = g_build_filename (tmp, "tree", NULL);
  g_autofree char *tmp_root = g_build_filename (tmp, "root", NULL);
  g_autofree char *tree = NULL, *root = NULL;
  gboolean was_layered = record->layers != NULL;
  g_autoptr(GStrvBuilder) stack = g_strv_builder_new ();
  char **old_layers;

  writable_paths (record, &tree, &root);
  if (mkdirat (store->dir_fd, "layers", 0700) < 0 && errno != EEXIST)
    return layer_error (error, errno, record->handle, "make the layer store");
  if (!sandstep_store_write_member (store, record->handle, INTENT, id, strlen (id), error))
    return FALSE;
  /* Renames: whatever the sandbox holds, a freeze moves no data. */
  if (mkdirat (store->dir_fd, tmp, 0700) < 0 ||
      renameat (store->dir_fd, tree, store->dir_fd, tmp_tree) < 0 ||
      (exists_at (store->dir_fd, root) ? renameat (store->dir_fd, root, store->dir_fd, tmp_root)
                                       : mkdirat (store->dir_fd, tmp_root, 0755)) < 0 ||
      renameat (store->dir_fd, tmp, store->dir_fd, final) < 0)
    {
      int errsv = errno;
      sandstep_layers_recover (store, record, NULL);
      return layer_error (error, errsv, record->handle, "freeze the files");
    }
  if (!sandstep_layers_add_user (store, (char *[]) { id, NULL }, record->handle, error) ||
      !fresh_writable (store, record, was_layered))
    {
      if (error != NULL && *error == NULL)
        layer_error (error, errno, record->handle, "make new writable layers");
      sandstep_layers_recover (store, record, NULL);
      return FALSE;
    }
  g_strv_builder_add (stack, id);
  if (record->layers != NULL)
    g_strv_builder_addv (stack, (const char **) record->layers);
  old_layers = record->layers;
  record->layers = g_strv_builder_end (stack);
  if (!sandstep_store_save (store, record, error))
    {
      g_strfreev (record->layers);
      record->layers = old_layers;
      sandstep_layers_recover (store, record, NULL);
      return FALSE;
    }
  g_strfreev (old_layers);
  if (!was_layered)
    remove_provisioned (store, record->handle);
  forget_intent (store, record->handle);
  return TRUE;
}

gboolean
sandstep_layers_reset (SandstepStore *store, SandstepRecord *record, char **layers, GError **error)
{
  g_autofree char *dir = g_build_filename ("sandboxes", record->handle, NULL);
  g_autofree char *old = g_strdup_printf ("sandboxes/%s/rw.old-%08x", record->handle, g_random_int ());
  g_autofree char *rw = g_build_filename (dir, "rw", NULL);
  char **old_layers = record->layers;
  int fd;

  g_return_val_if_fail (old_layers != NULL, FALSE);
  /* The writable layers go aside whole, then new ones come: a kill between leaves an empty sandbox over the old
   * stack, never a mix. */
  if (renameat (store->dir_fd, rw, store->dir_fd, old) < 0)
    return layer_error (error, errno, record->handle, "put the sandbox's changes aside");
  fd = openat (store->dir_fd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 || !sandstep_store_make_rw (fd, "rw"))
    {
      int errsv = errno;
      if (fd >= 0)
        close (fd);
      renameat (store->dir_fd, old, store->dir_fd, rw);
      return layer_error (error, errsv, record->handle, "make new writable layers");
    }
  close (fd);
  record->layers = g_strdupv (layers);
  if (!sandstep_store_save (store, record, error))
    {
      g_strfreev (record->layers);
      record->layers = old_layers;
      return FALSE;
    }
  g_strfreev (old_layers);
  sandstep_remove_tree_at (store->dir_fd, old);
  return TRUE;
}

static void
add_unique (GPtrArray *into, char **layers)
{
  for (gsize i = 0; layers != NULL && layers[i] != NULL; i++)
    if (!g_ptr_array_find_with_equal_func (into, layers[i], g_str_equal, NULL))
      g_ptr_array_add (into, g_strdup (layers[i]));
}

GPtrArray *
sandstep_layers_of (const SandstepRecord *record)
{
  GPtrArray *layers = g_ptr_array_new_with_free_func (g_free);

  add_unique (layers, record->layers);
  if (record->checkpoints != NULL)
    {
      GHashTableIter iter;
      gpointer value;

      g_hash_table_iter_init (&iter, record->checkpoints);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        add_unique (layers, value);
    }
  return layers;
}

/* Removes layer @id if nobody uses it: its users directory is removed only when empty, and a user is only ever
 * added by a sandbox that uses the layer already (a fork, under its parent's claim), so nothing can add one
 * after. */
static void
remove_if_unused (SandstepStore *store, const char *id)
{
  g_autofree char *users = g_strdup_printf ("layers/%s.users", id);
  g_autofree char *layer = g_build_filename ("layers", id, NULL);

  if (unlinkat (store->dir_fd, users, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return;
  sandstep_remove_tree_at (store->dir_fd, layer);
}

void
sandstep_layers_drop_user (SandstepStore *store, GPtrArray *layers, const char *handle)
{
  for (guint i = 0; i < layers->len; i++)
    {
      g_autofree char *entry = g_strdup_printf ("layers/%s.users/%s", (char *) layers->pdata[i], handle);

      unlinkat (store->dir_fd, entry, 0);
      remove_if_unused (store, layers->pdata[i]);
    }
}

void
sandstep_layers_sweep (SandstepStore *store)
{
  int fd = openat (store->dir_fd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) leftovers = g_ptr_array_new_with_free_func (g_free);
  struct dirent *entry;

  if (dir == NULL)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  while ((entry = readdir (dir)) != NULL)
    if (sandstep_layer_id_is_valid (entry->d_name))
      g_ptr_array_add (ids, g_strdup (entry->d_name));
    else if (g_str_has_prefix (entry->d_name, ".tmp-"))
      g_ptr_array_add (leftovers, g_strdup (entry->d_name));
  closedir (dir);
  for (guint i = 0; i < ids->len; i++)
    {
      g_autofree char *users = g_strdup_printf ("layers/%s.users", (char *) ids->pdata[i]);
      int users_fd = openat (store->dir_fd, users, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      DIR *list = users_fd >= 0 ? fdopendir (users_fd) : NULL;

      if (list == NULL && users_fd >= 0)
        close (users_fd);
      while (list != NULL && (entry = readdir (list)) != NULL)
        {
          g_autofree char *sandbox = NULL;
          if (!sandstep_handle_is_valid (entry->d_name))
            continue;
          sandbox = g_build_filename ("sandboxes", entry->d_name, NULL);
          /* A user whose sandbox is gone uses nothing. */
          if (!exists_at (store->dir_fd, sandbox))
            unlinkat (users_fd, entry->d_name, 0);
        }
      if (list != NULL)
        closedir (list);
      remove_if_unused (store, ids->pdata[i]);
    }
  /* A layer being made belongs to a sandbox whose freeze was killed: its recovery moves the files back first,
   * so only a .tmp- no sandbox names in its intent is left over; as for a sandbox half made, the sweep runs
   * under the provision lock, where nothing freezes. */
  for (guint i = 0; i < leftovers->len; i++)
    {
      g_autofree char *rel = g_build_filename ("layers", leftovers->pdata[i], NULL);
      g_autofree char *tree = g_build_filename (rel, "tree", NULL);
      if (!exists_at (store->dir_fd, tree))
        sandstep_remove_tree_at (store->dir_fd, rel);
    }
}
