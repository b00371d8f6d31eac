/* sandstepd-envd.c: E2B's envd (the service inside an E2B sandbox) on sandstepd's sandboxes.
 *
 * The SDK calls envd over the Connect protocol with its JSON codec (it never asks for protobuf binary),
 * naming the sandbox in the E2b-Sandbox-Id header.  A server-streaming call (process.Process/Start) is
 * POSTed as application/connect+json: its body one envelope (a flags byte, a 4-byte big-endian length,
 * the JSON message); its answer envelopes of events, then one flagged end-of-stream that carries {} or
 * {"error": {code, message}}.  A command runs as a sandstep command does: a worker claims the sandbox
 * for it (so a sandbox runs one command at a time, as a make step's does) and it streams out as it comes.
 * Files (GET and POST /files, ListDir; Stat, Remove, Move and MakeDir as commands in the jail,
 * sandstepd-envd-jail.c) go through the same claim, one operation each, answered once the claim is gone.
 * List, SendSignal, Connect, SendInput and CloseStdin of commands claim nothing (sandstepd-envd-commands.c).
 * WatchDir claims the sandbox only to open the directory, then watches it claiming nothing (sandstepd-envd-watch.c).
 * What is not served answers Connect's "unimplemented" naming the call (docs/e2b.md).  Connect's framing is
 * sandstepd-envd-connect.c's, a claiming call's life (Envd) sandstepd-envd-job.c's: both below this file, which
 * they never call.
 */
#include "sandstepd-private.h"
#include "sandstepd-envd.h"

#include "sandstepd-e2b-answer.h"
#include "sandstepd-e2b-tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

/* Connect-Timeout-Ms is at most 10 digits (the protocol's rule). */
#define MAX_TIMEOUT_DIGITS 10

gboolean
sandstepd_envd_is_path (const char *path)
{
  return g_str_has_prefix (path, "/process.Process/") || g_str_has_prefix (path, "/filesystem.Filesystem/") ||
         strcmp (path, "/files") == 0 || strcmp (path, "/health") == 0;
}

/* ---- process.Process/Start: a command, its output streamed ---- */

/* The pid of the command whose stream starts now: a framing's first() takes no context, and
 * sandstepd_stream_step_detached() calls it before it returns (main loop only). */
static guint32 starting_pid;

static char *
start_first (gsize *out_len)
{
  JsonObject *start = json_object_new ();

  /* sandstepd's number for the command (sandstepd-envd-commands.c), not its pid in the sandbox. */
  json_object_set_int_member (start, "pid", starting_pid);
  return sandstepd_envd_event ("start", start, out_len);
}

static char *
start_data (int stream, const char *data, gsize len, gsize *out_len)
{
  JsonObject *d = json_object_new ();
  g_autofree char *b64 = g_base64_encode ((const guchar *) data, len);

  /* Protobuf's JSON carries bytes as base64. */
  json_object_set_string_member (d, stream == 2 ? "stderr" : "stdout", b64);
  return sandstepd_envd_event ("data", d, out_len);
}

static char *
start_last (JsonObject *reply, const GError *error, gsize *out_len)
{
  SandstepRunResult result = { 0 };
  g_autofree char *status = NULL;

  if (error != NULL)
    return sandstepd_envd_end_stream (sandstepd_envd_connect_code (error), error->message, out_len);
  sandstep_wire_read_run_result (reply, &result);
  if (result.timed_out)
    {
      g_autofree char *message = g_strdup_printf ("The command ran past its timeout of %g s and was killed",
                                                  result.applied_timeout_s);
      return sandstepd_envd_end_stream ("deadline_exceeded", message, out_len);
    }
  status = g_strdup_printf ("exit status %d", result.exit_status);
  /* sandstep's exit status is the shell's (128+N for signal N), and so is envd's exitCode. */
  return sandstepd_envd_end_event (result.exit_status, TRUE, status, out_len);
}

static char *
start_keepalive (gsize *out_len)
{
  return sandstepd_envd_event ("keepalive", json_object_new (), out_len);
}

static const SandstepdFraming start_framing = {
  CONNECT_STREAM_TYPE, start_first, start_data, start_last, start_keepalive,
};

static gboolean
is_env_name (const char *name)
{
  if (!g_ascii_isalpha (name[0]) && name[0] != '_')
    return FALSE;
  for (const char *p = name; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '_')
      return FALSE;
  return TRUE;
}

static const char *
string_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/* The shell command that runs StartRequest.process (cmd, args, envs, cwd) as sandstep runs a command
 * (/bin/sh -c): every word quoted, the environment exported, the directory entered first. */
static char *
shell_command (JsonObject *request, GError **error)
{
  JsonNode *node = json_object_get_member (request, "process");
  JsonObject *process;
  const char *cmd, *cwd;
  g_autoptr(GString) out = g_string_new (NULL);
  g_autofree char *quoted_cmd = NULL;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request has no 'process' object; send StartRequest {process: {cmd, args, envs, cwd}}");
      return NULL;
    }
  process = json_node_get_object (node);
  cmd = string_member (process, "cmd");
  if (cmd == NULL || cmd[0] == '\0')
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The process has no 'cmd'; send the program to run as process.cmd");
      return NULL;
    }
  node = json_object_get_member (process, "envs");
  if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObject *envs = json_node_get_object (node);
      g_autoptr(GList) names = json_object_get_members (envs);

      for (GList *l = names; l != NULL; l = l->next)
        {
          const char *value = string_member (envs, l->data);
          g_autofree char *quoted = NULL;

          if (!is_env_name (l->data) || value == NULL)
            {
              g_autofree char *shown = sandstep_escape (l->data, -1, 200, SANDSTEP_ESCAPE_VALUE);
              g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "The environment variable '%s' cannot be set: a name is letters, digits and '_' "
                           "(not first a digit) and its value a string", shown);
              return NULL;
            }
          quoted = g_shell_quote (value);
          g_string_append_printf (out, "export %s=%s; ", (const char *) l->data, quoted);
        }
    }
  cwd = string_member (process, "cwd");
  if (cwd != NULL && cwd[0] != '\0')
    {
      g_autofree char *quoted = g_shell_quote (cwd);
      g_string_append_printf (out, "cd -- %s || exit 1; ", quoted);
    }
  quoted_cmd = g_shell_quote (cmd);
  g_string_append_printf (out, "exec %s", quoted_cmd);
  node = json_object_get_member (process, "args");
  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *args = json_node_get_array (node);

      for (guint i = 0; i < json_array_get_length (args); i++)
        {
          JsonNode *arg = json_array_get_element (args, i);
          g_autofree char *quoted = NULL;

          if (!JSON_NODE_HOLDS_VALUE (arg) || json_node_get_value_type (arg) != G_TYPE_STRING)
            {
              g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "The process's argument %u is not a string", i);
              return NULL;
            }
          quoted = g_shell_quote (json_node_get_string (arg));
          g_string_append_printf (out, " %s", quoted);
        }
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* A write's next file (of job->more) made its path and fd: 1; 0 when none is left; -1 (@error) when its bytes
 * cannot be held.  One file's memfd at a time, however many the body holds. */
static int
next_write (Envd *job, GError **error)
{
  g_autoptr(EnvdFile) file = NULL;
  int fd;

  if (job->more == NULL || job->more->len == 0)
    return 0;
  file = g_ptr_array_steal_index (job->more, 0);
  fd = sandstepd_envd_file_memfd (file, error);
  if (fd < 0)
    return -1;
  g_free (job->path);
  job->path = g_steal_pointer (&file->path);
  if (job->fd >= 0)
    close (job->fd);
  job->fd = fd;
  return 1;
}

static void start_write (Envd *job);

static void
on_files_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Envd *job = call->data;

  if (error != NULL)
    {
      sandstepd_envd_files_finish (job, error);
      return;
    }
  if (job->op == ENVD_READ)
    {
      g_autoptr(GMappedFile) mapped = NULL;
      g_autoptr(GError) map_error = NULL;

      if (reply_fd < 0)
        map_error = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                 "The worker read '%s' but passed nothing back", job->path);
      else if (lseek (reply_fd, 0, SEEK_END) == 0)
        job->answer = g_bytes_new_static ("", 0);
      else if ((mapped = g_mapped_file_new_from_fd (reply_fd, FALSE, &map_error)) != NULL)
        job->answer = g_mapped_file_get_bytes (mapped);
      job->status = SOUP_STATUS_OK;
      job->content_type = "application/octet-stream";
      sandstepd_envd_files_finish (job, map_error);
      return;
    }
  if (job->op == ENVD_WRITE)
    {
      g_autofree char *name = g_path_get_basename (job->path);
      g_autoptr(JsonNode) node = NULL;
      JsonObject *o = json_object_new ();

      /* The HTTP /files API says "file", not the protobuf enum. */
      json_object_set_string_member (o, "name", name);
      json_object_set_string_member (o, "type", "file");
      json_object_set_string_member (o, "path", job->path);
      if (job->written == NULL)
        job->written = json_array_new ();
      json_array_add_object_element (job->written, o);
      /* Several files: each in turn, under this claim; the first that fails ends the call, saying which (those
       * before it stay written). */
      {
        g_autoptr(GError) next_error = NULL;
        int next = next_write (job, &next_error);

        if (next > 0 && (job->lease->ended || job->lease->worker == NULL))
          next_error = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                    "The claim on sandbox '%s' ended before '%s' was written; write it again",
                                    job->req->handle, job->path);
        if (next_error != NULL)
          {
            sandstepd_envd_files_finish (job, next_error);
            return;
          }
        if (next > 0)
          {
            start_write (job);
            return;
          }
      }
      node = json_node_new (JSON_NODE_ARRAY);
      json_node_take_array (node, g_steal_pointer (&job->written));
      sandstepd_envd_answer_json (job, node);
      sandstepd_envd_files_finish (job, NULL);
      return;
    }
  /* list: the entries of a directory. */
  {
    g_autoptr(GPtrArray) entries = sandstep_wire_read_entries (reply);
    g_autoptr(JsonObject) answer = json_object_new ();
    g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
    JsonArray *array = json_array_new ();

    for (guint i = 0; i < entries->len; i++)
      {
        const SandstepDirEntry *e = entries->pdata[i];
        json_array_add_object_element (array, sandstepd_envd_entry_info (job->path, e->name, e->is_dir));
      }
    json_object_set_array_member (answer, "entries", array);
    json_node_set_object (node, answer);
    sandstepd_envd_answer_json (job, node);
    sandstepd_envd_files_finish (job, NULL);
  }
}

/* Writes job->path from job->fd, under the claim its lease holds. */
static void
start_write (Envd *job)
{
  int fd = g_steal_fd (&job->fd);

  sandstepd_worker_call (job->lease->worker, "write", sandstep_wire_path_request (NULL, job->path, -1), &fd, 1,
                         on_files_done, sandstepd_envd_ref (job), (GDestroyNotify) sandstepd_envd_unref);
}

static void
on_forked (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Envd *job = call->data;
  g_autoptr(GPtrArray) handles = error == NULL ? sandstep_wire_read_strings (reply, "handles") : NULL;
  g_autoptr(GError) none = NULL;

  if (error == NULL && (handles == NULL || handles->len != 1))
    error = none = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                "The worker forked '%s' but named no fork", job->req->handle);
  if (error == NULL)
    job->fork_handle = g_strdup (handles->pdata[0]);
  sandstepd_envd_files_finish (job, error);
}

/* WatchDir: the worker opened the directory (and the root of the sandbox's files).  The watch starts while the
 * claim is still held, so that no fork can move the files unseen between the two; then the claim goes. */
static void
on_directory_opened (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Envd *job = call->data;
  g_autoptr(GError) none = NULL;

  SandstepWatchedDir dir = { reply_fd, g_steal_fd (&call->more_fds[0]), g_steal_fd (&call->more_fds[1]),
                             g_steal_fd (&call->more_fds[2]) };

  if (error == NULL && (dir.dir < 0 || dir.root < 0 || (dir.keep < 0) != (dir.jail < 0)))
    error = none = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                "The worker opened '%s' but passed back too little to watch it; watch it again",
                                job->path);
  /* The directory is watched through reply_fd, which the worker's channel closes once this returns. */
  if (error == NULL && !job->req->finished)
    sandstepd_envd_watch_start (job->req, job->req->handle, job->path, &dir, job->recursive);
  dir.dir = -1;
  sandstep_watched_dir_clear (&dir);
  sandstepd_envd_files_finish (job, error);
}

static void
on_attached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Envd *job = call->data;
  Lease *lease = job->lease;
  Request *req = job->req;

  if (error != NULL)
    {
      sandstepd_lease_abandon (lease);
      sandstepd_envd_fail (job, sandstepd_envd_connect_code (error), error->message);
      return;
    }
  sandstepd_lease_activate (lease);
  if (req->finished)
    {
      sandstepd_lease_end (lease, "the E2B call's connection closed while attaching", TRUE);
      return;
    }
  switch (job->op)
    {
    case ENVD_PS:
    case ENVD_SIGNAL:
    case ENVD_CONNECT:
    case ENVD_INPUT:
    case ENVD_CLOSE_STDIN:
      g_assert_not_reached ();
    case ENVD_WATCH:
      /* The claim only opens the directory: the watch holds no claim, so the sandbox's other calls go on. */
      sandstepd_worker_call (lease->worker, "open-directory", sandstep_wire_path_request (NULL, job->path, -1), NULL,
                             0, on_directory_opened, sandstepd_envd_ref (job), (GDestroyNotify) sandstepd_envd_unref);
      return;
    case ENVD_FORK:
      sandstepd_worker_call (lease->worker, "fork", sandstep_wire_fork_request (NULL, job->fork_holder, 1), NULL, 0,
                             on_forked, sandstepd_envd_ref (job), (GDestroyNotify) sandstepd_envd_unref);
      return;
    case ENVD_START:
      {
        int stdin_pipe[2] = { -1, -1 };

        /* stdin: true: the command reads a pipe whose write end SendInput writes and CloseStdin closes. */
        if (job->stdin && pipe2 (stdin_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
          {
            int errsv = errno;
            g_autofree char *message = g_strdup_printf ("Cannot make the command's stdin pipe: %s",
                                                        g_strerror (errsv));
            sandstepd_lease_end (lease, "the server could not start the command", FALSE);
            sandstepd_envd_fail (job, "internal", message);
            return;
          }
        /* The command's end blocks on a read: only the write end is non-blocking. */
        if (stdin_pipe[0] >= 0)
          fcntl (stdin_pipe[0], F_SETFL, fcntl (stdin_pipe[0], F_GETFL) & ~O_NONBLOCK);
        starting_pid = sandstepd_envd_command_add (req, job->process, job->tag, lease);
        sandstepd_envd_command_set_stdin (starting_pid, stdin_pipe[1]);
        /* As envd's, the command outlives the call that started it (commands.connect finds it again). */
        sandstepd_stream_step_detached (req, lease, sandstep_wire_run_request (NULL, job->command, job->timeout_s),
                                        &start_framing, stdin_pipe[0]);
      }
      return;
    case ENVD_READ:
      sandstepd_worker_call (lease->worker, "read",
                             sandstep_wire_path_request (NULL, job->path, SANDSTEP_DEFAULT_READ_MAX), NULL, 0,
                             on_files_done, sandstepd_envd_ref (job), (GDestroyNotify) sandstepd_envd_unref);
      return;
    case ENVD_WRITE:
      start_write (job);
      return;
    case ENVD_LIST:
      sandstepd_worker_call (lease->worker, "list", sandstep_wire_path_request (NULL, job->path, -1), NULL, 0,
                             on_files_done, sandstepd_envd_ref (job), (GDestroyNotify) sandstepd_envd_unref);
      return;
    case ENVD_STAT:
    case ENVD_REMOVE:
    case ENVD_MOVE:
    case ENVD_MKDIR:
      sandstepd_envd_fs_start (job);
      return;
    }
}

static void
owner_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Envd *job = data;

  job->owner = sandstepd_e2b_owner_of (job->req, job->req->handle, &job->error);
  g_task_return_boolean (task, TRUE);
}

/* GET /health: envd answers 204 while its sandbox runs; E2B's proxy answers 502 for one that is gone, which the
 * SDK's isRunning() reads as false.  Looked up off the main loop, claiming nothing, so it answers beside a
 * running command. */
static void
health_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Request *req = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = sandstepd_e2b_covered (req, req->handle, &error);
  const SandstepListEntry *entry = entries != NULL && entries->len > 0 ? entries->pdata[0] : NULL;

  if (entries == NULL)
    g_task_return_error (task, g_steal_pointer (&error));
  else
    g_task_return_boolean (task, entry != NULL && entry->condition != SANDSTEP_CONDITION_EXPIRED &&
                                   entry->condition != SANDSTEP_CONDITION_BROKEN);
}

static void
health_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Request *req = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  gboolean runs = g_task_propagate_boolean (G_TASK (result), &error);

  if (error != NULL)
    sandstepd_envd_answer_unary_error (req, sandstepd_envd_connect_code (error), error->message);
  else if (runs)
    sandstepd_e2b_answer (req, SOUP_STATUS_NO_CONTENT, NULL, NULL, 0);
  else
    {
      g_autofree char *message = sandstepd_e2b_not_found (req->handle, FALSE);
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_GATEWAY, "%s", message);
    }
}

static void
owner_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Envd *job = g_task_get_task_data (G_TASK (result));
  Request *req = job->req;
  SandstepIdentity who = { NULL, NULL, NULL };
  g_autoptr(GError) error = NULL;
  Worker *w;

  if (job->error != NULL)
    {
      sandstepd_envd_fail (job, sandstepd_envd_connect_code (job->error), job->error->message);
      return;
    }
  /* List, SendSignal, Connect, SendInput and CloseStdin use the commands that run; they claim nothing (the
   * command holds the claim). */
  if (job->op == ENVD_PS)
    {
      g_autoptr(JsonObject) answer = sandstepd_envd_command_list (req->handle);
      sandstepd_answer_json (req, SOUP_STATUS_OK, answer);
      return;
    }
  if (job->op == ENVD_CONNECT)
    {
      if (!sandstepd_envd_command_connect (req->handle, job->selector, req))
        sandstepd_envd_answer_stream_error (req, "not_found",
                                            "No command with that pid runs in the sandbox: it ended, or was "
                                            "killed; commands.list() shows those that run");
      return;
    }
  if (job->op == ENVD_INPUT || job->op == ENVD_CLOSE_STDIN)
    {
      g_autofree char *message = NULL;
      const char *code = sandstepd_envd_command_input (req->handle, job->selector, job->input, &message);
      g_autoptr(JsonObject) answer = json_object_new ();

      if (code != NULL)
        sandstepd_envd_answer_unary_error (req, code, message);
      else
        sandstepd_answer_json (req, SOUP_STATUS_OK, answer);
      return;
    }
  if (job->op == ENVD_SIGNAL)
    {
      g_autoptr(JsonObject) answer = json_object_new ();

      if (!sandstepd_envd_command_kill (req->handle, job->selector))
        sandstepd_envd_answer_unary_error (req, "not_found",
                                           "No command with that pid runs in the sandbox: it ended, or was "
                                           "killed; commands.list() shows those that run");
      else
        sandstepd_answer_json (req, SOUP_STATUS_OK, answer);
      return;
    }
  w = sandstepd_worker_take (req->d, &error);
  if (w == NULL)
    {
      sandstepd_envd_fail (job, "resource_exhausted", error->message);
      return;
    }
  /* A snapshot's fork moves the files: under a name of its own, which no call beside E2B's others takes for
   * theirs. */
  job->holder = job->op == ENVD_FORK ? g_strconcat (job->owner, "/e2b-snapshot", NULL)
                                     : sandstepd_e2b_holder (job->owner);
  who.owner = job->owner;
  who.holder = job->holder;
  job->lease = sandstepd_lease_new (req, &who, w);
  {
    JsonObject *attach = sandstep_wire_attach_request (req->handle, &who);
    /* E2B's SDK never asks again: a command that has just ended may still hold the claim for a moment (its end
     * comes back through its own worker), so the next call waits that long rather than failing as busy. */
    json_object_set_double_member (attach, "wait", SANDSTEP_BESIDE_WAIT_S);
    /* Beside the sandbox's other envd calls (they share this holder): a command, a file call beside a command
     * that runs.  Not a fork, which moves the files and waits for them all to end. */
    json_object_set_boolean_member (attach, "beside", job->op != ENVD_FORK);
    sandstepd_worker_call (w, "attach", attach, NULL, 0, on_attached, sandstepd_envd_ref (job),
                           (GDestroyNotify) sandstepd_envd_unref);
  }
}

/* Finds the sandbox's owner off the main loop, claims the sandbox, then does @job. */
static void
envd_go (Envd *job)
{
  g_autoptr(GTask) task = g_task_new (NULL, NULL, owner_done, NULL);

  g_task_set_task_data (task, job, (GDestroyNotify) sandstepd_envd_unref);
  g_task_run_in_thread (task, owner_thread);
}

static double
connect_timeout_s (Request *req)
{
  const char *value = soup_message_headers_get_one (soup_server_message_get_request_headers (req->msg),
                                                    "Connect-Timeout-Ms");
  gsize n = value != NULL ? strlen (value) : 0;

  if (n == 0 || n > MAX_TIMEOUT_DIGITS || strspn (value, "0123456789") != n)
    return 0;
  return g_ascii_strtod (value, NULL) / 1000.0;
}


/* A streaming call's one request message, or NULL once answered why not: the body must be a Connect stream. */
static JsonObject *
read_stream_request (Request *req)
{
  const char *content_type = soup_message_headers_get_content_type (
    soup_server_message_get_request_headers (req->msg), NULL);
  g_autoptr(GError) error = NULL;
  JsonObject *request;

  if (g_strcmp0 (content_type, CONNECT_STREAM_TYPE) != 0)
    {
      g_autofree char *shown = sandstep_escape (content_type != NULL ? content_type : "(none)", -1, 200,
                                                SANDSTEP_ESCAPE_VALUE);
      g_autofree char *message = g_strdup_printf ("%s takes a body of type " CONNECT_STREAM_TYPE ", not '%s'",
                                                  req->path, shown);
      sandstepd_envd_answer_stream_error (req, "invalid_argument", message);
      return NULL;
    }
  request = sandstepd_envd_read_envelope (req->body->data, req->body->len, &error);
  if (request == NULL)
    sandstepd_envd_answer_stream_error (req, "invalid_argument", error->message);
  return request;
}

static void
handle_start (Request *req)
{
  g_autoptr(JsonObject) request = read_stream_request (req);
  g_autoptr(GError) error = NULL;
  JsonNode *stdin_node;
  Envd *job;

  if (request == NULL)
    return;
  stdin_node = json_object_get_member (request, "stdin");
  if (json_object_has_member (request, "pty"))
    {
      sandstepd_envd_answer_stream_error (req, "unimplemented",
                                          "PTYs are not served by sandstepd's E2B envd; run the command "
                                          "without one (commands.run)");
      return;
    }
  job = sandstepd_envd_new (req, ENVD_START);
  job->command = shell_command (request, &error);
  if (job->command != NULL)
    {
      job->process = json_object_ref (json_object_get_object_member (request, "process"));
      job->tag = g_strdup (string_member (request, "tag"));
    }
  if (job->command == NULL)
    {
      sandstepd_envd_answer_stream_error (req, "invalid_argument", error->message);
      sandstepd_envd_unref (job);
      return;
    }
  job->timeout_s = connect_timeout_s (req);
  job->stdin = stdin_node != NULL && JSON_NODE_HOLDS_VALUE (stdin_node) &&
               json_node_get_value_type (stdin_node) == G_TYPE_BOOLEAN && json_node_get_boolean (stdin_node);
  envd_go (job);
}

void
sandstepd_envd_fork (Request *req, const char *handle, const char *holder, EnvdForked forked, gpointer data,
                     GDestroyNotify destroy)
{
  Envd *job = sandstepd_envd_new (req, ENVD_FORK);

  g_free (req->handle);
  req->handle = g_strdup (handle);
  job->fork_holder = g_strdup (holder);
  job->forked = forked;
  job->forked_data = data;
  job->forked_destroy = destroy;
  envd_go (job);
}

/* process.Process/Connect ({process: selector}, streaming): what a running command streams from now on. */
static void
handle_connect (Request *req)
{
  g_autoptr(JsonObject) request = read_stream_request (req);
  JsonNode *selector;
  Envd *job;

  if (request == NULL)
    return;
  selector = json_object_get_member (request, "process");
  if (selector == NULL || !JSON_NODE_HOLDS_OBJECT (selector))
    {
      sandstepd_envd_answer_stream_error (req, "invalid_argument",
                                          "The request has no 'process'; name the command as {process: {pid: N}} "
                                          "or {process: {tag: T}}");
      return;
    }
  job = sandstepd_envd_new (req, ENVD_CONNECT);
  job->selector = json_object_ref (json_node_get_object (selector));
  envd_go (job);
}

/* filesystem.Filesystem/WatchDir ({path, recursive}, streaming): the directory's events, as they come. */
static void
handle_watch (Request *req)
{
  g_autoptr(JsonObject) request = read_stream_request (req);
  JsonNode *recursive;
  const char *path;
  Envd *job;

  if (request == NULL)
    return;
  path = string_member (request, "path");
  if (path == NULL || path[0] == '\0')
    {
      sandstepd_envd_answer_stream_error (req, "invalid_argument",
                                          "The request has no 'path'; name the directory to watch");
      return;
    }
  recursive = json_object_get_member (request, "recursive");
  job = sandstepd_envd_new (req, ENVD_WATCH);
  job->path = g_strdup (path);
  job->recursive = recursive != NULL && JSON_NODE_HOLDS_VALUE (recursive) &&
                   json_node_get_value_type (recursive) == G_TYPE_BOOLEAN && json_node_get_boolean (recursive);
  envd_go (job);
}

/* The query's "path" of GET and POST /files, or NULL. */
static char *
query_path (Request *req)
{
  GUri *uri = soup_server_message_get_uri (req->msg);
  g_autoptr(GHashTable) query = NULL;
  const char *path;

  if (uri == NULL || g_uri_get_query (uri) == NULL)
    return NULL;
  query = soup_form_decode (g_uri_get_query (uri));
  path = g_hash_table_lookup (query, "path");
  return path != NULL && path[0] != '\0' ? g_strdup (path) : NULL;
}

static void
handle_files (Request *req)
{
  g_autofree char *path = query_path (req);
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(GError) error = NULL;
  guint status = 0;
  Envd *job;

  if (strcmp (req->method, "GET") == 0)
    {
      if (path == NULL)
        {
          sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "GET /files: no path; add ?path=PATH");
          return;
        }
      job = sandstepd_envd_new (req, ENVD_READ);
      job->path = g_steal_pointer (&path);
      envd_go (job);
      return;
    }
  if (strcmp (req->method, "POST") != 0)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_METHOD_NOT_ALLOWED, "%s /files is not served; use GET or POST",
                           req->method);
      return;
    }
  files = sandstepd_envd_body_files (req, path, &status, &error);
  if (files == NULL)
    {
      sandstepd_e2b_error (req, status, "%s", error->message);
      return;
    }
  job = sandstepd_envd_new (req, ENVD_WRITE);
  /* The first now, the rest in turn under the same claim (next_write()). */
  job->more = g_steal_pointer (&files);
  if (next_write (job, &error) < 0)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "%s", error->message);
      sandstepd_envd_unref (job);
      return;
    }
  envd_go (job);
}

/* filesystem.Filesystem's unary calls (ListDir, Stat, Remove, MakeDir; Move): a JSON body with a path (a
 * source and a destination). */
static void
handle_filesystem (Request *req, EnvdOp op)
{
  const char *content_type = soup_message_headers_get_content_type (
    soup_server_message_get_request_headers (req->msg), NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) request = NULL;
  const char *path, *dest;
  Envd *job;

  if (g_strcmp0 (content_type, "application/json") != 0)
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument",
                                         "filesystem.Filesystem's calls take application/json");
      return;
    }
  request = sandstep_wire_parse_object ((const char *) req->body->data, req->body->len, &error);
  if (request == NULL)
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument", error->message);
      return;
    }
  /* Move names its paths source and destination. */
  path = string_member (request, op == ENVD_MOVE ? "source" : "path");
  if (path == NULL || path[0] == '\0')
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument",
                                         op == ENVD_MOVE
                                           ? "The request has no 'source'; name the file or directory to move"
                                           : "The request has no 'path'; name the file or directory");
      return;
    }
  dest = op == ENVD_MOVE ? string_member (request, "destination") : NULL;
  if (op == ENVD_MOVE && (dest == NULL || dest[0] == '\0'))
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument",
                                         "The request has no 'destination'; name where to move it");
      return;
    }
  job = sandstepd_envd_new (req, op);
  job->path = g_strdup (path);
  job->dest = g_strdup (dest);
  envd_go (job);
}

/* process.Process's unary calls that need no claim: List ({}), SendSignal ({process: selector, signal}). */
static void
handle_process (Request *req, EnvdOp op)
{
  const char *content_type = soup_message_headers_get_content_type (
    soup_server_message_get_request_headers (req->msg), NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) request = NULL;
  JsonNode *selector;
  Envd *job;

  if (g_strcmp0 (content_type, "application/json") != 0)
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument",
                                         "process.Process's unary calls take application/json");
      return;
    }
  request = sandstep_wire_parse_object ((const char *) req->body->data, req->body->len, &error);
  if (request == NULL)
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument", error->message);
      return;
    }
  selector = json_object_get_member (request, "process");
  if (op != ENVD_PS && (selector == NULL || !JSON_NODE_HOLDS_OBJECT (selector)))
    {
      sandstepd_envd_answer_unary_error (req, "invalid_argument",
                                         "The request has no 'process'; name the command as "
                                         "{process: {pid: N}} or {process: {tag: T}}");
      return;
    }
  job = sandstepd_envd_new (req, op);
  if (op != ENVD_PS)
    job->selector = json_object_ref (json_node_get_object (selector));
  if (op == ENVD_INPUT)
    {
      /* ProcessInput {stdin: BASE64}; a PTY's input has no PTY here. */
      JsonNode *input = json_object_get_member (request, "input");
      JsonObject *o = input != NULL && JSON_NODE_HOLDS_OBJECT (input) ? json_node_get_object (input) : NULL;
      const char *b64 = o != NULL ? string_member (o, "stdin") : NULL;
      gsize len = 0;
      guchar *bytes;

      if (b64 == NULL)
        {
          sandstepd_envd_answer_unary_error (req, o != NULL && json_object_has_member (o, "pty") ? "unimplemented"
                                                                                                 : "invalid_argument",
                                             o != NULL && json_object_has_member (o, "pty")
                                               ? "A PTY's input is not served: sandstepd's E2B envd has no PTYs"
                                               : "The request has no 'input.stdin'; send {process: {pid: N}, "
                                                 "input: {stdin: BASE64}}");
          sandstepd_envd_unref (job);
          return;
        }
      bytes = g_base64_decode (b64, &len);
      job->input = g_bytes_new_take (bytes, len);
    }
  envd_go (job);
}

/* ---- signed URLs (uploadUrl(), downloadUrl()): GET and POST /files naming no sandbox ---- */

typedef struct {
  Request *req;
  char *path;
  char *user;
  char *signature;
  char *expiration;
  const char *operation;
  char *handle;             /* found */
  GError *error;
} Signed;

static void
signed_free (Signed *job)
{
  sandstepd_request_unref (job->req);
  g_free (job->path);
  g_free (job->user);
  g_free (job->signature);
  g_free (job->expiration);
  g_free (job->handle);
  g_clear_error (&job->error);
  g_free (job);
}

static void
signed_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Signed *job = data;

  job->handle = sandstepd_e2b_signed_sandbox (job->req->d, job->path, job->operation, job->user, job->signature,
                                              job->expiration, &job->error);
  g_task_return_boolean (task, TRUE);
}

static void
signed_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Signed *job = g_task_get_task_data (G_TASK (result));

  if (job->handle == NULL)
    {
      sandstepd_say ("refused %s /files (signed): %s", job->req->method, job->error->message);
      sandstepd_e2b_error (job->req, SOUP_STATUS_UNAUTHORIZED, "%s", job->error->message);
      return;
    }
  /* From here on it is that sandbox's GET or POST /files, with the same path rules as files.read/write. */
  sandstepd_e2b_grant_sandbox (job->req, job->handle);
  handle_files (job->req);
}

/* A signed URL's request: the sandbox is the one whose envd access token made its signature. */
static void
handle_signed_files (Request *req)
{
  SoupServerMessage *msg = req->msg;
  GUri *uri = soup_server_message_get_uri (msg);
  g_autoptr(GHashTable) query = uri != NULL && g_uri_get_query (uri) != NULL ? soup_form_decode (g_uri_get_query (uri))
                                                                             : NULL;
  const char *path = query != NULL ? g_hash_table_lookup (query, "path") : NULL;
  const char *user = query != NULL ? g_hash_table_lookup (query, "username") : NULL;
  g_autoptr(GTask) task = NULL;
  Signed *job;

  if (strcmp (req->method, "GET") != 0 && strcmp (req->method, "POST") != 0)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_METHOD_NOT_ALLOWED,
                           "%s of a signed /files URL is not served; GET a downloadUrl(), POST an uploadUrl()",
                           req->method);
      return;
    }
  /* The signature covers the query's path alone: a multipart file's name cannot stand in for it. */
  if (path == NULL || path[0] == '\0')
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST,
                           "A signed /files URL names no path; make it with uploadUrl(path) or downloadUrl(path)");
      return;
    }
  job = g_new0 (Signed, 1);
  job->req = sandstepd_request_ref (req);
  job->path = g_strdup (path);
  job->user = g_strdup (user != NULL ? user : "");
  job->signature = g_strdup (g_hash_table_lookup (query, "signature"));
  job->expiration = g_strdup (g_hash_table_lookup (query, "signature_expiration"));
  job->operation = strcmp (req->method, "GET") == 0 ? "read" : "write";
  task = g_task_new (NULL, NULL, signed_done, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) signed_free);
  g_task_run_in_thread (task, signed_thread);
}

void
sandstepd_handle_envd (Request *req)
{
  const char *id = soup_message_headers_get_one (soup_server_message_get_request_headers (req->msg),
                                                 "E2b-Sandbox-Id");
  const char *content_type = soup_message_headers_get_content_type (
    soup_server_message_get_request_headers (req->msg), NULL);
  gboolean streaming = g_strcmp0 (content_type, CONNECT_STREAM_TYPE) == 0;
  g_autofree char *message = NULL;

  if (sandstepd_e2b_is_signed (req->scope))
    {
      handle_signed_files (req);
      return;
    }
  if (strcmp (req->path, "/health") == 0 && strcmp (req->method, "GET") == 0 && id != NULL &&
      sandstep_handle_is_local (id))
    {
      g_autoptr(GTask) task = g_task_new (NULL, NULL, health_done, NULL);

      g_free (req->handle);
      req->handle = g_strdup (id);
      g_task_set_task_data (task, sandstepd_request_ref (req), (GDestroyNotify) sandstepd_request_unref);
      g_task_run_in_thread (task, health_thread);
      return;
    }
  if (id == NULL || !sandstep_handle_is_local (id))
    {
      message = sandstepd_e2b_not_found (id, TRUE);
      if (streaming)
        sandstepd_envd_answer_stream_error (req, "not_found", message);
      else
        sandstepd_envd_answer_unary_error (req, "not_found", message);
      return;
    }
  g_free (req->handle);
  req->handle = g_strdup (id);
  if (strcmp (req->path, "/process.Process/Start") == 0)
    handle_start (req);
  else if (strcmp (req->path, "/files") == 0)
    handle_files (req);
  else if (strcmp (req->path, "/filesystem.Filesystem/ListDir") == 0)
    handle_filesystem (req, ENVD_LIST);
  else if (strcmp (req->path, "/filesystem.Filesystem/Stat") == 0)
    handle_filesystem (req, ENVD_STAT);
  else if (strcmp (req->path, "/filesystem.Filesystem/Remove") == 0)
    handle_filesystem (req, ENVD_REMOVE);
  else if (strcmp (req->path, "/filesystem.Filesystem/Move") == 0)
    handle_filesystem (req, ENVD_MOVE);
  else if (strcmp (req->path, "/filesystem.Filesystem/MakeDir") == 0)
    handle_filesystem (req, ENVD_MKDIR);
  else if (strcmp (req->path, "/process.Process/List") == 0)
    handle_process (req, ENVD_PS);
  else if (strcmp (req->path, "/process.Process/SendSignal") == 0)
    handle_process (req, ENVD_SIGNAL);
  else if (strcmp (req->path, "/process.Process/SendInput") == 0)
    handle_process (req, ENVD_INPUT);
  else if (strcmp (req->path, "/process.Process/CloseStdin") == 0)
    handle_process (req, ENVD_CLOSE_STDIN);
  else if (strcmp (req->path, "/process.Process/Connect") == 0)
    handle_connect (req);
  else if (strcmp (req->path, "/filesystem.Filesystem/WatchDir") == 0)
    handle_watch (req);
  else
    {
      const char *why = "";

      if (strcmp (req->path, "/process.Process/StreamInput") == 0)
        why = ": a client stream of stdin is not served; send it with SendInput (commands.sendStdin)";
      else if (strcmp (req->path, "/process.Process/Update") == 0)
        why = ": PTYs are not served";
      message = g_strdup_printf ("%s is not served by sandstepd's E2B envd%s (docs/e2b.md)", req->path, why);
      if (streaming)
        sandstepd_envd_answer_stream_error (req, "unimplemented", message);
      else
        sandstepd_envd_answer_unary_error (req, "unimplemented", message);
    }
}
