/* sandstep-claim.c: who uses a sandbox now.
 *
 * A claim is an flock on the sandbox's claim file, held for as long as its
 * holder uses the sandbox, so it dies with the holder's process; its content
 * names the holder, its pid and that process's start time, for messages and
 * for a destroy that must end the holder.
 */
#include "sandstep-store-private.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-claim-libc.h"
#include "sandstep-error.h"
#include "sandstep-read-libc.h"
#include "sandstep-host-files.h"
#include "sandstep-who.h"
#include "sandstep-json.h"

#define KILL_GRACE_US (5 * G_USEC_PER_SEC)

typedef struct {
  char *holder;
  pid_t pid;
  guint64 start;
} ClaimInfo;

/* Who holds the claim (sandstep-claim-libc.h), waiting a little for a new holder to write its name. */
static void
read_claim (int fd, ClaimInfo *info)
{
  SandstepClaimText text;

  memset (info, 0, sizeof *info);
  for (int attempt = 0; attempt < SANDSTEP_CLAIM_NAME_WAIT_US / 2000; attempt++)
    {
      /* A name that is no UTF-8 is damage, not a name to put in a message. */
      if (sandstep_claim_read_once (fd, &text) && g_utf8_validate (text.holder, -1, NULL))
        {
          info->holder = g_strdup (text.holder);
          info->pid = text.pid;
          info->start = text.start;
          return;
        }
      g_usleep (2000);
    }
  info->pid = text.pid;
  sandstep_claim_unnamed (text.pid, text.holder, sizeof text.holder);
  info->holder = g_strdup (text.holder);
}

static int
open_claim (SandstepStore *store, const char *handle, struct stat *out_st, GError **error)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, "claim", NULL);
  int fd = openat (store->dir_fd, rel, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  struct stat st;

  if (fd < 0 && errno == ENOENT)
    {
      g_autofree char *dir = g_build_filename ("sandboxes", handle, NULL);
      struct stat dir_st;
      if (fstatat (store->dir_fd, dir, &dir_st, AT_SYMLINK_NOFOLLOW) == 0)
        sandstep_store_broken (error, handle, "it has no claim file");
      else
        sandstep_store_not_found (store, error, handle);
    }
  else if (fd < 0 && (errno == ELOOP || errno == EISDIR || errno == ENXIO || errno == ENOTDIR))
    sandstep_store_broken (error, handle, "its claim file is not a regular file");
  else if (fd < 0)
    sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                          "Could not open the claim of sandbox '%s'", handle);
  else if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      sandstep_store_broken (error, handle, "its claim file is not a regular file");
      return -1;
    }
  else if (out_st != NULL)
    *out_st = st;
  return fd;
}

/* TRUE if @fd is still the claim file of @handle (not of a sandbox destroyed meanwhile). */
static gboolean
claim_is_current (SandstepStore *store, const char *handle, int fd)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, "claim", NULL);
  struct stat by_fd, by_path;

  return fstat (fd, &by_fd) == 0 && fstatat (store->dir_fd, rel, &by_path, AT_SYMLINK_NOFOLLOW) == 0 &&
         by_fd.st_ino == by_path.st_ino && by_fd.st_dev == by_path.st_dev;
}

int
sandstep_store_try_claim (SandstepStore *store, const char *handle, const char *holder, char **out_current,
                          GError **error)
{
  int fd = open_claim (store, handle, NULL, error);
  g_autofree char *text = NULL;

  *out_current = NULL;
  if (fd < 0)
    return -1;
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      ClaimInfo info;
      int errsv = errno;
      if (errsv != EWOULDBLOCK)
        {
          close (fd);
          sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                "Could not lock the claim of sandbox '%s'", handle);
          return -1;
        }
      read_claim (fd, &info);
      close (fd);
      *out_current = info.holder;
      return -1;
    }
  if (!claim_is_current (store, handle, fd))
    {
      close (fd);
      sandstep_store_not_found (store, error, handle);
      return -1;
    }
  {
    /* The holder's name goes through json-glib for quoting. */
    g_autoptr(JsonBuilder) builder = json_builder_new ();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "holder");
    json_builder_add_string_value (builder, holder);
    json_builder_set_member_name (builder, "pid");
    json_builder_add_int_value (builder, getpid ());
    json_builder_set_member_name (builder, "start");
    json_builder_add_int_value (builder, (gint64) sandstep_process_start_time (getpid ()));
    json_builder_end_object (builder);
    root = json_builder_get_root (builder);
    text = json_to_string (root, FALSE);
  }
  {
    /* Overwritten in place, cut only when shorter: truncating to 0 frees the block, and that costs a
     * journal transaction on every claim. */
    struct stat st;
    gsize len = strlen (text);
    if (fstat (fd, &st) < 0 || pwrite (fd, text, len, 0) != (ssize_t) len ||
        ((gsize) st.st_size > len && ftruncate (fd, len) < 0))
      g_debug ("Could not record the holder of '%s': %s", handle, g_strerror (errno));
  }
  return fd;
}

char *
sandstep_store_peek_holder (SandstepStore *store, const char *handle)
{
  ClaimInfo info;
  int fd = open_claim (store, handle, NULL, NULL);

  if (fd < 0)
    return NULL;
  /* A shared lock is refused only while someone holds the claim. */
  if (flock (fd, LOCK_SH | LOCK_NB) == 0)
    {
      close (fd);
      return NULL;
    }
  read_claim (fd, &info);
  close (fd);
  return info.holder;
}

/* Waits for the claim on @fd, ending its holder if it does not let go. */
static gboolean
take_claim_by_force (int fd, const char *handle, GError **error)
{
  ClaimInfo info;
  gint64 deadline;
  int sig = SIGTERM;

  if (flock (fd, LOCK_EX | LOCK_NB) == 0)
    return TRUE;
  read_claim (fd, &info);
  for (int round = 0; round < 2; round++, sig = SIGKILL)
    {
      /* Only the helper that wrote the claim, identified by pid and start time. */
      if (info.pid > 0 && info.pid != getpid () && info.start != 0 && sandstep_process_start_time (info.pid) == info.start)
        kill (info.pid, sig);
      deadline = g_get_monotonic_time () + KILL_GRACE_US;
      while (g_get_monotonic_time () < deadline)
        {
          if (flock (fd, LOCK_EX | LOCK_NB) == 0)
            {
              g_free (info.holder);
              return TRUE;
            }
          g_usleep (10 * 1000);
        }
    }
  sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY,
                  "Sandbox '%s' is still held by '%s' (pid %d), which did not stop; end that process and try again",
                  handle, info.holder, (int) info.pid);
  g_free (info.holder);
  return FALSE;
}

gboolean
sandstep_store_destroy (SandstepStore *store, const char *handle, int claim_fd, GError **error)
{
  g_autofree char *from = g_build_filename ("sandboxes", handle, NULL);
  g_autofree char *to = g_strdup_printf ("trash/%s.%08x", handle, g_random_int ());
  int fd = claim_fd;
  int trash_fd;

  if (fd < 0)
    {
      g_autoptr(GError) local_error = NULL;
      fd = open_claim (store, handle, NULL, &local_error);
      if (fd < 0 && (g_error_matches (local_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND) ||
                     g_error_matches (local_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BROKEN)))
        {
          /* No usable claim file: gone already, half made or damaged; nobody can hold it, so remove what is there. */
          sandstep_remove_tree_at (store->dir_fd, from);
          return TRUE;
        }
      if (fd < 0)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return FALSE;
        }
      if (!take_claim_by_force (fd, handle, error))
        {
          close (fd);
          return FALSE;
        }
    }

  if (renameat (store->dir_fd, from, store->dir_fd, to) < 0)
    {
      int errsv = errno;
      if (fd != claim_fd)
        close (fd);
      if (errsv == ENOENT)
        return TRUE;
      return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                   "Could not remove sandbox '%s' from '%s'", handle, store->dir);
    }
  if (fd != claim_fd)
    close (fd);
  trash_fd = openat (store->dir_fd, "trash", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (trash_fd >= 0)
    {
      sandstep_remove_tree_at (trash_fd, to + strlen ("trash/"));
      close (trash_fd);
    }
  return TRUE;
}
