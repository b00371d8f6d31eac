/* sandstepd-streams.c: run and export, whose bytes stream back as JSON lines.
 *
 * Both hand the worker the write ends of pipes and read the other ends on
 * the main loop: each read becomes one data line of the answer
 * (sandstep_wire_data_line()).  When the answer holds more than
 * SANDSTEPD_HIGH_WATER bytes the reader is slow: the pipes are left unread,
 * so the command (or the export) waits on a full pipe, until the answer
 * drains below SANDSTEPD_LOW_WATER.  The last line is the worker's reply
 * (the command's result, or the end of the export) once every pipe has
 * ended, or its error.  A caller that goes away has what it started killed, but for a detached command (E2B's),
 * which runs on: its output then goes to its stream's tees alone, never waited for.
 */
#include "sandstepd-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

#define READ_BLOCK (64 * 1024)

typedef struct _PipeStream PipeStream;

/* The answer's last line from the worker's reply. */
typedef JsonObject *(*LastLine) (JsonObject *reply);

struct _PipeStream {
  int refs;
  Request *req;
  Worker *worker;
  Call *call;
  guint n_pipes;
  int fds[2];               /* read ends, -1 once ended */
  int numbers[2];           /* the "stream" of each pipe's lines; 0: none (an export) */
  guint watches[2];
  LastLine last_line;
  JsonObject *last;
  GError *error;
  gboolean replied;
  gboolean stream_done;     /* the stream's reference is dropped */
  Lease *step;              /* claim-run: the lease this exchange holds (ref), released before the last line */
  Lease *held;              /* runCode: a lease that outlives the answer (ref), but not its caller going away */
  gboolean released;
  const SandstepdFraming *framing;  /* NULL: sandstep's JSON lines */
  JsonObject *reply;        /* with a framing: the worker's reply, for its last bytes */
  gboolean detached;        /* outlives its caller (E2B's commands): its caller going away kills nothing */
  gboolean gone;            /* a detached stream's caller went away: its output goes to the tees alone */
};

static void pipe_stream_try_finish (PipeStream *ps);

static void
pipe_stream_unref (PipeStream *ps)
{
  if (--ps->refs > 0)
    return;
  for (guint i = 0; i < ps->n_pipes; i++)
    {
      if (ps->watches[i] != 0)
        g_source_remove (ps->watches[i]);
      if (ps->fds[i] >= 0)
        close (ps->fds[i]);
    }
  if (ps->last != NULL)
    json_object_unref (ps->last);
  if (ps->reply != NULL)
    json_object_unref (ps->reply);
  g_clear_error (&ps->error);
  sandstepd_request_unref (ps->req);
  sandstepd_worker_unref (ps->worker);
  sandstepd_lease_unref (ps->step);
  sandstepd_lease_unref (ps->held);
  g_free (ps);
}

static gboolean
on_pipe_data (int fd, GIOCondition condition, gpointer data)
{
  PipeStream *ps = data;
  guint i = fd == ps->fds[0] ? 0 : 1;
  char buf[READ_BLOCK];
  ssize_t n = read (fd, buf, sizeof buf);
  gsize len;
  char *line;

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      ps->watches[i] = 0;
      close (ps->fds[i]);
      ps->fds[i] = -1;
      pipe_stream_try_finish (ps);
      return G_SOURCE_REMOVE;
    }
  line = ps->framing != NULL ? ps->framing->data (ps->numbers[i], buf, n, &len)
                              : sandstep_wire_data_line (ps->numbers[i], buf, n, &len);
  sandstepd_stream_take (ps->req, line, len);
  /* Once its caller is gone nothing drains: a tee that falls behind is cut instead (sandstepd_stream_tee()). */
  if (!ps->gone && ps->req->pending > SANDSTEPD_HIGH_WATER)
    {
      /* The reader is slow: stop reading; the writer waits on its full pipe. */
      ps->watches[i] = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
pipe_stream_watch (PipeStream *ps)
{
  for (guint i = 0; i < ps->n_pipes; i++)
    if (ps->fds[i] >= 0 && ps->watches[i] == 0)
      ps->watches[i] = g_unix_fd_add (ps->fds[i], G_IO_IN | G_IO_HUP | G_IO_ERR, on_pipe_data, ps);
}

static void
on_pipe_stream_drained (Request *req)
{
  pipe_stream_watch (req->owner);
}

/* The stream holds one reference until its answer is complete or its caller gone. */
static void
pipe_stream_done (PipeStream *ps)
{
  if (ps->stream_done)
    return;
  ps->stream_done = TRUE;
  ps->req->on_gone = NULL;
  ps->req->on_drained = NULL;
  ps->req->owner = NULL;
  pipe_stream_unref (ps);
}

static void
on_step_released (gpointer data)
{
  PipeStream *ps = data;

  ps->released = TRUE;
  pipe_stream_try_finish (ps);
  pipe_stream_unref (ps);
}

static void
pipe_stream_try_finish (PipeStream *ps)
{
  for (guint i = 0; i < ps->n_pipes; i++)
    if (ps->fds[i] >= 0)
      return;
  if (ps->stream_done || !ps->replied)
    return;
  if (ps->step != NULL && !ps->released)
    {
      /* The claim goes first: the step's next command must find the sandbox free. */
      if (!ps->step->ended && ps->step->on_released == NULL)
        {
          ps->refs++;
          ps->step->on_released = on_step_released;
          ps->step->on_released_data = ps;
          sandstepd_lease_end (ps->step, "the step's command ended", FALSE);
          return;
        }
      if (ps->step->on_released != NULL)
        return;
    }
  if (ps->framing != NULL)
    {
      gsize len = 0;
      char *last = ps->framing->last (ps->reply, ps->error, &len);

      sandstepd_stream_take (ps->req, last, len);
      sandstepd_stream_end (ps->req);
    }
  else if (ps->error != NULL)
    sandstepd_stream_error (ps->req, ps->error);
  else
    {
      sandstepd_stream_object (ps->req, ps->last);
      sandstepd_stream_end (ps->req);
    }
  pipe_stream_done (ps);
}

static void
on_pipe_stream_gone (Request *req)
{
  PipeStream *ps = req->owner;
  Lease *step = ps->step;
  Lease *held = ps->held;

  if (ps->detached)
    {
      /* The command runs on; the pipes are read again if a slow reader had paused them. */
      ps->gone = TRUE;
      pipe_stream_watch (ps);
      return;
    }
  /* The caller went away: what it started is killed; the worker's writes now fail. */
  sandstepd_worker_forget (ps->worker, ps->call);
  ps->call = NULL;
  for (guint i = 0; i < ps->n_pipes; i++)
    {
      if (ps->watches[i] != 0)
        g_source_remove (ps->watches[i]);
      ps->watches[i] = 0;
      if (ps->fds[i] >= 0)
        close (ps->fds[i]);
      ps->fds[i] = -1;
    }
  if (step != NULL)
    step->refs++;
  if (held != NULL)
    held->refs++;
  pipe_stream_done (ps);
  /* A step's claim ends with its connection, and whatever it runs. */
  if (step != NULL && !step->ended)
    sandstepd_lease_end (step, "the step's connection closed", TRUE);
  sandstepd_lease_unref (step);
  /* What runs under a held lease cannot be stopped alone (a Python session's code): the claim ends with it. */
  if (held != NULL && !held->ended)
    sandstepd_lease_end (held, "the caller went away before its answer", TRUE);
  sandstepd_lease_unref (held);
}

static void
on_pipe_stream_replied (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  PipeStream *ps = call->data;

  ps->call = NULL;
  ps->replied = TRUE;
  if (error != NULL)
    ps->error = g_error_copy (error);
  else if (ps->framing != NULL)
    ps->reply = json_object_ref (reply);
  else
    ps->last = ps->last_line (reply);
  pipe_stream_try_finish (ps);
}

/* Starts the answer of @req, gives @op to @lease's worker with the write ends
 * of @n_pipes new pipes (numbered @numbers in the lines), and streams.  A
 * @step's stream (claim-run's, with its @first line; or one of @framing) holds
 * @lease and ends it; a @held one ends it only when its caller goes away. */
static void
pipe_stream_start_full (Request *req, Lease *lease, const char *op, JsonObject *message, guint n_pipes,
                        const int numbers[2], LastLine last_line, JsonObject *first, int stdin_fd, gboolean step,
                        gboolean held, gboolean detached, const SandstepdFraming *framing)
{
  g_autoptr(JsonObject) owned = message;
  g_autoptr(JsonObject) owned_first = first;
  PipeStream *ps;
  int send[3];
  guint n_send;

  ps = g_new0 (PipeStream, 1);
  ps->refs = 1;             /* the stream's */
  ps->req = sandstepd_request_ref (req);
  ps->worker = sandstepd_worker_ref (lease->worker);
  ps->n_pipes = n_pipes;
  ps->last_line = last_line;
  ps->framing = framing;
  ps->detached = detached;
  req->keep_tees = detached;
  ps->fds[0] = ps->fds[1] = -1;
  for (guint i = 0; i < n_pipes; i++)
    {
      int fds[2];

      if (pipe2 (fds, O_CLOEXEC) < 0)
        {
          g_autoptr(GError) error = NULL;

          sandstep_throw_errno (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                "Cannot make a pipe");
          for (guint j = 0; j < i; j++)
            close (send[j]);
          if (stdin_fd >= 0)
            close (stdin_fd);
          if (step)
            sandstepd_lease_end (lease, "the server could not start the command", FALSE);
          sandstepd_answer_error (req, error);
          pipe_stream_unref (ps);
          return;
        }
      g_unix_set_fd_nonblocking (fds[0], TRUE, NULL);
      ps->fds[i] = fds[0];
      ps->numbers[i] = numbers[i];
      send[i] = fds[1];
    }
  n_send = n_pipes;
  if (stdin_fd >= 0)
    send[n_send++] = stdin_fd;
  if (step)
    {
      ps->step = lease;
      lease->refs++;
    }
  else if (held)
    {
      ps->held = lease;
      lease->refs++;
    }
  req->owner = ps;
  if (framing != NULL)
    req->keepalive_frame = framing->keepalive (&req->keepalive_len);
  sandstepd_stream_begin (req);
  if (framing != NULL)
    {
      gsize len = 0;
      char *bytes = framing->first (&len);

      soup_message_headers_set_content_type (soup_server_message_get_response_headers (req->msg),
                                             framing->content_type, NULL);
      sandstepd_stream_take (req, bytes, len);
    }
  req->on_gone = on_pipe_stream_gone;
  req->on_drained = on_pipe_stream_drained;
  if (owned_first != NULL)
    sandstepd_stream_object (req, owned_first);
  pipe_stream_watch (ps);
  ps->refs++;               /* the call's */
  ps->call = sandstepd_worker_call (lease->worker, op, g_steal_pointer (&owned), send, n_send,
                                    on_pipe_stream_replied, ps, (GDestroyNotify) pipe_stream_unref);
}

static void
pipe_stream_start (Request *req, Lease *lease, const char *op, JsonObject *message, guint n_pipes,
                   const int numbers[2], LastLine last_line)
{
  pipe_stream_start_full (req, lease, op, message, n_pipes, numbers, last_line, NULL, -1, FALSE, FALSE, FALSE,
                          NULL);
}

/* ---- run: stdout and stderr, then the command's result ---- */

static void
add_notice (const char *notice, gpointer data)
{
  g_ptr_array_add (data, g_strdup (notice));
}

static JsonObject *
run_last_line (JsonObject *reply)
{
  SandstepRunResult result = { 0 };
  g_autoptr(GPtrArray) notices = g_ptr_array_new_with_free_func (g_free);
  JsonObject *last;

  sandstep_wire_read_run_result (reply, &result);
  sandstep_wire_read_notices (reply, add_notice, notices);
  last = sandstep_wire_run_result (&result);
  sandstep_wire_set_notices (last, notices);
  return last;
}

void
sandstepd_handle_run (Request *req)
{
  static const int numbers[2] = { 1, 2 };
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(GError) error = NULL;
  const char *command;
  double timeout_s = 0;
  Lease *lease = sandstepd_claimed_body (req, &body);

  if (lease == NULL)
    return;
  if (!sandstep_wire_read_run_request (body, &command, &timeout_s, &error))
    {
      sandstepd_answer_bad_request (req, "send {claim, command, timeout_s}", error);
      return;
    }
  pipe_stream_start (req, lease, "run", sandstep_wire_run_request (NULL, command, timeout_s), 2, numbers,
                     run_last_line);
}

void
sandstepd_stream_step (Request *req, Lease *lease, JsonObject *first, JsonObject *message, int stdin_fd)
{
  static const int numbers[2] = { 1, 2 };

  pipe_stream_start_full (req, lease, "run", message, 2, numbers, run_last_line, first, stdin_fd, TRUE, FALSE, FALSE,
                          NULL);
}

void
sandstepd_stream_step_detached (Request *req, Lease *lease, JsonObject *message, const SandstepdFraming *framing,
                                int stdin_fd)
{
  static const int numbers[2] = { 1, 2 };

  pipe_stream_start_full (req, lease, "run", message, 2, numbers, run_last_line, NULL, stdin_fd, TRUE, FALSE, TRUE,
                          framing);
}

void
sandstepd_stream_op_framed (Request *req, Lease *lease, const char *op, JsonObject *message,
                            const SandstepdFraming *framing)
{
  static const int numbers[2] = { 1, 2 };

  pipe_stream_start_full (req, lease, op, message, 2, numbers, run_last_line, NULL, -1, FALSE, TRUE, FALSE, framing);
}

/* ---- export: the file's bytes, then the end ---- */

static JsonObject *
export_last_line (JsonObject *reply)
{
  return sandstep_wire_done_line ();
}

void
sandstepd_handle_export (Request *req)
{
  static const int numbers[2] = { 0, 0 };
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(GError) error = NULL;
  const char *path;
  guint64 max_bytes = 0;
  Lease *lease = sandstepd_claimed_body (req, &body);

  if (lease == NULL)
    return;
  if (!sandstep_wire_read_path_request (body, 0, &path, &max_bytes, &error))
    {
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return;
    }
  pipe_stream_start (req, lease, "export", sandstep_wire_path_request (NULL, path, (gint64) max_bytes), 1, numbers,
                     export_last_line);
}
