/* sandstep-image-archive.c: image archives: unpacking one (oci-archive, docker-archive) and docker-archive as a source.
 *
 * A docker-archive (`docker save`, `skopeo copy ... docker-archive:FILE`)
 * holds manifest.json ([{"Config": PATH, "RepoTags": [...], "Layers":
 * [PATH, ...]}]), the config and the layers as files.  Its source makes the
 * Docker schema 2 manifest those describe (each blob's digest is its
 * file's sha256), so the pull verifies, stores and unpacks them as it does a
 * registry's; the image's digest is that manifest's.
 */
#include "sandstep-image-source.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-error.h"
#include "sandstep-image-manifest.h"
#include "sandstep-image-unpack.h"

char *
sandstep_image_archive_unpack (const char *file, GError **error)
{
  g_autoptr(GFile) f = g_file_new_for_path (file);
  g_autoptr(GFileInputStream) in = g_file_read (f, NULL, error);
  g_autofree char *dir = NULL;
  /* An archive is a plain tar: what it unpacks to is bounded by its own size. */
  guint64 budget = G_MAXUINT64 / 4;
  int fd;
  gboolean ok;

  if (in == NULL)
    return NULL;
  dir = g_dir_make_tmp ("sandstep-image-archive-XXXXXX", error);
  if (dir == NULL)
    return NULL;
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_FAILED, errno, "cannot open '%s'", dir);
      sandstep_image_archive_remove (dir);
      return NULL;
    }
  ok = sandstep_image_unpack_tar (G_INPUT_STREAM (in), fd, &budget, NULL, error);
  close (fd);
  if (!ok)
    {
      sandstep_image_archive_remove (dir);
      return NULL;
    }
  return g_steal_pointer (&dir);
}

void
sandstep_image_archive_remove (const char *dir)
{
  g_autofree char *base = g_path_get_basename (dir);
  g_autofree char *parent = g_path_get_dirname (dir);
  int parent_fd = open (parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (parent_fd >= 0)
    {
      sandstep_remove_tree_at (parent_fd, base);
      close (parent_fd);
    }
}

typedef struct {
  SandstepImageSource source;
  char *text;
  char *dir;
  int dir_fd;
  GBytes *manifest;
  GHashTable *paths;  /* digest -> path in the archive */
} ArchiveSource;

/* Opens @path of the archive, refusing '..', absolute paths and a link anywhere on the way. */
static int
open_member (ArchiveSource *self, const char *path, GError **error)
{
  g_auto(GStrv) parts = g_strsplit (path, "/", -1);
  int fd = fcntl (self->dir_fd, F_DUPFD_CLOEXEC, 0);

  if (path[0] == '/' || fd < 0)
    {
      if (fd >= 0)
        close (fd);
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                      "image '%s': manifest.json names '%s', outside the archive; refused", self->text, path);
      return -1;
    }
  for (guint i = 0; parts[i] != NULL; i++)
    {
      gboolean last = parts[i + 1] == NULL;
      int next;

      if (strcmp (parts[i], "..") == 0)
        {
          close (fd);
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                          "image '%s': manifest.json names '%s', outside the archive; refused", self->text, path);
          return -1;
        }
      if (parts[i][0] == '\0' || strcmp (parts[i], ".") == 0)
        continue;
      next = openat (fd, parts[i], (last ? O_RDONLY : O_RDONLY | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
      close (fd);
      if (next < 0)
        {
          sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND, errno,
                                "image '%s': cannot open '%s' in the archive (a link is never followed)", self->text,
                                path);
          return -1;
        }
      fd = next;
    }
  return fd;
}

/* The sha256 digest and size of @path in the archive, and whether it starts as gzip does. */
static char *
hash_member (ArchiveSource *self, const char *path, guint64 *out_size, gboolean *out_gzip, GError **error)
{
  int fd = open_member (self, path, error);
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guchar buf[65536];
  guint64 size = 0;
  struct stat st;

  if (fd < 0)
    return NULL;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                      "image '%s': '%s' in the archive is not a regular file; refused", self->text, path);
      return NULL;
    }
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          close (fd);
          sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_FAILED, errsv,
                                "image '%s': cannot read '%s' in the archive", self->text, path);
          return NULL;
        }
      if (n == 0)
        break;
      if (size == 0 && out_gzip != NULL)
        *out_gzip = n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
      g_checksum_update (sum, buf, n);
      size += n;
    }
  close (fd);
  *out_size = size;
  return g_strconcat ("sha256:", g_checksum_get_string (sum), NULL);
}

static GBytes *
archive_get_manifest (SandstepImageSource *source, const char *reference, char **out_media_type, GError **error)
{
  ArchiveSource *self = (ArchiveSource *) source;

  *out_media_type = g_strdup (SANDSTEP_MEDIA_DOCKER_MANIFEST);
  return g_bytes_ref (self->manifest);
}

static gboolean
archive_get_blob (SandstepImageSource *source, const char *digest, SandstepImageBlobWriter *writer,
                  SandstepImageBytesFunc on_bytes, gpointer data, GError **error)
{
  ArchiveSource *self = (ArchiveSource *) source;
  const char *path = g_hash_table_lookup (self->paths, digest);
  g_autofree char *what = NULL;
  int fd;

  if (path == NULL)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND,
                           "image '%s': the archive has no blob '%s'", self->text, digest);
  fd = open_member (self, path, error);
  if (fd < 0)
    return FALSE;
  what = g_strdup_printf ("'%s' in the archive", path);
  return sandstep_image_blob_writer_write_fd (writer, fd, on_bytes, data, self->text, what, error);
}

static void
archive_free (SandstepImageSource *source)
{
  ArchiveSource *self = (ArchiveSource *) source;

  if (self->dir_fd >= 0)
    close (self->dir_fd);
  if (self->dir != NULL)
    sandstep_image_archive_remove (self->dir);
  g_clear_pointer (&self->manifest, g_bytes_unref);
  g_clear_pointer (&self->paths, g_hash_table_unref);
  g_free (self->text);
  g_free (self->dir);
  g_free (self);
}

/* manifest.json's one image, as a Docker schema 2 manifest. */
static gboolean
describe (ArchiveSource *self, GError **error)
{
  g_autoptr(GString) manifest = g_string_new (NULL);
  g_autofree char *config_digest = NULL, *config = NULL;
  g_autoptr(GPtrArray) layers = NULL;
  guint64 size = 0;
  int fd = open_member (self, "manifest.json", error);
  g_autoptr(GInputStream) in = NULL;
  g_autoptr(GBytes) bytes = NULL;

  if (fd < 0)
    return FALSE;
  in = g_unix_input_stream_new (fd, TRUE);
  bytes = g_input_stream_read_bytes (in, SANDSTEP_IMAGE_MAX_MANIFEST, NULL, error);
  if (bytes == NULL)
    return FALSE;
  config = sandstep_image_archive_manifest_parse (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes),
                                                  self->text, &layers, error);
  if (config == NULL)
    return FALSE;
  config_digest = hash_member (self, config, &size, NULL, error);
  if (config_digest == NULL)
    return FALSE;
  g_hash_table_replace (self->paths, g_strdup (config_digest), g_strdup (config));
  g_string_append_printf (manifest, "{\"schemaVersion\":2,\"mediaType\":\"" SANDSTEP_MEDIA_DOCKER_MANIFEST "\","
                          "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
                          "\"size\":%" G_GUINT64_FORMAT ",\"digest\":\"%s\"},\"layers\":[", size, config_digest);
  for (guint i = 0; i < layers->len; i++)
    {
      const char *path = layers->pdata[i];
      gboolean gzip = FALSE;
      g_autofree char *digest = path != NULL ? hash_member (self, path, &size, &gzip, error) : NULL;

      if (digest == NULL)
        return path != NULL ? FALSE
                            : sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                                              "image '%s': manifest.json names a layer that is not a path",
                                              self->text);
      g_string_append_printf (manifest, "%s{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar%s\","
                              "\"size\":%" G_GUINT64_FORMAT ",\"digest\":\"%s\"}", i > 0 ? "," : "",
                              gzip ? ".gzip" : "", size, digest);
      g_hash_table_replace (self->paths, g_strdup (digest), g_strdup (path));
    }
  g_string_append (manifest, "]}");
  self->manifest = g_string_free_to_bytes (g_steal_pointer (&manifest));
  return TRUE;
}

SandstepImageSource *
sandstep_docker_archive_source_new (const SandstepImageRef *ref, GError **error)
{
  ArchiveSource *self = g_new0 (ArchiveSource, 1);
  g_autoptr(SandstepImageSource) source = &self->source;

  self->source.get_manifest = archive_get_manifest;
  self->source.get_blob = archive_get_blob;
  self->source.free = archive_free;
  self->text = g_strdup (ref->text);
  self->dir_fd = -1;
  self->paths = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->dir = sandstep_image_archive_unpack (ref->path, error);
  if (self->dir == NULL)
    {
      g_prefix_error (error, "image '%s': ", ref->text);
      return NULL;
    }
  self->dir_fd = open (self->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (self->dir_fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_FAILED, errno, "cannot open '%s'",
                            self->dir);
      return NULL;
    }
  if (!describe (self, error))
    return NULL;
  return g_steal_pointer (&source);
}
