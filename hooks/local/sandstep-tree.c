/* sandstep-tree.c: host-side file tools over a sandbox's persistent tree.
 *
 * Every lookup goes through tree_openat2(): one openat2() from the tree's dirfd
 * with RESOLVE_IN_ROOT, so a symbolic link resolves the way the jail's root
 * would resolve it, clamped to the tree.
 *
 * Which error a hostile link gets: a link to a host path ("/etc/passwd", or
 * "../../../secret") names "<tree>/etc/passwd" or "<tree>/secret", which does
 * not exist, so it fails with SANDSTEP_PATH_ERROR_NOT_FOUND, as the same path
 * would inside the jail.  SANDSTEP_PATH_ERROR_ESCAPES is kept for what the
 * caller typed (a path outside /workspace and /tmp, a ".." above "/") and for
 * a lookup the kernel stops at a mount point (EXDEV from RESOLVE_NO_XDEV).
 *
 * A write never follows a link at its last component: the temporary sibling
 * is renamed over the link itself.  What is written is unnamed (O_TMPFILE)
 * until it is whole, so a kill at any moment leaves nothing but, at worst,
 * ".NAME.sandstep~" for the next write of NAME to reuse.  A file where a directory is expected
 * (listing a file, a parent that is a file) is NOT_FOUND: no directory of
 * that name exists.
 */
#include "sandstep-tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-progress.h"
#include "sandstep-host-files.h"
#include "sandstep-units.h"
#include "sandstep-tree-private.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DIR, closedir)


void
sandstep_dir_entry_free (SandstepDirEntry *entry)
{
  if (entry == NULL)
    return;
  g_free (entry->name);
  g_free (entry);
}

/* One lookup under @dir_fd as root.  EAGAIN means a concurrent rename or mount
 * made the kernel give up on a safe answer; it is worth a few more tries. */
int
sandstep_tree_openat2 (int dir_fd, const char *rel, guint64 flags)
{
  struct open_how how = { .flags = flags | O_CLOEXEC, .resolve = TREE_RESOLVE };

  for (int attempt = 0; attempt < 16; attempt++)
    {
      int fd = syscall (SYS_openat2, dir_fd, rel, &how, sizeof how);

      if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
        return fd;
    }
  return -1;
}

/* Turns a failed lookup of @shown into the matching GError. */
gboolean
sandstep_tree_throw_lookup (GError **error, int errsv, const char *shown)
{
  switch (errsv)
    {
    case ENOENT:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                             "'%s' does not exist in the sandbox", shown);
    case ENOTDIR:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                             "'%s' does not exist in the sandbox: a part of it is a file, not a directory",
                             shown);
    case ELOOP:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                             "'%s' goes through a loop of symbolic links; fix the links with 'sandstep run'",
                             shown);
    case EXDEV:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES,
                             "'%s' crosses onto another file system; only /workspace and /tmp can be read "
                             "or written from the host", shown);
    case ENOSYS:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO,
                             "Cannot look up '%s': this kernel lacks openat2(); sandstep needs Linux 5.6 "
                             "or later", shown);
    default:
      return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                   "Cannot open '%s' in the sandbox", shown);
    }
}

int
sandstep_tree_open (const char *path, GError **error)
{
  int fd;

  g_return_val_if_fail (path != NULL, -1);
  g_return_val_if_fail (error == NULL || *error == NULL, -1);

  fd = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Cannot open the sandbox's files at '%s'; destroy the sandbox and "
                            "provision a new one", path);
      return -1;
    }
  return fd;
}

char *
sandstep_tree_relative_path (const char *sandbox_path, GError **error)
{
  g_autofree char *absolute = NULL;
  g_auto(GStrv) split = NULL;
  g_autoptr(GPtrArray) parts = g_ptr_array_new ();

  g_return_val_if_fail (sandbox_path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  /* A relative path starts where a command's working directory does. */
  absolute = sandbox_path[0] == '/' ? g_strdup (sandbox_path)
                                     : g_strconcat ("/workspace/", sandbox_path, NULL);
  split = g_strsplit (absolute, "/", -1);

  /* Resolved lexically, before any lookup, so "a/../.." cannot be given a
   * meaning by whatever links the tree holds. */
  for (char **p = split; *p != NULL; p++)
    {
      if (**p == '\0' || strcmp (*p, ".") == 0)
        continue;
      if (strcmp (*p, "..") == 0)
        {
          if (parts->len == 0)
            {
              sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES,
                              "'%s' goes above '/' with '..'; give a path under /workspace or /tmp",
                              sandbox_path);
              return NULL;
            }
          g_ptr_array_remove_index (parts, parts->len - 1);
          continue;
        }
      g_ptr_array_add (parts, *p);
    }

  if (parts->len == 0 ||
      (strcmp (g_ptr_array_index (parts, 0), "workspace") != 0 &&
       strcmp (g_ptr_array_index (parts, 0), "tmp") != 0))
    {
      sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES,
                      "'%s' is outside the sandbox's files: only /workspace and /tmp can be read or written "
                      "from the host", sandbox_path);
      return NULL;
    }

  g_ptr_array_add (parts, NULL);
  return g_strjoinv ("/", (char **) parts->pdata);
}

/* Splits "workspace/a/b" into "workspace/a" and "b"; FALSE for "workspace" alone. */
gboolean
sandstep_tree_split_parent (const char *rel, char **out_parent, const char **out_name)
{
  const char *slash = strrchr (rel, '/');

  if (slash == NULL)
    return FALSE;
  *out_parent = g_strndup (rel, slash - rel);
  *out_name = slash + 1;
  return TRUE;
}

/* Opens a regular file for reading.  The O_PATH look comes first so that a
 * device node is never opened at all; the second fstat catches a swap. */
static int
open_regular (int tree_fd, const char *rel, const char *shown, struct stat *out_st, GError **error)
{
  g_auto(TreeFd) path_fd = -1;
  g_auto(TreeFd) fd = -1;
  struct stat path_st;

  path_fd = sandstep_tree_openat2 (tree_fd, rel, O_PATH);
  if (path_fd < 0)
    return sandstep_tree_throw_lookup (error, errno, shown), -1;
  if (fstat (path_fd, &path_st) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot stat '%s' in the sandbox", shown), -1;
  if (S_ISDIR (path_st.st_mode))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file, or list it with 'sandstep ls'", shown), -1;
  if (!S_ISREG (path_st.st_mode))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR,
                           "'%s' is %s, not a regular file; copy what you need into a file with "
                           "'sandstep run' first", shown, sandstep_file_type_words (path_st.st_mode)), -1;

  /* O_NONBLOCK: should a FIFO be swapped in after the check, open() must not wait for a writer. */
  fd = sandstep_tree_openat2 (tree_fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return sandstep_tree_throw_lookup (error, errno, shown), -1;
  if (fstat (fd, out_st) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot stat '%s' in the sandbox", shown), -1;
  if (!S_ISREG (out_st->st_mode) || out_st->st_dev != path_st.st_dev || out_st->st_ino != path_st.st_ino)
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_CHANGED,
                           "'%s' was replaced while it was opened; try again once nothing changes it",
                           shown), -1;
  return g_steal_fd (&fd);
}

GBytes *
sandstep_tree_read_file (int tree_fd, const char *sandbox_path, gsize max_bytes, GError **error)
{
  g_autofree char *rel = NULL;
  g_autofree char *shown = NULL;
  g_auto(TreeFd) fd = -1;
  g_autoptr(GByteArray) buffer = NULL;
  struct stat st;
  guint64 size;

  g_return_val_if_fail (sandbox_path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  rel = sandstep_tree_relative_path (sandbox_path, error);
  if (rel == NULL)
    return NULL;
  shown = g_strconcat ("/", rel, NULL);

  fd = open_regular (tree_fd, rel, shown, &st, error);
  if (fd < 0)
    return NULL;

  size = st.st_size;
  if (size <= max_bytes)
    sandstep_progress_expect (size);
  buffer = g_byte_array_sized_new (MIN (size, max_bytes));
  /* The size is checked again as the bytes come, since the file may grow. */
  while (size <= max_bytes)
    {
      guint old_len = buffer->len;
      ssize_t n;

      g_byte_array_set_size (buffer, old_len + COPY_CHUNK);
      n = read (fd, buffer->data + old_len, COPY_CHUNK);
      g_byte_array_set_size (buffer, old_len + MAX (n, 0));
      if (n > 0)
        sandstep_progress_add (n);
      if (n == 0)
        break;
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                "Cannot read '%s' in the sandbox", shown);
          return NULL;
        }
      size = MAX (size, buffer->len);
    }

  if (size > max_bytes)
    {
      g_autofree char *size_text = sandstep_format_size (size);
      g_autofree char *max_text = sandstep_format_size (max_bytes);

      sandstep_throw_too_large (error, size, max_bytes,
                                "'%s' is %s, over the %s read limit; read the part you need with 'sandstep run' "
                                "and head, tail or sed", shown, size_text, max_text);
      return NULL;
    }

  return g_byte_array_free_to_bytes (g_steal_pointer (&buffer));
}

static int
compare_entries (gconstpointer a, gconstpointer b)
{
  const SandstepDirEntry *ea = *(SandstepDirEntry *const *) a;
  const SandstepDirEntry *eb = *(SandstepDirEntry *const *) b;

  return strcmp (ea->name, eb->name);
}

/* Opens the directory @rel (shown as @shown) of the tree for reading, close-on-exec; -1 after setting @error. */
static int
open_directory (int tree_fd, const char *rel, const char *shown, GError **error)
{
  g_auto(TreeFd) path_fd = -1;
  int fd;
  struct stat st;

  path_fd = sandstep_tree_openat2 (tree_fd, rel, O_PATH);
  if (path_fd < 0)
    return sandstep_tree_throw_lookup (error, errno, shown), -1;
  if (fstat (path_fd, &st) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot stat '%s' in the sandbox", shown), -1;
  if (!S_ISDIR (st.st_mode))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                           "'%s' is %s, not a directory; name the directory that holds it", shown,
                           S_ISREG (st.st_mode) ? "a file" : sandstep_file_type_words (st.st_mode)), -1;

  /* "." from the O_PATH fd reopens the very directory that was checked. */
  fd = openat (path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot open the directory '%s' in the sandbox", shown), -1;
  return fd;
}

/* TRUE when @fd, a directory, is the tree's workspace or tmp or beneath one: its ".." climbed until one of them, or
 * the top (the tree's root, or a root whose ".." is itself), is met.  A link resolves inside the tree, but to the
 * jail's root of a layered sandbox, which holds the host's read-only files: those are not the sandbox's to watch. */
static gboolean
is_beneath_files (int tree_fd, int fd)
{
  static const char *const tops[] = { "workspace", "tmp" };
  struct stat top_st[G_N_ELEMENTS (tops)], root_st, st;
  g_auto(TreeFd) cur = -1;

  if (fstat (tree_fd, &root_st) < 0)
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (tops); i++)
    {
      g_auto(TreeFd) t = sandstep_tree_openat2 (tree_fd, tops[i], O_PATH);
      if (t < 0 || fstat (t, &top_st[i]) < 0)
        top_st[i].st_ino = 0, top_st[i].st_dev = (dev_t) -1;
    }
  cur = fcntl (fd, F_DUPFD_CLOEXEC, 0);
  /* A bound on the climb: no tree is this deep (PATH_MAX / 2 components). */
  for (int depth = 0; cur >= 0 && depth < 2048 && fstat (cur, &st) == 0; depth++)
    {
      struct stat up_st;
      int up;

      for (guint i = 0; i < G_N_ELEMENTS (tops); i++)
        if (st.st_dev == top_st[i].st_dev && st.st_ino == top_st[i].st_ino)
          return TRUE;
      if (st.st_dev == root_st.st_dev && st.st_ino == root_st.st_ino)
        return FALSE;
      up = openat (cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (up < 0 || fstat (up, &up_st) < 0 || (up_st.st_dev == st.st_dev && up_st.st_ino == st.st_ino))
        {
          if (up >= 0)
            close (up);
          return FALSE;
        }
      close (cur);
      cur = up;
    }
  return FALSE;
}

int
sandstep_tree_open_directory (int tree_fd, const char *sandbox_path, GError **error)
{
  g_autofree char *rel = NULL;
  g_autofree char *shown = NULL;
  g_auto(TreeFd) fd = -1;

  g_return_val_if_fail (sandbox_path != NULL, -1);
  g_return_val_if_fail (error == NULL || *error == NULL, -1);

  rel = sandstep_tree_relative_path (sandbox_path, error);
  if (rel == NULL)
    return -1;
  shown = g_strconcat ("/", rel, NULL);
  fd = open_directory (tree_fd, rel, shown, error);
  if (fd < 0)
    return -1;
  if (!is_beneath_files (tree_fd, fd))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES,
                           "'%s' leads outside the sandbox's files (a link out of /workspace and /tmp); name a "
                           "directory under /workspace or /tmp itself", sandbox_path), -1;
  return g_steal_fd (&fd);
}

GPtrArray *
sandstep_tree_list (int tree_fd, const char *sandbox_path, GError **error)
{
  g_autofree char *rel = NULL;
  g_autofree char *shown = NULL;
  g_auto(TreeFd) fd = -1;
  g_autoptr(DIR) dir = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  struct dirent *entry;
  struct stat st;

  g_return_val_if_fail (sandbox_path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  rel = sandstep_tree_relative_path (sandbox_path, error);
  if (rel == NULL)
    return NULL;
  shown = g_strconcat ("/", rel, NULL);
  fd = open_directory (tree_fd, rel, shown, error);
  if (fd < 0)
    return NULL;
  dir = fdopendir (fd);
  if (dir == NULL)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot read the directory '%s' in the sandbox", shown), NULL;
  g_steal_fd (&fd);

  entries = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_dir_entry_free);
  for (errno = 0; (entry = readdir (dir)) != NULL; errno = 0)
    {
      SandstepDirEntry *item;
      gboolean is_dir = entry->d_type == DT_DIR;

      if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0)
        continue;
      /* NOFOLLOW: a link to a directory is a link, not a directory. */
      if (entry->d_type == DT_UNKNOWN && fstatat (dirfd (dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        is_dir = S_ISDIR (st.st_mode);

      item = g_new0 (SandstepDirEntry, 1);
      item->name = g_strdup (entry->d_name);
      item->is_dir = is_dir;
      g_ptr_array_add (entries, item);
    }
  if (errno != 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot read the directory '%s' in the sandbox", shown), NULL;

  g_ptr_array_sort (entries, compare_entries);
  return g_steal_pointer (&entries);
}

gint64
sandstep_tree_export (int tree_fd, const char *sandbox_path, int dest_fd, guint64 max_bytes, GError **error)
{
  g_autofree char *rel = NULL;
  g_autofree char *shown = NULL;
  g_auto(TreeFd) fd = -1;
  struct stat before, after;
  gboolean read_failed = FALSE;
  int errsv = 0;
  gint64 copied;

  g_return_val_if_fail (sandbox_path != NULL, -1);
  g_return_val_if_fail (dest_fd >= 0, -1);
  g_return_val_if_fail (error == NULL || *error == NULL, -1);

  rel = sandstep_tree_relative_path (sandbox_path, error);
  if (rel == NULL)
    return -1;
  shown = g_strconcat ("/", rel, NULL);

  fd = open_regular (tree_fd, rel, shown, &before, error);
  if (fd < 0)
    return -1;

  if ((guint64) before.st_size > max_bytes)
    {
      g_autofree char *size_text = sandstep_format_size (before.st_size);
      g_autofree char *max_text = sandstep_format_size (max_bytes);

      return sandstep_throw_too_large (error, before.st_size, max_bytes,
                                       "'%s' is %s, over the %s export limit; make a smaller file with 'sandstep "
                                       "run' (split, gzip or tar) and export that", shown, size_text, max_text), -1;
    }

  /* At most the size seen: a file that grows meanwhile is caught below, not copied on. */
  sandstep_progress_expect (before.st_size);
  if (sandstep_tree_can_copy_sparse (fd, &before, dest_fd))
    copied = sandstep_tree_copy_sparse (fd, dest_fd, before.st_size, &read_failed, &errsv);
  else
    copied = sandstep_tree_copy_bytes (fd, dest_fd, before.st_size, &read_failed, &errsv);
  if (copied < 0)
    {
      if (read_failed)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                     "Cannot read '%s' in the sandbox", shown), -1;
      return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errsv,
                                   "Cannot write '%s' to the export destination; check that it has room "
                                   "and is still open", shown), -1;
    }

  /* The mtime too: a rewrite of the same size is a change all the same. */
  if (fstat (fd, &after) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot stat '%s' in the sandbox", shown), -1;
  if (after.st_size != before.st_size || copied != (gint64) before.st_size ||
      after.st_mtim.tv_sec != before.st_mtim.tv_sec || after.st_mtim.tv_nsec != before.st_mtim.tv_nsec)
    {
      g_autofree char *before_text = sandstep_format_size (before.st_size);
      g_autofree char *after_text = sandstep_format_size (after.st_size);

      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_CHANGED,
                             "'%s' changed while it was exported (%s before, %s after, %" G_GINT64_FORMAT
                             " bytes copied); export it again once nothing writes to it",
                             shown, before_text, after_text, copied), -1;
    }

  return copied;
}
