/* sandstep-python.c: run_python's session: one Python interpreter kept alive in the sandbox (see sandstep-python.h). */
#include "sandstep-python.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-json.h"
#include "sandstep-python-resources.h"
#include "sandstep-test-hooks.h"

/* A frame bigger than this is a broken protocol: the driver cuts values and
 * tracebacks at 4 MiB characters, and output comes in chunks of 64 KiB. */
#define MAX_FRAME (24 * 1024 * 1024)
#define MAX_HEADER 64
/* How long after a routed command's timeout the driver may take to report it. */
#define COMMAND_GRACE_S 10
/* How long after we stopped an interpreter the supervisor may still refuse the next. */
#define STOP_SETTLE_US (10 * G_USEC_PER_SEC)
/* The longest an interpreter may take to start. */
#define START_S 30
/* How long a driver may take to end after EOF on its stdin. */
#define STOP_GRACE_US (5 * G_USEC_PER_SEC)

typedef struct {
  SandstepAttachment *attachment;
  GThread *thread;
  GCancellable *cancellable;
  char *command;
  int in_r, in_w;             /* the driver's requests; in_r stays open here until the end, so writes never SIGPIPE */
  int out_r, out_w;           /* its frames; out_w is the thread's, closed when the command ended */
  int err_r, err_w;           /* the command's own stderr (before the driver takes fds 1 and 2) */
  GByteArray *buffer;         /* bytes of out_r not yet parsed */

  /* Under @lock: where the sandbox's notices (egress refusals) go while a
   * command runs through the driver; NULL: dropped. */
  SandstepPythonNotice notice;
  gpointer notice_data;

  /* Set by the thread, under @lock, when the command ended. */
  GMutex lock;
  gboolean finished;
  gboolean ok;
  SandstepRunResult result;
  GError *error;
} Interpreter;

struct _SandstepPythonSession {
  SandstepAttachment *attachment;
  SandstepPythonLimits limits;
  double used_s;
  guint64 next_id;
  gboolean died_before;       /* an interpreter of this session died: the next call says so */
  gint64 stopped_at;          /* when we last stopped one (monotonic), 0: never */
  Interpreter *interpreter;   /* NULL: none running */
};

void
sandstep_python_limits_init (SandstepPythonLimits *limits)
{
  limits->default_timeout_s = 60;
  limits->max_timeout_s = 300;
  limits->budget_s = 900;
}

void
sandstep_python_call_clear (SandstepPythonCall *call)
{
  g_clear_pointer (&call->value, g_free);
  g_clear_pointer (&call->error, g_free);
  g_clear_pointer (&call->failure, g_free);
  g_clear_pointer (&call->failure_detail, g_free);
}

/* ---- the interpreter: one command on a thread of its own ---- */

/* The driver comes as the first line on its stdin (a JSON string), so that
 * the command line stays short for `ps`; the reply to it is the hello. */
static const char *
driver_line (void)
{
  static gsize once;
  static char *source;

  if (g_once_init_enter (&once))
    {
      /* Named directly, so that the linker keeps the resource of this static library. */
      g_autoptr(GBytes) bytes = g_resource_lookup_data (sandstep_python_get_resource (), "/org/sandstep/python-driver.py",
                                                        0, NULL);
      /* A test's driver, that speaks the protocol wrong on purpose (build tree only). */
      const char *test_driver = sandstep_test_hook ("SANDSTEP_TEST_PYTHON_DRIVER");
      char *contents = NULL;
      gsize len = 0;

      if (test_driver != NULL && g_file_get_contents (test_driver, &contents, &len, NULL))
        {
          g_bytes_unref (bytes);
          bytes = g_bytes_new_take (contents, len);
        }
      /* Built into this program: missing means a broken build, caught by every run_python test. */
      g_assert (bytes != NULL);
      g_autofree char *text = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_VALUE);
      g_autofree char *json = NULL;

      json_node_set_string (node, text);
      json = json_to_string (node, FALSE);
      source = g_strconcat (json, "\n", NULL);
      g_once_init_leave (&once, 1);
    }
  return source;
}

/* The thread's: a notice of the supervisor (an egress refusal) for the command running now. */
static void
interpreter_notice (const char *message, gpointer user_data)
{
  Interpreter *interpreter = user_data;

  g_mutex_lock (&interpreter->lock);
  if (interpreter->notice != NULL)
    interpreter->notice (message, interpreter->notice_data);
  g_mutex_unlock (&interpreter->lock);
}

static gpointer
interpreter_thread (gpointer data)
{
  Interpreter *interpreter = data;
  SandstepRunRequest request = { 0 };
  SandstepRunResult result = { 0 };
  GError *error = NULL;
  gboolean ok;

  request.command = interpreter->command;
  /* No budget of its own: it idles between calls; each call's timeout and
   * the session's budget are kept by sandstep_python_session_run(). */
  request.timeout_s = 0;
  request.stdin_fd = interpreter->in_r;
  request.stdout_fd = interpreter->out_w;
  request.stderr_fd = interpreter->err_w;
  request.cancellable = interpreter->cancellable;
  request.on_notice = interpreter_notice;
  request.user_data = interpreter;
  ok = sandstep_attachment_run_command (interpreter->attachment, &request, &result, &error);

  g_mutex_lock (&interpreter->lock);
  interpreter->finished = TRUE;
  interpreter->ok = ok;
  interpreter->result = result;
  interpreter->error = error;
  g_mutex_unlock (&interpreter->lock);
  /* EOF for the reader: nothing writes to these any more. */
  close (interpreter->out_w);
  close (interpreter->err_w);
  return NULL;
}

static Interpreter *
interpreter_start (SandstepAttachment *attachment, GError **error)
{
  Interpreter *interpreter = g_new0 (Interpreter, 1);
  int in[2], out[2], err[2];

  if (pipe2 (in, O_CLOEXEC) != 0 || pipe2 (out, O_CLOEXEC) != 0 || pipe2 (err, O_CLOEXEC) != 0)
    {
      int errsv = errno;

      g_free (interpreter);
      sandstep_throw_errno (error, G_IO_ERROR, g_io_error_from_errno (errsv), errsv,
                            "Cannot make the pipes of a Python session");
      return NULL;
    }
  interpreter->in_r = in[0];
  interpreter->in_w = in[1];
  interpreter->out_r = out[0];
  interpreter->out_w = out[1];
  interpreter->err_r = err[0];
  interpreter->err_w = err[1];
  g_unix_set_fd_nonblocking (interpreter->in_w, TRUE, NULL);
  interpreter->buffer = g_byte_array_new ();
  interpreter->command = g_strdup ("exec python3 -u -c 'import json, sys; exec(compile(json.loads("
                                   "sys.stdin.buffer.readline()), \"sandstep-python-driver\", \"exec\"))'");
  interpreter->cancellable = g_cancellable_new ();
  interpreter->attachment = attachment;
  g_mutex_init (&interpreter->lock);
  interpreter->thread = g_thread_new ("sandstep-python", interpreter_thread, interpreter);
  return interpreter;
}

/* Ends it (when it still runs) with everything it started, and waits.  EOF
 * on its stdin first: the driver kills all it started and exits, so the
 * command ends as any does and the sandbox is free for the next at once.
 * Only a driver that does not end within STOP_GRACE_US is abandoned to the
 * supervisor (the cancellable), which kills it a moment later. */
static void
interpreter_stop (Interpreter *interpreter)
{
  gint64 deadline = g_get_monotonic_time () + STOP_GRACE_US;
  gboolean out_open = TRUE;

  if (interpreter == NULL)
    return;
  close (interpreter->in_w);
  interpreter->in_w = -1;
  /* Read on meanwhile: a driver blocked writing to us would never end. */
  while (interpreter->thread != NULL && out_open && g_get_monotonic_time () < deadline)
    {
      struct pollfd fds[2] = { { .fd = interpreter->out_r, .events = POLLIN },
                               { .fd = interpreter->err_r, .events = POLLIN } };
      char chunk[65536];

      if (poll (fds, 2, 50) > 0)
        {
          if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && read (interpreter->out_r, chunk, sizeof chunk) <= 0)
            out_open = FALSE;
          if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && read (interpreter->err_r, chunk, sizeof chunk) <= 0)
            fds[1].fd = -1;
        }
    }
  if (out_open)
    g_cancellable_cancel (interpreter->cancellable);
  if (interpreter->thread != NULL)
    g_thread_join (interpreter->thread);
  close (interpreter->in_r);
  if (interpreter->in_w >= 0)
    close (interpreter->in_w);
  close (interpreter->out_r);
  close (interpreter->err_r);
  g_byte_array_unref (interpreter->buffer);
  g_free (interpreter->command);
  g_object_unref (interpreter->cancellable);
  g_clear_error (&interpreter->error);
  g_mutex_clear (&interpreter->lock);
  g_free (interpreter);
}

/* ---- the session ---- */

SandstepPythonSession *
sandstep_python_session_new (SandstepAttachment *attachment, const SandstepPythonLimits *limits)
{
  SandstepPythonSession *session = g_new0 (SandstepPythonSession, 1);

  session->attachment = attachment;
  if (limits != NULL)
    session->limits = *limits;
  else
    sandstep_python_limits_init (&session->limits);
  return session;
}

void
sandstep_python_session_free (SandstepPythonSession *session)
{
  if (session == NULL)
    return;
  interpreter_stop (session->interpreter);
  g_free (session);
}

const SandstepPythonLimits *
sandstep_python_session_limits (SandstepPythonSession *session)
{
  return &session->limits;
}

double
sandstep_python_session_budget_left (SandstepPythonSession *session)
{
  return MAX (session->limits.budget_s - session->used_s, 0);
}

typedef enum {
  WAIT_RESULT,      /* the call's result came */
  WAIT_TIMEOUT,
  WAIT_ENDED,       /* the command ended (EOF on its stdout) */
  WAIT_BROKEN,      /* a frame we cannot read */
} WaitOutcome;

gboolean
sandstep_python_parse_frames (GByteArray *buffer, guint64 id, SandstepPythonCall *call, char **broken)
{
  for (;;)
    {
      /* An empty array may have no data at all, which memchr must not be given. */
      const guint8 *nl = buffer->len > 0 ? memchr (buffer->data, '\n', MIN (buffer->len, MAX_HEADER)) : NULL;
      g_autofree char *header = NULL;
      g_auto(GStrv) words = NULL;
      guint64 length = 0;
      const char *kind;
      gsize start;

      if (nl == NULL)
        {
          if (buffer->len >= MAX_HEADER)
            *broken = g_strdup ("a frame header is too long");
          return FALSE;
        }
      header = g_strndup ((const char *) buffer->data, nl - buffer->data);
      words = g_strsplit (header, " ", -1);
      kind = words[0];
      if (g_strv_length (words) < 2 ||
          !g_ascii_string_to_unsigned (words[g_strv_length (words) - 1], 10, 0, MAX_FRAME, &length, NULL) ||
          (strcmp (kind, "O") == 0) != (g_strv_length (words) == 3) ||
          (strcmp (kind, "O") != 0 && strcmp (kind, "R") != 0 && strcmp (kind, "H") != 0 && strcmp (kind, "D") != 0))
        {
          g_autofree char *shown = g_strescape (header, NULL);
          *broken = g_strdup_printf ("a frame header \"%s\" is not one of the protocol's", shown);
          return FALSE;
        }
      start = nl - buffer->data + 1;
      if (buffer->len - start < length)
        return FALSE;

      if (strcmp (kind, "O") == 0)
        {
          int stream = strcmp (words[1], "2") == 0 ? 2 : 1;
          if (call->on_output != NULL)
            call->on_output (stream, (const char *) buffer->data + start, length, call->output_data);
          else
            sandstep_capture_append (stream == 2 ? call->err : call->out, (const char *) buffer->data + start,
                                     length);
          g_byte_array_remove_range (buffer, 0, start + length);
          continue;
        }
      if (strcmp (kind, "D") == 0)
        {
          /* The interpreter died; the driver ends after this. */
          g_autoptr(JsonNode) root = sandstep_json_parse ((const char *) buffer->data + start, length, MAX_FRAME, NULL);

          call->died = TRUE;
          if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
            call->exit_status = (int) json_object_get_int_member_with_default (json_node_get_object (root), "exit", 0);
          g_byte_array_remove_range (buffer, 0, start + length);
          return TRUE;
        }
      if (strcmp (kind, "H") == 0)
        {
          g_byte_array_remove_range (buffer, 0, start + length);
          if (id == 0)
            return TRUE;
          continue;
        }
      {
        g_autoptr(GError) error = NULL;
        /* Bounded as every JSON input is: a deep one would crash json-glib's recursion, and with it this process. */
        g_autoptr(JsonNode) root = sandstep_json_parse ((const char *) buffer->data + start, length, MAX_FRAME, &error);
        JsonObject *object;

        g_byte_array_remove_range (buffer, 0, start + length);
        if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
          {
            *broken = g_strdup_printf ("a result is not a JSON object (%s)", error != NULL ? error->message : "");
            return FALSE;
          }
        object = json_node_get_object (root);
        if ((guint64) json_object_get_int_member_with_default (object, "id", 0) != id)
          continue;  /* the answer to a call that timed out: never, the interpreter went with it */
        call->value = g_strdup (json_object_get_string_member_with_default (object, "value", NULL));
        call->error = g_strdup (json_object_get_string_member_with_default (object, "error", NULL));
        if (json_object_has_member (object, "exit"))
          {
            call->command_exit = (int) json_object_get_int_member_with_default (object, "exit", 0);
            call->command_timed_out = json_object_get_boolean_member_with_default (object, "timedOut", FALSE);
          }
        return TRUE;
      }
    }
}

/* Writes @request (when not NULL) and reads frames until @id's result, the
 * deadline, the command's end or a broken frame. */
static WaitOutcome
wait_for (Interpreter *interpreter, const char *request, guint64 id, gint64 deadline, SandstepPythonCall *call,
          char **broken)
{
  gsize to_write = request != NULL ? strlen (request) : 0;
  gboolean out_open = TRUE, err_open = TRUE;
  int late = 0;

  if (sandstep_python_parse_frames (interpreter->buffer, id, call, broken))
    return WAIT_RESULT;
  if (*broken != NULL)
    return WAIT_BROKEN;
  while (out_open || err_open)
    {
      struct pollfd fds[3] = {
        { .fd = out_open ? interpreter->out_r : -1, .events = POLLIN },
        { .fd = err_open ? interpreter->err_r : -1, .events = POLLIN },
        { .fd = to_write > 0 ? interpreter->in_w : -1, .events = POLLOUT },
      };
      gint64 left = deadline - g_get_monotonic_time ();
      char chunk[65536];
      ssize_t n;
      int r;

      /* Past the deadline, what is there already still counts: an interpreter that ended (killed with its
       * sandbox, whose end left no time) is said to have died, not to have run out of time.  A few reads'
       * worth, so that one still writing cannot hold the call. */
      r = poll (fds, G_N_ELEMENTS (fds), left > 0 ? (int) MIN (left / 1000 + 1, G_MAXINT) : 0);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          *broken = g_strdup_printf ("poll failed: %s", g_strerror (errno));
          return WAIT_BROKEN;
        }
      if (left <= 0 && (r == 0 || ++late > 64))
        return WAIT_TIMEOUT;
      if (fds[2].revents & (POLLOUT | POLLERR))
        {
          n = write (interpreter->in_w, request, to_write);
          if (n > 0)
            {
              request += n;
              to_write -= n;
            }
          else if (n < 0 && errno != EAGAIN && errno != EINTR)
            {
              *broken = g_strdup_printf ("cannot write a request: %s", g_strerror (errno));
              return WAIT_BROKEN;
            }
        }
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR))
        {
          n = read (interpreter->err_r, chunk, sizeof chunk);
          if (n > 0 && call->err != NULL)
            sandstep_capture_append (call->err, chunk, n);
          else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            err_open = FALSE;
        }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
        {
          n = read (interpreter->out_r, chunk, sizeof chunk);
          if (n > 0)
            {
              if (interpreter->buffer->len + n > MAX_FRAME + MAX_HEADER)
                {
                  *broken = g_strdup ("a frame is over the size limit");
                  return WAIT_BROKEN;
                }
              g_byte_array_append (interpreter->buffer, (const guint8 *) chunk, n);
              if (sandstep_python_parse_frames (interpreter->buffer, id, call, broken))
                return WAIT_RESULT;
              if (*broken != NULL)
                return WAIT_BROKEN;
            }
          else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            out_open = FALSE;
        }
    }
  return WAIT_ENDED;
}

/* The command ended before the driver said hello: TRUE when the sandbox's
 * supervisor refused it because it was still ending the one stopped just
 * before (it runs one command at a time). */
static gboolean
interpreter_refused (Interpreter *interpreter)
{
  if (interpreter->thread != NULL)
    g_thread_join (g_steal_pointer (&interpreter->thread));
  return !interpreter->ok && g_error_matches (interpreter->error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE);
}

/* The interpreter ended on its own: how, into @call; then it is gone. */
static void
interpreter_ended (SandstepPythonSession *session, SandstepPythonCall *call)
{
  Interpreter *interpreter = g_steal_pointer (&session->interpreter);

  if (interpreter->thread != NULL)
    g_thread_join (g_steal_pointer (&interpreter->thread));
  if (!interpreter->ok)
    {
      call->failure = g_strdup ("the sandbox could not run the interpreter");
      call->failure_detail = g_strdup (interpreter->error != NULL ? interpreter->error->message : "no error given");
    }
  else
    {
      /* The driver said how the interpreter ended; else (python3 missing, the driver itself killed) the
       * command's status.  What the sandbox printed is in call->err. */
      if (!call->died)
        call->exit_status = interpreter->result.exit_status;
      call->died = TRUE;
      call->memory_limit_hit = interpreter->result.memory_limit_hit;
      call->pids_limit_hit = interpreter->result.pids_limit_hit;
    }
  session->died_before = TRUE;
  interpreter_stop (interpreter);
}

/* Did @interpreter's command end, or does it within @wait_us? */
static gboolean
interpreter_finishes (Interpreter *interpreter, gint64 wait_us)
{
  gint64 until = g_get_monotonic_time () + wait_us;

  for (;;)
    {
      gboolean finished;

      g_mutex_lock (&interpreter->lock);
      finished = interpreter->finished;
      g_mutex_unlock (&interpreter->lock);
      if (finished || g_get_monotonic_time () >= until)
        return finished;
      g_usleep (10 * 1000);
    }
}

/* One request: @object (its id is set here) for at most @timeout_s, after
 * starting an interpreter when none runs; @count: its time is the session's
 * budget's. */
static void
session_request (SandstepPythonSession *session, JsonObject *object, double timeout_s, gboolean count,
                 SandstepPythonCall *call)
{
  gint64 started = g_get_monotonic_time ();
  /* Starting an interpreter is not the code's time: a short timeout still gets one started. */
  gint64 deadline = started + (gint64) (MAX (timeout_s, START_S) * G_USEC_PER_SEC);
  g_autofree char *broken = NULL;
  g_autofree char *request = NULL;
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  WaitOutcome outcome;
  guint64 id;

  json_node_take_object (node, object);
  if (session->interpreter == NULL)
    {
      g_autoptr(GError) error = NULL;

      call->restarted = session->died_before;
      session->died_before = FALSE;
      for (;;)
        {
          session->interpreter = interpreter_start (session->attachment, &error);
          if (session->interpreter == NULL)
            {
              call->failure = g_strdup ("the interpreter could not be started");
              call->failure_detail = g_strdup (error->message);
              goto done;
            }
          outcome = wait_for (session->interpreter, driver_line (), 0, deadline, call, &broken);
          /* Right after we stopped one, the supervisor may still be ending it: ask again. */
          if (outcome == WAIT_ENDED && session->stopped_at > 0 &&
              g_get_monotonic_time () < MIN (deadline, session->stopped_at + STOP_SETTLE_US) &&
              interpreter_refused (session->interpreter))
            {
              interpreter_stop (g_steal_pointer (&session->interpreter));
              g_usleep (50 * 1000);
              continue;
            }
          break;
        }
      if (outcome != WAIT_RESULT)
        goto failed;
    }

  /* No time left (the sandbox's end came, which kills the interpreter): its end may still be on its way here; a
   * moment's wait for it says the interpreter died, not that the call ran out of time. */
  if (timeout_s <= 0 && interpreter_finishes (session->interpreter, 2 * G_USEC_PER_SEC))
    {
      interpreter_ended (session, call);
      goto done;
    }
  deadline = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);
  id = ++session->next_id;
  json_object_set_int_member (object, "id", (gint64) id);
  {
    /* Compact: one line, every newline of the code escaped. */
    g_autofree char *line = json_to_string (node, FALSE);
    request = g_strconcat (line, "\n", NULL);
  }
  outcome = wait_for (session->interpreter, request, id, deadline, call, &broken);
  if (outcome == WAIT_RESULT && call->died)
    {
      /* The driver ends after it said so: wait for the command's end, for the limits it hit. */
      interpreter_ended (session, call);
      goto done;
    }
  if (outcome == WAIT_RESULT)
    goto done;

failed:
  switch (outcome)
    {
    case WAIT_RESULT:
      break;
    case WAIT_TIMEOUT:
      call->timed_out = TRUE;
      session->died_before = TRUE;
      interpreter_stop (g_steal_pointer (&session->interpreter));
      session->stopped_at = g_get_monotonic_time ();
      break;
    case WAIT_ENDED:
      interpreter_ended (session, call);
      break;
    case WAIT_BROKEN:
      call->failure = g_strdup ("the session's protocol broke");
      call->failure_detail = g_steal_pointer (&broken);
      session->died_before = TRUE;
      interpreter_stop (g_steal_pointer (&session->interpreter));
      session->stopped_at = g_get_monotonic_time ();
      break;
    }

done:
  if (count)
    session->used_s += (g_get_monotonic_time () - started) / (double) G_USEC_PER_SEC;
}

gboolean
sandstep_python_check_env (JsonObject *env, GError **error)
{
  g_autoptr(GList) names = json_object_get_members (env);

  for (GList *l = names; l != NULL; l = l->next)
    {
      const char *name = l->data;
      JsonNode *value = json_object_get_member (env, name);
      gboolean ok = name[0] != '\0' && !g_ascii_isdigit (name[0]);

      for (const char *p = name; ok && *p != '\0'; p++)
        ok = g_ascii_isalnum (*p) || *p == '_';
      if (!ok)
        {
          g_autofree char *shown = sandstep_escape (name, -1, 100, SANDSTEP_ESCAPE_VALUE);
          return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                 "'%s' is no environment variable's name; use letters, digits and underscores, "
                                 "not starting with a digit", shown);
        }
      if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "The environment variable '%s' is not given a string; give each variable a string "
                               "value", name);
    }
  return TRUE;
}

void
sandstep_python_session_run (SandstepPythonSession *session, const char *code, JsonObject *env,
                             double timeout_s, SandstepPythonCall *call)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "code", code);
  if (env != NULL && json_object_get_size (env) > 0)
    json_object_set_object_member (object, "env", json_object_ref (env));
  session_request (session, object, timeout_s, TRUE, call);
}

gboolean
sandstep_python_session_alive (SandstepPythonSession *session)
{
  return session->interpreter != NULL;
}

static void
set_notice (Interpreter *interpreter, SandstepPythonNotice notice, gpointer notice_data)
{
  if (interpreter == NULL)
    return;
  g_mutex_lock (&interpreter->lock);
  interpreter->notice = notice;
  interpreter->notice_data = notice_data;
  g_mutex_unlock (&interpreter->lock);
}

void
sandstep_python_session_run_command (SandstepPythonSession *session, const char *command, double timeout_s,
                                     SandstepPythonCall *call, SandstepPythonNotice notice, gpointer notice_data)
{
  JsonObject *object = json_object_new ();
  Interpreter *interpreter = session->interpreter;

  json_object_set_string_member (object, "command", command);
  json_object_set_double_member (object, "timeout", timeout_s);
  set_notice (interpreter, notice, notice_data);
  /* The driver keeps the command's timeout; ours only catches a driver that no longer answers. */
  session_request (session, object, timeout_s + COMMAND_GRACE_S, FALSE, call);
  /* Still the same interpreter, unless it ended (and was freed) meanwhile. */
  if (session->interpreter == interpreter)
    set_notice (interpreter, NULL, NULL);
}

gboolean
sandstep_python_available (SandstepAttachment *attachment, gboolean *out_available, GError **error)
{
  SandstepRunRequest request = { 0 };
  SandstepRunResult result = { 0 };

  request.command = "command -v python3 >/dev/null";
  request.timeout_s = 30;
  request.stdin_fd = -1;
  request.stdout_fd = -1;
  request.stderr_fd = -1;
  if (!sandstep_attachment_run_command (attachment, &request, &result, error))
    return FALSE;
  *out_available = !result.timed_out && result.exit_status == 0;
  return TRUE;
}
