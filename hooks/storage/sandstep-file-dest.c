/* sandstep-file-dest.c: file:// destinations.
 *
 * The directory is opened one component at a time from "/", never through a
 * symbolic link that someone other than the caller or root owns: a link
 * planted in a shared directory (/tmp/x -> /etc) must not redirect an export
 * that root runs.  The file is staged as an unnamed file in that directory
 * (O_TMPFILE), so a kill at any moment leaves nothing behind, and committed
 * with linkat(): straight to its name when that is free, else to a hidden
 * ".NAME.<12 hex>.partial" that is renamed over the old file at once.  An
 * export removes such names of its own destination that an earlier, killed
 * export left (and the named staging files of older versions).
 */
#include "sandstep-destination.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"

#define MAX_LINKS 40        /* as the kernel's ELOOP limit */
#define STAGING_HEX 12

typedef struct {
  SandstepDestination parent;
  char *dest;          /* host path */
  char *dir;           /* its directory, for messages */
  char *base;          /* its name in that directory */
  int dir_fd;          /* O_PATH on the directory, opened safely; -1 before stage */
  int tmp_fd;          /* the unnamed staging file, or -1 */
  char *named;         /* the name of a staging file in dir_fd where O_TMPFILE is not supported */
} FileDestination;

typedef int FileFd;

static void
file_fd_close (int fd)
{
  int errsv = errno;

  close (fd);
  errno = errsv;
}
G_DEFINE_AUTO_CLEANUP_FREE_FUNC (FileFd, file_fd_close, -1)

/* g_clear_fd() is GLib 2.76; this is 2.74. */
static void
clear_fd (int *fd)
{
  if (*fd >= 0)
    file_fd_close (g_steal_fd (fd));
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DIR, closedir)

/* ---- opening the directory ---- */

static gboolean
owner_trusted (uid_t uid)
{
  return uid == 0 || uid == geteuid ();
}

/* Pushes the components of @path onto @todo, first component last (a stack). */
static void
push_components (GPtrArray *todo, const char *path)
{
  g_auto(GStrv) parts = g_strsplit (path, "/", -1);

  for (guint n = g_strv_length (parts); n > 0; n--)
    if (parts[n - 1][0] != '\0' && strcmp (parts[n - 1], ".") != 0)
      g_ptr_array_add (todo, g_strdup (parts[n - 1]));
}

/* An O_PATH fd on the directory @dir (absolute), made with @mode where
 * missing.  Each component is opened with O_NOFOLLOW; a link is followed by
 * hand, and only when the caller or root owns it. */
static int
open_directory (const char *dir, mode_t mode, GError **error)
{
  g_autoptr(GPtrArray) todo = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GString) walked = g_string_new ("");
  g_auto(FileFd) fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  guint links = 0;

  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot open '/'"), -1;
  push_components (todo, dir);
  while (todo->len > 0)
    {
      g_autofree char *name = g_ptr_array_steal_index (todo, todo->len - 1);
      g_auto(FileFd) next = -1;
      struct stat st;

      if (strcmp (name, "..") == 0)
        {
          /* The kernel stops ".." at "/" as it does for any lookup. */
          next = openat (fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
          if (next < 0)
            return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                         "Cannot open '%s/..'", walked->len ? walked->str : "/"), -1;
          clear_fd (&fd);
          fd = g_steal_fd (&next);
          g_string_append (walked, "/..");
          continue;
        }
      g_string_append_printf (walked, "/%s", name);
      next = openat (fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0 && errno == ENOENT)
        {
          if (mkdirat (fd, name, mode) < 0 && errno != EEXIST)
            return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                         "Cannot create the directory '%s'", walked->str), -1;
          next = openat (fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
      if (next < 0 || fstat (next, &st) < 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot open '%s'", walked->str), -1;
      if (S_ISLNK (st.st_mode))
        {
          g_autofree char *target = NULL;
          char buffer[4096];
          ssize_t n;

          if (!owner_trusted (st.st_uid))
            return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                                   "'%s' is a symbolic link owned by uid %u, neither you nor root, so it could "
                                   "send the export anywhere; it was not followed.  Export to the real path, or "
                                   "have the link removed", walked->str, (guint) st.st_uid), -1;
          if (++links > MAX_LINKS)
            return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, ELOOP,
                                         "Cannot resolve '%s'", dir), -1;
          n = readlinkat (next, "", buffer, sizeof buffer);
          if (n < 0 || (gsize) n >= sizeof buffer)
            return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                                         n < 0 ? errno : ENAMETOOLONG, "Cannot read the link '%s'", walked->str), -1;
          target = g_strndup (buffer, n);
          push_components (todo, target);
          /* Messages name the path as resolved so far: the link's directory, or "/". */
          g_string_truncate (walked, target[0] == '/' ? 0 : walked->len - strlen (name) - 1);
          if (target[0] == '/')
            {
              clear_fd (&fd);
              fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
              if (fd < 0)
                return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                             "Cannot open '/'"), -1;
            }
          continue;
        }
      if (!S_ISDIR (st.st_mode))
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, ENOTDIR,
                                     "Cannot export under '%s'", walked->str), -1;
      clear_fd (&fd);
      fd = g_steal_fd (&next);
    }
  return g_steal_fd (&fd);
}

/* ---- staging names ---- */

static char *
staging_name (const char *base)
{
  guint8 r[STAGING_HEX / 2];
  GString *name = g_string_new (".");

  if (getrandom (r, sizeof r, 0) != sizeof r)
    for (gsize i = 0; i < sizeof r; i++)
      r[i] = g_random_int_range (0, 256);
  g_string_append_printf (name, "%s.", base);
  for (gsize i = 0; i < sizeof r; i++)
    g_string_append_printf (name, "%02x", r[i]);
  g_string_append (name, ".partial");
  return g_string_free (name, FALSE);
}

/* ".@base.<12 lowercase hex>.partial": a staging name of @base. */
static gboolean
is_staging_name (const char *name, const char *base)
{
  gsize base_len = strlen (base);
  const char *hex;

  if (name[0] != '.' || strncmp (name + 1, base, base_len) != 0 || name[1 + base_len] != '.')
    return FALSE;
  hex = name + 2 + base_len;
  for (int i = 0; i < STAGING_HEX; i++)
    if (!g_ascii_isdigit (hex[i]) && !(hex[i] >= 'a' && hex[i] <= 'f'))
      return FALSE;
  return strcmp (hex + STAGING_HEX, ".partial") == 0;
}

/* Removes the staging files of our destination that a killed export left:
 * regular files of the caller's only, never another user's in a shared
 * directory.  Nothing here is worth failing the export for. */
static void
remove_stale_staging (FileDestination *d)
{
  g_autoptr(DIR) dir = NULL;
  struct dirent *entry;
  int fd = openat (d->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0 || (dir = fdopendir (fd)) == NULL)
    {
      if (fd >= 0)
        close (fd);
      g_debug ("cannot list '%s' for stale staging files: %s", d->dir, g_strerror (errno));
      return;
    }
  while ((entry = readdir (dir)) != NULL)
    {
      struct stat st;

      if (!is_staging_name (entry->d_name, d->base))
        continue;
      if (fstatat (dirfd (dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (st.st_mode) ||
          st.st_uid != geteuid ())
        continue;
      if (unlinkat (dirfd (dir), entry->d_name, 0) < 0)
        g_debug ("cannot remove the stale staging file '%s/%s': %s", d->dir, entry->d_name, g_strerror (errno));
    }
}

/* ---- the destination ---- */

static gboolean
throw_exists (FileDestination *d, GError **error)
{
  return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                         "'%s' exists and --no-clobber keeps it; remove it, or export without --no-clobber",
                         d->dest);
}

static gboolean
file_stage (SandstepDestination *parent, SandstepAttachment *attachment, gint64 *out_bytes, GError **error)
{
  FileDestination *d = (FileDestination *) parent;
  g_auto(FileFd) fd = -1;
  struct stat st;
  mode_t kept;
  gint64 n;

  d->dir_fd = open_directory (d->dir, 0755, error);
  if (d->dir_fd < 0)
    return FALSE;
  if (parent->context->no_clobber && fstatat (d->dir_fd, d->base, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return throw_exists (d, error);
  remove_stale_staging (d);

  fd = openat (d->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
    {
      /* No O_TMPFILE here (some network file systems): a named hidden sibling. */
      d->named = staging_name (d->base);
      fd = openat (d->dir_fd, d->named, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0)
        g_clear_pointer (&d->named, g_free);
    }
  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot create a staging file in '%s'", d->dir);
  /* The file it replaces keeps its mode (0600 stays 0600); a new one gets 0644 less the umask. */
  kept = sandstep_replaced_mode (d->dir_fd, d->base, (mode_t) -1);
  if (kept != (mode_t) -1 && fchmod (fd, kept) < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot give the staging file in '%s' the mode of '%s'", d->dir, d->dest);

  n = sandstep_attachment_export_file (attachment, parent->path, fd, parent->context->max_bytes, error);
  if (n < 0)
    return FALSE;
  if (d->named != NULL)
    {
      if (close (g_steal_fd (&fd)) < 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot finish writing '%s/%s'", d->dir, d->named);
    }
  else
    d->tmp_fd = g_steal_fd (&fd);
  *out_bytes = n;
  return TRUE;
}

/* Gives the unnamed staging file the name @name in the directory; EEXIST
 * when it is taken.  AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc does not. */
static int
link_staged (FileDestination *d, const char *name)
{
  g_autofree char *proc_path = NULL;

  if (linkat (d->tmp_fd, "", d->dir_fd, name, AT_EMPTY_PATH) == 0)
    return 0;
  if (errno != ENOENT && errno != EPERM)
    return -1;
  proc_path = g_strdup_printf ("/proc/self/fd/%d", d->tmp_fd);
  return linkat (AT_FDCWD, proc_path, d->dir_fd, name, AT_SYMLINK_FOLLOW);
}

static gboolean
file_commit (SandstepDestination *parent, GError **error)
{
  FileDestination *d = (FileDestination *) parent;

  if (d->named != NULL)
    {
      if (parent->context->no_clobber && faccessat (d->dir_fd, d->base, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return throw_exists (d, error);
      if (renameat (d->dir_fd, d->named, d->dir_fd, d->base) < 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot move the export into '%s'", d->dest);
      g_clear_pointer (&d->named, g_free);
      return TRUE;
    }

  /* A free name takes the file in one step, and never replaces anything. */
  if (link_staged (d, d->base) == 0)
    return TRUE;
  if (errno != EEXIST)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot move the export into '%s'", d->dest);
  if (parent->context->no_clobber)
    return throw_exists (d, error);

  /* Taken: a hidden name for an instant, then a rename over the old file.
   * Another export's cleanup may remove that name meanwhile: link again. */
  for (int attempt = 0; attempt < 3; attempt++)
    {
      g_autofree char *name = staging_name (d->base);

      if (link_staged (d, name) < 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot move the export into '%s'", d->dest);
      if (renameat (d->dir_fd, name, d->dir_fd, d->base) == 0)
        return TRUE;
      if (errno != ENOENT)
        {
          int errsv = errno;
          unlinkat (d->dir_fd, name, 0);
          return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errsv,
                                       "Cannot move the export into '%s'", d->dest);
        }
    }
  return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, ENOENT,
                               "Cannot move the export into '%s'", d->dest);
}

static void
file_abort (SandstepDestination *parent, GString *left)
{
  FileDestination *d = (FileDestination *) parent;

  /* An unnamed file goes with its last fd. */
  clear_fd (&d->tmp_fd);
  if (d->named != NULL && unlinkat (d->dir_fd, d->named, 0) < 0 && errno != ENOENT)
    g_string_append_printf (left, "%s%s/%s", left->len ? ", " : "", d->dir, d->named);
  g_clear_pointer (&d->named, g_free);
}

static void
file_free (SandstepDestination *parent)
{
  FileDestination *d = (FileDestination *) parent;

  clear_fd (&d->tmp_fd);
  clear_fd (&d->dir_fd);
  g_free (d->dest);
  g_free (d->dir);
  g_free (d->base);
  g_free (d->named);
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
  g_autofree char *host = NULL;
  g_autofree char *dest = g_filename_from_uri (url, &host, NULL);
  FileDestination *d;

  if (dest == NULL || g_str_has_suffix (url, "/"))
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' is not a file URL naming a file; write file:///absolute/path/name",
                           url), NULL;
  /* file://NAME/x names the host NAME; it is not a relative path (RFC 8089). */
  if (host != NULL && host[0] != '\0' && g_ascii_strcasecmp (host, "localhost") != 0)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' names the host '%s'; a file:// URL may name only this one (empty, "
                           "or localhost): write file:///absolute/path/name", url, host), NULL;
  d = g_new0 (FileDestination, 1);
  d->dir_fd = -1;
  d->tmp_fd = -1;
  d->dir = g_path_get_dirname (dest);
  d->base = g_path_get_basename (dest);
  d->dest = g_steal_pointer (&dest);
  return sandstep_destination_init (&d->parent, &file_class, path, d->dest, context);
}
