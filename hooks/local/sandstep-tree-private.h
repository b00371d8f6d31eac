/* sandstep-tree-private.h: what the tree's files share (sandstep-tree.c looks up and reads,
 * sandstep-tree-write.c stages and writes, sandstep-tree-copy.c moves bytes). */
#pragma once

#include <errno.h>
#include <glib.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#define TREE_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define COPY_CHUNK (64 * 1024)

/* GLib 2.74 has no g_autofd: a local one that keeps errno for the caller. */
typedef int TreeFd;

static inline void
tree_fd_close (int fd)
{
  int errsv = errno;

  close (fd);
  errno = errsv;
}
G_DEFINE_AUTO_CLEANUP_FREE_FUNC (TreeFd, tree_fd_close, -1)

int sandstep_tree_openat2 (int dir_fd, const char *rel, guint64 flags);
gboolean sandstep_tree_throw_lookup (GError **error, int errsv, const char *shown);
gboolean sandstep_tree_split_parent (const char *rel, char **out_parent, const char **out_name);
gint64 sandstep_tree_copy_bytes (int in_fd, int out_fd, guint64 limit, gboolean *out_read_failed, int *out_errno);
gint64 sandstep_tree_copy_sparse (int in_fd, int out_fd, guint64 size, gboolean *out_read_failed, int *out_errno);
gboolean sandstep_tree_can_copy_sparse (int in_fd, const struct stat *in_st, int out_fd);
int sandstep_tree_write_all (int fd, const void *data, gsize len);
