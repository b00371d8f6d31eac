/* sandstep-host-files.c: the host's side of a put, for every backend. */
#include "sandstep-host-files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-write-libc.h"
#include "sandstep-remove-libc.h"

const char *
sandstep_file_type_words (mode_t mode)
{
  switch (mode & S_IFMT)
    {
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    case S_IFDIR: return "a directory";
    default: return "not a regular file";
    }
}

mode_t
sandstep_replaced_mode (int dir_fd, const char *name, mode_t fresh)
{
  struct stat st;

  /* A link at @name is replaced itself (rename), never followed. */
  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode))
    return st.st_mode & 0777;
  return fresh;
}

gboolean
sandstep_replace_host_file (const char *path, const void *data, gsize len, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *staging = g_strdup_printf ("%s/.%s.XXXXXX", dir, base);
  mode_t kept = sandstep_replaced_mode (AT_FDCWD, path, (mode_t) -1);
  int fd = g_mkstemp_full (staging, O_WRONLY | O_CLOEXEC, 0644);
  int errsv;

  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot create a file in '%s' to write '%s'; give a file in a writable directory",
                                 dir, path);
  /* fchmod, not the create mode: the umask must not decide a replaced file's mode. */
  if ((kept != (mode_t) -1 && fchmod (fd, kept) < 0) || !sandstep_write_all (fd, data, len) || fsync (fd) < 0)
    goto failed;
  if (close (fd) < 0)
    {
      fd = -1;
      goto failed;
    }
  fd = -1;
  if (rename (staging, path) < 0)
    goto failed;
  return TRUE;

failed:
  errsv = errno;
  if (fd >= 0)
    close (fd);
  unlink (staging);
  return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errsv,
                               "Cannot write '%s'; give a file in a writable directory", path);
}

char *
sandstep_read_link_at (int dir_fd, const char *name)
{
  for (gsize size = 256; size <= 65536; size *= 2)
    {
      g_autofree char *buffer = g_malloc (size);
      ssize_t n = readlinkat (dir_fd, name, buffer, size);

      if (n < 0)
        return NULL;
      if ((gsize) n < size)
        {
          buffer[n] = '\0';
          return g_steal_pointer (&buffer);
        }
    }
  errno = ENAMETOOLONG;
  return NULL;
}

gboolean
sandstep_host_source (const char *host_src, char **out_path, char **out_base, struct stat *out_st, GError **error)
{
  /* Canonical, so that "." or "dir/.." still has a real basename to put under. */
  g_autofree char *path = g_canonicalize_filename (host_src, NULL);
  g_autofree char *base = g_path_get_basename (path);

  if (strcmp (base, "/") == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "'%s' is the host's root; put a file or directory under it", host_src);
  if (stat (path, out_st) < 0)
    {
      if (errno == ENOENT || errno == ENOTDIR)
        return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                               "'%s' does not exist on the host", host_src);
      return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                   "Cannot stat '%s' on the host", host_src);
    }
  *out_path = g_steal_pointer (&path);
  *out_base = g_steal_pointer (&base);
  return TRUE;
}

/* A directory the walk is inside of: its open stream, and the names its entries get. */
typedef struct {
  DIR *dir;
  char *shown;
  char *rel;
} WalkLevel;

static void
walk_level_clear (gpointer data)
{
  WalkLevel *level = data;

  if (level->dir != NULL)
    closedir (level->dir);
  g_free (level->shown);
  g_free (level->rel);
}

/* The host entry @name in @dir_fd (its lstat in @st), handed to @sink; a directory is opened and pushed onto
 * @levels, for the walk to read next.  @follow: the entry was named by the caller, so a link there is followed. */
static gboolean
walk_entry (int dir_fd, const char *name, const char *shown, const struct stat *st, gboolean follow, const char *rel,
            const SandstepHostSink *sink, gpointer data, GArray *levels, GError **error)
{
  int nofollow = follow ? 0 : O_NOFOLLOW;
  int fd;

  if (S_ISLNK (st->st_mode))
    {
      g_autofree char *target = sandstep_read_link_at (dir_fd, name);

      if (target == NULL)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot read the symbolic link '%s' on the host", shown);
      return sink->link (rel, target, data, error);
    }
  if (S_ISREG (st->st_mode))
    {
      struct stat fd_st;
      gboolean ok;

      /* O_NONBLOCK: a FIFO swapped in after the lstat must not hang the open. */
      fd = openat (dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | nofollow);
      if (fd < 0)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot open '%s' on the host", shown);
      if (fstat (fd, &fd_st) < 0 || !S_ISREG (fd_st.st_mode))
        ok = sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_CHANGED,
                             "'%s' on the host was replaced while it was copied; put it again", shown);
      else
        ok = sink->file (rel, fd, &fd_st, shown, data, error);
      close (fd);
      return ok;
    }
  if (S_ISDIR (st->st_mode))
    {
      WalkLevel level = { NULL, NULL, NULL };

      fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow);
      if (fd < 0)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot open the directory '%s' on the host", shown);
      if (!sink->dir (rel, st->st_mode, data, error))
        {
          close (fd);
          return FALSE;
        }
      level.dir = fdopendir (fd);
      if (level.dir == NULL)
        {
          close (fd);
          return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                       "Cannot read the directory '%s' on the host", shown);
        }
      level.shown = g_strdup (shown);
      level.rel = g_strdup (rel);
      g_array_append_val (levels, level);
      return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR,
                         "'%s' on the host is %s; put copies only regular files, directories and symbolic "
                         "links: remove it from the source, or put the files you need one by one",
                         shown, sandstep_file_type_words (st->st_mode));
}

gboolean
sandstep_host_walk (const char *path, const struct stat *st, const char *rel, const SandstepHostSink *sink,
                    gpointer data, GError **error)
{
  /* Iterative, with the directories it is inside of on the heap: a deep tree never overflows the stack (one
   * deeper than the descriptor limit fails with EMFILE). */
  g_autoptr(GArray) levels = g_array_new (FALSE, FALSE, sizeof (WalkLevel));

  g_array_set_clear_func (levels, walk_level_clear);
  if (!walk_entry (AT_FDCWD, path, path, st, TRUE, rel, sink, data, levels, error))
    return FALSE;
  while (levels->len > 0)
    {
      WalkLevel *level = &g_array_index (levels, WalkLevel, levels->len - 1);
      g_autofree char *child_shown = NULL;
      g_autofree char *child_rel = NULL;
      struct dirent *entry;
      struct stat child_st;

      errno = 0;
      entry = readdir (level->dir);
      if (entry == NULL)
        {
          if (errno != 0)
            return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                         "Cannot read the directory '%s' on the host", level->shown);
          g_array_set_size (levels, levels->len - 1);
          continue;
        }
      if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0)
        continue;
      child_shown = g_build_filename (level->shown, entry->d_name, NULL);
      child_rel = level->rel[0] ? g_strconcat (level->rel, "/", entry->d_name, NULL) : g_strdup (entry->d_name);
      if (fstatat (dirfd (level->dir), entry->d_name, &child_st, AT_SYMLINK_NOFOLLOW) < 0)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot stat '%s' on the host", child_shown);
      /* @level may move when a level is pushed: nothing of it is used after. */
      if (!walk_entry (dirfd (level->dir), entry->d_name, child_shown, &child_st, FALSE, child_rel, sink, data,
                       levels, error))
        return FALSE;
    }
  return TRUE;
}

void
sandstep_remove_tree_at (int dir_fd, const char *name)
{
  sandstep_remove_at (dir_fd, name);
}

GPtrArray *
sandstep_list_entries_at (int dir_fd, const char *rel)
{
  int fd = openat (dir_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
  GPtrArray *names;
  struct dirent *entry;

  if (dir == NULL)
    {
      if (fd >= 0)
        close (fd);
      return NULL;
    }
  names = g_ptr_array_new_with_free_func (g_free);
  while ((entry = readdir (dir)) != NULL)
    if (strcmp (entry->d_name, ".") != 0 && strcmp (entry->d_name, "..") != 0)
      g_ptr_array_add (names, g_strdup (entry->d_name));
  closedir (dir);
  return names;
}

void
sandstep_remove_entries_at (int dir_fd)
{
  sandstep_empty_directory (dir_fd);
}
