/* sandstepd-envd-watch.c: filesystem.Filesystem/WatchDir of E2B's envd (the SDK's files.watchDir).
 *
 * A watch holds no claim: the call claims its sandbox only while a worker opens the directory (as the file tools
 * resolve a path, beneath /workspace or /tmp) and passes its fd back (sandstepd-envd.c); then the sandbox's
 * commands and file calls go on while it is watched.  All watches share the daemon's one inotify instance, made
 * at the first watch: inotify instances are counted per user host-wide (128 by default, issue 33), so never one
 * per sandbox or per watch.  A directory is watched through its fd (/proc/self/fd/N names exactly that inode),
 * which is closed then: an open directory would outlive its removal, and its watch never say it went.  A
 * subdirectory, for a recursive watch, is opened with no link followed from its parent, found again as the file
 * tools find a path (through the root of the sandbox's files, kept) and checked to be the inode watched.
 * The watches of one directory share its inotify watch (the kernel gives them one descriptor).  Main loop only.
 */
#include "sandstepd-private.h"
#include "sandstepd-envd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib-unix.h>

#include "sandstep-error.h"
#include "sandstep-tree.h"

/* The directories one watchDir watches (itself and its subdirectories), and all watches together: each is a
 * kernel watch charged to sandstepd's user (fs.inotify.max_user_watches). */
#define WATCH_MAX_DIRS 1000
#define WATCH_MAX_ALL 8192
/* A client that reads none of its events is cut off past this much unread. */
#define WATCH_MAX_UNREAD (4 * SANDSTEPD_HIGH_WATER)
/* The root of a sandbox's files: its move (into a layer, at a fork or checkpoint) or its end ends the watches. */
#define ROOT_MASK (IN_MOVE_SELF | IN_DELETE_SELF | IN_ONLYDIR)
#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | \
                    IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

typedef struct {
  char *rel;                /* its path relative to the watched one ("" for itself) */
  dev_t dev;                /* the inode watched */
  ino_t ino;
} Dir;

typedef struct {
  Request *req;             /* ref: where the events stream */
  char *handle;
  char *path;               /* as the client named it */
  int root_fd;              /* the root of the sandbox's files (O_PATH), to find a directory again */
  int keep_fd;              /* files in a jail (a layered sandbox's): what keeps the jail while watched; -1 */
  int jail_fd;              /* ... and its init's pidfd, readable once it ended; -1 */
  guint jail_source;        /* the wait for that; 0 */
  int top_wd;
  int root_wd;              /* the root of the sandbox's files, which a fork moves and a destroy removes; -1 */
  gboolean recursive;
  GHashTable *dirs;         /* wd -> Dir */
} Watch;

static int inotify_fd = -1;
static guint inotify_source;
static GHashTable *users;   /* wd -> GPtrArray of the Watches that watch it */
static GPtrArray *watches;  /* every Watch */
static guint n_dirs;        /* the kernel watches all Watches hold (one a directory each) */

static void
dir_free (Dir *d)
{
  g_free (d->rel);
  g_free (d);
}

/* @w no longer uses the kernel's watch @wd. */
static void
unuse_wd (Watch *w, int wd)
{
  GPtrArray *list = g_hash_table_lookup (users, GINT_TO_POINTER (wd));

  if (list != NULL && g_ptr_array_remove (list, w) && list->len == 0)
    {
      /* The last watch of that inode: the kernel's watch goes (EINVAL once it went itself). */
      inotify_rm_watch (inotify_fd, wd);
      g_hash_table_remove (users, GINT_TO_POINTER (wd));
    }
}

static void
use_wd (Watch *w, int wd)
{
  GPtrArray *list = g_hash_table_lookup (users, GINT_TO_POINTER (wd));

  if (list == NULL)
    {
      list = g_ptr_array_new ();
      g_hash_table_insert (users, GINT_TO_POINTER (wd), list);
    }
  g_ptr_array_add (list, w);
}

static void
forget_wd (Watch *w, int wd)
{
  if (!g_hash_table_remove (w->dirs, GINT_TO_POINTER (wd)))
    return;
  n_dirs--;
  unuse_wd (w, wd);
}

static void
watch_free (Watch *w)
{
  g_autoptr(GList) wds = g_hash_table_get_keys (w->dirs);

  for (GList *l = wds; l != NULL; l = l->next)
    forget_wd (w, GPOINTER_TO_INT (l->data));
  if (w->root_wd >= 0)
    unuse_wd (w, w->root_wd);
  g_ptr_array_remove (watches, w);
  if (w->req->owner == w)
    {
      w->req->owner = NULL;
      w->req->on_gone = NULL;
    }
  sandstepd_request_unref (w->req);
  g_hash_table_unref (w->dirs);
  if (w->root_fd >= 0)
    close (w->root_fd);
  if (w->jail_source != 0)
    g_source_remove (w->jail_source);
  if (w->jail_fd >= 0)
    close (w->jail_fd);
  /* The jail may end idle from now (sandstep-supervisor-keep.h). */
  if (w->keep_fd >= 0)
    close (w->keep_fd);
  g_free (w->handle);
  g_free (w->path);
  g_free (w);
}

/* Ends @w's stream ({} when @code is NULL, else Connect's error @code with @message) and forgets it. */
static void
watch_end (Watch *w, const char *code, const char *message)
{
  Request *req = w->req;

  req->on_gone = NULL;
  req->owner = NULL;
  if (!req->finished && !req->completed)
    {
      gsize len = 0;
      char *bytes = sandstepd_envd_end_stream (code, message, &len);

      sandstepd_stream_take (req, bytes, len);
      sandstepd_stream_end (req);
    }
  watch_free (w);
}

/* The client went (stop(), or it disconnected). */
static void
on_watch_gone (Request *req)
{
  Watch *w = req->owner;

  if (w != NULL)
    watch_free (w);
}

/* Streams envd's FilesystemEvent {name, type} to @w's client, @name relative to the watched path. */
static void
send_event (Watch *w, const char *name, const char *type)
{
  g_autoptr(JsonObject) message = json_object_new ();
  JsonObject *fs = json_object_new ();
  gsize len = 0;
  char *bytes;

  json_object_set_string_member (fs, "name", name);
  json_object_set_string_member (fs, "type", type);
  json_object_set_object_member (message, "filesystem", fs);
  bytes = sandstepd_envd_message (message, &len);
  sandstepd_stream_take (w->req, bytes, len);
}

/* Watches the directory @fd (@rel beneath the watched one) for @w, and its subdirectories when @w is recursive.
 * With @announce (a directory made while watched), what it holds already was made after its own creation, before
 * its watch could see it: each entry is sent as created. */
static gboolean
add_directory (Watch *w, int fd, const char *rel, gboolean announce, GError **error)
{
  char proc[64];
  DIR *dir;
  Dir *d;
  struct stat dir_st;
  gboolean ok = TRUE;
  struct dirent *entry;
  int wd, copy;

  if (g_hash_table_size (w->dirs) >= WATCH_MAX_DIRS)
    {
      g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                   "Watching '%s' takes more than %d directories; watch a smaller tree, or not recursively", w->path,
                   WATCH_MAX_DIRS);
      return FALSE;
    }
  if (n_dirs >= WATCH_MAX_ALL)
    {
      g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                   "sandstepd watches %d directories already (its cap); stop other watches, then watch '%s' again",
                   WATCH_MAX_ALL, w->path);
      return FALSE;
    }
  /* The magic link names the inode the fd holds: nothing is looked up again by name. */
  g_snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
  wd = inotify_add_watch (inotify_fd, proc, WATCH_MASK);
  if (wd < 0)
    {
      int errsv = errno;
      g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                   "Cannot watch '%s%s%s' in the sandbox: %s%s", w->path, rel[0] != '\0' ? "/" : "", rel,
                   g_strerror (errsv),
                   errsv == ENOSPC ? " (the host's fs.inotify.max_user_watches is reached: raise it, or watch less)"
                                   : "");
      return FALSE;
    }
  if (g_hash_table_contains (w->dirs, GINT_TO_POINTER (wd)) || fstat (fd, &dir_st) < 0)
    return TRUE;
  d = g_new0 (Dir, 1);
  d->rel = g_strdup (rel);
  d->dev = dir_st.st_dev;
  d->ino = dir_st.st_ino;
  g_hash_table_insert (w->dirs, GINT_TO_POINTER (wd), d);
  n_dirs++;
  use_wd (w, wd);
  if (rel[0] == '\0')
    w->top_wd = wd;
  if (!w->recursive)
    return TRUE;

  /* Watched first, then listed: a subdirectory made meanwhile is seen by one or the other. */
  copy = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  dir = copy >= 0 ? fdopendir (copy) : NULL;
  if (dir == NULL)
    {
      if (copy >= 0)
        close (copy);
      return TRUE;
    }
  while ((entry = readdir (dir)) != NULL)
    {
      g_autofree char *sub_rel = NULL;
      struct stat st;
      int sub;

      if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0)
        continue;
      sub_rel = rel[0] != '\0' ? g_strconcat (rel, "/", entry->d_name, NULL) : g_strdup (entry->d_name);
      if (announce)
        send_event (w, sub_rel, "EVENT_TYPE_CREATE");
      if (entry->d_type != DT_DIR &&
          (entry->d_type != DT_UNKNOWN || fstatat (dirfd (dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
           !S_ISDIR (st.st_mode)))
        continue;
      /* NOFOLLOW: a link is not a subdirectory to watch, wherever it leads. */
      sub = openat (dirfd (dir), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0)
        continue;
      ok = add_directory (w, sub, sub_rel, announce, error);
      close (sub);
      if (!ok)
        break;
    }
  closedir (dir);
  return ok;
}

/* A directory @name made (or moved in) in the watched directory @parent of @w: watched too.  @parent is found
 * again from the root of the sandbox's files as the file tools find a path, and must be the very inode watched
 * (else it moved, and its own events say so); @name is opened in it with no link followed. */
static gboolean
add_new_directory (Watch *w, const Dir *parent, const char *name, GError **error)
{
  g_autofree char *parent_path = parent->rel[0] != '\0' ? g_strconcat (w->path, "/", parent->rel, NULL)
                                                          : g_strdup (w->path);
  g_autofree char *rel = parent->rel[0] != '\0' ? g_strconcat (parent->rel, "/", name, NULL) : g_strdup (name);
  int pfd = sandstep_tree_open_directory (w->root_fd, parent_path, NULL);
  struct stat st;
  int fd = -1;
  gboolean ok;

  if (pfd >= 0 && fstat (pfd, &st) == 0 && st.st_dev == parent->dev && st.st_ino == parent->ino)
    fd = openat (pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd >= 0)
    close (pfd);
  /* Gone already, moved, or not a directory: nothing to watch. */
  if (fd < 0)
    return TRUE;
  ok = add_directory (w, fd, rel, TRUE, error);
  close (fd);
  return ok;
}

/* A directory of @w moved away: its watches (and its subdirectories') go, as their paths no longer hold. */
static void
forget_beneath (Watch *w, const char *rel)
{
  g_autoptr(GList) wds = g_hash_table_get_keys (w->dirs);
  gsize n = strlen (rel);

  for (GList *l = wds; l != NULL; l = l->next)
    {
      const Dir *d = g_hash_table_lookup (w->dirs, l->data);
      if (d != NULL && strncmp (d->rel, rel, n) == 0 && (d->rel[n] == '\0' || d->rel[n] == '/'))
        forget_wd (w, GPOINTER_TO_INT (l->data));
    }
}

static const char *
event_type (guint32 mask)
{
  if (mask & (IN_CREATE | IN_MOVED_TO))
    return "EVENT_TYPE_CREATE";
  if (mask & IN_MODIFY)
    return "EVENT_TYPE_WRITE";
  if (mask & IN_DELETE)
    return "EVENT_TYPE_REMOVE";
  if (mask & IN_MOVED_FROM)
    return "EVENT_TYPE_RENAME";
  if (mask & IN_ATTRIB)
    return "EVENT_TYPE_CHMOD";
  return NULL;
}

/* One inotify event for @w: streamed as envd's FilesystemEvent {name, type}, name relative to the watched path. */
static void
watch_event (Watch *w, const struct inotify_event *ev)
{
  const Dir *dir = g_hash_table_lookup (w->dirs, GINT_TO_POINTER (ev->wd));
  const char *type = event_type (ev->mask);
  g_autofree char *name = NULL;
  g_autoptr(GError) error = NULL;

  if (ev->wd == w->root_wd && w->root_wd >= 0)
    {
      g_autofree char *message_text = g_strdup_printf (
        "The files of sandbox '%s' moved into a layer (a fork, checkpoint or snapshot of it), or the sandbox ended; "
        "the watch of '%s' ended: watch it again", w->handle, w->path);
      if (ev->mask & (IN_MOVE_SELF | IN_DELETE_SELF | IN_IGNORED))
        watch_end (w, "not_found", message_text);
      return;
    }
  if (dir == NULL)
    return;
  /* The watch holds the directory open, so its inode outlives its removal and no IN_IGNORED comes: its removal
   * (or move) is the end. */
  if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
    {
      if (ev->wd == w->top_wd)
        {
          g_autofree char *message_text = g_strdup_printf (
            "'%s' is gone (removed or moved away, or its sandbox ended); the watch ended: watch it again once it "
            "is there", w->path);
          watch_end (w, "not_found", message_text);
          return;
        }
      forget_wd (w, ev->wd);
      return;
    }
  if (ev->mask & IN_UNMOUNT)
    {
      g_autofree char *message_text = g_strdup_printf (
        "The sandbox's files under '%s' were unmounted (its jail ended); the watch ended: watch it again", w->path);
      watch_end (w, "unavailable", message_text);
      return;
    }
  if (ev->len == 0 || ev->name[0] == '\0' || type == NULL)
    return;
  name = dir->rel[0] != '\0' ? g_strconcat (dir->rel, "/", ev->name, NULL) : g_strdup (ev->name);
  if ((ev->mask & IN_ISDIR) && w->recursive && (ev->mask & IN_MOVED_FROM))
    forget_beneath (w, name);
  if (w->req->pending > WATCH_MAX_UNREAD)
    {
      watch_end (w, "resource_exhausted", "The client read none of its events for too long; the watch ended");
      return;
    }
  send_event (w, name, type);
  /* After its own event: what the new directory holds already is sent as created. */
  if ((ev->mask & IN_ISDIR) && w->recursive && (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
      !add_new_directory (w, dir, ev->name, &error))
    watch_end (w, "resource_exhausted", error->message);
}

static gboolean
on_inotify (int fd, GIOCondition condition, gpointer data)
{
  /* As inotify(7) asks: aligned for struct inotify_event. */
  char buf[64 * 1024] __attribute__ ((aligned (__alignof__ (struct inotify_event))));

  /* A few reads a turn: a sandbox that writes without end must not keep the main loop from the others. */
  for (int turn = 0; turn < 16; turn++)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      for (char *p = buf; p < buf + n;)
        {
          const struct inotify_event *ev = (const struct inotify_event *) p;
          GPtrArray *list;

          p += sizeof *ev + ev->len;
          if (ev->mask & IN_Q_OVERFLOW)
            {
              /* Events were dropped: no watch can say what happened, so each ends, saying so. */
              while (watches->len > 0)
                watch_end (watches->pdata[0], "resource_exhausted",
                           "Events were lost (sandstepd's inotify queue overflowed); watch the directory again");
              continue;
            }
          list = g_hash_table_lookup (users, GINT_TO_POINTER (ev->wd));
          if (list == NULL)
            continue;
          /* A copy: an event may end a watch, which leaves the list. */
          {
            g_autoptr(GPtrArray) copy = g_ptr_array_copy (list, NULL, NULL);
            for (guint i = 0; i < copy->len; i++)
              if (g_ptr_array_find (watches, copy->pdata[i], NULL))
                watch_event (copy->pdata[i], ev);
          }
          /* The kernel's watch is gone: no one uses its number now (it may be given again). */
          if ((ev->mask & IN_IGNORED) && (list = g_hash_table_lookup (users, GINT_TO_POINTER (ev->wd))) != NULL)
            {
              g_autoptr(GPtrArray) copy = g_ptr_array_copy (list, NULL, NULL);
              for (guint i = 0; i < copy->len; i++)
                forget_wd (copy->pdata[i], ev->wd);
            }
        }
    }
  return G_SOURCE_CONTINUE;
}

/* The daemon's one inotify instance, made at the first watch; FALSE with @error when it cannot be. */
static gboolean
ensure_inotify (GError **error)
{
  if (inotify_fd >= 0)
    return TRUE;
  inotify_fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd < 0)
    {
      int errsv = errno;
      g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                   "sandstepd cannot make its inotify instance: %s%s", g_strerror (errsv),
                   errsv == EMFILE ? " (its user has fs.inotify.max_user_instances in use: end some, or raise it)"
                                   : "");
      return FALSE;
    }
  users = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_ptr_array_unref);
  watches = g_ptr_array_new ();
  inotify_source = g_unix_fd_add (inotify_fd, G_IO_IN, on_inotify, NULL);
  return TRUE;
}

/* The jail a layered sandbox's watched files live in ended (its init's pidfd is readable): destroyed, expired,
 * or stopped for a fork, checkpoint or snapshot, whose files are a layer now.  Never idle: the watch kept it. */
static gboolean
on_jail_ended (int fd, GIOCondition condition, gpointer user_data)
{
  Watch *w = user_data;
  g_autofree char *message_text = g_strdup_printf (
    "The jail of sandbox '%s' ended (the sandbox ended, or its files moved into a layer: a fork, checkpoint or "
    "snapshot of it); the watch of '%s' ended: watch it again", w->handle, w->path);

  w->jail_source = 0;
  watch_end (w, "not_found", message_text);
  return G_SOURCE_REMOVE;
}

void
sandstepd_envd_watch_start (Request *req, const char *handle, const char *path, SandstepWatchedDir *dir,
                            gboolean recursive)
{
  int root_fd = g_steal_fd (&dir->root);
  char proc[64];
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) start = json_object_new ();
  Watch *w;
  gsize len = 0;
  char *bytes;
  gboolean ok;

  if (!ensure_inotify (&error))
    {
      /* The rest of @dir is its caller's to close (the directory itself, by the worker's channel). */
      close (root_fd);
      sandstepd_envd_answer_stream_error (req, "resource_exhausted", error->message);
      return;
    }
  w = g_new0 (Watch, 1);
  w->req = sandstepd_request_ref (req);
  w->handle = g_strdup (handle);
  w->path = g_strdup (path);
  w->root_fd = root_fd;
  w->keep_fd = g_steal_fd (&dir->keep);
  w->jail_fd = g_steal_fd (&dir->jail);
  if (w->jail_fd >= 0)
    w->jail_source = g_unix_fd_add (w->jail_fd, G_IO_IN, on_jail_ended, w);
  w->top_wd = -1;
  w->recursive = recursive;
  w->dirs = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) dir_free);
  g_ptr_array_add (watches, w);
  g_snprintf (proc, sizeof proc, "/proc/self/fd/%d", root_fd);
  w->root_wd = inotify_add_watch (inotify_fd, proc, ROOT_MASK);
  if (w->root_wd < 0)
    g_set_error (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                 "Cannot watch the files of sandbox '%s': %s", handle, g_strerror (errno));
  else
    use_wd (w, w->root_wd);
  ok = error == NULL && add_directory (w, dir->dir, "", FALSE, &error);
  if (!ok)
    {
      sandstepd_envd_answer_stream_error (req, "resource_exhausted", error->message);
      watch_free (w);
      return;
    }
  {
    g_autoptr(JsonObject) keepalive = json_object_new ();
    json_object_set_object_member (keepalive, "keepalive", json_object_new ());
    req->keepalive_frame = sandstepd_envd_message (keepalive, &req->keepalive_len);
  }
  sandstepd_stream_begin (req);
  soup_message_headers_set_content_type (soup_server_message_get_response_headers (req->msg), CONNECT_STREAM_TYPE,
                                         NULL);
  req->owner = w;
  req->on_gone = on_watch_gone;
  json_object_set_object_member (start, "start", json_object_new ());
  bytes = sandstepd_envd_message (start, &len);
  sandstepd_stream_take (req, bytes, len);
}

void
sandstepd_envd_watch_end_sandbox (const char *handle)
{
  for (guint i = 0; watches != NULL && i < watches->len;)
    {
      Watch *w = watches->pdata[i];

      if (strcmp (w->handle, handle) != 0)
        {
          i++;
          continue;
        }
      {
        g_autofree char *message = g_strdup_printf ("The sandbox '%s' was killed; the watch of '%s' ended", handle,
                                                    w->path);
        watch_end (w, "not_found", message);
      }
    }
}
