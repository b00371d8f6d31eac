/* sandstepd-envd.c: E2B's envd (the service inside an E2B sandbox) on sandstepd's sandboxes.
 *
 * The SDK calls envd over the Connect protocol with its JSON codec (it never asks for protobuf binary),
 * naming the sandbox in the E2b-Sandbox-Id header.  A server-streaming call (process.Process/Start) is
 * POSTed as application/connect+json: its body one envelope (a flags byte, a 4-byte big-endian length,
 * the JSON message); its answer envelopes of events, then one flagged end-of-stream that carries {} or
 * {"error": {code, message}}.  A command runs as a sandstep command does: a worker claims the sandbox
 * for it (so a sandbox runs one command at a time, as a make step's does) and it streams out as it comes.
 * What is not served answers Connect's "unimplemented" naming the call (docs/e2b.md).
 */
#include "sandstepd-private.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

#define CONNECT_STREAM_TYPE "application/connect+json"
#define ENVELOPE_HEADER 5
#define FLAG_COMPRESSED 0x01
#define FLAG_END_STREAM 0x02
/* Connect-Timeout-Ms is at most 10 digits (the protocol's rule). */
#define MAX_TIMEOUT_DIGITS 10

gboolean
sandstepd_envd_is_path (const char *path)
{
  return g_str_has_prefix (path, "/process.Process/") || g_str_has_prefix (path, "/filesystem.Filesystem/") ||
         strcmp (path, "/files") == 0;
}

/* ---- Connect's envelopes ---- */

static char *
envelope (guint8 flags, const char *payload, gsize len, gsize *out_len)
{
  char *out = g_malloc (ENVELOPE_HEADER + len);

  out[0] = (char) flags;
  out[1] = (char) ((len >> 24) & 0xff);
  out[2] = (char) ((len >> 16) & 0xff);
  out[3] = (char) ((len >> 8) & 0xff);
  out[4] = (char) (len & 0xff);
  memcpy (out + ENVELOPE_HEADER, payload, len);
  *out_len = ENVELOPE_HEADER + len;
  return out;
}

static char *
envelope_object (guint8 flags, JsonObject *object, gsize *out_len)
{
  gsize len = 0;
  g_autofree char *text = sandstep_wire_to_text (object, &len);

  return envelope (flags, text, len, out_len);
}

/* The one message of a streaming request's @body: uncompressed, its length what the envelope says, nothing
 * after it (the body's size is bounded already, SANDSTEPD_MAX_JSON_BODY). */
static JsonObject *
read_envelope (const guint8 *body, gsize len, GError **error)
{
  guint32 n;

  if (len < ENVELOPE_HEADER)
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request's body of %" G_GSIZE_FORMAT " bytes is shorter than Connect's 5-byte envelope; "
                   "send one enveloped JSON message", len);
      return NULL;
    }
  if (body[0] != 0)
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request's envelope has flags '0x%02x'; send one uncompressed message (flags 0)%s", body[0],
                   (body[0] & FLAG_COMPRESSED) ? ": sandstepd takes no compressed messages" : "");
      return NULL;
    }
  n = ((guint32) body[1] << 24) | ((guint32) body[2] << 16) | ((guint32) body[3] << 8) | body[4];
  if ((gsize) n != len - ENVELOPE_HEADER)
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request's envelope says '%" G_GUINT32_FORMAT "' bytes, and %" G_GSIZE_FORMAT
                   " follow it; send one message whose length the envelope gives", n, len - ENVELOPE_HEADER);
      return NULL;
    }
  return sandstep_wire_parse_object ((const char *) body + ENVELOPE_HEADER, n, error);
}

/* Connect's code for a sandbox's or a request's error. */
static const char *
connect_code (const GError *error)
{
  if (error->domain == SANDSTEP_SANDBOX_ERROR &&
      (error->code == SANDSTEP_SANDBOX_ERROR_NOT_FOUND || error->code == SANDSTEP_SANDBOX_ERROR_NOT_OWNER ||
       error->code == SANDSTEP_SANDBOX_ERROR_EXPIRED))
    return "not_found";
  if (error->domain == SANDSTEP_SANDBOX_ERROR && error->code == SANDSTEP_SANDBOX_ERROR_BUSY)
    return "aborted";
  if (error->domain == SANDSTEP_USAGE_ERROR)
    return "invalid_argument";
  return "internal";
}

static char *
end_stream (const char *code, const char *message, gsize *out_len)
{
  g_autoptr(JsonObject) end = json_object_new ();

  if (code != NULL)
    {
      JsonObject *e = json_object_new ();
      json_object_set_string_member (e, "code", code);
      json_object_set_string_member (e, "message", message);
      json_object_set_object_member (end, "error", e);
    }
  return envelope_object (FLAG_END_STREAM, end, out_len);
}

/* A streaming call's error before anything streamed: HTTP 200 and the error in the end of the stream, as
 * Connect answers it. */
static void
answer_stream_error (Request *req, const char *code, const char *message)
{
  gsize len = 0;
  char *bytes = end_stream (code, message, &len);

  sandstepd_e2b_answer (req, SOUP_STATUS_OK, CONNECT_STREAM_TYPE, bytes, len);
}

/* A process event, {"event": {@kind: @value}}, enveloped. */
static char *
event (const char *kind, JsonObject *value, gsize *out_len)
{
  g_autoptr(JsonObject) message = json_object_new ();
  JsonObject *e = json_object_new ();

  json_object_set_object_member (e, kind, value);
  json_object_set_object_member (message, "event", e);
  return envelope_object (0, message, out_len);
}

/* ---- process.Process/Start: a command, its output streamed ---- */

static char *
start_first (gsize *out_len)
{
  JsonObject *start = json_object_new ();

  /* The command's pid in the sandbox is not known here; commands.kill(pid) is not served yet. */
  json_object_set_int_member (start, "pid", 1);
  return event ("start", start, out_len);
}

static char *
start_data (int stream, const char *data, gsize len, gsize *out_len)
{
  JsonObject *d = json_object_new ();
  g_autofree char *b64 = g_base64_encode ((const guchar *) data, len);

  /* Protobuf's JSON carries bytes as base64. */
  json_object_set_string_member (d, stream == 2 ? "stderr" : "stdout", b64);
  return event ("data", d, out_len);
}

static char *
start_last (JsonObject *reply, const GError *error, gsize *out_len)
{
  SandstepRunResult result = { 0 };
  JsonObject *end;
  g_autofree char *end_bytes = NULL;
  g_autofree char *stream_end = NULL;
  g_autofree char *status = NULL;
  gsize end_len = 0, stream_end_len = 0;
  char *out;

  if (error != NULL)
    return end_stream (connect_code (error), error->message, out_len);
  sandstep_wire_read_run_result (reply, &result);
  if (result.timed_out)
    {
      g_autofree char *message = g_strdup_printf ("The command ran past its timeout of %g s and was killed",
                                                  result.applied_timeout_s);
      return end_stream ("deadline_exceeded", message, out_len);
    }
  end = json_object_new ();
  status = g_strdup_printf ("exit status %d", result.exit_status);
  /* sandstep's exit status is the shell's (128+N for signal N), and so is envd's exitCode. */
  json_object_set_int_member (end, "exitCode", result.exit_status);
  json_object_set_boolean_member (end, "exited", TRUE);
  json_object_set_string_member (end, "status", status);
  end_bytes = event ("end", end, &end_len);
  stream_end = end_stream (NULL, NULL, &stream_end_len);
  out = g_malloc (end_len + stream_end_len);
  memcpy (out, end_bytes, end_len);
  memcpy (out + end_len, stream_end, stream_end_len);
  *out_len = end_len + stream_end_len;
  return out;
}

static char *
start_keepalive (gsize *out_len)
{
  return event ("keepalive", json_object_new (), out_len);
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

typedef struct {
  Request *req;             /* ref */
  Lease *lease;             /* ref, once a worker is taken */
  char *command;
  double timeout_s;
  char *owner;
  char *holder;
  GError *error;
} Start;

static void
start_free (Start *start)
{
  sandstepd_request_unref (start->req);
  if (start->lease != NULL)
    sandstepd_lease_unref (start->lease);
  g_free (start->command);
  g_free (start->owner);
  g_free (start->holder);
  g_clear_error (&start->error);
  g_free (start);
}

static void
on_start_attached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Start *start = call->data;
  Lease *lease = start->lease;
  Request *req = start->req;

  if (error != NULL)
    {
      sandstepd_lease_abandon (lease);
      answer_stream_error (req, connect_code (error), error->message);
      return;
    }
  sandstepd_lease_activate (lease);
  if (req->finished)
    {
      sandstepd_lease_end (lease, "the E2B command's connection closed while attaching", TRUE);
      return;
    }
  sandstepd_stream_step_framed (req, lease, sandstep_wire_run_request (NULL, start->command, start->timeout_s),
                                &start_framing);
}

static void
start_owner_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Start *start = data;

  start->owner = sandstepd_e2b_owner_of (start->req, start->req->handle, &start->error);
  g_task_return_boolean (task, TRUE);
}

static void
start_owner_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Start *start = g_task_get_task_data (G_TASK (result));
  Request *req = start->req;
  SandstepIdentity who = { NULL, NULL, NULL };
  g_autoptr(GError) error = NULL;
  Start *attaching;
  Worker *w;

  if (start->error != NULL)
    {
      answer_stream_error (req, connect_code (start->error), start->error->message);
      return;
    }
  w = sandstepd_worker_take (req->d, &error);
  if (w == NULL)
    {
      answer_stream_error (req, "resource_exhausted", error->message);
      return;
    }
  /* The worker's call owns what it needs from here: a Start of its own. */
  attaching = g_new0 (Start, 1);
  attaching->req = sandstepd_request_ref (req);
  attaching->command = g_steal_pointer (&start->command);
  attaching->timeout_s = start->timeout_s;
  attaching->owner = g_steal_pointer (&start->owner);
  attaching->holder = g_strconcat (attaching->owner, "/e2b-envd", NULL);
  who.owner = attaching->owner;
  who.holder = attaching->holder;
  attaching->lease = sandstepd_lease_new (req, &who, w);
  sandstepd_worker_call (w, "attach", sandstep_wire_attach_request (req->handle, &who), NULL, 0, on_start_attached,
                         attaching, (GDestroyNotify) start_free);
}

/* The command's budget: Connect-Timeout-Ms (the SDK's timeoutMs), else none but the sandbox's lifetime. */
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

static void
handle_start (Request *req)
{
  const char *content_type = soup_message_headers_get_content_type (
    soup_server_message_get_request_headers (req->msg), NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) request = NULL;
  g_autoptr(GTask) task = NULL;
  Start *start;
  JsonNode *stdin_node;

  if (g_strcmp0 (content_type, CONNECT_STREAM_TYPE) != 0)
    {
      g_autofree char *shown = sandstep_escape (content_type != NULL ? content_type : "(none)", -1, 200,
                                                SANDSTEP_ESCAPE_VALUE);
      g_autofree char *message = g_strdup_printf ("%s takes a body of type " CONNECT_STREAM_TYPE ", not '%s'",
                                                  req->path, shown);
      answer_stream_error (req, "invalid_argument", message);
      return;
    }
  request = read_envelope (req->body->data, req->body->len, &error);
  if (request == NULL)
    {
      answer_stream_error (req, "invalid_argument", error->message);
      return;
    }
  stdin_node = json_object_get_member (request, "stdin");
  if (stdin_node != NULL && JSON_NODE_HOLDS_VALUE (stdin_node) && json_node_get_boolean (stdin_node))
    {
      answer_stream_error (req, "unimplemented",
                           "A command's stdin is not served by sandstepd's E2B envd yet; run it without stdin");
      return;
    }
  start = g_new0 (Start, 1);
  start->req = sandstepd_request_ref (req);
  start->command = shell_command (request, &error);
  if (start->command == NULL)
    {
      answer_stream_error (req, "invalid_argument", error->message);
      start_free (start);
      return;
    }
  start->timeout_s = connect_timeout_s (req);
  task = g_task_new (NULL, NULL, start_owner_done, NULL);
  g_task_set_task_data (task, start, (GDestroyNotify) start_free);
  g_task_run_in_thread (task, start_owner_thread);
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

  if (id == NULL || !sandstep_handle_is_local (id))
    {
      g_autofree char *shown = sandstep_escape (id != NULL ? id : "(none)", -1, 200, SANDSTEP_ESCAPE_VALUE);
      message = g_strdup_printf ("Sandbox '%s' not found: name a sandbox in E2b-Sandbox-Id (sandstep's sandbox IDs "
                                 "look like sandstep-0123456789abcdef)", shown);
      if (streaming)
        answer_stream_error (req, "not_found", message);
      else
        sandstepd_e2b_error (req, SOUP_STATUS_NOT_FOUND, "%s", message);
      return;
    }
  g_free (req->handle);
  req->handle = g_strdup (id);
  if (strcmp (req->path, "/process.Process/Start") == 0)
    {
      handle_start (req);
      return;
    }
  message = g_strdup_printf ("%s is not served by sandstepd's E2B envd yet (docs/e2b.md)", req->path);
  if (streaming)
    answer_stream_error (req, "unimplemented", message);
  else
    {
      g_autoptr(JsonObject) object = json_object_new ();
      json_object_set_string_member (object, "code", "unimplemented");
      json_object_set_string_member (object, "message", message);
      sandstepd_answer_json (req, SOUP_STATUS_NOT_FOUND, object);
    }
}
