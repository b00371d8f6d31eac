/* sandstep-mcp.c: the MCP server: JSON-RPC dispatch, its methods, and the tool calls (see sandstep-mcp-private.h). */
#include "sandstep-mcp-private.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-json.h"

G_DEFINE_QUARK (sandstep-mcp-error-quark, sandstep_mcp_error)

typedef struct _ToolJob ToolJob;

/* One request taken by the dispatcher, answered exactly once. */
typedef struct _SandstepMcpRequest Request;
struct _SandstepMcpRequest {
  SandstepMcpServer *server;
  JsonNode *id;
  SandstepMcpReplyTo reply;
  gpointer user_data;
  gboolean modern;           /* of the 2026-07-28 era: its result gets resultType and _meta */
  char *method;
};

struct _ToolJob {
  SandstepMcpServer *server;
  Request *request;
  char *name;
  char *arguments;           /* serialized: the task parses its own copy; NULL for {} */
  /* Set by the task. */
  char *text;
  gboolean is_error;
  JsonNode *structured;      /* structuredContent, for a tool with an outputSchema */
  GError *error;             /* terminal */
};

/* ---- JSON-RPC messages (the shared ones: sandstep-mcp-message.c) ---- */

static char *
response_result (JsonNode *id, JsonNode *result)
{
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "jsonrpc", "2.0");
  json_object_set_member (object, "id", json_node_copy (id));
  json_object_set_member (object, "result", result);
  json_node_take_object (root, object);
  return sandstep_mcp_to_json (root);
}

static char *
response_gerror (JsonNode *id, const GError *error)
{
  int code = error->domain == SANDSTEP_MCP_ERROR ? error->code : SANDSTEP_MCP_ERROR_INTERNAL;

  return sandstep_mcp_response_error (id, code, error->message);
}

/* ---- requests and their replies ---- */

/* A result for @request: the era's envelope added. */
static char *
request_result (Request *request, JsonNode *result)
{
  if (request->modern)
    sandstep_mcp_modern_finish (result, request->method);
  return response_result (request->id, result);
}

static void
request_reply (Request *request, const char *reply)
{
  SandstepMcpServer *server = request->server;

  request->reply (server, reply, request->user_data);
  g_assert (server->in_flight > 0);
  server->in_flight--;
  if (server->quit_when_idle && server->in_flight == 0)
    sandstep_mcp_server_quit (server);
  if (request->id != NULL)
    json_node_unref (request->id);
  g_free (request->method);
  g_free (request);
}

void
sandstep_mcp_reply_delivered (SandstepMcpServer *server, gboolean was_terminal)
{
  if (was_terminal)
    sandstep_mcp_server_quit (server);
}

/* ---- methods ---- */

static JsonNode *
method_initialize (SandstepMcpServer *server, JsonObject *params, GError **error)
{
  JsonNode *requested = params != NULL ? json_object_get_member (params, "protocolVersion") : NULL;
  const char *version;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autofree char *instructions = NULL;

  if (requested == NULL || !JSON_NODE_HOLDS_VALUE (requested) || json_node_get_value_type (requested) != G_TYPE_STRING)
    {
      sandstep_throw (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                      "initialize needs params.protocolVersion, a string such as \"%s\"",
                      SANDSTEP_MCP_PROTOCOL_VERSION);
      return NULL;
    }
  version = json_node_get_string (requested);
  if (!sandstep_mcp_version_is_supported (version))
    {
      g_debug ("client asked for protocol version '%s'; offering %s", version, SANDSTEP_MCP_PROTOCOL_VERSION);
      version = SANDSTEP_MCP_PROTOCOL_VERSION;
    }
  instructions = sandstep_mcp_instructions (server);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "protocolVersion");
  json_builder_add_string_value (builder, version);
  json_builder_set_member_name (builder, "capabilities");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "tools");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "listChanged");
  json_builder_add_boolean_value (builder, FALSE);
  json_builder_end_object (builder);
  json_builder_end_object (builder);
  json_builder_set_member_name (builder, "serverInfo");
  {
    g_autoptr(JsonNode) info = json_node_new (JSON_NODE_OBJECT);
    json_node_take_object (info, sandstep_mcp_server_info ());
    json_builder_add_value (builder, g_steal_pointer (&info));
  }
  json_builder_set_member_name (builder, "instructions");
  json_builder_add_string_value (builder, instructions);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static JsonNode *
method_ping (SandstepMcpServer *server, JsonObject *params, GError **error)
{
  JsonNode *result = json_node_new (JSON_NODE_OBJECT);

  json_node_take_object (result, json_object_new ());
  return result;
}

static JsonNode *
method_tools_list (SandstepMcpServer *server, JsonObject *params, GError **error)
{
  JsonNode *result = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();

  /* One page: there are four tools, so params.cursor never matters. */
  json_object_set_array_member (object, "tools", json_array_ref (server->tools));
  json_node_take_object (result, object);
  return result;
}

static JsonNode *
tool_result (const char *text, gboolean is_error, JsonNode *structured)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autofree char *valid = g_utf8_make_valid (text != NULL ? text : "", -1);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "content");
  json_builder_begin_array (builder);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "text");
  json_builder_set_member_name (builder, "text");
  json_builder_add_string_value (builder, valid);
  json_builder_end_object (builder);
  json_builder_end_array (builder);
  if (structured != NULL)
    {
      json_builder_set_member_name (builder, "structuredContent");
      json_builder_add_value (builder, json_node_copy (structured));
    }
  json_builder_set_member_name (builder, "isError");
  json_builder_add_boolean_value (builder, is_error);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static void
tool_job_free (ToolJob *job)
{
  g_free (job->name);
  g_free (job->arguments);
  g_free (job->text);
  g_clear_pointer (&job->structured, json_node_unref);
  g_clear_error (&job->error);
  g_free (job);
}

/* Main thread: answers a finished tool call. */
static void
tool_job_finish (SandstepMcpServer *server, ToolJob *job)
{
  g_autofree char *reply = NULL;
  gboolean was_terminal = FALSE;

  if (job->error != NULL)
    {
      g_autofree char *message = g_strdup_printf ("The sandbox cannot be used any more: %s", job->error->message);

      g_debug ("tool '%s' failed terminally: %s", job->name, job->error->message);
      if (server->terminal == NULL)
        server->terminal = g_error_copy (job->error);
      reply = request_result (job->request, tool_result (message, TRUE, NULL));
      was_terminal = TRUE;
    }
  else
    reply = request_result (job->request, tool_result (job->text, job->is_error, job->structured));

  server->replying_terminal = was_terminal;
  request_reply (g_steal_pointer (&job->request), reply);
  server->replying_terminal = FALSE;
  tool_job_free (job);
}

/* A GTask thread: one call on the toolbox.  Calls run one at a time, so
 * the toolbox is never used by two threads at once; a command's jail lives
 * within the call, so it never outlives the thread that started it. */
static void
tool_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  ToolJob *job = data;
  SandstepMcpServer *server = job->server;
  g_autoptr(JsonObject) arguments = NULL;

  if (job->arguments != NULL)
    {
      g_autoptr(JsonNode) node = json_from_string (job->arguments, NULL);
      if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
        arguments = json_object_ref (json_node_get_object (node));
    }
  job->text = sandstep_toolbox_call_structured (server->toolbox, job->name, arguments, &job->is_error,
                                                &job->structured, &job->error);
  if (job->text == NULL && job->error == NULL)
    job->error = g_error_new (SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INTERNAL,
                              "The tool '%s' returned nothing and no error", job->name);
  g_atomic_int_set (&server->running, FALSE);
  g_task_return_boolean (task, TRUE);
}

static void run_next_job (SandstepMcpServer *server);

/* Main thread: the call's task is done. */
static void
tool_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  /* The job is the task's data, but its reply frees it. */
  ToolJob *job = g_task_get_task_data (G_TASK (result));

  server->busy = FALSE;
  if (job->error != NULL && server->dead == NULL)
    server->dead = g_strdup (job->error->message);
  tool_job_finish (server, job);
  run_next_job (server);
}

/* Starts the next waiting call, unless one runs or the server stops.  Once
 * the toolbox has failed for good, the calls after are answered with that
 * failure without touching it. */
static void
run_next_job (SandstepMcpServer *server)
{
  while (!server->busy && !server->stopping && !g_queue_is_empty (&server->jobs))
    {
      ToolJob *job = g_queue_pop_head (&server->jobs);
      g_autoptr(GTask) task = NULL;

      if (server->unreachable != NULL)
        {
          /* Not terminal: the client keeps its session, and each call says what to fix. */
          job->text = g_strdup (server->unreachable);
          job->is_error = TRUE;
          tool_job_finish (server, job);
          continue;
        }
      if (server->dead != NULL)
        {
          job->error = g_error_new_literal (SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INTERNAL, server->dead);
          tool_job_finish (server, job);
          continue;
        }
      server->busy = TRUE;
      g_atomic_int_set (&server->running, TRUE);
      job->server = server;
      task = g_task_new (NULL, NULL, tool_done, server);
      g_task_set_task_data (task, job, NULL);
      g_task_run_in_thread (task, tool_thread);
    }
}

static gboolean
start_jobs_later (gpointer data)
{
  SandstepMcpServer *server = data;

  server->start_idle = 0;
  run_next_job (server);
  return G_SOURCE_REMOVE;
}

/* tools/call: checks the request here, leaves the arguments to the toolbox. */
static gboolean
method_tools_call (SandstepMcpServer *server, JsonObject *params, Request *request, GError **error)
{
  JsonNode *name = params != NULL ? json_object_get_member (params, "name") : NULL;
  JsonNode *arguments = params != NULL ? json_object_get_member (params, "arguments") : NULL;
  ToolJob *job;

  if (name == NULL || !JSON_NODE_HOLDS_VALUE (name) || json_node_get_value_type (name) != G_TYPE_STRING)
    return sandstep_throw (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                           "tools/call needs params.name, the name of a tool (see tools/list)");
  if (!g_hash_table_contains (server->tool_names, json_node_get_string (name)))
    return sandstep_throw (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                           "Unknown tool: '%s'; the tools are: %s", json_node_get_string (name), server->tool_list);
  if (arguments != NULL && !JSON_NODE_HOLDS_NULL (arguments) && !JSON_NODE_HOLDS_OBJECT (arguments))
    return sandstep_throw (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                           "tools/call needs params.arguments to be an object of the tool's arguments");

  job = g_new0 (ToolJob, 1);
  job->request = request;
  job->name = g_strdup (json_node_get_string (name));
  if (arguments != NULL && JSON_NODE_HOLDS_OBJECT (arguments))
    job->arguments = sandstep_mcp_to_json (arguments);

  g_queue_push_tail (&server->jobs, job);
  /* Answered later, from the main loop, never from inside this call. */
  if (server->start_idle == 0)
    {
      GSource *idle = g_idle_source_new ();

      g_source_set_callback (idle, start_jobs_later, server, NULL);
      server->start_idle = g_source_attach (idle, server->context);
      g_source_unref (idle);
    }
  return TRUE;
}

typedef JsonNode *(*MethodFunc) (SandstepMcpServer *server, JsonObject *params, GError **error);
/* Takes @request on success and answers it later. */
typedef gboolean (*AsyncMethodFunc) (SandstepMcpServer *server, JsonObject *params, Request *request, GError **error);

/* Which eras have a method. */
enum { LEGACY = 1 << 0, MODERN = 1 << 1 };

static const struct {
  const char *name;
  guint eras;
  MethodFunc run;
  AsyncMethodFunc run_async;
} methods[] = {
  /* name               eras              answered at once              answered later */
  { "initialize",       LEGACY,           method_initialize,            NULL },
  { "ping",             LEGACY,           method_ping,                  NULL },
  { "server/discover",  MODERN,           sandstep_mcp_method_discover, NULL },
  { "tools/call",       LEGACY | MODERN,  NULL,                         method_tools_call },
  { "tools/list",       LEGACY | MODERN,  method_tools_list,            NULL },
};

/* ---- dispatch ---- */

/* MCP's RequestId is a string or an integer.  A number with a fraction or an
 * exponent is neither, and one json-glib holds as a double may not survive
 * the echo (1e400 would come back as inf.0, which is no JSON). */
gboolean
sandstep_mcp_id_is_valid (JsonNode *id)
{
  GType type;

  if (id == NULL || !JSON_NODE_HOLDS_VALUE (id))
    return FALSE;
  type = json_node_get_value_type (id);
  return type == G_TYPE_STRING || type == G_TYPE_INT64;
}

void
sandstep_mcp_handle_node (SandstepMcpServer *server, JsonNode *root, SandstepMcpReplyTo reply, gpointer user_data)
{
  JsonObject *message;
  JsonNode *id, *method_node, *params_node;
  JsonObject *params = NULL;
  const char *method;
  Request *request;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;

  server->in_flight++;
  request = g_new0 (Request, 1);
  request->server = server;
  request->reply = reply;
  request->user_data = user_data;

  if (JSON_NODE_HOLDS_ARRAY (root))
    {
      text = sandstep_mcp_response_error (NULL, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "Batches are not supported (MCP removed them in 2025-06-18); send one request per "
                             "message");
      request_reply (request, text);
      return;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      text = sandstep_mcp_response_error (NULL, SANDSTEP_MCP_ERROR_INVALID_REQUEST, "A JSON-RPC message must be an object");
      request_reply (request, text);
      return;
    }
  message = json_node_get_object (root);
  id = json_object_get_member (message, "id");
  method_node = json_object_get_member (message, "method");
  if (sandstep_mcp_id_is_valid (id))
    request->id = json_node_copy (id);

  if (g_strcmp0 (sandstep_mcp_member_string (message, "jsonrpc"), "2.0") != 0)
    {
      text = sandstep_mcp_response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "Not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\"");
      request_reply (request, text);
      return;
    }
  if (method_node == NULL)
    {
      /* A response to a request of ours; we send none, so there is nothing to match. */
      if (id != NULL && (json_object_has_member (message, "result") || json_object_has_member (message, "error")))
        {
          g_debug ("ignoring a JSON-RPC response from the client");
          request_reply (request, NULL);
          return;
        }
      text = sandstep_mcp_response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "A JSON-RPC request needs \"method\"");
      request_reply (request, text);
      return;
    }
  if (!JSON_NODE_HOLDS_VALUE (method_node) || json_node_get_value_type (method_node) != G_TYPE_STRING)
    {
      text = sandstep_mcp_response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_REQUEST, "\"method\" must be a string");
      request_reply (request, text);
      return;
    }
  method = json_node_get_string (method_node);
  if (id == NULL)
    {
      /* A notification: notifications/initialized, notifications/cancelled
       * (a tool call cannot be stopped half-way, so it runs on) or one we do
       * not know.  JSON-RPC answers none of them. */
      /* Escaped: a client's bytes, and a log line is one line of text (TAP reads the tests' debug lines). */
      g_autofree char *shown = sandstep_escape (method, -1, 100, SANDSTEP_ESCAPE_VALUE);

      g_debug ("notification '%s'", shown);
      request_reply (request, NULL);
      return;
    }
  if (request->id == NULL)
    {
      text = sandstep_mcp_response_error (NULL, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "\"id\" must be a string or an integer (MCP never uses null)");
      request_reply (request, text);
      return;
    }
  params_node = json_object_get_member (message, "params");
  if (params_node != NULL && !JSON_NODE_HOLDS_NULL (params_node))
    {
      if (!JSON_NODE_HOLDS_OBJECT (params_node))
        {
          text = sandstep_mcp_response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_PARAMS, "\"params\" must be an object");
          request_reply (request, text);
          return;
        }
      params = json_node_get_object (params_node);
    }
  request->method = g_strdup (method);
  request->modern = sandstep_mcp_request_is_modern (params);
  if (request->modern)
    {
      text = sandstep_mcp_modern_refusal (request->id, params);
      if (text != NULL)
        {
          request_reply (request, text);
          return;
        }
    }

  for (gsize i = 0; i < G_N_ELEMENTS (methods); i++)
    {
      if (strcmp (methods[i].name, method) != 0 || (methods[i].eras & (request->modern ? MODERN : LEGACY)) == 0)
        continue;
      if (methods[i].run_async != NULL)
        {
          if (methods[i].run_async (server, params, request, &error))
            return;
          text = response_gerror (request->id, error);
        }
      else
        {
          JsonNode *result = methods[i].run (server, params, &error);
          text = result != NULL ? request_result (request, result) : response_gerror (request->id, error);
        }
      request_reply (request, text);
      return;
    }
  {
    g_autofree char *shown = sandstep_escape (method, -1, 100, SANDSTEP_ESCAPE_VALUE);
    g_debug ("unknown method '%s'", shown);
  }
  {
    g_autofree char *what = NULL;

    if (request->modern && (strcmp (method, "initialize") == 0 || strcmp (method, "ping") == 0))
      what = g_strdup_printf ("Method not found: '%s' is not part of MCP %s (a request that names its version in "
                              "_meta needs no initialize); send server/discover, tools/list or tools/call",
                              method, SANDSTEP_MCP_MODERN_VERSION);
    else if (!request->modern && strcmp (method, "server/discover") == 0)
      what = g_strdup_printf ("Method not found: server/discover belongs to MCP %s: name the version in "
                              "params._meta[\"%s\"], or initialize for %s and older",
                              SANDSTEP_MCP_MODERN_VERSION, SANDSTEP_MCP_META_VERSION, SANDSTEP_MCP_PROTOCOL_VERSION);
    else
      what = g_strdup_printf ("Method not found: '%s'", method);
    text = sandstep_mcp_response_error (request->id, SANDSTEP_MCP_ERROR_METHOD_NOT_FOUND, what);
  }
  request_reply (request, text);
}

/* "Parse error: the message is not JSON (...)", without json-glib's own "<data>:1:1: Parse error:". */
char *
sandstep_mcp_parse_error_message (const GError *parse_error)
{
  const char *detail = strstr (parse_error->message, "Parse error: ");

  detail = detail != NULL ? detail + strlen ("Parse error: ") : parse_error->message;
  return g_strdup_printf ("Parse error: the message is not JSON (%s)", detail);
}

void
sandstep_mcp_handle_parse_error (SandstepMcpServer *server, const GError *parse_error, SandstepMcpReplyTo reply, gpointer user_data)
{
  g_autofree char *message = sandstep_mcp_parse_error_message (parse_error);
  g_autofree char *text = sandstep_mcp_response_error (NULL, SANDSTEP_MCP_ERROR_PARSE, message);
  Request *request = g_new0 (Request, 1);

  server->in_flight++;
  request->server = server;
  request->reply = reply;
  request->user_data = user_data;
  request_reply (request, text);
}

JsonNode *
sandstep_mcp_parse_message (const char *message, gsize length, GError **error)
{
  if (!g_utf8_validate (message, MIN (length, G_MAXSSIZE), NULL))
    {
      sandstep_throw (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_PARSE, "the message is not UTF-8");
      return NULL;
    }
  /* Depth and size are checked before json-glib recurses into it. */
  return sandstep_json_parse (message, length, SANDSTEP_MCP_MAX_MESSAGE, error);
}

typedef struct {
  SandstepMcpReplyFunc func;
  gpointer user_data;
} PublicReply;

static void
public_reply (SandstepMcpServer *server, const char *reply, gpointer user_data)
{
  PublicReply *closure = user_data;

  closure->func (reply, closure->user_data);
  g_free (closure);
}

void
sandstep_mcp_server_handle (SandstepMcpServer *server, const char *message, gsize length,
                            SandstepMcpReplyFunc reply, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = sandstep_mcp_parse_message (message, length, &error);
  PublicReply *closure = g_new0 (PublicReply, 1);

  closure->func = reply;
  closure->user_data = user_data;
  if (root == NULL)
    sandstep_mcp_handle_parse_error (server, error, public_reply, closure);
  else
    sandstep_mcp_handle_node (server, root, public_reply, closure);
}

/* ---- the server ---- */

SandstepMcpServer *
sandstep_mcp_server_new (SandstepToolbox *toolbox, const char *handle)
{
  SandstepMcpServer *server = g_new0 (SandstepMcpServer, 1);
  GString *names;

  server->toolbox = toolbox;
  server->handle = g_strdup (handle);
  server->context = g_main_context_ref_thread_default ();
  server->loop = g_main_loop_new (server->context, FALSE);
  server->tools = sandstep_toolbox_definitions (toolbox);
  server->tool_names = g_hash_table_new (g_str_hash, g_str_equal);
  names = g_string_new (NULL);
  for (guint i = 0; i < json_array_get_length (server->tools); i++)
    {
      JsonNode *node = json_array_get_element (server->tools, i);
      const char *name = JSON_NODE_HOLDS_OBJECT (node) ? sandstep_mcp_member_string (json_node_get_object (node), "name") : NULL;

      if (name == NULL)
        continue;
      g_hash_table_add (server->tool_names, (gpointer) name);
      g_string_append_printf (names, "%s%s", names->len > 0 ? ", " : "", name);
    }
  server->tool_list = g_string_free (names, FALSE);
  server->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  g_queue_init (&server->jobs);
  return server;
}

void
sandstep_mcp_server_set_unreachable (SandstepMcpServer *server, const char *why)
{
  g_free (server->unreachable);
  server->unreachable = g_strdup (why);
}

static gboolean
wake_up (gpointer data)
{
  return G_SOURCE_REMOVE;
}

gboolean
sandstep_mcp_server_stop (SandstepMcpServer *server, double wait_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (MAX (wait_s, 0) * G_USEC_PER_SEC);
  ToolJob *job;

  server->stopping = TRUE;
  /* A call that runs may finish within @wait_s; it is answered as usual. */
  while (server->busy)
    {
      gint64 now = g_get_monotonic_time ();
      gboolean running = g_atomic_int_get (&server->running);
      GSource *wake;

      if (running && now >= deadline)
        return FALSE;
      /* Woken by the call's end, or by the deadline. */
      wake = g_timeout_source_new (running ? (guint) CLAMP ((deadline - now) / 1000, 1, 1000) : 1);
      g_source_set_callback (wake, wake_up, NULL, NULL);
      g_source_attach (wake, server->context);
      g_main_context_iteration (server->context, TRUE);
      g_source_destroy (wake);
      g_source_unref (wake);
    }

  /* Requests nobody will answer now: the server is going away. */
  while ((job = g_queue_pop_head (&server->jobs)) != NULL)
    {
      if (job->request != NULL)
        {
          g_clear_pointer (&job->request->id, json_node_unref);
          g_free (job->request);
        }
      tool_job_free (job);
    }
  return TRUE;
}

void
sandstep_mcp_server_free (SandstepMcpServer *server)
{
  if (server == NULL)
    return;
  if (!sandstep_mcp_server_stop (server, G_MAXINT))
    g_assert_not_reached ();
  g_clear_pointer (&server->http_guard, sandstep_http_guard_free);
  if (server->http != NULL)
    {
      soup_server_disconnect (server->http);
      g_object_unref (server->http);
    }
  if (server->cancellable != NULL)
    g_cancellable_cancel (server->cancellable);
  g_clear_object (&server->cancellable);
  g_clear_object (&server->stdio_in);
  g_clear_object (&server->stdio_out);
  g_clear_object (&server->eof_in);
  if (server->token != NULL)
    explicit_bzero (server->token, strlen (server->token));
  g_free (server->token);
  if (server->start_idle != 0)
    g_source_destroy (g_main_context_find_source_by_id (server->context, server->start_idle));
  g_free (server->dead);
  g_free (server->unreachable);
  g_clear_error (&server->terminal);
  g_hash_table_unref (server->sessions);
  g_hash_table_unref (server->tool_names);
  g_free (server->tool_list);
  json_array_unref (server->tools);
  g_free (server->bound_host);
  g_free (server->handle);
  g_main_loop_unref (server->loop);
  g_main_context_unref (server->context);
  g_free (server);
}

gboolean
sandstep_mcp_server_run (SandstepMcpServer *server, GError **error)
{
  if (server->terminal == NULL)
    g_main_loop_run (server->loop);
  if (server->terminal != NULL)
    {
      g_propagate_error (error, g_error_copy (server->terminal));
      return FALSE;
    }
  return TRUE;
}

void
sandstep_mcp_server_quit (SandstepMcpServer *server)
{
  g_main_loop_quit (server->loop);
}
