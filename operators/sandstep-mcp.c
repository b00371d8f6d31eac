/* sandstep-mcp.c: the MCP server: JSON-RPC dispatch, a tool worker, stdio and Streamable HTTP. */
#include "sandstep-mcp.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <gio/gio.h>
#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <libsoup/soup.h>

#include "sandstep-error.h"
#include "sandstep-units.h"

/* Newest first; the first is the answer to a version we do not know. */
static const char *const protocol_versions[] = {
  SANDSTEP_MCP_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05",
};

/* A JSON-RPC message bigger than this is refused (HTTP 413); write_file
 * content is the only big thing a client sends. */
#define MAX_HTTP_BODY (64 * 1024 * 1024)

G_DEFINE_QUARK (sandstep-mcp-error-quark, sandstep_mcp_error)

typedef struct _Request Request;
typedef struct _ToolJob ToolJob;

struct _SandstepMcpServer {
  SandstepToolbox *toolbox;
  char *handle;
  GMainContext *context;
  GMainLoop *loop;
  JsonArray *tools;          /* the definitions, fixed when the server starts */
  GHashTable *tool_names;    /* name -> itself (borrowed from @tools) */
  char *tool_list;           /* "run_command, read_file, ...", for messages */

  guint in_flight;           /* requests taken and not yet answered */
  GError *terminal;          /* the first terminal tool error (main thread) */
  gboolean replying_terminal;/* TRUE while the reply to a terminal failure is handed over */
  gboolean quit_when_idle;   /* stdio reached EOF: end once every request is answered */

  /* The worker thread and what it shares with the main thread, under @lock. */
  GThread *worker;
  GMutex lock;
  GCond cond;
  GQueue jobs;               /* ToolJob *, waiting */
  GQueue done;               /* ToolJob *, finished, for the main thread */
  gboolean stopping;
  gboolean busy;
  char *dead;                /* the terminal message, once the toolbox has failed for good */
  GSource *done_source;      /* wakes the main thread for @done */

  /* stdio */
  GDataInputStream *stdio_in;
  GOutputStream *stdio_out;
  GCancellable *cancellable;

  /* Streamable HTTP */
  SoupServer *http;
  char *bound_host;          /* the literal address bound, e.g. "127.0.0.1" or "::1" */
  GHashTable *sessions;      /* Mcp-Session-Id -> itself */
};

typedef void (*ReplyFunc) (SandstepMcpServer *server, const char *reply, gpointer user_data);

/* One request taken by the dispatcher, answered exactly once. */
struct _Request {
  SandstepMcpServer *server;
  JsonNode *id;
  ReplyFunc reply;
  gpointer user_data;
};

struct _ToolJob {
  Request *request;
  char *name;
  char *arguments;           /* serialized: the worker parses its own copy; NULL for {} */
  /* Set by the worker. */
  char *text;
  gboolean is_error;
  GError *error;             /* terminal */
};

/* ---- JSON-RPC messages ---- */

static char *
to_json (JsonNode *node)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();

  json_generator_set_root (generator, node);
  return json_generator_to_data (generator, NULL);
}

static char *
response_result (JsonNode *id, JsonNode *result)
{
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "jsonrpc", "2.0");
  json_object_set_member (object, "id", json_node_copy (id));
  json_object_set_member (object, "result", result);
  json_node_take_object (root, object);
  return to_json (root);
}

/* @id NULL: the request's id is not known (a parse error, an invalid request). */
static char *
response_error (JsonNode *id, int code, const char *message)
{
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();
  JsonObject *error = json_object_new ();

  json_object_set_string_member (object, "jsonrpc", "2.0");
  if (id != NULL)
    json_object_set_member (object, "id", json_node_copy (id));
  else
    json_object_set_null_member (object, "id");
  json_object_set_int_member (error, "code", code);
  json_object_set_string_member (error, "message", message);
  json_object_set_object_member (object, "error", error);
  json_node_take_object (root, object);
  return to_json (root);
}

static char *
response_gerror (JsonNode *id, const GError *error)
{
  int code = error->domain == SANDSTEP_MCP_ERROR ? error->code : SANDSTEP_MCP_ERROR_INTERNAL;

  return response_error (id, code, error->message);
}

static gboolean
throw_mcp (GError **error, SandstepMcpError code, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
throw_mcp (GError **error, SandstepMcpError code, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (SANDSTEP_MCP_ERROR, code, format, args));
  va_end (args);
  return FALSE;
}

static gboolean
version_is_supported (const char *version)
{
  for (gsize i = 0; i < G_N_ELEMENTS (protocol_versions); i++)
    if (g_strcmp0 (version, protocol_versions[i]) == 0)
      return TRUE;
  return FALSE;
}

/* The string member @name of @object, or NULL when it is absent or not a string. */
static const char *
member_string (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/* ---- requests and their replies ---- */

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
  g_free (request);
}

/* After a reply went out: ends the server once a terminal failure is answered. */
static void
reply_delivered (SandstepMcpServer *server, gboolean was_terminal)
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
      throw_mcp (error, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                 "initialize needs params.protocolVersion, a string such as \"%s\"", SANDSTEP_MCP_PROTOCOL_VERSION);
      return NULL;
    }
  version = json_node_get_string (requested);
  if (!version_is_supported (version))
    {
      g_debug ("client asked for protocol version '%s'; offering %s", version, SANDSTEP_MCP_PROTOCOL_VERSION);
      version = SANDSTEP_MCP_PROTOCOL_VERSION;
    }
  instructions = g_strdup_printf ("These tools work in the sandbox '%s': an isolated Linux machine whose files "
                                  "persist between calls (run_command starts a fresh shell each time, in "
                                  "/workspace). Nothing you do there reaches this host.",
                                  server->handle);

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
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, "sandstep");
  json_builder_set_member_name (builder, "title");
  json_builder_add_string_value (builder, "sandstep sandbox tools");
  json_builder_set_member_name (builder, "version");
  json_builder_add_string_value (builder, SANDSTEP_VERSION);
  json_builder_end_object (builder);
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
tool_result (const char *text, gboolean is_error)
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
      reply = response_result (job->request->id, tool_result (message, TRUE));
      was_terminal = TRUE;
    }
  else
    reply = response_result (job->request->id, tool_result (job->text, job->is_error));

  server->replying_terminal = was_terminal;
  request_reply (g_steal_pointer (&job->request), reply);
  server->replying_terminal = FALSE;
  tool_job_free (job);
}

static gboolean
done_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  GQueue done = G_QUEUE_INIT;
  ToolJob *job;

  g_source_set_ready_time (source, -1);
  g_mutex_lock (&server->lock);
  done = server->done;
  g_queue_init (&server->done);
  g_mutex_unlock (&server->lock);
  while ((job = g_queue_pop_head (&done)) != NULL)
    tool_job_finish (server, job);
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs done_source_funcs = {
  .dispatch = done_dispatch,
};

/* Worker thread: calls the tools one at a time, in order.  It is the only
 * thread that touches the toolbox after the server starts, and it lives as
 * long as the server: a jail dies with the thread that started it. */
static gpointer
worker_main (gpointer user_data)
{
  SandstepMcpServer *server = user_data;

  g_mutex_lock (&server->lock);
  for (;;)
    {
      ToolJob *job;
      g_autoptr(JsonObject) arguments = NULL;

      while (g_queue_is_empty (&server->jobs) && !server->stopping)
        g_cond_wait (&server->cond, &server->lock);
      if (server->stopping)
        break;
      job = g_queue_pop_head (&server->jobs);
      if (server->dead != NULL)
        {
          job->error = g_error_new_literal (SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INTERNAL, server->dead);
          g_queue_push_tail (&server->done, job);
          g_source_set_ready_time (server->done_source, 0);
          continue;
        }
      server->busy = TRUE;
      g_mutex_unlock (&server->lock);

      if (job->arguments != NULL)
        {
          g_autoptr(JsonNode) node = json_from_string (job->arguments, NULL);
          if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
            arguments = json_object_ref (json_node_get_object (node));
        }
      job->text = sandstep_toolbox_call (server->toolbox, job->name, arguments, &job->is_error, &job->error);
      if (job->text == NULL && job->error == NULL)
        job->error = g_error_new (SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INTERNAL,
                                  "The tool '%s' returned nothing and no error", job->name);
      g_clear_pointer (&arguments, json_object_unref);

      g_mutex_lock (&server->lock);
      if (job->error != NULL && server->dead == NULL)
        server->dead = g_strdup (job->error->message);
      server->busy = FALSE;
      g_queue_push_tail (&server->done, job);
      g_source_set_ready_time (server->done_source, 0);
      g_cond_broadcast (&server->cond);
    }
  g_mutex_unlock (&server->lock);
  return NULL;
}

/* tools/call: checks the request here, leaves the arguments to the toolbox. */
static gboolean
method_tools_call (SandstepMcpServer *server, JsonObject *params, Request *request, GError **error)
{
  JsonNode *name = params != NULL ? json_object_get_member (params, "name") : NULL;
  JsonNode *arguments = params != NULL ? json_object_get_member (params, "arguments") : NULL;
  ToolJob *job;

  if (name == NULL || !JSON_NODE_HOLDS_VALUE (name) || json_node_get_value_type (name) != G_TYPE_STRING)
    return throw_mcp (error, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                      "tools/call needs params.name, the name of a tool (see tools/list)");
  if (!g_hash_table_contains (server->tool_names, json_node_get_string (name)))
    return throw_mcp (error, SANDSTEP_MCP_ERROR_INVALID_PARAMS, "Unknown tool: '%s'; the tools are: %s",
                      json_node_get_string (name), server->tool_list);
  if (arguments != NULL && !JSON_NODE_HOLDS_NULL (arguments) && !JSON_NODE_HOLDS_OBJECT (arguments))
    return throw_mcp (error, SANDSTEP_MCP_ERROR_INVALID_PARAMS,
                      "tools/call needs params.arguments to be an object of the tool's arguments");

  job = g_new0 (ToolJob, 1);
  job->request = request;
  job->name = g_strdup (json_node_get_string (name));
  if (arguments != NULL && JSON_NODE_HOLDS_OBJECT (arguments))
    job->arguments = to_json (arguments);

  g_mutex_lock (&server->lock);
  g_queue_push_tail (&server->jobs, job);
  g_cond_broadcast (&server->cond);
  g_mutex_unlock (&server->lock);
  return TRUE;
}

typedef JsonNode *(*MethodFunc) (SandstepMcpServer *server, JsonObject *params, GError **error);
/* Takes @request on success and answers it later. */
typedef gboolean (*AsyncMethodFunc) (SandstepMcpServer *server, JsonObject *params, Request *request, GError **error);

static const struct {
  const char *name;
  MethodFunc run;
  AsyncMethodFunc run_async;
} methods[] = {
  /* name          answered at once     answered later */
  { "initialize",  method_initialize,   NULL },
  { "ping",        method_ping,         NULL },
  { "tools/call",  NULL,                method_tools_call },
  { "tools/list",  method_tools_list,   NULL },
};

/* ---- dispatch ---- */

static gboolean
id_is_valid (JsonNode *id)
{
  GType type;

  if (!JSON_NODE_HOLDS_VALUE (id))
    return FALSE;
  type = json_node_get_value_type (id);
  return type == G_TYPE_STRING || type == G_TYPE_INT64 || type == G_TYPE_DOUBLE;
}

/* Handles one parsed message; @reply runs once, now or when a tool call ends. */
static void
handle_node (SandstepMcpServer *server, JsonNode *root, ReplyFunc reply, gpointer user_data)
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
      text = response_error (NULL, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "Batches are not supported (MCP removed them in 2025-06-18); send one request per "
                             "message");
      request_reply (request, text);
      return;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      text = response_error (NULL, SANDSTEP_MCP_ERROR_INVALID_REQUEST, "A JSON-RPC message must be an object");
      request_reply (request, text);
      return;
    }
  message = json_node_get_object (root);
  id = json_object_get_member (message, "id");
  method_node = json_object_get_member (message, "method");
  if (id != NULL && id_is_valid (id))
    request->id = json_node_copy (id);

  if (g_strcmp0 (member_string (message, "jsonrpc"), "2.0") != 0)
    {
      text = response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
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
      text = response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "A JSON-RPC request needs \"method\"");
      request_reply (request, text);
      return;
    }
  if (!JSON_NODE_HOLDS_VALUE (method_node) || json_node_get_value_type (method_node) != G_TYPE_STRING)
    {
      text = response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_REQUEST, "\"method\" must be a string");
      request_reply (request, text);
      return;
    }
  method = json_node_get_string (method_node);
  if (id == NULL)
    {
      /* A notification: notifications/initialized, notifications/cancelled
       * (a tool call cannot be stopped half-way, so it runs on) or one we do
       * not know.  JSON-RPC answers none of them. */
      g_debug ("notification '%s'", method);
      request_reply (request, NULL);
      return;
    }
  if (request->id == NULL)
    {
      text = response_error (NULL, SANDSTEP_MCP_ERROR_INVALID_REQUEST,
                             "\"id\" must be a string or an integer (MCP never uses null)");
      request_reply (request, text);
      return;
    }
  params_node = json_object_get_member (message, "params");
  if (params_node != NULL && !JSON_NODE_HOLDS_NULL (params_node))
    {
      if (!JSON_NODE_HOLDS_OBJECT (params_node))
        {
          text = response_error (request->id, SANDSTEP_MCP_ERROR_INVALID_PARAMS, "\"params\" must be an object");
          request_reply (request, text);
          return;
        }
      params = json_node_get_object (params_node);
    }

  for (gsize i = 0; i < G_N_ELEMENTS (methods); i++)
    {
      if (strcmp (methods[i].name, method) != 0)
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
          text = result != NULL ? response_result (request->id, result) : response_gerror (request->id, error);
        }
      request_reply (request, text);
      return;
    }
  g_debug ("unknown method '%s'", method);
  {
    g_autofree char *what = g_strdup_printf ("Method not found: '%s'", method);
    text = response_error (request->id, SANDSTEP_MCP_ERROR_METHOD_NOT_FOUND, what);
  }
  request_reply (request, text);
}

/* "Parse error: the message is not JSON (...)", without json-glib's own "<data>:1:1: Parse error:". */
static char *
parse_error_message (const GError *parse_error)
{
  const char *detail = strstr (parse_error->message, "Parse error: ");

  detail = detail != NULL ? detail + strlen ("Parse error: ") : parse_error->message;
  return g_strdup_printf ("Parse error: the message is not JSON (%s)", detail);
}

static void
handle_parse_error (SandstepMcpServer *server, const GError *parse_error, ReplyFunc reply, gpointer user_data)
{
  g_autofree char *message = parse_error_message (parse_error);
  g_autofree char *text = response_error (NULL, SANDSTEP_MCP_ERROR_PARSE, message);
  Request *request = g_new0 (Request, 1);

  server->in_flight++;
  request->server = server;
  request->reply = reply;
  request->user_data = user_data;
  request_reply (request, text);
}

static JsonNode *
parse_message (const char *message, gsize length, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();

  if (length > G_MAXSSIZE)
    length = G_MAXSSIZE;
  if (!g_utf8_validate (message, length, NULL))
    {
      throw_mcp (error, SANDSTEP_MCP_ERROR_PARSE, "the message is not UTF-8");
      return NULL;
    }
  if (!json_parser_load_from_data (parser, message, (gssize) length, error))
    return NULL;
  if (json_parser_get_root (parser) == NULL)
    {
      throw_mcp (error, SANDSTEP_MCP_ERROR_PARSE, "the message is empty");
      return NULL;
    }
  return json_node_ref (json_parser_get_root (parser));
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
  g_autoptr(JsonNode) root = parse_message (message, length, &error);
  PublicReply *closure = g_new0 (PublicReply, 1);

  closure->func = reply;
  closure->user_data = user_data;
  if (root == NULL)
    handle_parse_error (server, error, public_reply, closure);
  else
    handle_node (server, root, public_reply, closure);
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
      const char *name = JSON_NODE_HOLDS_OBJECT (node) ? member_string (json_node_get_object (node), "name") : NULL;

      if (name == NULL)
        continue;
      g_hash_table_add (server->tool_names, (gpointer) name);
      g_string_append_printf (names, "%s%s", names->len > 0 ? ", " : "", name);
    }
  server->tool_list = g_string_free (names, FALSE);
  server->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  g_mutex_init (&server->lock);
  g_cond_init (&server->cond);
  g_queue_init (&server->jobs);
  g_queue_init (&server->done);
  server->done_source = g_source_new (&done_source_funcs, sizeof (GSource));
  g_source_set_callback (server->done_source, NULL, server, NULL);
  g_source_set_static_name (server->done_source, "sandstep-mcp tool results");
  g_source_attach (server->done_source, server->context);
  server->worker = g_thread_new ("sandstep-tools", worker_main, server);
  return server;
}

gboolean
sandstep_mcp_server_stop (SandstepMcpServer *server, double wait_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (MAX (wait_s, 0) * G_USEC_PER_SEC);
  ToolJob *job;

  if (server->worker == NULL)
    return TRUE;
  g_mutex_lock (&server->lock);
  server->stopping = TRUE;
  g_cond_broadcast (&server->cond);
  while (server->busy)
    if (!g_cond_wait_until (&server->cond, &server->lock, deadline))
      break;
  if (server->busy)
    {
      g_mutex_unlock (&server->lock);
      return FALSE;
    }
  g_mutex_unlock (&server->lock);
  g_thread_join (g_steal_pointer (&server->worker));

  /* Requests nobody will answer now: the server is going away. */
  while ((job = g_queue_pop_head (&server->jobs)) != NULL || (job = g_queue_pop_head (&server->done)) != NULL)
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
  g_source_destroy (server->done_source);
  g_source_unref (server->done_source);
  g_mutex_clear (&server->lock);
  g_cond_clear (&server->cond);
  g_free (server->dead);
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

/* ---- stdio: one message per line ---- */

static void stdio_read_next (SandstepMcpServer *server);

static void
stdio_reply (SandstepMcpServer *server, const char *reply, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;

  if (reply == NULL)
    return;
  /* The generator escapes every newline inside strings, so a reply is one line. */
  line = g_strconcat (reply, "\n", NULL);
  if (!g_output_stream_write_all (server->stdio_out, line, strlen (line), NULL, NULL, &error))
    {
      g_debug ("cannot write a reply to stdout, stopping: %s", error->message);
      sandstep_mcp_server_quit (server);
      return;
    }
  reply_delivered (server, server->replying_terminal);
}

static void
stdio_line_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  g_autoptr(GError) error = NULL;
  gsize length = 0;
  g_autofree char *line = g_data_input_stream_read_line_finish (G_DATA_INPUT_STREAM (source), result, &length, &error);

  if (line == NULL)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return;
      if (error != NULL)
        g_debug ("cannot read stdin, stopping: %s", error->message);
      /* EOF: the client is done; answer what is still running, then end. */
      server->quit_when_idle = TRUE;
      if (server->in_flight == 0)
        sandstep_mcp_server_quit (server);
      return;
    }
  if (length > 0 && line[length - 1] == '\r')
    line[--length] = '\0';
  if (strspn (line, " \t") != length)
    {
      g_autoptr(GError) parse_error = NULL;
      g_autoptr(JsonNode) root = parse_message (line, length, &parse_error);

      if (root == NULL)
        handle_parse_error (server, parse_error, stdio_reply, NULL);
      else
        handle_node (server, root, stdio_reply, NULL);
    }
  stdio_read_next (server);
}

static void
stdio_read_next (SandstepMcpServer *server)
{
  g_data_input_stream_read_line_async (server->stdio_in, G_PRIORITY_DEFAULT, server->cancellable, stdio_line_read,
                                       server);
}

gboolean
sandstep_mcp_server_listen_stdio (SandstepMcpServer *server, int in_fd, int out_fd, GError **error)
{
  g_autoptr(GInputStream) in = g_unix_input_stream_new (in_fd, FALSE);

  g_return_val_if_fail (server->stdio_in == NULL, FALSE);
  server->stdio_in = g_data_input_stream_new (in);
  g_data_input_stream_set_newline_type (server->stdio_in, G_DATA_STREAM_NEWLINE_TYPE_LF);
  server->stdio_out = g_unix_output_stream_new (out_fd, FALSE);
  server->cancellable = g_cancellable_new ();
  stdio_read_next (server);
  return TRUE;
}

/* ---- Streamable HTTP ---- */

static gboolean
host_is_loopback (SandstepMcpServer *server, const char *host)
{
  g_autoptr(GInetAddress) address = NULL;
  g_autofree char *lower = g_ascii_strdown (host, -1);
  gsize len = strlen (lower);

  if (len > 0 && lower[len - 1] == '.')
    lower[--len] = '\0';
  if (strcmp (lower, "localhost") == 0 || g_str_has_suffix (lower, ".localhost"))
    return TRUE;
  if (server->bound_host != NULL && g_ascii_strcasecmp (lower, server->bound_host) == 0)
    return TRUE;
  address = g_inet_address_new_from_string (lower);
  return address != NULL && g_inet_address_get_is_loopback (address);
}

/* "name", "name:port", "[v6]" or "[v6]:port" -> the host part, or NULL. */
static char *
host_header_host (const char *value)
{
  const char *colon;

  if (value == NULL || value[0] == '\0')
    return NULL;
  if (value[0] == '[')
    {
      const char *end = strchr (value, ']');
      if (end == NULL || (end[1] != '\0' && end[1] != ':'))
        return NULL;
      return g_strndup (value + 1, end - value - 1);
    }
  colon = strchr (value, ':');
  if (colon != NULL && strchr (colon + 1, ':') != NULL)
    return NULL;
  return colon != NULL ? g_strndup (value, colon - value) : g_strdup (value);
}

static void
http_set_json (SoupServerMessage *msg, guint status, const char *body)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, body, strlen (body));
}

static void
http_refuse (SoupServerMessage *msg, guint status, int code, const char *message)
{
  g_autofree char *body = response_error (NULL, code, message);

  http_set_json (msg, status, body);
}

/* Before the body is read: who may talk to us at all. */
static void
http_early_handler (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query,
                    gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *host_value = soup_message_headers_get_one (headers, "Host");
  const char *origin = soup_message_headers_get_one (headers, "Origin");
  g_autofree char *host = host_header_host (host_value);
  goffset length;

  /* DNS rebinding: a page from evil.example whose name now points at
   * 127.0.0.1 still sends "Host: evil.example". */
  if (host == NULL || !host_is_loopback (server, host))
    {
      g_autofree char *message = g_strdup_printf ("Forbidden: Host '%s' is not this loopback server",
                                                  host_value != NULL ? host_value : "");
      g_debug ("%s", message);
      http_refuse (msg, SOUP_STATUS_FORBIDDEN, SANDSTEP_MCP_ERROR_REFUSED, message);
      return;
    }
  /* A browser page of another origin: only loopback pages may call us. */
  if (origin != NULL)
    {
      g_autoptr(GUri) uri = g_uri_parse (origin, G_URI_FLAGS_NONE, NULL);
      const char *scheme = uri != NULL ? g_uri_get_scheme (uri) : NULL;
      const char *origin_host = uri != NULL ? g_uri_get_host (uri) : NULL;

      if (uri == NULL || (g_strcmp0 (scheme, "http") != 0 && g_strcmp0 (scheme, "https") != 0) ||
          origin_host == NULL || !host_is_loopback (server, origin_host))
        {
          g_autofree char *message = g_strdup_printf ("Forbidden: Origin '%s' is not a loopback origin", origin);
          g_debug ("%s", message);
          http_refuse (msg, SOUP_STATUS_FORBIDDEN, SANDSTEP_MCP_ERROR_REFUSED, message);
          return;
        }
    }
  length = soup_message_headers_get_content_length (headers);
  if (soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH && length > MAX_HTTP_BODY)
    {
      g_autofree char *message = g_strdup_printf ("The message is %" G_GOFFSET_FORMAT " bytes, over the limit of "
                                                  "%d bytes", length, MAX_HTTP_BODY);
      http_refuse (msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, SANDSTEP_MCP_ERROR_REFUSED, message);
    }
}

typedef struct {
  SandstepMcpServer *server;
  SoupServerMessage *msg;
  char *session;             /* issue this Mcp-Session-Id with the reply (initialize) */
  gboolean paused;
  gboolean answered;
  gboolean finished;         /* the message is done (sent, or the client went away) */
  gboolean terminal;         /* the reply answers a terminal failure */
  int refs;
} HttpExchange;

static void
http_exchange_unref (HttpExchange *exchange)
{
  if (--exchange->refs > 0)
    return;
  g_object_unref (exchange->msg);
  g_free (exchange->session);
  g_free (exchange);
}

static void
http_finished (SoupServerMessage *msg, gpointer user_data)
{
  HttpExchange *exchange = user_data;

  if (exchange->finished)
    return;
  exchange->finished = TRUE;
  reply_delivered (exchange->server, exchange->terminal);
  g_signal_handlers_disconnect_by_data (msg, exchange);
  http_exchange_unref (exchange);
}

static gboolean
reply_is_result (const char *reply)
{
  g_autoptr(JsonNode) root = json_from_string (reply, NULL);

  return root != NULL && JSON_NODE_HOLDS_OBJECT (root) && json_object_has_member (json_node_get_object (root), "result");
}

static void
http_reply (SandstepMcpServer *server, const char *reply, gpointer user_data)
{
  HttpExchange *exchange = user_data;

  exchange->answered = TRUE;
  exchange->terminal = server->replying_terminal;
  if (!exchange->finished)
    {
      SoupMessageHeaders *headers = soup_server_message_get_response_headers (exchange->msg);

      if (reply == NULL)
        {
          /* A notification or a response: accepted, nothing to say. */
          soup_server_message_set_status (exchange->msg, SOUP_STATUS_ACCEPTED, NULL);
        }
      else
        {
          /* A session starts with a successful initialize. */
          if (exchange->session != NULL && reply_is_result (reply))
            {
              g_hash_table_add (server->sessions, g_strdup (exchange->session));
              soup_message_headers_replace (headers, "Mcp-Session-Id", exchange->session);
            }
          http_set_json (exchange->msg, SOUP_STATUS_OK, reply);
        }
      if (exchange->paused)
        soup_server_message_unpause (exchange->msg);
    }
  else if (exchange->terminal)
    reply_delivered (server, TRUE);
  http_exchange_unref (exchange);
}

static char *
new_session_id (void)
{
  guint8 bytes[16];
  GString *id = g_string_new (NULL);

  if (getrandom (bytes, sizeof bytes, 0) != sizeof bytes)
    g_error ("getrandom() failed: %s", g_strerror (errno));
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (id, "%02x", bytes[i]);
  return g_string_free (id, FALSE);
}

static void
http_post (SandstepMcpServer *server, SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  const char *session = soup_message_headers_get_one (headers, "Mcp-Session-Id");
  const char *version = soup_message_headers_get_one (headers, "MCP-Protocol-Version");
  const char *content_type = soup_message_headers_get_content_type (headers, NULL);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  HttpExchange *exchange;
  gsize length;
  const char *data;

  if (content_type != NULL && g_ascii_strcasecmp (content_type, "application/json") != 0)
    {
      g_autofree char *message = g_strdup_printf ("Unsupported Content-Type '%s': send JSON-RPC messages as "
                                                  "application/json", content_type);
      http_refuse (msg, SOUP_STATUS_UNSUPPORTED_MEDIA_TYPE, SANDSTEP_MCP_ERROR_REFUSED, message);
      return;
    }
  if (version != NULL && !version_is_supported (version))
    {
      g_autofree char *message = g_strdup_printf ("Unsupported MCP-Protocol-Version '%s'; supported: %s, %s, %s, "
                                                  "%s", version, protocol_versions[0], protocol_versions[1],
                                                  protocol_versions[2], protocol_versions[3]);
      http_refuse (msg, SOUP_STATUS_BAD_REQUEST, SANDSTEP_MCP_ERROR_REFUSED, message);
      return;
    }
  if (session != NULL && !g_hash_table_contains (server->sessions, session))
    {
      http_refuse (msg, SOUP_STATUS_NOT_FOUND, SANDSTEP_MCP_ERROR_REFUSED,
                   "Session not found: it ended or was never issued; initialize again");
      return;
    }

  bytes = soup_message_body_flatten (body);
  data = g_bytes_get_data (bytes, &length);
  root = parse_message (data != NULL ? data : "", length, &error);
  if (root == NULL)
    {
      g_autofree char *message = parse_error_message (error);
      g_autofree char *text = response_error (NULL, SANDSTEP_MCP_ERROR_PARSE, message);
      http_set_json (msg, SOUP_STATUS_BAD_REQUEST, text);
      return;
    }

  exchange = g_new0 (HttpExchange, 1);
  exchange->server = server;
  exchange->msg = g_object_ref (msg);
  exchange->refs = 2;      /* one for the reply, one for "finished" */
  g_signal_connect (msg, "finished", G_CALLBACK (http_finished), exchange);
  if (JSON_NODE_HOLDS_OBJECT (root) &&
      g_strcmp0 (member_string (json_node_get_object (root), "method"), "initialize") == 0 &&
      json_object_has_member (json_node_get_object (root), "id"))
    exchange->session = new_session_id ();

  handle_node (server, root, http_reply, exchange);
  if (!exchange->answered)
    {
      exchange->paused = TRUE;
      soup_server_message_pause (msg);
    }
}

static void
http_handler (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  const char *method = soup_server_message_get_method (msg);
  SoupMessageHeaders *response_headers = soup_server_message_get_response_headers (msg);

  if (strcmp (path, SANDSTEP_MCP_PATH) != 0)
    {
      http_refuse (msg, SOUP_STATUS_NOT_FOUND, SANDSTEP_MCP_ERROR_REFUSED,
                   "Not found: the MCP endpoint is " SANDSTEP_MCP_PATH);
      return;
    }
  if (strcmp (method, SOUP_METHOD_POST) == 0)
    http_post (server, msg);
  else if (strcmp (method, SOUP_METHOD_DELETE) == 0)
    {
      const char *session = soup_message_headers_get_one (soup_server_message_get_request_headers (msg),
                                                          "Mcp-Session-Id");
      if (session == NULL)
        http_refuse (msg, SOUP_STATUS_BAD_REQUEST, SANDSTEP_MCP_ERROR_REFUSED,
                     "DELETE ends a session: send its Mcp-Session-Id");
      else if (!g_hash_table_remove (server->sessions, session))
        http_refuse (msg, SOUP_STATUS_NOT_FOUND, SANDSTEP_MCP_ERROR_REFUSED,
                     "Session not found: it ended or was never issued");
      else
        soup_server_message_set_status (msg, SOUP_STATUS_NO_CONTENT, NULL);
    }
  else
    {
      /* GET would open a stream of server messages; this server sends none. */
      soup_message_headers_replace (response_headers, "Allow", "POST, DELETE");
      http_refuse (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, SANDSTEP_MCP_ERROR_REFUSED,
                   "Method not allowed: POST JSON-RPC messages; this server offers no event stream");
    }
}

/* Splits "PORT", "ADDR:PORT" or "[ADDR]:PORT" and checks that ADDR is loopback. */
static gboolean
parse_listen_address (const char *text, char **out_host, guint16 *out_port, GError **error)
{
  g_autofree char *host = NULL;
  g_autoptr(GInetAddress) address = NULL;
  guint16 port;
  const char *expected = "ADDR:PORT with a loopback ADDR (127.0.0.1, [::1] or localhost) and a PORT from 0 "
                         "(pick a free one) to 65535";

  if (text == NULL || text[0] == '\0')
    text = "127.0.0.1:0";
  if (!sandstep_parse_host_port (text, TRUE, &host, &port))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--http '%s' is not %s", text, expected);
  if (host[0] == '\0' || g_ascii_strcasecmp (host, "localhost") == 0)
    {
      g_free (host);
      host = g_strdup ("127.0.0.1");
    }
  address = g_inet_address_new_from_string (host);
  if (address == NULL || !g_inet_address_get_is_loopback (address))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--http '%s': '%s' is not a loopback address. The MCP endpoint has no "
                           "authentication and runs commands in the sandbox, so sandstep serves it on loopback "
                           "only (127.0.0.1, [::1] or localhost); reach it from another machine through an SSH "
                           "tunnel", text, host);
  *out_host = g_inet_address_to_string (address);
  *out_port = port;
  return TRUE;
}

gboolean
sandstep_mcp_check_address (const char *address, GError **error)
{
  g_autofree char *host = NULL;
  guint16 port;

  return parse_listen_address (address, &host, &port, error);
}

char *
sandstep_mcp_server_listen_http (SandstepMcpServer *server, const char *address, GError **error)
{
  g_autofree char *host = NULL;
  g_autoptr(GInetAddress) inet = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(SoupServer) soup = NULL;
  g_autoptr(GError) local_error = NULL;
  GSList *listeners;
  guint port = 0;
  guint16 wanted_port = 0;

  g_return_val_if_fail (server->http == NULL, NULL);
  if (!parse_listen_address (address, &host, &wanted_port, error))
    return NULL;
  inet = g_inet_address_new_from_string (host);
  socket_address = g_inet_socket_address_new (inet, wanted_port);
  soup = soup_server_new ("server-header", "sandstep-mcp ", NULL);
  if (!soup_server_listen (soup, socket_address, 0, &local_error))
    {
      /* A port someone chose and someone else holds is the caller's to change. */
      if (wanted_port != 0)
        sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                        "--http '%s': %s; choose another port, or 0 for a free one", address, local_error->message);
      else
        g_propagate_prefixed_error (error, g_steal_pointer (&local_error), "Cannot serve MCP over HTTP: ");
      return NULL;
    }
  /* The port bound (port 0 picks one); soup_server_get_uris() would leak here. */
  listeners = soup_server_get_listeners (soup);
  if (listeners != NULL)
    {
      g_autoptr(GSocketAddress) local = g_socket_get_local_address (listeners->data, NULL);
      if (local != NULL && G_IS_INET_SOCKET_ADDRESS (local))
        port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));
    }
  g_slist_free (listeners);
  if (port == 0)
    {
      g_set_error (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INTERNAL, "Cannot tell which port the MCP server "
                   "listens on");
      return NULL;
    }
  soup_server_add_early_handler (soup, NULL, http_early_handler, server, NULL);
  soup_server_add_handler (soup, NULL, http_handler, server, NULL);

  server->bound_host = g_steal_pointer (&host);
  server->http = g_steal_pointer (&soup);
  if (strchr (server->bound_host, ':') != NULL)
    return g_strdup_printf ("http://[%s]:%u" SANDSTEP_MCP_PATH, server->bound_host, port);
  return g_strdup_printf ("http://%s:%u" SANDSTEP_MCP_PATH, server->bound_host, port);
}
