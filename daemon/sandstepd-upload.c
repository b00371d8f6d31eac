/* sandstepd-upload.c: a `put` upload, parsed as it arrives and staged on disk.
 *
 * Memory stays bounded whatever the upload's size: file bytes go straight to
 * their staged file, and only one entry line (at most MAX_HEADER) is held.
 * The staged tree is then handed to the local backend's put, which applies
 * its own rules (no set-id bits, links copied as links, the cp -r naming).
 */
#include "sandstepd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-wire.h"

#define MAX_HEADER (64 * 1024)
#define MAX_ENTRIES (1024 * 1024)
#define MAX_DEPTH 256
/* What the entry lines of a put may add to --max-upload (and at most as
 * much again): the lines of a few thousand files, so a tree of exactly the
 * limit still goes. */
#define UPLOAD_SLACK (1024 * 1024)

typedef enum {
  STATE_HEADER,
  STATE_DATA,
  STATE_ENDED,
} UploadState;

struct _SandstepdUpload {
  int staging_fd;
  char *dir_name;         /* "put-XXXXXX" under the staging directory */
  char *path;             /* staging_dir/put-XXXXXX/NAME */
  char *name;
  int dir_fd;             /* put-XXXXXX */
  int top_fd;             /* NAME, when it is a directory */
  gboolean top_done;
  gboolean top_is_dir;
  UploadState state;
  GByteArray *line;
  int file_fd;
  guint64 file_left;
  guint64 total;           /* bytes of files */
  guint64 stream;          /* bytes of the stream, entry lines included */
  guint64 max_bytes;
  guint entries;
  GError *error;
};

static gboolean
fail (SandstepdUpload *u, GError **error, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
fail (SandstepdUpload *u, GError **error, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  if (u->error == NULL)
    u->error = g_error_new (SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "The upload of '%s' is malformed: %s",
                            u->name, message);
  if (error != NULL)
    *error = g_error_copy (u->error);
  return FALSE;
}

static gboolean
fail_errno (SandstepdUpload *u, GError **error, int errsv, const char *what, const char *path)
{
  if (u->error == NULL)
    u->error = g_error_new (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, "Could not stage '%s' of the upload (%s): %s",
                            path, what, g_strerror (errsv));
  if (error != NULL)
    *error = g_error_copy (u->error);
  return FALSE;
}

SandstepdUpload *
sandstepd_upload_new (int staging_fd, const char *staging_dir, const char *name, guint64 max_bytes, GError **error)
{
  g_autoptr(SandstepdUpload) u = g_new0 (SandstepdUpload, 1);

  u->staging_fd = staging_fd;
  u->dir_fd = u->top_fd = u->file_fd = -1;
  u->name = g_strdup (name != NULL ? name : "");
  u->line = g_byte_array_new ();
  u->max_bytes = max_bytes;
  if (name == NULL || name[0] == '\0' || strchr (name, '/') != NULL || strcmp (name, ".") == 0 ||
      strcmp (name, "..") == 0 || strlen (name) > 255)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "The upload's name '%s' is not one file name", u->name);
      return NULL;
    }
  for (int attempt = 0; attempt < 100 && u->dir_name == NULL; attempt++)
    {
      g_autofree char *candidate = g_strdup_printf ("put-%08x%08x", g_random_int (), g_random_int ());
      if (mkdirat (staging_fd, candidate, 0700) == 0)
        u->dir_name = g_steal_pointer (&candidate);
      else if (errno != EEXIST)
        break;
    }
  if (u->dir_name == NULL)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not make a staging directory under '%s'", staging_dir);
      return NULL;
    }
  u->dir_fd = openat (staging_fd, u->dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (u->dir_fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not open the staging directory under '%s'", staging_dir);
      return NULL;
    }
  u->path = g_build_filename (staging_dir, u->dir_name, u->name, NULL);
  return g_steal_pointer (&u);
}

void
sandstepd_upload_free (SandstepdUpload *u)
{
  if (u == NULL)
    return;
  if (u->file_fd >= 0)
    close (u->file_fd);
  if (u->top_fd >= 0)
    close (u->top_fd);
  if (u->dir_fd >= 0)
    close (u->dir_fd);
  if (u->dir_name != NULL)
    sandstep_remove_tree_at (u->staging_fd, u->dir_name);
  g_byte_array_unref (u->line);
  g_clear_error (&u->error);
  g_free (u->dir_name);
  g_free (u->path);
  g_free (u->name);
  g_free (u);
}

const char *
sandstepd_upload_path (SandstepdUpload *u)
{
  return u->path;
}

/* Every component non-empty, not "." or "..", and not too many. */
static gboolean
path_is_clean (const char *path)
{
  g_auto(GStrv) parts = NULL;
  guint depth = 0;

  if (path[0] == '/' || strlen (path) > 4096)
    return FALSE;
  parts = g_strsplit (path, "/", -1);
  for (char **p = parts; *p != NULL; p++, depth++)
    if (**p == '\0' || strcmp (*p, ".") == 0 || strcmp (*p, "..") == 0)
      return FALSE;
  return depth > 0 && depth <= MAX_DEPTH;
}

/* The directory that holds @rel, under the top, never through a link. */
static int
open_parent (SandstepdUpload *u, const char *rel, const char **out_name)
{
  const char *slash = strrchr (rel, '/');
  g_autofree char *parent = NULL;
  struct open_how how = {
    .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  int fd;

  if (slash == NULL)
    {
      *out_name = rel;
      return fcntl (u->top_fd, F_DUPFD_CLOEXEC, 3);
    }
  parent = g_strndup (rel, slash - rel);
  *out_name = slash + 1;
  do
    fd = syscall (SYS_openat2, u->top_fd, parent, &how, sizeof how);
  while (fd < 0 && errno == EAGAIN);
  return fd;
}

static gboolean
begin_entry (SandstepdUpload *u, const SandstepWirePutEntry *entry, GError **error)
{
  const char *rel = entry->path;
  const char *type = entry->type;
  gint64 mode = entry->mode & 0777;
  gint64 size = entry->size;
  const char *target = entry->target;
  const char *name;
  int parent_fd;
  gboolean top;

  if (rel == NULL || type == NULL)
    return fail (u, error, "an entry lacks its path or type");
  if (++u->entries > MAX_ENTRIES)
    return fail (u, error, "more than %d entries", MAX_ENTRIES);
  top = rel[0] == '\0';
  if (top != !u->top_done)
    return fail (u, error, top ? "the top entry comes twice" : "an entry comes before the top one");
  if (!top && (!u->top_is_dir || !path_is_clean (rel)))
    return fail (u, error, "the entry path '%s' is not a clean relative path under a directory", rel);

  if (top)
    {
      parent_fd = fcntl (u->dir_fd, F_DUPFD_CLOEXEC, 3);
      name = u->name;
    }
  else
    parent_fd = open_parent (u, rel, &name);
  if (parent_fd < 0)
    return fail_errno (u, error, errno, "its directory", rel);

  if (strcmp (type, "dir") == 0)
    {
      /* Owner rwx at least, so it can be filled; the local put sets the final modes. */
      if (mkdirat (parent_fd, name, mode | 0700) < 0)
        {
          int errsv = errno;
          close (parent_fd);
          return fail_errno (u, error, errsv, "mkdir", rel);
        }
      if (top)
        {
          u->top_fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          u->top_is_dir = TRUE;
          if (u->top_fd < 0)
            {
              int errsv = errno;
              close (parent_fd);
              return fail_errno (u, error, errsv, "open", rel);
            }
        }
    }
  else if (strcmp (type, "file") == 0)
    {
      if (size < 0)
        {
          close (parent_fd);
          return fail (u, error, "the file '%s' has a negative size", rel);
        }
      u->file_fd = openat (parent_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (u->file_fd < 0 || fchmod (u->file_fd, mode) < 0)
        {
          int errsv = errno;
          close (parent_fd);
          return fail_errno (u, error, errsv, "create", rel);
        }
      u->file_left = size;
      if (size > 0)
        u->state = STATE_DATA;
      else
        {
          close (u->file_fd);
          u->file_fd = -1;
        }
    }
  else if (strcmp (type, "link") == 0)
    {
      if (target == NULL || target[0] == '\0' || strlen (target) > 4096)
        {
          close (parent_fd);
          return fail (u, error, "the link '%s' has no usable target", rel);
        }
      if (symlinkat (target, parent_fd, name) < 0)
        {
          int errsv = errno;
          close (parent_fd);
          return fail_errno (u, error, errsv, "symlink", rel);
        }
    }
  else
    {
      close (parent_fd);
      return fail (u, error, "the entry '%s' has the unknown type '%s'", rel, type);
    }
  close (parent_fd);
  u->top_done = TRUE;
  return TRUE;
}

static gboolean
end_line (SandstepdUpload *u, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonObject) line = NULL;
  SandstepWirePutEntry entry;

  line = sandstep_wire_parse_object ((const char *) u->line->data, u->line->len, &local_error);
  g_byte_array_set_size (u->line, 0);
  if (line == NULL)
    return fail (u, error, "%s", local_error->message);
  if (!sandstep_wire_read_put_entry (line, &entry))
    {
      if (!u->top_done)
        return fail (u, error, "it ends before its first entry");
      u->state = STATE_ENDED;
      return TRUE;
    }
  return begin_entry (u, &entry, error);
}

gboolean
sandstepd_upload_feed (SandstepdUpload *u, const guint8 *data, gsize len, GError **error)
{
  if (u->error != NULL)
    {
      if (error != NULL)
        *error = g_error_copy (u->error);
      return FALSE;
    }
  /* Every byte counts, entry lines too: a stream of links or empty files is as big as it is. */
  if (u->stream + len > u->max_bytes + MIN (u->max_bytes, UPLOAD_SLACK))
    {
      sandstep_throw_too_large (&u->error, 0, u->max_bytes,
                                "The upload of '%s' is larger than the server's limit of %" G_GUINT64_FORMAT
                                " bytes; put less at a time, or start sandstepd with a larger --max-upload", u->name,
                                u->max_bytes);
      if (error != NULL)
        *error = g_error_copy (u->error);
      return FALSE;
    }
  u->stream += len;
  while (len > 0)
    {
      switch (u->state)
        {
        case STATE_HEADER:
          {
            const guint8 *nl = memchr (data, '\n', len);
            gsize take = nl != NULL ? (gsize) (nl - data) : len;

            if (u->line->len + take > MAX_HEADER)
              return fail (u, error, "an entry line is longer than %d bytes", MAX_HEADER);
            g_byte_array_append (u->line, data, take);
            data += take;
            len -= take;
            if (nl != NULL)
              {
                data++;
                len--;
                if (!end_line (u, error))
                  return FALSE;
              }
            break;
          }
        case STATE_DATA:
          {
            gsize take = MIN (len, u->file_left);
            gsize done = 0;

            if (u->total + take > u->max_bytes)
              {
                if (u->error == NULL)
                  sandstep_throw_too_large (&u->error, 0, u->max_bytes,
                                            "The upload of '%s' is larger than the server's limit of %"
                                            G_GUINT64_FORMAT " bytes; put less at a time, or start sandstepd with "
                                            "a larger --max-upload", u->name, u->max_bytes);
                if (error != NULL)
                  *error = g_error_copy (u->error);
                return FALSE;
              }
            while (done < take)
              {
                ssize_t n = write (u->file_fd, data + done, take - done);
                if (n < 0 && errno == EINTR)
                  continue;
                if (n <= 0)
                  return fail_errno (u, error, errno, "write", u->name);
                done += n;
              }
            u->total += take;
            u->file_left -= take;
            data += take;
            len -= take;
            if (u->file_left == 0)
              {
                close (u->file_fd);
                u->file_fd = -1;
                u->state = STATE_HEADER;
              }
            break;
          }
        case STATE_ENDED:
          return fail (u, error, "bytes follow its end");
        }
    }
  return TRUE;
}

gboolean
sandstepd_upload_finish (SandstepdUpload *u, GError **error)
{
  if (u->error != NULL)
    {
      if (error != NULL)
        *error = g_error_copy (u->error);
      return FALSE;
    }
  if (u->state != STATE_ENDED)
    return fail (u, error, "it was cut short (the client stopped sending)");
  return TRUE;
}
