/* sandstep-image-root.c: the image store's part in a sandbox's root (sandstep-image-root.h). */
#include "sandstep-image-root.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-handle.h"
#include "sandstep-image-manifest.h"
#include "sandstep-image-pull.h"
#include "sandstep-image-ref.h"
#include "sandstep-image-store.h"

/* An image config is small; a larger one is not one. */
#define CONFIG_MAX (4 * 1024 * 1024)

char *
sandstep_image_root_pull (const char *reference, char **out_reference, GError **error)
{
  g_autoptr(SandstepImageRef) ref = sandstep_image_ref_parse (reference, error);
  g_autofree char *dir = NULL;
  g_autoptr(SandstepImageStore) store = NULL;
  SandstepPullOptions options = { 0 };
  char *digest;

  if (ref == NULL)
    return NULL;
  if (ref->transport != SANDSTEP_IMAGE_TRANSPORT_REGISTRY)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s' names a file, and a server reads none of its host's for a client; push the image "
                      "to a registry and give its docker:// reference", reference);
      return NULL;
    }
  dir = sandstep_image_store_default_dir ();
  store = sandstep_image_store_open (dir, FALSE, error);
  if (store == NULL)
    return NULL;
  digest = sandstep_image_store_find_reference (store, ref->text);
  if (digest == NULL)
    digest = sandstep_image_pull (store, ref, &options, error);
  if (digest != NULL && out_reference != NULL)
    *out_reference = g_strdup (ref->text);
  return digest;
}

int
sandstep_image_root_hold (GError **error)
{
  g_autofree char *dir = sandstep_image_store_default_dir ();
  g_autoptr(SandstepImageStore) store = sandstep_image_store_open (dir, FALSE, error);
  int fd;

  if (store == NULL)
    return -1;
  /* The lock belongs to the open file, which the duplicate keeps when the store closes its own fd. */
  fd = fcntl (store->lock_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                          "cannot hold the image store '%s' (dup of store.lock); check the open file limit", dir);
  return fd;
}

static SandstepImageRecord *
find_record (SandstepImageStore *store, const char *digest, GError **error)
{
  g_autoptr(GPtrArray) records = sandstep_image_store_list (store, error);

  if (records == NULL)
    return NULL;
  for (guint i = 0; i < records->len; i++)
    {
      SandstepImageRecord *record = records->pdata[i];
      if (strcmp (record->digest, digest) == 0)
        return g_ptr_array_steal_index (records, i);
    }
  sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND,
                  "image '%s' is not in the image store '%s' (removed by 'sandstep gc --images'?); destroy this "
                  "sandbox and provision it again, which pulls the image", digest, store->dir);
  return NULL;
}

gboolean
sandstep_image_root_resolve (const char *digest, GPtrArray *out_layers, GPtrArray *out_env, GError **error)
{
  g_autofree char *dir = sandstep_image_store_default_dir ();
  g_autoptr(SandstepImageStore) store = NULL;
  g_autoptr(SandstepImageRecord) record = NULL;
  g_autoptr(GBytes) config = NULL;

  if (!sandstep_image_digest_is_valid (digest))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                           "the sandbox's image digest '%s' is not sha256:HEX; destroy the sandbox and provision "
                           "it again", digest);
  store = sandstep_image_store_open (dir, FALSE, error);
  if (store == NULL || (record = find_record (store, digest, error)) == NULL)
    return FALSE;
  for (guint i = 0; i < record->layers->len; i++)
    {
      if (!sandstep_image_store_has_layer (store, record->layers->pdata[i]))
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND,
                               "layer '%s' of image '%s' is not unpacked in '%s'; pull the image again",
                               (char *) record->layers->pdata[i], digest, store->dir);
      g_ptr_array_add (out_layers, sandstep_image_store_layer_path (store, record->layers->pdata[i]));
    }
  config = sandstep_image_store_read_blob (store, record->config, CONFIG_MAX, error);
  if (config == NULL)
    return FALSE;
  if (!sandstep_image_config_read_env (g_bytes_get_data (config, NULL), g_bytes_get_size (config), out_env))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_FAILED,
                           "the config '%s' of image '%s' is not a JSON object; pull another image",
                           record->config, digest);
  return TRUE;
}

gboolean
sandstep_image_root_set_user (const char *digest, const char *handle, gboolean in_use, GError **error)
{
  g_autofree char *dir = sandstep_image_store_default_dir ();
  g_autoptr(SandstepImageStore) store = NULL;
  g_autofree char *users = NULL, *name = NULL;
  int fd;

  if (digest == NULL && !in_use && sandstep_handle_is_valid (handle))
    {
      g_autoptr(GPtrArray) records = NULL;
      store = sandstep_image_store_open (dir, FALSE, error);
      if (store == NULL || (records = sandstep_image_store_list (store, error)) == NULL)
        return FALSE;
      for (guint i = 0; i < records->len; i++)
        {
          const SandstepImageRecord *record = records->pdata[i];
          g_autofree char *name = g_strdup_printf ("images/%s.users/%s", record->digest + strlen ("sha256:"), handle);
          unlinkat (store->dir_fd, name, 0);
        }
      return TRUE;
    }
  if (!sandstep_image_digest_is_valid (digest) || !sandstep_handle_is_valid (handle))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                           "image '%s' of sandbox '%s': not a digest and a handle; destroy the sandbox", digest,
                           handle);
  /* Shared: a gc (exclusive) never runs between our look and our write. */
  store = sandstep_image_store_open (dir, FALSE, error);
  if (store == NULL)
    return FALSE;
  users = g_strdup_printf ("images/%s.users", digest + strlen ("sha256:"));
  name = g_build_filename (users, handle, NULL);
  if (!in_use)
    {
      if (unlinkat (store->dir_fd, name, 0) < 0 && errno != ENOENT)
        return sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                     "cannot remove '%s' in the image store '%s'; remove it by hand", name,
                                     store->dir);
      return TRUE;
    }
  /* A sandbox starting on it is a use: `sandstep images` shows when the last one did. */
  {
    g_autoptr(SandstepImageRecord) record = find_record (store, digest, NULL);
    if (record != NULL)
      {
        record->last_used = g_get_real_time () / G_USEC_PER_SEC;
        sandstep_image_store_save_record (store, record, NULL);
      }
  }
  if (mkdirat (store->dir_fd, users, 0755) < 0 && errno != EEXIST)
    return sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                 "cannot create '%s' in the image store '%s'; check its permissions", users,
                                 store->dir);
  fd = openat (store->dir_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                 "cannot create '%s' in the image store '%s'; check its permissions", name,
                                 store->dir);
  close (fd);
  return TRUE;
}
