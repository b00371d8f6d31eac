/* sandstep-host-files.h: the host's side of a put, for every backend, and rm -rf.
 *
 * The local tree and the sandstepd client copy the same host entries by the
 * same rules and with the same messages: one walk here, and a sink per
 * backend that writes what the walk visits (into the tree, or onto the wire).
 */
#pragma once

#include <glib.h>
#include <sys/stat.h>

G_BEGIN_DECLS

/* "a FIFO", "a directory", ...: a file type in words, for messages. */
const char *sandstep_file_type_words (mode_t mode);

/* The permission bits a file written over @name in @dir_fd gets: those of
 * the regular file there now (never its set-id bits; a link there is not
 * followed, as a rename replaces the link), else @fresh.  A
 * replaced 0600 file must not come back 0644 (export, get --to). */
mode_t sandstep_replaced_mode (int dir_fd, const char *name, mode_t fresh);

/* Writes @len bytes of @data to the host file @path whole (a staging file in
 * its directory, renamed over it: a reader never sees half), with the mode
 * of the file it replaces, exactly, whatever the umask (a new one: 0644 less
 * the umask).  Errors are SANDSTEP_EXPORT_ERROR_WRITE naming @path. */
gboolean sandstep_replace_host_file (const char *path, const void *data, gsize len, GError **error);

/* The target of the symbolic link @name in @dir_fd; NULL with errno set. */
char *sandstep_read_link_at (int dir_fd, const char *name);

/* Checks the host path given to put: its canonical form in @out_path, its
 * basename (what a put "into" a directory names it) in @out_base, and its
 * stat, links followed, in @out_st. */
gboolean sandstep_host_source (const char *host_src, char **out_path, char **out_base, struct stat *out_st,
                               GError **error);

/* What the walk hands over; @rel is the destination path of each entry. */
typedef struct {
  /* A directory, before its entries. */
  gboolean (*dir) (const char *rel, mode_t mode, gpointer data, GError **error);
  gboolean (*link) (const char *rel, const char *target, gpointer data, GError **error);
  /* A regular file, open on @fd; @st is its fstat, @shown its host path. */
  gboolean (*file) (const char *rel, int fd, const struct stat *st, const char *shown, gpointer data,
                    GError **error);
} SandstepHostSink;

/* Walks @path (from sandstep_host_source()) depth first, as @rel; links
 * inside are copied as links, never followed.  Anything but regular files,
 * directories and links is refused. */
gboolean sandstep_host_walk (const char *path, const struct stat *st, const char *rel, const SandstepHostSink *sink,
                             gpointer data, GError **error);

/* Deletes @name under @dir_fd (rm -rf) without following any link, making
 * directories writable on the way (a command may leave a read-only one),
 * at any depth without recursion (sandstep-remove-libc.h). */
void sandstep_remove_tree_at (int dir_fd, const char *name);

/* The names in the directory @rel of @dir_fd (not "." or ".."), read whole
 * before anything is done with them; NULL when it cannot be opened (a link
 * is not followed). */
GPtrArray *sandstep_list_entries_at (int dir_fd, const char *rel);

/* Removes everything in the directory @dir_fd (not the directory itself), as sandstep_remove_tree_at(). */
void sandstep_remove_entries_at (int dir_fd);

G_END_DECLS
