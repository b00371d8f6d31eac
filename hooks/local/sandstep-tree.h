/* sandstep-tree.h: host-side file tools over a sandbox's persistent tree.
 *
 * The tree is the directory that the jail sees as its root for persistent
 * data: it holds "workspace" (the jail's /workspace) and "tmp" (the jail's
 * /tmp).  A sandbox path is what a command inside sees: "/workspace/a",
 * "/tmp/b", or relative ("a" means "/workspace/a").  Anything else is refused.
 *
 * The rules that keep a hostile tree from reaching the host:
 * - every lookup is one openat2() under the tree's dirfd with
 *   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, so a symbolic
 *   link (absolute or "../..") resolves inside the tree as the jail would see
 *   it, never outside; a lexical ".." above "/" is refused before any lookup;
 * - where a file is expected only a regular file is accepted (checked with
 *   fstat on the opened fd, opened O_NONBLOCK so a FIFO never hangs us);
 * - directories are created component by component with mkdirat on dirfds;
 * - files are written to a hidden temporary sibling and renamed into place;
 * - set-id bits are never copied in.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Opens @path (the tree on the host) as an O_PATH|O_DIRECTORY dirfd, close-on-exec. */
int sandstep_tree_open (const char *path, GError **error);

/* Maps a sandbox path to a path relative to the tree ("workspace/a").
 * Refuses paths outside /workspace and /tmp, and ".." above "/". */
char *sandstep_tree_relative_path (const char *sandbox_path, GError **error);

/* Reads a regular file, refusing with SANDSTEP_PATH_ERROR_TOO_LARGE (message
 * names the size and suggests head, tail or sed through `sandstep run`) when
 * it is larger than @max_bytes. */
GBytes *sandstep_tree_read_file (int tree_fd, const char *sandbox_path, gsize max_bytes, GError **error);

/* Creates parent directories, then replaces the file atomically. */
gboolean sandstep_tree_write_file (int tree_fd, const char *sandbox_path, const void *data, gsize len,
                                   GError **error);

/* Copies a host file or directory tree (regular files, directories, symbolic
 * links) to @dest.  A @dest ending in "/" or naming an existing directory
 * receives the source under its own basename, as cp -r does; a source
 * directory written with a trailing "/" gives its contents instead, as
 * rsync does, so `put src/ /workspace/src/` is idempotent. */
gboolean sandstep_tree_put (int tree_fd, const char *host_src, const char *dest, GError **error);
/* What the calling thread makes in a tree from here on, made as @uid and @gid (the file system ids: this thread's
 * only); -1: as itself.  Returns what sandstep_tree_maker_end() takes back. */
int sandstep_tree_maker_begin (int uid, int gid);
void sandstep_tree_maker_end (int old_fsuid);

/* The same, what it makes in the tree made as @maker_uid and @maker_gid (-1: as this process), for the calling
 * thread only and only while it makes it: the host is read as this process. */
gboolean sandstep_tree_put_as (int tree_fd, const char *host_src, const char *dest, int maker_uid, int maker_gid,
                               GError **error);

/* Entries of a directory (SandstepDirEntry, from sandstep-backend.h), sorted by
 * name; a symbolic link to a directory is not a directory. */
GPtrArray *sandstep_tree_list (int tree_fd, const char *sandbox_path, GError **error);

/* Opens a directory of the sandbox (as sandstep_tree_list() resolves it) for reading, close-on-exec, for a watch
 * of its files; refuses one that a link leads to outside /workspace and /tmp (SANDSTEP_PATH_ERROR_ESCAPES). */
int sandstep_tree_open_directory (int tree_fd, const char *sandbox_path, GError **error);

/* Streams a regular file into @dest_fd (copy_file_range where it can).
 * Refuses over @max_bytes before writing anything; fails with
 * SANDSTEP_PATH_ERROR_CHANGED if the size changed during the copy.
 * Returns the bytes written, or -1. */
gint64 sandstep_tree_export (int tree_fd, const char *sandbox_path, int dest_fd, guint64 max_bytes,
                             GError **error);

G_END_DECLS
