/* sandstep-image-layout.c: an OCI image layout (oci:DIR) or a tar of one (oci-archive:FILE) as a pull's source. */
#include "sandstep-image-source.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-error.h"
#include "sandstep-image-manifest.h"
#include "sandstep-image-unpack.h"

typedef struct {
  SandstepImageSource source;
  char *text;       /* the reference, for messages */
  char *dir;        /* the layout */
  char *tmp_dir;    /* an oci-archive's layout, removed at the end */
  int dir_fd;
} LayoutSource;

/* Reads @name under the layout whole (at most @max bytes), never following a link at its end. */
static GBytes *
read_in_layout (LayoutSource *self, const char *name, gsize max, GError **error)
{
  int fd = openat (self->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  g_autoptr(GInputStream) in = NULL;
  g_autoptr(GBytes) bytes = NULL;
  struct stat st;

  if (fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, errno == ENOENT ? SANDSTEP_IMAGE_ERROR_NOT_FOUND
                                                                          : SANDSTEP_IMAGE_ERROR_FAILED, errno,
                            "image '%s': cannot open '%s' in the layout", self->text, name);
      return NULL;
    }
  in = g_unix_input_stream_new (fd, TRUE);
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || (guint64) st.st_size > max)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                      "image '%s': '%s' in the layout is not a regular file of at most %" G_GSIZE_FORMAT " bytes",
                      self->text, name, max);
      return NULL;
    }
  bytes = g_input_stream_read_bytes (in, max + 1, NULL, error);
  return g_steal_pointer (&bytes);
}

static GBytes *
read_blob_bytes (LayoutSource *self, const char *digest, GError **error)
{
  g_autofree char *name = g_strdup_printf ("blobs/sha256/%s", digest + strlen ("sha256:"));
  g_autoptr(GBytes) bytes = read_in_layout (self, name, SANDSTEP_IMAGE_MAX_MANIFEST, error);
  g_autofree char *got = NULL;

  if (bytes == NULL)
    return NULL;
  got = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);
  if (strcmp (got, digest + strlen ("sha256:")) != 0)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_DIGEST,
                      "image '%s': blob '%s' does not match its digest (its bytes hash to 'sha256:%s'): the layout "
                      "is corrupt or tampered with; nothing was kept", self->text, digest, got);
      return NULL;
    }
  return g_steal_pointer (&bytes);
}

static GBytes *
layout_get_manifest (SandstepImageSource *source, const char *reference, char **out_media_type, GError **error)
{
  LayoutSource *self = (LayoutSource *) source;
  g_autoptr(GBytes) index = NULL;
  g_autofree char *digest = NULL;

  if (reference != NULL && g_str_has_prefix (reference, "sha256:"))
    {
      g_autoptr(GBytes) bytes = read_blob_bytes (self, reference, error);
      *out_media_type = NULL;   /* the pull reads it from the manifest's own mediaType */
      return g_steal_pointer (&bytes);
    }
  index = read_in_layout (self, "index.json", SANDSTEP_IMAGE_MAX_MANIFEST, error);
  if (index == NULL)
    return NULL;
  digest = sandstep_image_layout_index_pick (g_bytes_get_data (index, NULL), g_bytes_get_size (index), reference,
                                             self->text, out_media_type, error);
  if (digest == NULL)
    return NULL;
  return read_blob_bytes (self, digest, error);
}

static gboolean
layout_get_blob (SandstepImageSource *source, const char *digest, SandstepImageBlobWriter *writer,
                 SandstepImageBytesFunc on_bytes, gpointer data, GError **error)
{
  LayoutSource *self = (LayoutSource *) source;
  g_autofree char *name = g_strdup_printf ("blobs/sha256/%s", digest + strlen ("sha256:"));
  int fd = openat (self->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  g_autofree char *what = NULL;

  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, errno == ENOENT ? SANDSTEP_IMAGE_ERROR_NOT_FOUND
                                                                               : SANDSTEP_IMAGE_ERROR_FAILED, errno,
                                 "image '%s': cannot open the blob '%s' in the layout", self->text, digest);
  what = g_strdup_printf ("the blob '%s'", digest);
  return sandstep_image_blob_writer_write_fd (writer, fd, on_bytes, data, self->text, what, error);
}

static void
layout_free (SandstepImageSource *source)
{
  LayoutSource *self = (LayoutSource *) source;

  if (self->dir_fd >= 0)
    close (self->dir_fd);
  if (self->tmp_dir != NULL)
    sandstep_image_archive_remove (self->tmp_dir);
  g_free (self->text);
  g_free (self->dir);
  g_free (self->tmp_dir);
  g_free (self);
}

SandstepImageSource *
sandstep_layout_source_new (const SandstepImageRef *ref, GError **error)
{
  LayoutSource *self = g_new0 (LayoutSource, 1);
  g_autoptr(SandstepImageSource) source = &self->source;

  self->source.get_manifest = layout_get_manifest;
  self->source.get_blob = layout_get_blob;
  self->source.free = layout_free;
  self->text = g_strdup (ref->text);
  self->dir_fd = -1;
  if (ref->transport == SANDSTEP_IMAGE_TRANSPORT_OCI_ARCHIVE)
    {
      self->tmp_dir = sandstep_image_archive_unpack (ref->path, error);
      if (self->tmp_dir == NULL)
        {
          g_prefix_error (error, "image '%s': ", ref->text);
          return NULL;
        }
      self->dir = g_strdup (self->tmp_dir);
    }
  else
    self->dir = g_strdup (ref->path);
  self->dir_fd = open (self->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (self->dir_fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND, errno,
                            "image '%s': cannot open the layout directory '%s'; check the path", ref->text, self->dir);
      return NULL;
    }
  return g_steal_pointer (&source);
}
