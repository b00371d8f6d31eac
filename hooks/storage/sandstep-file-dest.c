/* sandstep-file-dest.c: file:// destinations, staged as a hidden sibling and renamed into place. */
#include "sandstep-destination.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sandstep-error.h"

typedef struct {
  SandstepDestination parent;
  char *dest;          /* host path */
  char *staging;       /* host path of the .partial sibling, once created */
} FileDestination;

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
file_stage (SandstepDestination *parent, SandstepAttachment *attachment, gint64 *out_bytes, GError **error)
{
  FileDestination *d = (FileDestination *) parent;
  g_autofree char *dir = g_path_get_dirname (d->dest);
  int fd;
  gint64 n;

  if (g_mkdir_with_parents (dir, 0755) < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "could not create the directory '%s'", dir);
  d->staging = staging_path (d->dest);
  fd = open (d->staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    {
      g_clear_pointer (&d->staging, g_free);
      return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                   "could not create a staging file beside '%s'", d->dest);
    }
  n = attachment->backend->klass->export_file (attachment, parent->path, fd, parent->context->max_bytes, error);
  if (close (fd) < 0 && n >= 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "could not finish writing '%s'", d->staging);
  *out_bytes = n;
  return n >= 0;
}

/* A rename is atomic per file, not across files. */
static gboolean
file_commit (SandstepDestination *parent, GError **error)
{
  FileDestination *d = (FileDestination *) parent;

  if (rename (d->staging, d->dest) < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Could not move the export into '%s'", d->dest);
  g_clear_pointer (&d->staging, g_free);
  return TRUE;
}

static void
file_abort (SandstepDestination *parent, GString *left)
{
  FileDestination *d = (FileDestination *) parent;

  if (d->staging != NULL && unlink (d->staging) < 0 && errno != ENOENT)
    g_string_append_printf (left, "%s%s", left->len ? ", " : "", d->staging);
  g_clear_pointer (&d->staging, g_free);
}

static void
file_free (SandstepDestination *parent)
{
  FileDestination *d = (FileDestination *) parent;

  g_free (d->dest);
  g_free (d->staging);
  g_free (d);
}

static const SandstepDestinationClass file_class = {
  .scheme = "file",
  .commit_rank = 2,
  .stage = file_stage,
  .commit = file_commit,
  .abort = file_abort,
  .free = file_free,
};

SandstepDestination *
sandstep_file_destination_new (const char *url, const char *path, SandstepExportContext *context, GError **error)
{
  g_autofree char *dest = g_filename_from_uri (url, NULL, NULL);
  FileDestination *d;

  if (dest == NULL || g_str_has_suffix (url, "/"))
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' is not a file URL naming a file; write file:///absolute/path/name",
                           url), NULL;
  d = g_new0 (FileDestination, 1);
  d->dest = g_steal_pointer (&dest);
  return sandstep_destination_init (&d->parent, &file_class, path, d->dest, context);
}
