/* sandstep-tree-write.c: writes into a sandbox's tree, staged and put in place whole; see sandstep-tree.c. */
#include "sandstep-tree.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-units.h"
#include "sandstep-tree-private.h"

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

  fd = sandstep_tree_openat2 (tree_fd, rel, O_PATH | O_DIRECTORY);
  if (fd >= 0)
    return fd;
  if (errno != ENOENT)
    {
      g_autofree char *shown = g_strconcat ("/", rel, NULL);
      return sandstep_tree_throw_lookup (error, errno, shown), -1;
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

      next_fd = sandstep_tree_openat2 (tree_fd, prefix->str, O_PATH | O_DIRECTORY);
      if (next_fd < 0 && errno == ENOENT)
        {
          if (mkdirat (parent_fd >= 0 ? parent_fd : tree_fd, *p, last ? mode : 0755) < 0 && errno != EEXIST)
            return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                         "Cannot create the directory '%s' in the sandbox", shown), -1;
          next_fd = sandstep_tree_openat2 (tree_fd, prefix->str, O_PATH | O_DIRECTORY);
          /* mkdirat() found something, yet the lookup finds nothing: a link
           * whose target is not in the tree (a host path, as often as not). */
          if (next_fd < 0 && errno == ENOENT)
            return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                                   "'%s' is a symbolic link to a directory that does not exist in the "
                                   "sandbox; remove the link or give another path", shown), -1;
        }
      if (next_fd < 0)
        return sandstep_tree_throw_lookup (error, errno, shown), -1;

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
  if (!sandstep_tree_split_parent (rel, &parent, &name))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file, or list it with 'sandstep ls'", shown);

  dir_fd = ensure_directory (tree_fd, parent, 0755, error);
  if (dir_fd < 0)
    return FALSE;
  if (!check_not_directory (dir_fd, name, shown, error))
    return FALSE;

  if (!staged_file_open (&staged, dir_fd, name, shown, error))
    return FALSE;
  errsv = fchmod (staged.fd, 0644) < 0 ? errno : sandstep_tree_write_all (staged.fd, data, len);
  if (errsv != 0)
    return sandstep_throw_write_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv,
                                       "Cannot write '%s' in the sandbox", shown);
  return staged_file_commit (&staged, name, shown, error);
}

/* The directory a put writes @rel into, made if missing: an O_PATH dirfd, *out_name the last
 * component; -1 when @rel names a directory or the place is taken by one. */
static int
open_put_parent (int tree_fd, const char *rel, const char *shown, const char **out_name, GError **error)
{
  g_autofree char *parent = NULL;
  g_auto(TreeFd) dir_fd = -1;

  if (!sandstep_tree_split_parent (rel, &parent, out_name))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                           "'%s' is a directory; give a file name, or put into it with a '/' at the end",
                           shown), -1;
  dir_fd = ensure_directory (tree_fd, parent, 0755, error);
  if (dir_fd < 0 || !check_not_directory (dir_fd, *out_name, shown, error))
    return -1;
  return g_steal_fd (&dir_fd);
}

/* Copies the open host file @src_fd to @rel, with @mode less any set-id bits. */
static gboolean
put_file (int tree_fd, int src_fd, const char *host_shown, mode_t mode, const char *rel, GError **error)
{
  g_autofree char *shown = g_strconcat ("/", rel, NULL);
  g_auto(TreeFd) dir_fd = -1;
  g_auto(StagedFile) staged = { .fd = -1 };
  const char *name;
  gboolean read_failed = FALSE;
  int errsv = 0;

  dir_fd = open_put_parent (tree_fd, rel, shown, &name, error);
  if (dir_fd < 0)
    return FALSE;

  if (!staged_file_open (&staged, dir_fd, name, shown, error))
    return FALSE;
  /* fchmod, not the create mode: the umask must not decide, and set-id bits never come in. */
  if (fchmod (staged.fd, mode & 0777) < 0 || sandstep_tree_copy_bytes (src_fd, staged.fd, G_MAXUINT64, &read_failed, &errsv) < 0)
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
  g_autofree char *passage = NULL;
  g_auto(TreeFd) dir_fd = -1;
  const char *name;

  dir_fd = open_put_parent (tree_fd, rel, shown, &name, error);
  if (dir_fd < 0)
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

/* sandstep_tree_put()'s sink: the walk's entries land under the tree, made as @maker_uid and @maker_gid where
 * they are not -1 (for this thread only, and only while it makes them: the walk reads the host as itself). */
typedef struct {
  int tree_fd;
  int maker_uid, maker_gid;
} TreeSink;

int
sandstep_tree_maker_begin (int uid, int gid)
{
  if (uid < 0)
    return -1;
  syscall (SYS_setfsgid, gid);
  return (int) syscall (SYS_setfsuid, uid);
}

void
sandstep_tree_maker_end (int old_fsuid)
{
  if (old_fsuid < 0)
    return;
  syscall (SYS_setfsuid, old_fsuid);
  syscall (SYS_setfsgid, getegid ());
}

static gboolean
tree_sink_dir (const char *rel, mode_t mode, gpointer data, GError **error)
{
  const TreeSink *sink = data;
  int old = sandstep_tree_maker_begin (sink->maker_uid, sink->maker_gid);
  /* 0700 at least, or a read-only source directory could not be filled. */
  int out_fd = ensure_directory (sink->tree_fd, rel, (mode & 0777) | 0700, error);

  sandstep_tree_maker_end (old);
  if (out_fd >= 0)
    tree_fd_close (out_fd);
  return out_fd >= 0;
}

static gboolean
tree_sink_link (const char *rel, const char *target, gpointer data, GError **error)
{
  const TreeSink *sink = data;
  int old = sandstep_tree_maker_begin (sink->maker_uid, sink->maker_gid);
  gboolean ok = put_symlink (sink->tree_fd, target, rel, error);

  sandstep_tree_maker_end (old);
  return ok;
}

static gboolean
tree_sink_file (const char *rel, int fd, const struct stat *st, const char *shown, gpointer data, GError **error)
{
  const TreeSink *sink = data;
  int old = sandstep_tree_maker_begin (sink->maker_uid, sink->maker_gid);
  gboolean ok = put_file (sink->tree_fd, fd, shown, st->st_mode, rel, error);

  sandstep_tree_maker_end (old);
  return ok;
}

static const SandstepHostSink tree_sink = { tree_sink_dir, tree_sink_link, tree_sink_file };

gboolean
sandstep_tree_put (int tree_fd, const char *host_src, const char *dest, GError **error)
{
  return sandstep_tree_put_as (tree_fd, host_src, dest, -1, -1, error);
}

gboolean
sandstep_tree_put_as (int tree_fd, const char *host_src, const char *dest, int maker_uid, int maker_gid,
                      GError **error)
{
  TreeSink sink = { tree_fd, maker_uid, maker_gid };
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
      g_auto(TreeFd) fd = sandstep_tree_openat2 (tree_fd, dest_rel, O_PATH | O_DIRECTORY);
      into = fd >= 0;
    }
  rel = into ? g_strconcat (dest_rel, "/", base, NULL) : g_strdup (dest_rel);

  return sandstep_host_walk (src, &st, rel, &tree_sink, &sink, error);
}
