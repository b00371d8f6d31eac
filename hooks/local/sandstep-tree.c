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

#define TREE_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define COPY_CHUNK (64 * 1024)

/* GLib 2.74 has no g_autofd: a local one that keeps errno for the caller. */
typedef int TreeFd;

static void
tree_fd_close (int fd)
{
  int errsv = errno;

  close (fd);
  errno = errsv;
}
G_DEFINE_AUTO_CLEANUP_FREE_FUNC (TreeFd, tree_fd_close, -1)
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
static int
tree_openat2 (int dir_fd, const char *rel, guint64 flags)
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
static gboolean
throw_lookup (GError **error, int errsv, const char *shown)
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
static gboolean
split_parent (const char *rel, char **out_parent, const char **out_name)
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

  path_fd = tree_openat2 (tree_fd, rel, O_PATH);
  if (path_fd < 0)
    return throw_lookup (error, errno, shown), -1;
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
  fd = tree_openat2 (tree_fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return throw_lookup (error, errno, shown), -1;
  if (fstat (fd, out_st) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot stat '%s' in the sandbox", shown), -1;
  if (!S_ISREG (out_st->st_mode) || out_st->st_dev != path_st.st_dev || out_st->st_ino != path_st.st_ino)
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_CHANGED,
                           "'%s' was replaced while it was opened; try again once nothing changes it",
                           shown), -1;
  return g_steal_fd (&fd);
}

/* mkdir -p: returns an O_PATH dirfd on @rel, creating what is missing.  Each
 * prefix is looked up from the tree's root (so links resolve as the jail sees
 * them) and each missing directory is made with mkdirat() on the dirfd its
 * parent resolved to.  @mode applies to the last component when it is new. */
static int
ensure_directory (int tree_fd, const char *rel, mode_t mode, GError **error)
{
  g_auto(GStrv) parts = NULL;
  g_autoptr(GString) prefix = NULL;
  g_auto(TreeFd) parent_fd = -1;
  int fd;

  fd = tree_openat2 (tree_fd, rel, O_PATH | O_DIRECTORY);
  if (fd >= 0)
    return fd;
  if (errno != ENOENT)
    {
      g_autofree char *shown = g_strconcat ("/", rel, NULL);
      return throw_lookup (error, errno, shown), -1;
    }

  parts = g_strsplit (rel, "/", -1);
  prefix = g_string_new (NULL);
  for (char **p = parts; *p != NULL; p++)
    {
      g_auto(TreeFd) next_fd = -1;
      g_autofree char *shown = NULL;
      gboolean last = p[1] == NULL;

      if (prefix->len > 0)
        g_string_append_c (prefix, '/');
      g_string_append (prefix, *p);
      shown = g_strconcat ("/", prefix->str, NULL);

      next_fd = tree_openat2 (tree_fd, prefix->str, O_PATH | O_DIRECTORY);
      if (next_fd < 0 && errno == ENOENT)
        {
          if (mkdirat (parent_fd >= 0 ? parent_fd : tree_fd, *p, last ? mode : 0755) < 0 && errno != EEXIST)
            return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                         "Cannot create the directory '%s' in the sandbox", shown), -1;
          next_fd = tree_openat2 (tree_fd, prefix->str, O_PATH | O_DIRECTORY);
          /* mkdirat() found something, yet the lookup finds nothing: a link
           * whose target is not in the tree (a host path, as often as not). */
          if (next_fd < 0 && errno == ENOENT)
            return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                                   "'%s' is a symbolic link to a directory that does not exist in the "
                                   "sandbox; remove the link or give another path", shown), -1;
        }
      if (next_fd < 0)
        return throw_lookup (error, errno, shown), -1;

      if (parent_fd >= 0)
        tree_fd_close (parent_fd);
      parent_fd = g_steal_fd (&next_fd);
    }

  return g_steal_fd (&parent_fd);
}

/* A file or link may replace anything in @dir_fd but a directory. */
static gboolean
check_not_directory (int dir_fd, const char *name, const char *shown, GError **error)
{
  struct stat st;

  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file name, or remove the directory first", shown);
  return TRUE;
}

/* ".NAME.sandstep~": the one name a file of NAME passes through on its way in.
 * Operators on a sandbox take turns (its claim), so no two use it at once,
 * and a retry after a kill at that moment reuses it instead of leaving it. */
static char *
passage_name_for (const char *name)
{
  return g_strdup_printf (".%.200s.sandstep~", name);
}

/* A file written where nobody sees it, then put in place whole.  Unnamed
 * (O_TMPFILE) where the file system allows, so that a kill while it is
 * written leaves nothing. */
typedef struct {
  int dir_fd;   /* not owned */
  int fd;
  char *temp;   /* the temporary name, or NULL while unnamed */
} StagedFile;

static void
staged_file_clear (StagedFile *staged)
{
  if (staged->fd >= 0)
    close (g_steal_fd (&staged->fd));
  if (staged->temp != NULL)
    unlinkat (staged->dir_fd, staged->temp, 0);
  g_clear_pointer (&staged->temp, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (StagedFile, staged_file_clear)

static gboolean
staged_file_open (StagedFile *staged, int dir_fd, const char *name, const char *shown, GError **error)
{
  staged->dir_fd = dir_fd;
  staged->fd = openat (dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (staged->fd >= 0)
    return TRUE;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                       "Cannot create a temporary file for '%s' in the sandbox", shown);
  /* No O_TMPFILE on this file system: the passage name, made afresh (whatever a command left there). */
  staged->temp = passage_name_for (name);
  unlinkat (dir_fd, staged->temp, 0);
  staged->fd = openat (dir_fd, staged->temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (staged->fd >= 0)
    return TRUE;
  {
    int errsv = errno;
    g_clear_pointer (&staged->temp, g_free);
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                       "Cannot create a temporary file for '%s' in the sandbox", shown);
  }
}

static gboolean
rename_into_place (int dir_fd, const char *temp, const char *name, const char *shown, GError **error)
{
  if (renameat (dir_fd, temp, dir_fd, name) == 0)
    return TRUE;

  int errsv = errno;
  unlinkat (dir_fd, temp, 0);
  if (errsv == EISDIR)
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file name, or remove the directory first", shown);
  return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                               "Cannot put '%s' in place in the sandbox", shown);
}

/* Puts the written file in place as @name, replacing what is there (a link itself, never its target). */
static gboolean
staged_file_commit (StagedFile *staged, const char *name, const char *shown, GError **error)
{
  if (staged->temp == NULL)
    {
      /* Linked by its /proc name: AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH. */
      g_autofree char *proc = g_strdup_printf ("/proc/self/fd/%d", staged->fd);
      g_autofree char *passage = NULL;

      if (linkat (AT_FDCWD, proc, staged->dir_fd, name, AT_SYMLINK_FOLLOW) == 0)
        {
          if (close (g_steal_fd (&staged->fd)) == 0)
            return TRUE;
          int errsv = errno;
          unlinkat (staged->dir_fd, name, 0);
          return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                             "Cannot write '%s' in the sandbox", shown);
        }
      if (errno != EEXIST)
        return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                           "Cannot put '%s' in place in the sandbox", shown);
      /* Something is there: through the passage name, renamed over it. */
      passage = passage_name_for (name);
      unlinkat (staged->dir_fd, passage, 0);
      if (linkat (AT_FDCWD, proc, staged->dir_fd, passage, AT_SYMLINK_FOLLOW) < 0)
        return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                           "Cannot put '%s' in place in the sandbox (through '%s')", shown,
                                           passage);
      staged->temp = g_steal_pointer (&passage);
    }
  if (close (g_steal_fd (&staged->fd)) < 0)
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                       "Cannot write '%s' in the sandbox", shown);
  {
    gboolean ok = rename_into_place (staged->dir_fd, staged->temp, name, shown, error);
    g_clear_pointer (&staged->temp, g_free);
    return ok;
  }
}

/* Waits until a non-blocking @fd can take more. */
static void
wait_writable (int fd)
{
  struct pollfd pfd = { .fd = fd, .events = POLLOUT };

  while (poll (&pfd, 1, -1) < 0 && errno == EINTR)
    ;
}

/* Returns 0, or the errno of the failed write. */
static int
write_all (int fd, const void *data, gsize len)
{
  const guint8 *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, MIN (len, (gsize) G_MAXSSIZE));

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            {
              wait_writable (fd);
              continue;
            }
          return errno;
        }
      p += n;
      len -= n;
    }
  return 0;
}

/* Copies up to @limit bytes from @in_fd's offset to @out_fd's, stopping at end
 * of file.  On failure returns -1 with *@out_errno set and *@out_read_failed
 * saying which side failed (copy_file_range() cannot say: counted as the
 * write side). */
static gint64
copy_bytes (int in_fd, int out_fd, guint64 limit, gboolean *out_read_failed, int *out_errno)
{
  guint64 total = 0;
  gboolean kernel_copy = TRUE;
  g_autofree guint8 *buffer = NULL;

  while (total < limit)
    {
      gsize want = MIN (limit - total, sandstep_progress_piece ((guint64) 1 << 30));
      ssize_t n;

      if (kernel_copy)
        {
          n = copy_file_range (in_fd, NULL, out_fd, NULL, want, 0);
          if (n > 0)
            {
              total += n;
              sandstep_progress_add (n);
              continue;
            }
          if (n == 0)
            break;
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            {
              wait_writable (out_fd);
              continue;
            }
          /* Not every pair of fds takes it: pipes, two file systems, old kernels,
           * an O_APPEND destination.  The offsets are shared, so read/write
           * carries on where it stopped. */
          if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EBADF)
            {
              kernel_copy = FALSE;
              continue;
            }
          *out_read_failed = FALSE;
          *out_errno = errno;
          return -1;
        }

      if (buffer == NULL)
        buffer = g_malloc (COPY_CHUNK);
      n = read (in_fd, buffer, MIN (want, COPY_CHUNK));
      if (n == 0)
        break;
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          *out_read_failed = TRUE;
          *out_errno = errno;
          return -1;
        }
      int errsv = write_all (out_fd, buffer, n);
      if (errsv != 0)
        {
          *out_read_failed = FALSE;
          *out_errno = errsv;
          return -1;
        }
      total += n;
      sandstep_progress_add (n);
    }

  return total;
}

/* Copies @size bytes of a file with holes run by run (SEEK_DATA, SEEK_HOLE),
 * seeking over the holes in @out_fd, so the copy is as sparse as the source.
 * @out_fd must be a regular file open without O_APPEND; writing starts at its
 * offset.  Returns the bytes the copy covers (holes included), or -1. */
static gint64
copy_sparse (int in_fd, int out_fd, guint64 size, gboolean *out_read_failed, int *out_errno)
{
  off_t out_start = lseek (out_fd, 0, SEEK_CUR);
  off_t pos = 0;

  if (out_start < 0)
    goto write_failed;
  while ((guint64) pos < size)
    {
      off_t data = lseek (in_fd, pos, SEEK_DATA);
      off_t hole;
      gint64 n;

      if (data < 0 && errno == ENXIO)
        break;                    /* only a hole from here on */
      if (data < 0)
        goto read_failed;
      if ((guint64) data >= size)
        break;
      hole = lseek (in_fd, data, SEEK_HOLE);
      if (hole < 0)
        goto read_failed;
      hole = MIN ((guint64) hole, size);
      if (lseek (in_fd, data, SEEK_SET) < 0)
        goto read_failed;
      if (lseek (out_fd, out_start + data, SEEK_SET) < 0)
        goto write_failed;
      /* A hole is copied the moment it is skipped. */
      sandstep_progress_add (data - pos);
      n = copy_bytes (in_fd, out_fd, hole - data, out_read_failed, out_errno);
      if (n < 0)
        return -1;
      if (n < hole - data)
        return data + n;          /* the file shrank: the caller reports the change */
      pos = hole;
    }
  /* A hole at the end is the file's length, not data. */
  if (ftruncate (out_fd, out_start + size) < 0 || lseek (out_fd, out_start + size, SEEK_SET) < 0)
    goto write_failed;
  sandstep_progress_add (size - MIN ((guint64) pos, size));
  return size;

read_failed:
  *out_read_failed = TRUE;
  *out_errno = errno;
  return -1;
write_failed:
  *out_read_failed = FALSE;
  *out_errno = errno;
  return -1;
}

/* Holes are worth keeping only where they can be made: a regular file
 * written at its offset (O_APPEND puts every write at the end). */
static gboolean
can_copy_sparse (int in_fd, const struct stat *in_st, int out_fd)
{
  struct stat out_st;
  int flags;

  if ((guint64) in_st->st_blocks * 512 >= (guint64) in_st->st_size)
    return FALSE;
  flags = fcntl (out_fd, F_GETFL);
  return flags >= 0 && !(flags & O_APPEND) && fstat (out_fd, &out_st) == 0 && S_ISREG (out_st.st_mode);
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

gboolean
sandstep_tree_write_file (int tree_fd, const char *sandbox_path, const void *data, gsize len, GError **error)
{
  g_autofree char *rel = NULL;
  g_autofree char *shown = NULL;
  g_autofree char *parent = NULL;
  g_auto(TreeFd) dir_fd = -1;
  g_auto(StagedFile) staged = { .fd = -1 };
  const char *name;
  int errsv;

  g_return_val_if_fail (sandbox_path != NULL, FALSE);
  g_return_val_if_fail (data != NULL || len == 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  rel = sandstep_tree_relative_path (sandbox_path, error);
  if (rel == NULL)
    return FALSE;
  shown = g_strconcat ("/", rel, NULL);
  if (!split_parent (rel, &parent, &name))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file, or list it with 'sandstep ls'", shown);

  dir_fd = ensure_directory (tree_fd, parent, 0755, error);
  if (dir_fd < 0)
    return FALSE;
  if (!check_not_directory (dir_fd, name, shown, error))
    return FALSE;

  if (!staged_file_open (&staged, dir_fd, name, shown, error))
    return FALSE;
  errsv = fchmod (staged.fd, 0644) < 0 ? errno : write_all (staged.fd, data, len);
  if (errsv != 0)
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                       "Cannot write '%s' in the sandbox", shown);
  return staged_file_commit (&staged, name, shown, error);
}

/* Copies the open host file @src_fd to @rel, with @mode less any set-id bits. */
static gboolean
put_file (int tree_fd, int src_fd, const char *host_shown, mode_t mode, const char *rel, GError **error)
{
  g_autofree char *shown = g_strconcat ("/", rel, NULL);
  g_autofree char *parent = NULL;
  g_auto(TreeFd) dir_fd = -1;
  g_auto(StagedFile) staged = { .fd = -1 };
  const char *name;
  gboolean read_failed = FALSE;
  int errsv = 0;

  if (!split_parent (rel, &parent, &name))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file name, or put into it with a '/' at the end",
                           shown);
  dir_fd = ensure_directory (tree_fd, parent, 0755, error);
  if (dir_fd < 0)
    return FALSE;
  if (!check_not_directory (dir_fd, name, shown, error))
    return FALSE;

  if (!staged_file_open (&staged, dir_fd, name, shown, error))
    return FALSE;
  /* fchmod, not the create mode: the umask must not decide, and set-id bits never come in. */
  if (fchmod (staged.fd, mode & 0777) < 0 || copy_bytes (src_fd, staged.fd, G_MAXUINT64, &read_failed, &errsv) < 0)
    {
      if (errsv == 0)
        errsv = errno;
      if (read_failed)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                     "Cannot read '%s' on the host", host_shown);
      return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                         "Cannot write '%s' in the sandbox", shown);
    }
  return staged_file_commit (&staged, name, shown, error);
}

/* Creates the symbolic link @rel -> @target.  The target is copied as it is:
 * every tool here resolves it inside the tree, and so does the jail. */
static gboolean
put_symlink (int tree_fd, const char *target, const char *rel, GError **error)
{
  g_autofree char *shown = g_strconcat ("/", rel, NULL);
  g_autofree char *parent = NULL;
  g_autofree char *passage = NULL;
  g_auto(TreeFd) dir_fd = -1;
  const char *name;

  if (!split_parent (rel, &parent, &name))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file name, or put into it with a '/' at the end",
                           shown);
  dir_fd = ensure_directory (tree_fd, parent, 0755, error);
  if (dir_fd < 0)
    return FALSE;
  if (!check_not_directory (dir_fd, name, shown, error))
    return FALSE;

  if (symlinkat (target, dir_fd, name) == 0)
    return TRUE;
  if (errno != EEXIST)
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                       "Cannot create the symbolic link '%s' in the sandbox", shown);
  /* Something is there: through the passage name, renamed over it. */
  passage = passage_name_for (name);
  unlinkat (dir_fd, passage, 0);
  if (symlinkat (target, dir_fd, passage) < 0)
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                       "Cannot create the symbolic link '%s' in the sandbox (through '%s')", shown,
                                       passage);
  return rename_into_place (dir_fd, passage, name, shown, error);
}

/* sandstep_tree_put()'s sink: the walk's entries land under the tree. */
static gboolean
tree_sink_dir (const char *rel, mode_t mode, gpointer data, GError **error)
{
  /* 0700 at least, or a read-only source directory could not be filled. */
  g_auto(TreeFd) out_fd = ensure_directory (GPOINTER_TO_INT (data), rel, (mode & 0777) | 0700, error);

  return out_fd >= 0;
}

static gboolean
tree_sink_link (const char *rel, const char *target, gpointer data, GError **error)
{
  return put_symlink (GPOINTER_TO_INT (data), target, rel, error);
}

static gboolean
tree_sink_file (const char *rel, int fd, const struct stat *st, const char *shown, gpointer data, GError **error)
{
  return put_file (GPOINTER_TO_INT (data), fd, shown, st->st_mode, rel, error);
}

static const SandstepHostSink tree_sink = { tree_sink_dir, tree_sink_link, tree_sink_file };

gboolean
sandstep_tree_put (int tree_fd, const char *host_src, const char *dest, GError **error)
{
  g_autofree char *src = NULL;
  g_autofree char *base = NULL;
  g_autofree char *dest_rel = NULL;
  g_autofree char *rel = NULL;
  gboolean into = FALSE;
  struct stat st;

  g_return_val_if_fail (host_src != NULL, FALSE);
  g_return_val_if_fail (dest != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!sandstep_host_source (host_src, &src, &base, &st, error))
    return FALSE;

  dest_rel = sandstep_tree_relative_path (dest, error);
  if (dest_rel == NULL)
    return FALSE;

  /* As rsync: "src/" means the contents of src, so `put src/ /workspace/src/`
   * fills /workspace/src and a retried put lands in the same place. */
  if (S_ISDIR (st.st_mode) && g_str_has_suffix (host_src, "/"))
    into = FALSE;
  else if (g_str_has_suffix (dest, "/"))
    into = TRUE;
  else
    {
      g_auto(TreeFd) fd = tree_openat2 (tree_fd, dest_rel, O_PATH | O_DIRECTORY);
      into = fd >= 0;
    }
  rel = into ? g_strconcat (dest_rel, "/", base, NULL) : g_strdup (dest_rel);

  return sandstep_host_walk (src, &st, rel, &tree_sink, GINT_TO_POINTER (tree_fd), error);
}

static int
compare_entries (gconstpointer a, gconstpointer b)
{
  const SandstepDirEntry *ea = *(SandstepDirEntry *const *) a;
  const SandstepDirEntry *eb = *(SandstepDirEntry *const *) b;

  return strcmp (ea->name, eb->name);
}

GPtrArray *
sandstep_tree_list (int tree_fd, const char *sandbox_path, GError **error)
{
  g_autofree char *rel = NULL;
  g_autofree char *shown = NULL;
  g_auto(TreeFd) path_fd = -1;
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

  path_fd = tree_openat2 (tree_fd, rel, O_PATH);
  if (path_fd < 0)
    return throw_lookup (error, errno, shown), NULL;
  if (fstat (path_fd, &st) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot stat '%s' in the sandbox", shown), NULL;
  if (!S_ISDIR (st.st_mode))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                           "'%s' is %s, not a directory; list the directory that holds it", shown,
                           S_ISREG (st.st_mode) ? "a file" : sandstep_file_type_words (st.st_mode)), NULL;

  /* "." from the O_PATH fd reopens the very directory that was checked. */
  fd = openat (path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot open the directory '%s' in the sandbox", shown), NULL;
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
  if (can_copy_sparse (fd, &before, dest_fd))
    copied = copy_sparse (fd, dest_fd, before.st_size, &read_failed, &errsv);
  else
    copied = copy_bytes (fd, dest_fd, before.st_size, &read_failed, &errsv);
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
