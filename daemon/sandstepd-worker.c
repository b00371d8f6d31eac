/* sandstepd-worker.c: the process that holds one claim for sandstepd.
 *
 * sandstepd keeps a few of these ready.  A claim takes one, which attaches
 * through the local backend exactly as the `sandstep` helper does: the claim
 * is this process's lock, a destroy kills this process, and a command it
 * runs ends when it goes (its supervisor sees the connection close).  It
 * dies with sandstepd in turn.
 * Once detached it waits for the next claim: no process start per claim.
 *
 * Two threads: the reader takes messages off the socket and cancels what
 * runs when told to (or when sandstepd goes away: the sandbox's supervisor
 * then kills the command); the main thread does the operations in order and
 * answers each.
 */
#include "sandstepd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-wire.h"
#include "sandstepd-channel.h"
#include "sandstepd-e2b-code-worker.h"

#define SEND_TIMEOUT_MS (30 * 1000)
/* How long a cancel keeps killing before it gives up on a command that will not die. */
#define CANCEL_LIMIT_US (30 * G_USEC_PER_SEC)

typedef struct {
  JsonObject *message;    /* NULL: the daemon is gone; detach and exit */
  int fds[SANDSTEPD_CHANNEL_MAX_FDS];
  guint n_fds;
} Op;

typedef struct {
  int sock;
  SandstepBackend *backend;
  SandstepAttachment *attachment;
  SandstepIdentity who;
  GAsyncQueue *ops;
  gint current;           /* id of the operation running now; 0: none */
  gint cancelled;         /* the last id told to cancel */
  GMutex lock;
  GCancellable *running;  /* the command that runs, under .lock */
} Worker;

static void
op_free (Op *op)
{
  if (op->message != NULL)
    json_object_unref (op->message);
  for (guint i = 0; i < op->n_fds; i++)
    if (op->fds[i] >= 0)
      close (op->fds[i]);
  g_free (op);
}

static void
cancel (Worker *w, gint id)
{
  gint64 limit = g_get_monotonic_time () + CANCEL_LIMIT_US;

  g_atomic_int_set (&w->cancelled, id);
  /* Until the operation is over: a command may be starting right now. */
  while (id != 0 && g_atomic_int_get (&w->current) == id && g_get_monotonic_time () < limit)
    {
      g_mutex_lock (&w->lock);
      if (w->running != NULL)
        g_cancellable_cancel (w->running);
      g_mutex_unlock (&w->lock);
      g_usleep (20 * 1000);
    }
}

static gpointer
reader_thread (gpointer data)
{
  Worker *w = data;

  for (;;)
    {
      g_autoptr(GError) error = NULL;
      Op *op = g_new0 (Op, 1);
      const char *name;

      if (!sandstepd_channel_recv (w->sock, &op->message, op->fds, &op->n_fds, &error))
        {
          /* sandstepd closed the lease (or died): stop what runs, then detach. */
          op->message = NULL;
          g_async_queue_push (w->ops, op);
          cancel (w, g_atomic_int_get (&w->current));
          return NULL;
        }
      name = json_object_get_string_member_with_default (op->message, "op", "");
      if (strcmp (name, "cancel") == 0)
        {
          gint id = (gint) json_object_get_int_member_with_default (op->message, "id", 0);
          op_free (op);
          cancel (w, id);
          continue;
        }
      g_async_queue_push (w->ops, op);
    }
}

static JsonObject *
error_reply (const GError *error)
{
  return sandstep_wire_error_line (error);
}

static JsonObject *
do_attach (Worker *w, JsonObject *m)
{
  const char *handle = json_object_get_string_member_with_default (m, "handle", NULL);
  g_autoptr(GError) error = NULL;
  SandstepIdentity who = { NULL, NULL };

  if (w->attachment != NULL || !sandstep_handle_is_local (handle) || !sandstep_wire_read_identity (m, &who, NULL))
    {
      g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "sandstepd worker: attach refused (already attached, or a bad handle)");
      return error_reply (error);
    }
  g_free ((char *) w->who.owner);
  g_free ((char *) w->who.holder);
  w->who.owner = g_strdup (who.owner);
  w->who.holder = g_strdup (who.holder);
  /* E2B's calls share their holder's claim, and run beside each other (SandstepIdentity.beside). */
  w->who.beside = json_object_get_boolean_member_with_default (m, "beside", FALSE);
  /* A claim held elsewhere is refused at once (the client waits and asks again), unless the caller asked to wait
   * a little here ("wait", seconds: E2B's calls, whose client never asks again). */
  w->attachment = sandstep_backend_attach (w->backend, handle, &w->who,
                                           CLAMP (json_object_get_double_member_with_default (m, "wait", 0), 0, 60),
                                           NULL, NULL, &error);
  /* A busy refusal names its holder: the client waits and asks again. */
  if (w->attachment == NULL)
    return error_reply (error);
  return sandstep_wire_claim (NULL, sandstep_attachment_remaining_lifetime (w->attachment),
                              sandstep_attachment_spec (w->attachment));
}

static JsonObject *
need_attachment (Worker *w)
{
  g_autoptr(GError) error = NULL;

  if (w->attachment != NULL)
    return NULL;
  g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                       "sandstepd worker: no sandbox is attached");
  return error_reply (error);
}

/* The notices of one command, which come on another thread. */
typedef struct {
  GMutex lock;
  GPtrArray *lines;
} Notices;

static void
keep_notice (const char *message, gpointer user_data)
{
  Notices *notices = user_data;

  g_mutex_lock (&notices->lock);
  /* Bounded: a command that retries forever must not fill the daemon. */
  if (notices->lines->len < 64)
    g_ptr_array_add (notices->lines, g_strdup (message));
  g_mutex_unlock (&notices->lock);
}

static JsonObject *
do_run (Worker *w, JsonObject *m, Op *op, gint id)
{
  SandstepRunRequest request = { 0 };
  SandstepRunResult result;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);
  Notices notices = { .lines = lines };
  JsonObject *reply;
  gboolean ok;

  /* A third descriptor is the command's stdin (claim-run's staged body). */
  if (op->n_fds != 2 && op->n_fds != 3)
    {
      g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "sandstepd worker: a command needs two output pipes, and its stdin if any");
      return error_reply (error);
    }
  if (!sandstep_wire_read_run_request (m, &request.command, &request.timeout_s, &error))
    return error_reply (error);
  request.stdin_fd = op->n_fds == 3 ? op->fds[2] : -1;
  request.stdout_fd = op->fds[0];
  request.stderr_fd = op->fds[1];
  /* Sent with the result, so the caller's tools can say what was refused. */
  request.on_notice = keep_notice;
  request.user_data = &notices;
  if (g_atomic_int_get (&w->cancelled) == id)
    {
      g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "The command was cancelled before it started: its caller went away");
      return error_reply (error);
    }
  request.cancellable = g_cancellable_new ();
  g_mutex_lock (&w->lock);
  w->running = request.cancellable;
  g_mutex_unlock (&w->lock);
  if (g_atomic_int_get (&w->cancelled) == id)
    g_cancellable_cancel (request.cancellable);
  g_mutex_init (&notices.lock);
  ok = sandstep_attachment_run_command (w->attachment, &request, &result, &error);
  g_mutex_clear (&notices.lock);
  g_mutex_lock (&w->lock);
  w->running = NULL;
  g_mutex_unlock (&w->lock);
  g_object_unref (request.cancellable);
  if (!ok)
    return error_reply (error);
  reply = sandstep_wire_run_result (&result);
  /* Every thread that could add one has ended with the command. */
  sandstep_wire_set_notices (reply, lines);
  return reply;
}

static JsonObject *
do_read (Worker *w, JsonObject *m, int *out_fd)
{
  const char *path = NULL;
  guint64 max_bytes = 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  const char *data;
  gsize len, done = 0;
  JsonObject *reply;
  int fd;

  if (!sandstep_wire_read_path_request (m, 0, &path, &max_bytes, &error))
    return error_reply (error);
  bytes = sandstep_attachment_read_file (w->attachment, path, (gsize) MIN (max_bytes, G_MAXSIZE), &error);
  if (bytes == NULL)
    return error_reply (error);
  /* The bytes go back in a memfd: the daemon maps it and sends it, never copying it onto its heap. */
  fd = memfd_create ("sandstepd-read", MFD_CLOEXEC);
  data = g_bytes_get_data (bytes, &len);
  while (fd >= 0 && done < len)
    {
      ssize_t n = write (fd, data + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          close (fd);
          fd = -1;
          break;
        }
      done += n;
    }
  if (fd < 0)
    {
      sandstep_throw_errno (&error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                            "Could not pass '%s' on to the client", path);
      return error_reply (error);
    }
  *out_fd = fd;
  reply = json_object_new ();
  json_object_set_int_member (reply, "size", len);
  return reply;
}

static JsonObject *
do_write (Worker *w, JsonObject *m, Op *op)
{
  const char *path = NULL;
  guint64 unused = 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(GMappedFile) mapped = NULL;
  const char *data = "";
  gsize len = 0;

  if (op->n_fds != 1)
    {
      g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "sandstepd worker: a write needs its staged file");
      return error_reply (error);
    }
  if (!sandstep_wire_read_path_request (m, 0, &path, &unused, &error))
    return error_reply (error);
  if (lseek (op->fds[0], 0, SEEK_END) > 0)
    {
      mapped = g_mapped_file_new_from_fd (op->fds[0], FALSE, &error);
      if (mapped == NULL)
        return error_reply (error);
      data = g_mapped_file_get_contents (mapped);
      len = g_mapped_file_get_length (mapped);
    }
  if (!sandstep_attachment_write_file (w->attachment, path, data, len, &error))
    return error_reply (error);
  return json_object_new ();
}

static JsonObject *
do_put (Worker *w, JsonObject *m)
{
  g_autoptr(GError) error = NULL;
  const char *src = NULL, *dest = NULL;

  if (!sandstep_wire_get_string (m, "src", &src, &error) || !sandstep_wire_get_string (m, "dest", &dest, &error) ||
      !sandstep_attachment_put (w->attachment, src, dest, &error))
    return error_reply (error);
  return json_object_new ();
}

static JsonObject *
do_list (Worker *w, JsonObject *m)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  const char *path = NULL;
  guint64 unused = 0;

  if (!sandstep_wire_read_path_request (m, 0, &path, &unused, &error))
    return error_reply (error);
  entries = sandstep_attachment_list_directory (w->attachment, path, &error);
  if (entries == NULL)
    return error_reply (error);
  return sandstep_wire_entries (entries);
}

/* A directory of the sandbox, passed back as fds (@out_fds: the directory, the root of its files, and for a jail's
 * files its keep and its init's pidfd; sandstep-backend.h): E2B's watchDir watches it from the daemon, claiming
 * nothing. */
static JsonObject *
do_open_directory (Worker *w, JsonObject *m, int out_fds[SANDSTEPD_CHANNEL_MAX_FDS])
{
  g_autoptr(GError) error = NULL;
  SandstepWatchedDir dir;
  const char *path = NULL;
  guint64 unused = 0;

  if (!sandstep_wire_read_path_request (m, 0, &path, &unused, &error))
    return error_reply (error);
  if (!sandstep_attachment_open_directory (w->attachment, path, &dir, &error))
    return error_reply (error);
  out_fds[0] = dir.dir;
  out_fds[1] = dir.root;
  out_fds[2] = dir.keep;
  out_fds[3] = dir.jail;
  return json_object_new ();
}

static JsonObject *
do_export (Worker *w, JsonObject *m, Op *op)
{
  g_autoptr(GError) error = NULL;
  const char *path = NULL;
  guint64 max_bytes = 0;
  gint64 written;

  if (op->n_fds != 1)
    {
      g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "sandstepd worker: an export needs its pipe");
      return error_reply (error);
    }
  if (!sandstep_wire_read_path_request (m, 0, &path, &max_bytes, &error))
    return error_reply (error);
  written = sandstep_attachment_export_file (w->attachment, path, op->fds[0], max_bytes, &error);
  /* The reader sees the end of the file once our end is closed. */
  close (op->fds[0]);
  op->fds[0] = -1;
  if (written < 0)
    return error_reply (error);
  return json_object_new ();
}

/* A fork of the claimed sandbox for the client's holder, of the claim's owner (a fork is its parent's owner's). */
static JsonObject *
do_fork (Worker *w, JsonObject *m)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) handles = g_ptr_array_new_with_free_func (g_free);
  SandstepIdentity who = { w->who.owner, NULL };
  guint count = 1;

  if (!sandstep_wire_read_fork_request (m, &who.holder, &count, &error) ||
      !sandstep_attachment_fork (w->attachment, &who, count, handles, &error))
    return error_reply (error);
  return sandstep_wire_strings ("handles", handles);
}

static JsonObject *
do_checkpoint (Worker *w, JsonObject *m, gboolean rollback)
{
  g_autoptr(GError) error = NULL;
  const char *name = NULL;

  if (!sandstep_wire_get_string (m, "name", &name, &error) ||
      !(rollback ? sandstep_attachment_rollback (w->attachment, name, &error)
                 : sandstep_attachment_checkpoint (w->attachment, name, &error)))
    return error_reply (error);
  return json_object_new ();
}

static JsonObject *
do_checkpoints (Worker *w)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) names = sandstep_attachment_checkpoints (w->attachment, &error);

  if (names == NULL)
    return error_reply (error);
  return sandstep_wire_strings ("names", names);
}

static void
detach (Worker *w)
{
  /* runCode's Python session runs under the claim: it ends first. */
  sandstepd_e2b_code_worker_end ();
  if (w->attachment != NULL)
    sandstep_attachment_detach (g_steal_pointer (&w->attachment));
}

int
sandstepd_worker_main (int sock, const char *state_dir, int parent)
{
  Worker w = { .sock = sock };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) ready = json_object_new ();

  g_mutex_init (&w.lock);
  /* Die with sandstepd; if it is gone already, go now. */
  prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid () != parent)
    return 1;
  /* A pipe whose reader went away is an error to handle, not a reason to die. */
  signal (SIGPIPE, SIG_IGN);

  w.backend = sandstep_local_backend_new (state_dir, &error);
  json_object_set_boolean_member (ready, "ready", w.backend != NULL);
  if (w.backend == NULL)
    json_object_set_member (ready, "error", sandstep_wire_error_to_json (error));
  if (!sandstepd_channel_send_object (sock, ready, NULL, 0, SEND_TIMEOUT_MS, NULL) || w.backend == NULL)
    return 1;

  w.ops = g_async_queue_new ();
  g_thread_unref (g_thread_new ("sandstepd-reader", reader_thread, &w));

  for (;;)
    {
      Op *op = g_async_queue_pop (w.ops);
      g_autoptr(JsonObject) reply = NULL;
      const char *name;
      gint id;
      /* The answer's fds: a read's bytes; an opened directory and what watches it need (do_open_directory()). */
      int reply_fds[SANDSTEPD_CHANNEL_MAX_FDS] = { -1, -1, -1, -1 };
      guint n_reply_fds = 0;
      gboolean last = FALSE;

      if (op->message == NULL)
        {
          detach (&w);
          _exit (0);
        }
      name = json_object_get_string_member_with_default (op->message, "op", "");
      id = (gint) json_object_get_int_member_with_default (op->message, "id", 0);
      g_atomic_int_set (&w.current, id);

      if (strcmp (name, "attach") == 0)
        reply = do_attach (&w, op->message);
      else if (strcmp (name, "detach") == 0)
        {
          /* The claim goes; the process stays, ready for the next one. */
          detach (&w);
          g_atomic_int_set (&w.cancelled, 0);
          reply = json_object_new ();
        }
      else if ((reply = need_attachment (&w)) != NULL)
        ;
      else if (strcmp (name, "run") == 0)
        reply = do_run (&w, op->message, op, id);
      else if (strcmp (name, "python") == 0)
        reply = sandstepd_e2b_code_worker_run (w.attachment, op->message, op->fds, op->n_fds);
      else if (strcmp (name, "read") == 0)
        reply = do_read (&w, op->message, &reply_fds[0]);
      else if (strcmp (name, "write") == 0)
        reply = do_write (&w, op->message, op);
      else if (strcmp (name, "put") == 0)
        reply = do_put (&w, op->message);
      else if (strcmp (name, "list") == 0)
        reply = do_list (&w, op->message);
      else if (strcmp (name, "open-directory") == 0)
        reply = do_open_directory (&w, op->message, reply_fds);
      else if (strcmp (name, "export") == 0)
        reply = do_export (&w, op->message, op);
      else if (strcmp (name, "fork") == 0)
        reply = do_fork (&w, op->message);
      else if (strcmp (name, "checkpoint") == 0 || strcmp (name, "rollback") == 0)
        reply = do_checkpoint (&w, op->message, strcmp (name, "rollback") == 0);
      else if (strcmp (name, "checkpoints") == 0)
        reply = do_checkpoints (&w);
      else
        {
          g_autoptr(GError) unknown = NULL;
          g_set_error (&unknown, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                       "sandstepd worker: unknown operation '%s'", name);
          reply = error_reply (unknown);
        }
      /* Close our copies of the command's pipes before answering: the daemon's
       * reader must see their end once the answer is in. */
      for (guint i = 0; i < op->n_fds; i++)
        if (op->fds[i] >= 0)
          {
            close (op->fds[i]);
            op->fds[i] = -1;
          }
      g_atomic_int_set (&w.current, 0);
      json_object_set_int_member (reply, "id", id);
      /* Those given, in order (a directory's keep and pidfd come together or not at all). */
      while (n_reply_fds < G_N_ELEMENTS (reply_fds) && reply_fds[n_reply_fds] >= 0)
        n_reply_fds++;
      if (!sandstepd_channel_send_object (sock, reply, n_reply_fds > 0 ? reply_fds : NULL, n_reply_fds,
                                          SEND_TIMEOUT_MS, NULL))
        last = TRUE;
      for (guint i = 0; i < G_N_ELEMENTS (reply_fds); i++)
        if (reply_fds[i] >= 0)
          close (reply_fds[i]);
      op_free (op);
      if (last)
        {
          detach (&w);
          _exit (0);
        }
    }
}
