/* sandstep-export.c: stage every file, then publish them all. */
#include "sandstep-export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sandstep-error.h"

typedef struct {
  char *path;       /* in the sandbox */
  char *url;
  char *dest;       /* host path */
  char *staging;    /* host path of the .partial sibling, once created */
} ExportItem;

static void
export_item_free (ExportItem *item)
{
  g_free (item->path);
  g_free (item->url);
  g_free (item->dest);
  g_free (item->staging);
  g_free (item);
}

char *
sandstep_export_destination (const char *url, GError **error)
{
  g_autofree char *path = NULL;

  if (url == NULL || strstr (url, "://") == NULL)
    {
      sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                      "destination '%s' is not a URL; write file:///absolute/path", url ? url : "");
      return NULL;
    }
  if (!g_str_has_prefix (url, "file://"))
    {
      sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                      "destination '%s' uses a scheme sandstep cannot write yet; use file:///absolute/path", url);
      return NULL;
    }
  path = g_filename_from_uri (url, NULL, NULL);
  if (path == NULL || g_str_has_suffix (url, "/"))
    {
      sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                      "destination '%s' is not a file URL naming a file; write file:///absolute/path/name", url);
      return NULL;
    }
  return g_steal_pointer (&path);
}

static char *
staging_path (const char *dest)
{
  g_autofree char *dir = g_path_get_dirname (dest);
  g_autofree char *base = g_path_get_basename (dest);
  guint8 r[6];

  if (getrandom (r, sizeof r, 0) != sizeof r)
    for (gsize i = 0; i < sizeof r; i++)
      r[i] = g_random_int_range (0, 256);
  return g_strdup_printf ("%s/.%s.%02x%02x%02x%02x%02x%02x.partial", dir, base, r[0], r[1], r[2], r[3], r[4], r[5]);
}

static gboolean
stage_one (SandstepAttachment *attachment, ExportItem *item, guint64 max_bytes, gint64 *out_bytes, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (item->dest);
  int fd;
  gint64 n;

  if (g_mkdir_with_parents (dir, 0755) < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "could not create the directory '%s'", dir);
  item->staging = staging_path (item->dest);
  fd = open (item->staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    {
      g_clear_pointer (&item->staging, g_free);
      return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                   "could not create a staging file beside '%s'", item->dest);
    }
  n = sandstep_attachment_export_file (attachment, item->path, fd, max_bytes, error);
  if (close (fd) < 0 && n >= 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "could not finish writing '%s'", item->staging);
  *out_bytes = n;
  return n >= 0;
}

/* Removes every staging file; returns the ones that could not be removed. */
static char *
remove_staging (GPtrArray *items)
{
  GString *left = NULL;

  for (guint i = 0; i < items->len; i++)
    {
      ExportItem *item = items->pdata[i];
      if (item->staging != NULL && unlink (item->staging) < 0 && errno != ENOENT)
        {
          if (left == NULL)
            left = g_string_new (NULL);
          g_string_append_printf (left, "%s%s", left->len ? ", " : "", item->staging);
        }
    }
  return left != NULL ? g_string_free (left, FALSE) : NULL;
}

gboolean
sandstep_export_files (SandstepAttachment *attachment, GPtrArray *pairs, guint64 max_bytes,
                       void (*progress) (const char *path, const char *dest, gint64 bytes, gpointer data),
                       gpointer progress_data, GError **error)
{
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func ((GDestroyNotify) export_item_free);
  g_autoptr(GString) published = g_string_new (NULL);

  /* Check every pair before copying anything. */
  for (guint i = 0; pairs != NULL && i < pairs->len; i++)
    {
      const char *pair = pairs->pdata[i];
      const char *eq = strchr (pair, '=');
      ExportItem *item;

      if (eq == NULL || eq == pair || eq[1] == '\0')
        return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                               "'%s' is not PATH=URL; write for example report.md=file:///tmp/report.md", pair);
      item = g_new0 (ExportItem, 1);
      g_ptr_array_add (items, item);
      item->path = g_strndup (pair, eq - pair);
      item->url = g_strdup (eq + 1);
      item->dest = sandstep_export_destination (item->url, error);
      if (item->dest == NULL)
        return FALSE;
    }
  if (items->len == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "nothing to export; give PATH=URL pairs, e.g. report.md=file:///tmp/report.md");

  for (guint i = 0; i < items->len; i++)
    {
      ExportItem *item = items->pdata[i];
      g_autoptr(GError) local_error = NULL;
      gint64 bytes = 0;

      if (!stage_one (attachment, item, max_bytes, &bytes, &local_error))
        {
          g_autofree char *left = remove_staging (items);
          g_autofree char *message = g_strdup (local_error->message);
          gsize len = strlen (message);
          while (len > 0 && message[len - 1] == '.')
            message[--len] = '\0';
          g_set_error (error, local_error->domain, local_error->code,
                       "Could not export '%s' from sandbox %s to %s: %s. No destination was changed.%s%s",
                       item->path, attachment->handle, item->url, message, left ? " Left behind, to delete by hand: " : "",
                       left ? left : "");
          return FALSE;
        }
      if (progress != NULL)
        progress (item->path, item->dest, bytes, progress_data);
    }

  /* All staged: publish.  A rename is atomic per file, not across files. */
  for (guint i = 0; i < items->len; i++)
    {
      ExportItem *item = items->pdata[i];
      if (rename (item->staging, item->dest) < 0)
        {
          int errsv = errno;
          g_autofree char *left = remove_staging (items);
          return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                                 "Could not move the export into '%s': %s.%s%s%s%s", item->dest, g_strerror (errsv),
                                 published->len ? " Already in place: " : "", published->str,
                                 left ? " Left behind, to delete by hand: " : "", left ? left : "");
        }
      g_clear_pointer (&item->staging, g_free);
      g_string_append_printf (published, "%s%s", published->len ? ", " : "", item->dest);
    }
  return TRUE;
}
