/* test-agent.c: the agent tools on a real sandbox, and `sandstep agent`
 * against a scripted chat-completions server.
 *
 * /tools/...  call the toolbox in this process, attached to a sandbox the
 *             helper provisioned (SANDSTEP_STATE_DIR of the fixture).
 * /agent/...  run the helper as a subprocess with OPENAI_BASE_URL pointing at
 *             a SoupServer on 127.0.0.1 (port 0) in a thread of this process,
 *             which answers from a script and records every request.
 * /llm/...    the chat client alone against the same server: retries,
 *             unreachable endpoints, replies that are not completions.
 *
 * The same server runs on its own for demos (examples/agent/README.md):
 *
 *   test-agent --serve SCRIPT.json [--port=N] [--log=FILE]
 *
 * prints its base URL (http://127.0.0.1:PORT/v1) on stdout and serves until
 * SIGINT or SIGTERM, logging each request body to FILE as a JSON line.
 *
 * A script is a JSON array of steps, one per request (the last one repeats):
 *   {"calls": [{"name": "run_command", "arguments": {...} or "raw text"}, ...]}
 *   {"answer": "text; {{last_tool_result}} is replaced by the last tool message"}
 *   {"status": 429, "headers": {"Retry-After": "0"}, "body": {...}}
 *   {"raw": "text sent as the body, byte for byte"}
 * with optional "delay" (seconds before answering), "finish_reason" and
 * "content" (with calls).  Tool call ids are "call_<request>_<index>".
 */
#include <glib-unix.h>
#include <libsoup/soup.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "sandstep-error.h"
#include "sandstep-llm.h"
#include "sandstep-test-utils.h"
#include "sandstep-tools.h"

#define SECRET "hunter2-sandstep-secret"
#define API_KEY "sk-test-key-do-not-log-123"
#define AGENT_TIMEOUT_S 120.0

/* ---- the scripted server ---- */

typedef struct {
  GMutex lock;
  GCond ready_cond;
  gboolean ready;
  JsonArray *script;
  guint served;
  GPtrArray *requests;       /* JsonObject: path, authorization, body */
  GMainContext *context;
  GMainLoop *loop;
  GThread *thread;
  SoupServer *server;
  guint port;
  char *base_url;
  FILE *log;
  char *error;
} Scripted;

typedef struct {
  Scripted *s;
  SoupServerMessage *msg;
  guint status;
  char *body;
  JsonObject *headers;
} Delayed;

static char *
node_to_string (JsonNode *node)
{
  return json_to_string (node, FALSE);
}

static char *
object_to_string (JsonObject *object)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, object);
  return node_to_string (node);
}

static void
send_response (SoupServerMessage *msg, guint status, JsonObject *headers, const char *body)
{
  SoupMessageHeaders *out = soup_server_message_get_response_headers (msg);

  if (headers != NULL)
    {
      GList *names = json_object_get_members (headers);
      for (GList *l = names; l != NULL; l = l->next)
        soup_message_headers_replace (out, l->data, json_object_get_string_member (headers, l->data));
      g_list_free (names);
    }
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, body, strlen (body));
}

static gboolean
send_delayed (gpointer data)
{
  Delayed *d = data;

  send_response (d->msg, d->status, d->headers, d->body);
  soup_server_message_unpause (d->msg);
  return G_SOURCE_REMOVE;
}

/* Also when the server stops before the delay is over. */
static void
delayed_free (gpointer data)
{
  Delayed *d = data;

  g_object_unref (d->msg);
  if (d->headers != NULL)
    json_object_unref (d->headers);
  g_free (d->body);
  g_free (d);
}

/* The content of the last tool message of @body's messages, or "". */
static const char *
last_tool_result (JsonObject *body)
{
  JsonArray *messages = json_object_get_array_member (body, "messages");

  for (guint i = json_array_get_length (messages); i > 0; i--)
    {
      JsonObject *m = json_array_get_object_element (messages, i - 1);
      if (g_strcmp0 (json_object_get_string_member_with_default (m, "role", ""), "tool") == 0)
        return json_object_get_string_member_with_default (m, "content", "");
    }
  return "";
}

static char *
completion_for (JsonObject *step, guint n, JsonObject *request)
{
  g_autoptr(JsonObject) reply = json_object_new ();
  JsonObject *message = json_object_new ();
  JsonObject *choice = json_object_new ();
  JsonObject *usage = json_object_new ();
  JsonArray *choices = json_array_new ();
  gboolean has_calls = json_object_has_member (step, "calls");

  json_object_set_string_member (message, "role", "assistant");
  if (json_object_has_member (step, "answer"))
    {
      g_autoptr(GString) answer = g_string_new (json_object_get_string_member (step, "answer"));
      g_string_replace (answer, "{{last_tool_result}}", last_tool_result (request), 0);
      json_object_set_string_member (message, "content", answer->str);
    }
  else if (json_object_has_member (step, "content"))
    json_object_set_member (message, "content", json_node_copy (json_object_get_member (step, "content")));
  else
    json_object_set_null_member (message, "content");
  if (has_calls)
    {
      JsonArray *calls = json_object_get_array_member (step, "calls");
      JsonArray *tool_calls = json_array_new ();

      for (guint i = 0; i < json_array_get_length (calls); i++)
        {
          JsonObject *call = json_array_get_object_element (calls, i);
          JsonObject *tool_call = json_object_new ();
          JsonObject *function = json_object_new ();
          JsonNode *arguments = json_object_get_member (call, "arguments");
          g_autofree char *id = g_strdup_printf ("call_%u_%u", n, i + 1);

          json_object_set_string_member (function, "name", json_object_get_string_member (call, "name"));
          if (arguments != NULL && JSON_NODE_HOLDS_OBJECT (arguments))
            {
              g_autofree char *text = node_to_string (arguments);
              json_object_set_string_member (function, "arguments", text);
            }
          else if (arguments != NULL)
            json_object_set_member (function, "arguments", json_node_copy (arguments));
          else
            json_object_set_string_member (function, "arguments", "{}");
          json_object_set_string_member (tool_call, "id", id);
          json_object_set_string_member (tool_call, "type", "function");
          json_object_set_object_member (tool_call, "function", function);
          json_array_add_object_element (tool_calls, tool_call);
        }
      json_object_set_array_member (message, "tool_calls", tool_calls);
    }
  json_object_set_int_member (choice, "index", 0);
  json_object_set_object_member (choice, "message", message);
  json_object_set_string_member (choice, "finish_reason",
                                 json_object_get_string_member_with_default (step, "finish_reason",
                                                                             has_calls ? "tool_calls" : "stop"));
  json_array_add_object_element (choices, choice);
  {
    g_autofree char *id = g_strdup_printf ("chatcmpl-scripted-%u", n);
    json_object_set_string_member (reply, "id", id);
  }
  json_object_set_string_member (reply, "object", "chat.completion");
  json_object_set_int_member (reply, "created", g_get_real_time () / G_USEC_PER_SEC);
  json_object_set_string_member (reply, "model", json_object_get_string_member_with_default (request, "model", ""));
  json_object_set_array_member (reply, "choices", choices);
  json_object_set_int_member (usage, "prompt_tokens", 0);
  json_object_set_int_member (usage, "completion_tokens", 0);
  json_object_set_int_member (usage, "total_tokens", 0);
  json_object_set_object_member (reply, "usage", usage);
  return object_to_string (reply);
}

static void
handle_request (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  Scripted *s = data;
  g_autoptr(GBytes) body = soup_message_body_flatten (soup_server_message_get_request_body (msg));
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonObject) record = json_object_new ();
  const char *authorization = soup_message_headers_get_one (soup_server_message_get_request_headers (msg),
                                                            "Authorization");
  JsonObject *step, *request;
  g_autofree char *text = NULL;
  guint n, status;
  double delay;

  if (strcmp (path, "/v1/chat/completions") != 0 || strcmp (soup_server_message_get_method (msg), "POST") != 0)
    {
      send_response (msg, 404, NULL, "{\"error\": {\"message\": \"Not found: use POST /v1/chat/completions\"}}");
      return;
    }
  if (!json_parser_load_from_data (parser, g_bytes_get_data (body, NULL), g_bytes_get_size (body), NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      send_response (msg, 400, NULL, "{\"error\": {\"message\": \"The body is not a JSON object\"}}");
      return;
    }
  request = json_node_get_object (json_parser_get_root (parser));
  json_object_set_string_member (record, "path", path);
  if (authorization != NULL)
    json_object_set_string_member (record, "authorization", authorization);
  else
    json_object_set_null_member (record, "authorization");
  json_object_set_object_member (record, "body", json_object_ref (request));

  g_mutex_lock (&s->lock);
  g_ptr_array_add (s->requests, json_object_ref (record));
  n = ++s->served;
  step = json_array_get_object_element (s->script, MIN (n, json_array_get_length (s->script)) - 1);
  g_mutex_unlock (&s->lock);
  if (s->log != NULL)
    {
      g_autofree char *line = node_to_string (json_parser_get_root (parser));
      fprintf (s->log, "%s\n", line);
      fflush (s->log);
    }

  status = json_object_get_int_member_with_default (step, "status", 200);
  if (json_object_has_member (step, "raw"))
    text = g_strdup (json_object_get_string_member (step, "raw"));
  else if (json_object_has_member (step, "body"))
    text = node_to_string (json_object_get_member (step, "body"));
  else
    text = completion_for (step, n, request);
  delay = json_object_get_double_member_with_default (step, "delay", 0);
  if (delay > 0)
    {
      Delayed *d = g_new0 (Delayed, 1);
      GSource *source = g_timeout_source_new ((guint) (delay * 1000));

      d->s = s;
      d->msg = g_object_ref (msg);
      d->status = status;
      d->body = g_steal_pointer (&text);
      if (json_object_has_member (step, "headers"))
        d->headers = json_object_ref (json_object_get_object_member (step, "headers"));
      soup_server_message_pause (msg);
      g_source_set_callback (source, send_delayed, d, delayed_free);
      g_source_attach (source, s->context);
      g_source_unref (source);
      return;
    }
  send_response (msg, status,
                 json_object_has_member (step, "headers") ? json_object_get_object_member (step, "headers") : NULL,
                 text);
}

static gboolean
scripted_listen (Scripted *s, guint port, GError **error)
{
  GSList *uris;

  s->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (s->server, NULL, handle_request, s, NULL);
  if (!soup_server_listen_local (s->server, port, SOUP_SERVER_LISTEN_IPV4_ONLY, error))
    return FALSE;
  uris = soup_server_get_uris (s->server);
  s->port = g_uri_get_port (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  s->base_url = g_strdup_printf ("http://127.0.0.1:%u/v1", s->port);
  return TRUE;
}

static gpointer
scripted_thread (gpointer data)
{
  Scripted *s = data;
  g_autoptr(GError) error = NULL;

  g_main_context_push_thread_default (s->context);
  if (!scripted_listen (s, 0, &error))
    s->error = g_strdup (error->message);
  g_mutex_lock (&s->lock);
  s->ready = TRUE;
  g_cond_signal (&s->ready_cond);
  g_mutex_unlock (&s->lock);
  if (s->error == NULL)
    g_main_loop_run (s->loop);
  if (s->server != NULL)
    {
      soup_server_disconnect (s->server);
      g_clear_object (&s->server);
    }
  /* Anything still pending (a delayed answer) goes with the context. */
  while (g_main_context_iteration (s->context, FALSE))
    ;
  g_main_context_pop_thread_default (s->context);
  return NULL;
}

static JsonArray *
parse_script (const char *json)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, json, -1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)));
  g_assert_cmpuint (json_array_get_length (json_node_get_array (json_parser_get_root (parser))), >, 0);
  return json_array_ref (json_node_get_array (json_parser_get_root (parser)));
}

static Scripted *
scripted_new (const char *script_json)
{
  Scripted *s = g_new0 (Scripted, 1);

  g_mutex_init (&s->lock);
  g_cond_init (&s->ready_cond);
  s->script = parse_script (script_json);
  s->requests = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  return s;
}

/* In a thread of its own, so the test can block on the helper. */
static Scripted *
scripted_start (const char *script_json)
{
  Scripted *s = scripted_new (script_json);

  s->context = g_main_context_new ();
  s->loop = g_main_loop_new (s->context, FALSE);
  s->thread = g_thread_new ("scripted-llm", scripted_thread, s);
  g_mutex_lock (&s->lock);
  while (!s->ready)
    g_cond_wait (&s->ready_cond, &s->lock);
  g_mutex_unlock (&s->lock);
  g_assert_null (s->error);
  return s;
}

static void
scripted_free (Scripted *s)
{
  if (s == NULL)
    return;
  if (s->thread != NULL)
    {
      g_main_loop_quit (s->loop);
      g_main_context_wakeup (s->context);
      g_thread_join (s->thread);
    }
  g_clear_pointer (&s->loop, g_main_loop_unref);
  g_clear_pointer (&s->context, g_main_context_unref);
  g_clear_object (&s->server);
  json_array_unref (s->script);
  g_ptr_array_unref (s->requests);
  g_free (s->base_url);
  g_free (s->error);
  if (s->log != NULL)
    fclose (s->log);
  g_mutex_clear (&s->lock);
  g_cond_clear (&s->ready_cond);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Scripted, scripted_free)

/* The body of request @i (0-based). */
static JsonObject *
request_body (Scripted *s, guint i)
{
  JsonObject *record;

  g_mutex_lock (&s->lock);
  g_assert_cmpuint (i, <, s->requests->len);
  record = s->requests->pdata[i];
  g_mutex_unlock (&s->lock);
  return json_object_get_object_member (record, "body");
}

static guint
request_count (Scripted *s)
{
  guint n;

  g_mutex_lock (&s->lock);
  n = s->requests->len;
  g_mutex_unlock (&s->lock);
  return n;
}

static JsonObject *
message_at (Scripted *s, guint request, guint index)
{
  JsonArray *messages = json_object_get_array_member (request_body (s, request), "messages");

  g_assert_cmpuint (index, <, json_array_get_length (messages));
  return json_array_get_object_element (messages, index);
}

/* ---- --serve ---- */

static gboolean
quit_on_signal (gpointer loop)
{
  g_main_loop_quit (loop);
  return G_SOURCE_REMOVE;
}

static int
serve_main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *script_text = NULL;
  g_autoptr(Scripted) s = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  const char *script_path = NULL, *log_path = NULL;
  guint port = 0;

  for (int i = 2; i < argc; i++)
    {
      if (g_str_has_prefix (argv[i], "--port="))
        port = (guint) g_ascii_strtoull (argv[i] + 7, NULL, 10);
      else if (g_str_has_prefix (argv[i], "--log="))
        log_path = argv[i] + 6;
      else
        script_path = argv[i];
    }
  if (script_path == NULL)
    {
      g_printerr ("usage: test-agent --serve SCRIPT.json [--port=N] [--log=FILE]\n");
      return 64;
    }
  if (!g_file_get_contents (script_path, &script_text, NULL, &error))
    {
      g_printerr ("test-agent: %s\n", error->message);
      return 66;
    }
  s = scripted_new (script_text);
  if (log_path != NULL)
    s->log = fopen (log_path, "we");
  if (!scripted_listen (s, port, &error))
    {
      g_printerr ("test-agent: cannot listen on 127.0.0.1:%u: %s\n", port, error->message);
      return 1;
    }
  g_print ("%s\n", s->base_url);
  fflush (stdout);
  g_unix_signal_add (SIGINT, quit_on_signal, loop);
  g_unix_signal_add (SIGTERM, quit_on_signal, loop);
  g_main_loop_run (loop);
  soup_server_disconnect (s->server);
  return 0;
}

/* ---- fixtures ---- */

typedef struct {
  SandstepTestFixture f;
  Scripted *server;
  char *handle;
  char *transcript;
} AgentFixture;

static void
agent_setup (AgentFixture *af, gconstpointer data)
{
  sandstep_test_setup (&af->f, data);
  sandstep_test_fixture_setenv (&af->f, "MYSECRET", SECRET);
  sandstep_test_fixture_setenv (&af->f, "OPENAI_API_KEY", API_KEY);
  sandstep_test_fixture_setenv (&af->f, "OPENAI_MODEL", NULL);
  sandstep_test_fixture_setenv (&af->f, "OPENAI_BASE_URL", "http://127.0.0.1:1/v1");
  af->transcript = sandstep_test_host_path (&af->f, "transcript.jsonl");
}

static void
agent_teardown (AgentFixture *af, gconstpointer data)
{
  scripted_free (af->server);
  g_free (af->handle);
  g_free (af->transcript);
  sandstep_test_teardown (&af->f, data);
}

static const char *
provision (AgentFixture *af, const char *lifetime)
{
  g_autofree char *lifetime_arg = g_strconcat ("--lifetime=", lifetime != NULL ? lifetime : "1h", NULL);

  g_free (af->handle);
  af->handle = sandstep_test_provision (&af->f, "--secret=MYSECRET", lifetime_arg, NULL);
  return af->handle;
}

/* Runs `sandstep agent` against a scripted server; NULL-terminated extra
 * arguments go before "--" PROMPT. */
static SandstepTestResult *
run_agent (AgentFixture *af, const char *script, const char *prompt, ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  va_list ap;
  const char *arg;

  if (af->handle == NULL)
    provision (af, NULL);
  scripted_free (af->server);
  af->server = scripted_start (script);
  sandstep_test_fixture_setenv (&af->f, "OPENAI_BASE_URL", af->server->base_url);
  g_ptr_array_add (args, g_strdup ("agent"));
  g_ptr_array_add (args, g_strconcat ("--handle=", af->handle, NULL));
  g_ptr_array_add (args, g_strdup ("--model=test-model"));
  g_ptr_array_add (args, g_strconcat ("--transcript=", af->transcript, NULL));
  va_start (ap, prompt);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (args, g_strdup (arg));
  va_end (ap);
  g_ptr_array_add (args, g_strdup ("--"));
  g_ptr_array_add (args, g_strdup (prompt));
  g_ptr_array_add (args, NULL);
  return sandstep_test_helper_argv (&af->f, (const char *const *) args->pdata, AGENT_TIMEOUT_S);
}

/* The transcript's lines, each checked to be a JSON object with ts, elapsed,
 * type and turn; the API key appears nowhere. */
static GPtrArray *
read_transcript (AgentFixture *af)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GRegex) ts = g_regex_new ("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$", 0, 0, NULL);
  GPtrArray *events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);

  g_file_get_contents (af->transcript, &text, NULL, &error);
  g_assert_no_error (error);
  g_assert_null (strstr (text, API_KEY));
  g_assert_true (g_str_has_suffix (text, "\n"));
  lines = g_strsplit (text, "\n", -1);
  for (char **line = lines; *line != NULL && **line != '\0'; line++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *event;

      json_parser_load_from_data (parser, *line, -1, &error);
      g_assert_no_error (error);
      g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
      event = json_node_get_object (json_parser_get_root (parser));
      g_assert_true (g_regex_match (ts, json_object_get_string_member (event, "ts"), 0, NULL));
      g_assert_true (json_object_has_member (event, "elapsed_ms"));
      g_assert_true (json_object_has_member (event, "turn"));
      g_assert_nonnull (json_object_get_string_member (event, "type"));
      g_ptr_array_add (events, json_object_ref (event));
    }
  return events;
}

static char *
event_types (GPtrArray *events)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < events->len; i++)
    g_string_append_printf (out, "%s%s", i > 0 ? " " : "",
                            json_object_get_string_member (events->pdata[i], "type"));
  return g_string_free (out, FALSE);
}

static JsonObject *
find_event (GPtrArray *events, const char *type, guint nth)
{
  for (guint i = 0; i < events->len; i++)
    if (strcmp (json_object_get_string_member (events->pdata[i], "type"), type) == 0 && nth-- == 0)
      return events->pdata[i];
  g_assert_not_reached ();
  return NULL;
}

/* ---- /agent ---- */

static void
test_agent_single_call (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo hello; echo $MYSECRET\"}}],"
    "  \"finish_reason\": \"stop\"},"
    " {\"answer\": \"All done.\", \"finish_reason\": \"tool_calls\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  g_autofree char *types = NULL;
  JsonObject *first, *second, *assistant, *tool, *tool_event, *request_event;
  JsonArray *tools;

  g_test_summary ("One tool call: answered as a tool message with its call id, the loop ends on a reply "
                  "without tool calls whatever its finish_reason, and the transcript has every step");
  result = run_agent (af, script, "Say hello", NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpstr (result->out, ==, "All done.\n");
  sandstep_test_assert_contains (result->err, "sandstep agent: turn 1: run_command (");
  sandstep_test_assert_contains (result->err, "sandstep agent: turn 2: final answer (");
  sandstep_test_assert_not_contains (result->err, API_KEY);

  g_assert_cmpuint (request_count (af->server), ==, 2);
  first = request_body (af->server, 0);
  g_assert_cmpstr (json_object_get_string_member (first, "model"), ==, "test-model");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (first, "messages")), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (message_at (af->server, 0, 0), "role"), ==, "system");
  g_assert_cmpstr (json_object_get_string_member (message_at (af->server, 0, 1), "role"), ==, "user");
  g_assert_cmpstr (json_object_get_string_member (message_at (af->server, 0, 1), "content"), ==, "Say hello");
  tools = json_object_get_array_member (first, "tools");
  g_assert_cmpuint (json_array_get_length (tools), ==, 4);
  for (guint i = 0; i < 4; i++)
    {
      JsonObject *tool_def = json_array_get_object_element (tools, i);
      JsonObject *function = json_object_get_object_member (tool_def, "function");
      const char *names[] = { "run_command", "read_file", "write_file", "list_directory" };

      g_assert_cmpstr (json_object_get_string_member (tool_def, "type"), ==, "function");
      g_assert_cmpstr (json_object_get_string_member (function, "name"), ==, names[i]);
      g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (function, "parameters"), "type"),
                       ==, "object");
      g_assert_nonnull (json_object_get_string_member (function, "description"));
    }
  g_assert_nonnull (strstr (json_object_get_string_member (
                              json_object_get_object_member (json_array_get_object_element (tools, 0), "function"),
                              "description"),
                            "NO network access"));
  {
    JsonObject *record;
    g_mutex_lock (&af->server->lock);
    record = af->server->requests->pdata[0];
    g_mutex_unlock (&af->server->lock);
    g_assert_cmpstr (json_object_get_string_member (record, "authorization"), ==, "Bearer " API_KEY);
  }

  second = request_body (af->server, 1);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (second, "messages")), ==, 4);
  assistant = message_at (af->server, 1, 2);
  g_assert_cmpstr (json_object_get_string_member (assistant, "role"), ==, "assistant");
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (
                     json_object_get_array_member (assistant, "tool_calls"), 0), "id"), ==, "call_1_1");
  tool = message_at (af->server, 1, 3);
  g_assert_cmpstr (json_object_get_string_member (tool, "role"), ==, "tool");
  g_assert_cmpstr (json_object_get_string_member (tool, "tool_call_id"), ==, "call_1_1");
  /* The secret is masked before the model sees it. */
  g_assert_cmpstr (json_object_get_string_member (tool, "content"), ==, "[stdout]\nhello\n***");

  events = read_transcript (af);
  types = event_types (events);
  g_assert_cmpstr (types, ==, "start request response tool_result request response final end");
  request_event = find_event (events, "request", 0);
  g_assert_cmpint (json_object_get_int_member (request_event, "turn"), ==, 1);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (request_event, "tools")), ==, 4);
  request_event = find_event (events, "request", 1);
  g_assert_cmpint (json_object_get_int_member (request_event, "message_count"), ==, 4);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (request_event, "messages")), ==, 2);
  g_assert_false (json_object_has_member (request_event, "tools"));
  tool_event = find_event (events, "tool_result", 0);
  g_assert_cmpstr (json_object_get_string_member (tool_event, "tool_call_id"), ==, "call_1_1");
  g_assert_cmpstr (json_object_get_string_member (tool_event, "name"), ==, "run_command");
  g_assert_false (json_object_get_boolean_member (tool_event, "is_error"));
  g_assert_cmpstr (json_object_get_string_member (tool_event, "content"), ==, "[stdout]\nhello\n***");
  g_assert_cmpstr (json_object_get_string_member (find_event (events, "final", 0), "content"), ==, "All done.");
  g_assert_cmpstr (json_object_get_string_member (find_event (events, "end", 0), "reason"), ==, "answer");
}

static void
test_agent_parallel_calls (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": ["
    "   {\"name\": \"write_file\", \"arguments\": {\"path\": \"notes/a.txt\", \"content\": \"alpha\\n\"}},"
    "   {\"name\": \"read_file\", \"arguments\": {\"path\": \"notes/a.txt\"}},"
    "   {\"name\": \"list_directory\", \"arguments\": {\"path\": \"notes\"}},"
    "   {\"name\": \"run_command\", \"arguments\": {\"command\": \"cat notes/a.txt\"}}]},"
    " {\"answer\": \"Read: {{last_tool_result}}\"}]";
  const char *expected[] = { "Wrote 6 bytes to 'notes/a.txt'.", "alpha", "a.txt", "[stdout]\nalpha" };
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  g_autofree char *types = NULL;

  g_test_summary ("Parallel tool calls in one reply are each answered by their own tool message, in order");
  result = run_agent (af, script, "Write and read a note", NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpstr (result->out, ==, "Read: [stdout]\nalpha\n");
  sandstep_test_assert_contains (result->err, "turn 1: write_file, read_file, list_directory, run_command (");
  g_assert_cmpuint (request_count (af->server), ==, 2);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (request_body (af->server, 1), "messages")),
                    ==, 3 + 4);
  for (guint i = 0; i < 4; i++)
    {
      JsonObject *tool = message_at (af->server, 1, 3 + i);
      g_autofree char *id = g_strdup_printf ("call_1_%u", i + 1);

      g_assert_cmpstr (json_object_get_string_member (tool, "role"), ==, "tool");
      g_assert_cmpstr (json_object_get_string_member (tool, "tool_call_id"), ==, id);
      g_assert_cmpstr (json_object_get_string_member (tool, "content"), ==, expected[i]);
    }
  events = read_transcript (af);
  types = event_types (events);
  g_assert_cmpstr (types, ==, "start request response tool_result tool_result tool_result tool_result request "
                              "response final end");
}

static void
test_agent_bad_calls (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": ["
    "   {\"name\": \"run_command\", \"arguments\": \"{\\\"command\\\": \\\"echo hi\\\"\"},"
    "   {\"name\": \"delete_everything\", \"arguments\": \"{}\"},"
    "   {\"name\": \"read_file\", \"arguments\": \"{}\"},"
    "   {\"name\": \"run_command\", \"arguments\": \"{\\\"command\\\": 1}\"},"
    "   {\"name\": \"list_directory\", \"arguments\": {\"path\": \".\", \"bogus\": true}},"
    "   {\"name\": \"write_file\", \"arguments\": \"{\\\"path\\\": \\\"x\\\", \\\"content\\\": \\\"a\\\\ud800b\\\"}\"},"
    "   {\"name\": \"write_file\", \"arguments\": \"{\\\"path\\\": \\\"x\\\", \\\"content\\\": \\\"a\\\\ud800\\\"}\"},"
    "   {\"name\": \"run_command\", \"arguments\": {\"command\": \"true\", \"timeout_seconds\": 0}},"
    "   {\"name\": \"read_file\", \"arguments\": {\"path\": \"/etc/passwd\"}}]},"
    " {\"answer\": \"I recovered.\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  const char *prefixes[] = {
    "The arguments of this run_command call are not valid JSON (",
    "Unknown tool: 'delete_everything'. The tools are run_command, read_file, write_file and list_directory.",
    "read_file needs the argument \"path\" (a string). Call it again with it, e.g. {\"path\": \"notes.txt\"}.",
    "The argument \"command\" of run_command must be a string, got a number (1).",
    "(empty)",
    "content contains characters that cannot be encoded as UTF-8 (unpaired surrogates).",
    "The arguments of this write_file call contain characters that cannot be encoded as UTF-8 (unpaired "
    "surrogates).",
    "timeout_seconds must be greater than 0, got 0.",
    "The read_file tool failed: '/etc/passwd' is outside the sandbox's files",
  };

  g_test_summary ("Malformed JSON arguments, an unknown tool, missing and mistyped arguments and refused values "
                  "go back to the model as tool errors; extra keys are ignored; the run goes on");
  result = run_agent (af, script, "Misbehave", NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpstr (result->out, ==, "I recovered.\n");
  g_assert_cmpuint (request_count (af->server), ==, 2);
  events = read_transcript (af);
  for (guint i = 0; i < G_N_ELEMENTS (prefixes); i++)
    {
      JsonObject *tool = message_at (af->server, 1, 3 + i);
      JsonObject *event = find_event (events, "tool_result", i);
      g_autofree char *id = g_strdup_printf ("call_1_%u", i + 1);

      g_assert_cmpstr (json_object_get_string_member (tool, "tool_call_id"), ==, id);
      if (!g_str_has_prefix (json_object_get_string_member (tool, "content"), prefixes[i]))
        g_error ("tool message %u: '%s' does not start with '%s'", i,
                 json_object_get_string_member (tool, "content"), prefixes[i]);
      g_assert_cmpint (json_object_get_boolean_member (event, "is_error"), ==, i != 4);
    }
  g_assert_cmpstr (json_object_get_string_member (find_event (events, "tool_result", 1), "arguments"), ==, "{}");
}

static void
test_agent_escaped_names (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": [{\"name\": \"\\u001b[2Jrm\\tall\", \"arguments\": \"{}\"}]},"
    " {\"answer\": \"\", \"finish_reason\": \"\\u001b]0;owned\\u0007\"}]";
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("What the model names (a made-up tool, a finish reason) reaches the step's stderr escaped: "
                  "no escape sequence, no tab, as text");
  result = run_agent (af, script, "Misbehave", NULL);
  sandstep_test_assert_status (result, 0);
  sandstep_test_assert_contains (result->err, "turn 1: \\x1b[2Jrm\\tall (");
  sandstep_test_assert_contains (result->err, "finish_reason '\\x1b]0;owned\\x07'");
  g_assert_null (strchr (result->err, '\033'));
  g_assert_null (strchr (result->err, '\a'));
}

static void
test_agent_retry (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"status\": 429, \"headers\": {\"Retry-After\": \"0\"},"
    "  \"body\": {\"error\": {\"message\": \"Rate limit reached\", \"type\": \"rate_limit_error\","
    "                         \"code\": \"rate_limit_exceeded\"}}},"
    " {\"status\": 503, \"body\": {\"error\": {\"message\": \"Overloaded\"}}},"
    " {\"answer\": \"Made it.\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  g_autofree char *types = NULL;
  g_autofree char *first = NULL;
  g_autofree char *third = NULL;
  JsonObject *retry;

  g_test_summary ("429 and 5xx are retried (Retry-After honoured, else exponential backoff) with the same body");
  result = run_agent (af, script, "Try hard", NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpstr (result->out, ==, "Made it.\n");
  sandstep_test_assert_contains (result->err, "HTTP 429 (Too Many Requests): Rate limit reached); retrying in 0.0s");
  sandstep_test_assert_contains (result->err, "HTTP 503 (Service Unavailable): Overloaded); retrying in 1.0s");
  g_assert_cmpuint (request_count (af->server), ==, 3);
  first = object_to_string (request_body (af->server, 0));
  third = object_to_string (request_body (af->server, 2));
  g_assert_cmpstr (first, ==, third);
  events = read_transcript (af);
  types = event_types (events);
  g_assert_cmpstr (types, ==, "start request retry retry response final end");
  retry = find_event (events, "retry", 0);
  g_assert_cmpint (json_object_get_int_member (retry, "status"), ==, 429);
  g_assert_cmpint (json_object_get_int_member (retry, "attempt"), ==, 1);
  g_assert_cmpint (json_object_get_int_member (find_event (events, "response", 0), "attempts"), ==, 3);
}

static void
test_agent_refused (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"status\": 400, \"body\": {\"error\": {\"message\": \"Invalid value for 'model': 'test-model' does not "
    "exist.\", \"type\": \"invalid_request_error\", \"param\": \"model\", \"code\": null}}}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  JsonObject *end;

  g_test_summary ("A 400 is not retried; the helper's error quotes the server's error.message and exits 1");
  result = run_agent (af, script, "Anything", NULL);
  sandstep_test_assert_status (result, 1);
  g_assert_cmpstr (result->out, ==, "");
  sandstep_test_assert_contains (result->err, "refused the request with HTTP 400 (Bad Request): \"Invalid value for "
                                              "'model': 'test-model' does not exist.\"");
  sandstep_test_assert_contains (result->err, af->server->base_url);
  g_assert_cmpuint (request_count (af->server), ==, 1);
  events = read_transcript (af);
  end = find_event (events, "end", 0);
  g_assert_cmpstr (json_object_get_string_member (end, "reason"), ==, "endpoint");
}

static void
test_agent_max_turns (AgentFixture *af, gconstpointer data)
{
  const char *script = "[{\"calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": \"true\"}}]}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;

  g_test_summary ("--max-turns stops a model that never answers, with a clear message and exit 2");
  result = run_agent (af, script, "Loop forever", "--max-turns=3", NULL);
  sandstep_test_assert_status (result, 2);
  g_assert_cmpstr (result->out, ==, "");
  sandstep_test_assert_contains (result->err, "turn 3: run_command (");
  sandstep_test_assert_contains (result->err, "stopped after 3 turns (max-turns=3) without a final answer");
  g_assert_cmpuint (request_count (af->server), ==, 3);
  events = read_transcript (af);
  g_assert_cmpstr (json_object_get_string_member (find_event (events, "end", 0), "reason"), ==, "max_turns");
}

static void
test_agent_time_budget_command (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": \"sleep 30\", \"timeout_seconds\": 60}}]},"
    " {\"answer\": \"too late\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  const char *content;

  g_test_summary ("--time-budget cuts a command to what is left, then stops the run with exit 124");
  result = run_agent (af, script, "Be slow", "--time-budget=3", NULL);
  sandstep_test_assert_status (result, SANDSTEP_EXIT_TIMEOUT);
  sandstep_test_assert_contains (result->err, "the time budget of 3s ran out in turn 2, before asking the model");
  /* It did not wait for the 30 s command; how soon after the budget it ended is the host's speed. */
  g_assert_cmpfloat (result->elapsed_s, <, 30);
  g_assert_cmpuint (request_count (af->server), ==, 1);
  events = read_transcript (af);
  content = json_object_get_string_member (find_event (events, "tool_result", 0), "content");
  g_assert_true (g_str_has_prefix (content, "(no output)\n[timed out after "));
  g_assert_cmpstr (json_object_get_string_member (find_event (events, "end", 0), "reason"), ==, "time_budget");
}

static void
test_agent_time_budget_model (AgentFixture *af, gconstpointer data)
{
  const char *script = "[{\"delay\": 30, \"answer\": \"late\"}]";
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("--time-budget also cuts a model request short");
  result = run_agent (af, script, "Think long", "--time-budget=1", NULL);
  sandstep_test_assert_status (result, SANDSTEP_EXIT_TIMEOUT);
  sandstep_test_assert_contains (result->err, "the time budget of 1s ran out in turn 1, while waiting for the model");
  /* It did not wait for the model's 30 s answer; how soon after the budget it ended is the host's speed. */
  g_assert_cmpfloat (result->elapsed_s, <, 30);
}

static void
test_agent_sandbox_gone (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"delay\": 6, \"calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": \"true\"}}]},"
    " {\"answer\": \"never\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;

  g_test_summary ("A sandbox that expires under the agent is terminal: the run fails with the sandbox's error");
  provision (af, "5");
  result = run_agent (af, script, "Work", NULL);
  sandstep_test_assert_status (result, SANDSTEP_EXIT_EXPIRED);
  sandstep_test_assert_contains (result->err, "sandstep agent: turn 1, run_command: Sandbox '");
  sandstep_test_assert_contains (result->err, "expired");
  g_assert_cmpuint (request_count (af->server), ==, 1);
  events = read_transcript (af);
  g_assert_cmpstr (json_object_get_string_member (find_event (events, "end", 0), "reason"), ==, "sandbox");
}

static void
test_agent_python (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": [{\"name\": \"run_python\", \"arguments\": {\"code\": \"rows = [3, 4, 5]\\nsum(rows)\"}}]},"
    " {\"calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo 6 > more.txt\"}}]},"
    " {\"calls\": [{\"name\": \"run_python\", \"arguments\": {\"code\": \"rows.append(int(open('more.txt').read()))"
    "\\nprint(rows)\\nsum(rows)\"}}]},"
    " {\"answer\": \"The sum is 18.\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(SandstepTestResult) refused = NULL;
  JsonArray *tools;

  g_test_summary ("--python=yes (python=yes in make) offers run_python as a fifth tool, and one interpreter serves "
                  "the whole run: a variable made in the first call is there in the third, after a run_command");
  if (!g_file_test ("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("python3 is not installed in /usr/bin, so the sandbox has none (apt-get install python3)");
      return;
    }
  result = run_agent (af, script, "Sum the rows", "--python=yes", NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpstr (result->out, ==, "The sum is 18.\n");
  tools = json_object_get_array_member (request_body (af->server, 0), "tools");
  g_assert_cmpuint (json_array_get_length (tools), ==, 5);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (json_array_get_object_element (tools, 4),
                                                                                 "function"), "name"), ==, "run_python");
  sandstep_test_assert_contains (json_object_get_string_member (message_at (af->server, 0, 0), "content"),
                                 "five tools: run_command, read_file, write_file, list_directory and run_python");
  g_assert_cmpstr (json_object_get_string_member (message_at (af->server, 1, 3), "content"), ==, "[value]\n12");
  g_assert_cmpstr (json_object_get_string_member (message_at (af->server, 3, 7), "content"), ==,
                   "[stdout]\n[3, 4, 5, 6]\n[value]\n18");

  /* Without it, four tools; a value that is neither yes nor no is refused. */
  refused = run_agent (af, script, "Sum the rows", "--python=maybe", NULL);
  sandstep_test_assert_status (refused, 64);
  sandstep_test_assert_contains (refused->err, "python");
}


static void
test_agent_usage (AgentFixture *af, gconstpointer data)
{
  g_autofree char *handle_arg = NULL;
  g_autoptr(SandstepTestResult) no_model = NULL;
  g_autoptr(SandstepTestResult) no_prompt = NULL;
  g_autoptr(SandstepTestResult) bad_url = NULL;

  g_test_summary ("No model, no prompt or a bad endpoint URL are usage errors, before any request");
  provision (af, NULL);
  handle_arg = g_strconcat ("--handle=", af->handle, NULL);
  no_model = sandstep_test_helper (&af->f, "agent", handle_arg, "--", "hi", NULL);
  sandstep_test_assert_status (no_model, SANDSTEP_EXIT_USAGE);
  sandstep_test_assert_contains (no_model->err, "no model given; pass --model=NAME");
  no_prompt = sandstep_test_helper (&af->f, "agent", handle_arg, "--model=m", NULL);
  sandstep_test_assert_status (no_prompt, SANDSTEP_EXIT_USAGE);
  sandstep_test_assert_contains (no_prompt->err, "no prompt given");
  sandstep_test_fixture_setenv (&af->f, "OPENAI_BASE_URL", "ftp://example.com/v1");
  bad_url = sandstep_test_helper (&af->f, "agent", handle_arg, "--model=m", "--", "hi", NULL);
  sandstep_test_assert_contains (bad_url->err, "is not an http:// or https:// URL");
  g_assert_cmpint (bad_url->status, !=, 0);
}

static void
test_agent_system_prompt (AgentFixture *af, gconstpointer data)
{
  g_autofree char *path = sandstep_test_host_path (&af->f, "system.txt");
  g_autofree char *system_arg = g_strconcat ("--system=", path, NULL);
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GError) error = NULL;

  g_test_summary ("--system replaces the built-in system prompt");
  g_file_set_contents (path, "You are terse.", -1, &error);
  g_assert_no_error (error);
  result = run_agent (af, "[{\"answer\": \"ok\"}]", "Hi", system_arg, NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpstr (json_object_get_string_member (message_at (af->server, 0, 0), "content"), ==, "You are terse.");
}

static void
test_agent_bounded_memory (AgentFixture *af, gconstpointer data)
{
  const char *script =
    "[{\"calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": "
    "   \"yes 'the hunter line of output' | head -c 1073741824; head -c 67108864 /dev/zero >&2\"}}]},"
    " {\"answer\": \"ok\"}]";
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(GPtrArray) events = NULL;
  g_autofree char *timeout_arg = NULL, *max_arg = NULL;
  struct rusage usage;
  const char *content;

  if (!g_test_subprocess ())
    {
      /* Its own rusage, in a process of its own; what it says comes through, so that a failure says which check. */
      g_test_trap_subprocess (NULL, 300 * G_USEC_PER_SEC * sandstep_test_time_scale (),
                              G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      return;
    }
  g_test_summary ("A command writing 1 GiB: the helper keeps only the head and tail of each stream (peak RSS "
                  "under 32 MiB) and still counts what it left out");
  /* The flood's own time stretches on an emulated host (TCG: about 90 s), past run_command's 60 s default. */
  timeout_arg = g_strdup_printf ("--command-timeout=%.0f", 60 * sandstep_test_time_scale ());
  max_arg = g_strdup_printf ("--max-command-timeout=%.0f", 300 * sandstep_test_time_scale ());
  result = run_agent (af, script, "Flood", timeout_arg, max_arg, NULL);
  sandstep_test_assert_status (result, 0);
  g_assert_cmpint (getrusage (RUSAGE_CHILDREN, &usage), ==, 0);
  g_test_message ("largest child's peak RSS: %ld KiB", usage.ru_maxrss);
  g_assert_cmpint (usage.ru_maxrss, <, 32 * 1024);
  events = read_transcript (af);
  content = json_object_get_string_member (find_event (events, "tool_result", 0), "content");
  g_assert_true (g_str_has_prefix (content, "[stdout]\nthe hunter line of output\n"));
  /* 1 GiB of 26-byte lines (the last one cut short by head -c). */
  g_assert_nonnull (strstr (content, "\n[... 412"));
  g_assert_nonnull (strstr (content, " lines (1024.0MB) omitted ...]\nthe hunter line of output\n"));
  /* The 64 MiB of NUL bytes on stderr: one wide line, its tail kept as U+FFFD. */
  g_assert_nonnull (strstr (content, "\n[stderr]\n"));
  g_assert_nonnull (strstr (content, "[... the start of the next line (64.0MB) omitted ...]\n\xef\xbf\xbd"));
  g_assert_cmpuint (strlen (content), <, 300 * 1024);
}

/* ---- /tools: the toolbox in this process ---- */

typedef struct {
  SandstepBackend *backend;
  SandstepAttachment *attachment;
  SandstepToolbox *toolbox;
} Tools;

static void
tools_free (Tools *t)
{
  sandstep_toolbox_free (t->toolbox);
  sandstep_attachment_detach (t->attachment);
  sandstep_backend_free (t->backend);
  g_free (t);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Tools, tools_free)

static Tools *
tools_attach (AgentFixture *af, const char *lifetime)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *holder = g_strconcat (af->f.owner, "/tools", NULL);
  SandstepIdentity who = { af->f.owner, holder };
  Tools *t = g_new0 (Tools, 1);

  provision (af, lifetime);
  t->backend = sandstep_local_backend_new (af->f.state_dir, &error);
  g_assert_no_error (error);
  t->attachment = sandstep_backend_attach (t->backend, af->handle, &who, 0, NULL, NULL, &error);
  g_assert_no_error (error);
  t->toolbox = sandstep_toolbox_new (t->attachment, NULL);
  return t;
}

/* Calls @name with @json; asserts recoverable-or-success and the error flag. */
static char *
call (Tools *t, const char *name, const char *json, gboolean expect_error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  gboolean is_error = !expect_error;
  char *text;

  json_parser_load_from_data (parser, json, -1, &error);
  g_assert_no_error (error);
  text = sandstep_toolbox_call (t->toolbox, name, json_node_get_object (json_parser_get_root (parser)), &is_error,
                                &error);
  g_assert_no_error (error);
  g_assert_nonnull (text);
  if (is_error != expect_error)
    g_error ("%s %s: is_error %d, expected %d: %s", name, json, is_error, expect_error, text);
  return text;
}

static void
test_tools_definitions (AgentFixture *af, gconstpointer data)
{
  g_autoptr(Tools) t = tools_attach (af, NULL);
  g_autoptr(JsonArray) defs = sandstep_toolbox_definitions (t->toolbox);
  const char *names[] = { "run_command", "read_file", "write_file", "list_directory" };
  const char *run_description;

  g_test_summary ("Four MCP-style definitions; run_command's states the timeouts, the network and the lifetime");
  g_assert_cmpuint (json_array_get_length (defs), ==, 4);
  for (guint i = 0; i < 4; i++)
    {
      JsonObject *def = json_array_get_object_element (defs, i);
      JsonObject *schema = json_object_get_object_member (def, "inputSchema");

      g_assert_cmpstr (json_object_get_string_member (def, "name"), ==, names[i]);
      g_assert_nonnull (json_object_get_string_member (def, "title"));
      g_assert_cmpstr (json_object_get_string_member (schema, "type"), ==, "object");
      g_assert_true (json_object_has_member (schema, "required"));
      g_assert_true (json_object_has_member (def, "annotations"));
      if (i > 0)
        g_assert_null (strstr (json_object_get_string_member (def, "description"), "network"));
    }
  run_description = json_object_get_string_member (json_array_get_object_element (defs, 0), "description");
  sandstep_test_assert_contains (run_description, "Commands time out after 60s unless you pass timeout_seconds "
                                                  "(at most 300s)");
  sandstep_test_assert_contains (run_description, "This sandbox has NO network access, including DNS");
  sandstep_test_assert_contains (run_description, "About 60 minutes of its lifetime remained when this run began.");
  g_assert_true (json_object_get_boolean_member (json_object_get_object_member (
                   json_array_get_object_element (defs, 1), "annotations"), "readOnlyHint"));
}

static void
test_tools_run_command (AgentFixture *af, gconstpointer data)
{
  g_autoptr(Tools) t = tools_attach (af, NULL);
  g_autofree char *seq = NULL;
  g_autofree char *marker = NULL;
  guint64 omitted = 0;

  g_test_summary ("run_command through the jail: labels, exit codes, masking across chunks, head and tail, "
                  "timeouts refused and applied");
  {
    g_autofree char *a = call (t, "run_command", "{\"command\": \"echo out; echo err >&2; exit 3\"}", FALSE);
    g_autofree char *b = call (t, "run_command", "{\"command\": \"true\"}", FALSE);
    g_autofree char *c = call (t, "run_command", "{\"command\": \"cat; echo done\"}", FALSE);
    g_autofree char *d = call (t, "run_command",
                               "{\"command\": \"printf 'x hunter2-sand'; sleep 0.3; printf 'step-secret y\\\\n'; "
                               "printf 'hunter2-sandstep-' >&2; sleep 0.3; printf 'secret' >&2\"}", FALSE);
    g_autofree char *e = call (t, "run_command", "{\"command\": \"sleep 10\", \"timeout_seconds\": 0.5}", FALSE);
    g_autofree char *f = call (t, "run_command", "{\"command\": \"echo $HOME; pwd\", \"timeout_seconds\": \"5\", "
                                                 "\"extra\": [1]}", FALSE);
    g_autofree char *g = call (t, "run_command", "{\"command\": \"true\", \"timeout_seconds\": -1}", TRUE);
    g_autofree char *h = call (t, "run_command", "{\"command\": \"true\", \"timeout_seconds\": true}", TRUE);
    g_autofree char *i = call (t, "run_command", "{\"command\": null}", TRUE);
    g_autofree char *j = call (t, "run_command", "{\"command\": \"true\", \"timeout_seconds\": null}", FALSE);

    g_assert_cmpstr (a, ==, "[stdout]\nout\n[stderr]\nerr\n[exit code: 3]");
    g_assert_cmpstr (b, ==, "(no output)");
    g_assert_cmpstr (c, ==, "[stdout]\ndone");
    g_assert_cmpstr (d, ==, "[stdout]\nx *** y\n[stderr]\n***");
    g_assert_cmpstr (e, ==, "(no output)\n[timed out after 0.5s]");
    g_assert_cmpstr (f, ==, "[stdout]\n/workspace\n/workspace");
    g_assert_cmpstr (g, ==, "timeout_seconds must be greater than 0, got -1.");
    sandstep_test_assert_contains (h, "The argument \"timeout_seconds\" of run_command must be a number of seconds, "
                                      "got a boolean (true).");
    sandstep_test_assert_contains (i, "The argument \"command\" of run_command must be a string, got null.");
    g_assert_cmpstr (j, ==, "(no output)");
  }

  /* seq 1 100000: 2000 lines of budget keep 1..500 and 98501..100000. */
  seq = call (t, "run_command", "{\"command\": \"seq 1 100000\"}", FALSE);
  for (guint n = 501; n <= 98500; n++)
    omitted += (n < 1000 ? 3 : n < 10000 ? 4 : n < 100000 ? 5 : 6) + 1;
  {
    g_autofree char *size = g_strdup_printf ("%.1fKB", omitted / 1024.0);
    marker = g_strdup_printf ("\n500\n[... 98000 lines (%s) omitted ...]\n98501\n", size);
  }
  g_assert_true (g_str_has_prefix (seq, "[stdout]\n1\n2\n3\n"));
  sandstep_test_assert_contains (seq, marker);
  g_assert_true (g_str_has_suffix (seq, "\n99999\n100000"));
}

static void
test_tools_lifetime (AgentFixture *af, gconstpointer data)
{
  g_autoptr(Tools) t = tools_attach (af, "4");
  g_autofree char *result = NULL;
  g_autoptr(GError) error = NULL;
  gboolean is_error = FALSE;
  double seconds;

  g_test_summary ("A command's budget is cut to the sandbox's remaining lifetime; after it, calls are terminal");
  result = call (t, "run_command", "{\"command\": \"sleep 30\", \"timeout_seconds\": 60}", FALSE);
  g_assert_true (g_str_has_prefix (result, "(no output)\n[timed out after "));
  seconds = g_ascii_strtod (result + strlen ("(no output)\n[timed out after "), NULL);
  g_assert_cmpfloat (seconds, <=, 4);
  g_assert_cmpfloat (seconds, >, 0);
  /* The budget was the lifetime that remained, however much of it the host's start took: the command ran
   * until the lifetime ended. */
  {
    g_autoptr(JsonObject) d = sandstep_test_describe (&af->f, af->handle);
    g_assert_cmpint (json_object_get_int_member (d, "remaining_seconds"), ==, 0);
  }
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autofree char *text = NULL;

    json_parser_load_from_data (parser, "{\"command\": \"true\"}", -1, NULL);
    text = sandstep_toolbox_call (t->toolbox, "run_command", json_node_get_object (json_parser_get_root (parser)),
                                  &is_error, &error);
    g_assert_null (text);
    g_assert_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_EXPIRED);
  }
}

static void
test_tools_deadline (AgentFixture *af, gconstpointer data)
{
  g_autoptr(Tools) t = tools_attach (af, NULL);
  g_autofree char *result = NULL;
  gint64 start = g_get_monotonic_time ();

  g_test_summary ("An agent's deadline cuts a command's budget too");
  sandstep_toolbox_set_deadline (t->toolbox, start + G_USEC_PER_SEC);
  result = call (t, "run_command", "{\"command\": \"sleep 30\"}", FALSE);
  g_assert_true (g_str_has_prefix (result, "(no output)\n[timed out after "));
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
}

static void
test_tools_files (AgentFixture *af, gconstpointer data)
{
  g_autoptr(Tools) t = tools_attach (af, NULL);

  g_test_summary ("read_file, write_file and list_directory over the sandbox's tree");
  {
    g_autofree char *a = call (t, "write_file", "{\"path\": \"d/f.txt\", \"content\": \"caf\\u00e9\\nl2\\nl3\\n\"}", FALSE);
    g_autofree char *b = call (t, "read_file", "{\"path\": \"d/f.txt\"}", FALSE);
    g_autofree char *c = call (t, "read_file", "{\"path\": \"/workspace/d/f.txt\", \"offset\": 2, \"limit\": 1}", FALSE);
    g_autofree char *d = call (t, "read_file", "{\"path\": \"d/f.txt\", \"offset\": 9}", FALSE);
    g_autofree char *e = call (t, "read_file", "{\"path\": \"d/f.txt\", \"offset\": 1.5}", TRUE);
    g_autofree char *f = call (t, "read_file", "{\"path\": \"d/f.txt\", \"offset\": 2.0, \"limit\": \"1\"}", FALSE);
    g_autofree char *g = call (t, "read_file", "{\"path\": \"missing.txt\"}", TRUE);
    g_autofree char *h = call (t, "write_file", "{\"path\": \"it's.txt\", \"content\": \"\"}", FALSE);
    g_autofree char *i = call (t, "write_file", "{\"path\": \"x.txt\"}", TRUE);
    g_autofree char *j = call (t, "write_file", "{\"path\": \"x.txt\", \"content\": \"a\\ud800b\"}", TRUE);
    g_autofree char *k = call (t, "read_file", "{\"path\": \"d\"}", TRUE);

    g_assert_cmpstr (a, ==, "Wrote 12 bytes to 'd/f.txt'.");
    g_assert_cmpstr (b, ==, "caf\xc3\xa9\nl2\nl3");
    g_assert_cmpstr (c, ==, "l2\n[... 1 more line; read on with offset=3]");
    g_assert_cmpstr (d, ==, "(no lines at offset 9; file has 3 lines)");
    g_assert_cmpstr (e, ==, "offset must be a whole number, got 1.5.");
    g_assert_cmpstr (f, ==, "l2\n[... 1 more line; read on with offset=3]");
    g_assert_true (g_str_has_prefix (g, "The read_file tool failed: '/workspace/missing.txt' "));
    g_assert_cmpstr (h, ==, "Wrote 0 bytes to \"it's.txt\".");
    g_assert_cmpstr (i, ==, "write_file needs the argument \"content\" (a string). Call it again with it, e.g. "
                            "{\"path\": \"notes.txt\", \"content\": \"hello\\n\"}.");
    g_assert_cmpstr (j, ==, "content contains characters that cannot be encoded as UTF-8 (unpaired surrogates).");
    g_assert_true (g_str_has_prefix (k, "The read_file tool failed: "));
  }
  {
    g_autofree char *setup = call (t, "run_command",
                                   "{\"command\": \"mkdir -p l/a l/empty && touch l/a-b l/a.b && "
                                   "head -c 6291456 /dev/zero | tr '\\\\0' x > big.txt && printf 'a\\\\0b' > bin "
                                   "&& echo $MYSECRET > s.txt && mkdir many && cd many && seq -w 1 3000 | xargs "
                                   "touch\"}", FALSE);
    g_autofree char *a = call (t, "list_directory", "{\"path\": \"l\"}", FALSE);
    g_autofree char *b = call (t, "list_directory", "{\"path\": \"l/empty\"}", FALSE);
    g_autofree char *c = call (t, "list_directory", "{}", FALSE);
    g_autofree char *d = call (t, "list_directory", "{\"path\": \"\"}", FALSE);
    g_autofree char *e = call (t, "list_directory", "{\"path\": \"many\"}", FALSE);
    g_autofree char *f = call (t, "read_file", "{\"path\": \"big.txt\"}", TRUE);
    g_autofree char *g = call (t, "read_file", "{\"path\": \"bin\"}", TRUE);
    g_autofree char *h = call (t, "read_file", "{\"path\": \"s.txt\"}", FALSE);

    g_assert_cmpstr (setup, ==, "(no output)");
    /* Sorted by name before the "/" suffix: "a" < "a-b" < "a.b". */
    g_assert_cmpstr (a, ==, "a/\na-b\na.b\nempty/");
    g_assert_cmpstr (b, ==, "(empty)");
    g_assert_cmpstr (c, ==, d);
    sandstep_test_assert_contains (c, "big.txt\nbin\nd/\n");
    g_assert_true (g_str_has_prefix (e, "0001\n0002\n"));
    sandstep_test_assert_contains (e, "\n0500\n[... 1000 entries omitted; see them with run_command: LC_ALL=C ls -Ap "
                                      "'many' | sed -n '501,1500p' ...]\n1501\n");
    g_assert_true (g_str_has_suffix (e, "\n3000"));
    g_assert_cmpstr (f, ==, "'big.txt' is 6.0MB, over the 5.0MB read limit. Read just the part you need with a "
                            "shell command instead (e.g. head, tail, sed -n, or grep).");
    g_assert_true (g_str_has_prefix (g, "'bin' looks like a binary file (3B, with NUL bytes)"));
    g_assert_cmpstr (h, ==, "***");
  }
}

static void
test_tools_unknown (AgentFixture *af, gconstpointer data)
{
  g_autoptr(Tools) t = tools_attach (af, NULL);
  g_autofree char *a = call (t, "rm_rf", "{}", TRUE);
  g_autoptr(GError) error = NULL;
  gboolean is_error = FALSE;
  g_autofree char *b = sandstep_toolbox_call (t->toolbox, "list_directory", NULL, &is_error, &error);

  g_assert_cmpstr (a, ==, "Unknown tool: 'rm_rf'. The tools are run_command, read_file, write_file and "
                          "list_directory.");
  /* NULL arguments count as {}. */
  g_assert_no_error (error);
  g_assert_false (is_error);
}

static void
test_llm_units (void)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonArray) tools = NULL;
  JsonObject *function;

  g_test_summary ("Retry-After parsing and the OpenAI tools array built from MCP definitions");
  g_assert_cmpfloat (sandstep_llm_parse_retry_after (NULL, "2", 0), ==, 2);
  g_assert_cmpfloat (sandstep_llm_parse_retry_after ("1500", "2", 0), ==, 1.5);
  g_assert_cmpfloat (sandstep_llm_parse_retry_after (NULL, NULL, 0), ==, -1);
  g_assert_cmpfloat (sandstep_llm_parse_retry_after (NULL, "soon", 0), ==, -1);
  g_assert_cmpfloat (sandstep_llm_parse_retry_after (NULL, "Wed, 21 Oct 2015 07:28:10 GMT", 1445412480), ==, 10);
  json_parser_load_from_data (parser,
                              "[{\"name\": \"t\", \"title\": \"T\", \"description\": \"d\", \"inputSchema\": "
                              "{\"type\": \"object\"}, \"annotations\": {\"readOnlyHint\": true}}]", -1, NULL);
  tools = sandstep_llm_tools_from_definitions (json_node_get_array (json_parser_get_root (parser)));
  g_assert_cmpuint (json_array_get_length (tools), ==, 1);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (tools, 0), "type"), ==, "function");
  function = json_object_get_object_member (json_array_get_object_element (tools, 0), "function");
  g_assert_cmpstr (json_object_get_string_member (function, "name"), ==, "t");
  g_assert_cmpstr (json_object_get_string_member (function, "description"), ==, "d");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (function, "parameters"), "type"),
                   ==, "object");
  g_assert_false (json_object_has_member (function, "annotations"));
}

static void
count_retry (guint attempt, guint status, const char *reason, double delay_s, gpointer user_data)
{
  GString *seen = user_data;

  g_string_append_printf (seen, "%s%u", seen->len > 0 ? "," : "", status);
}

static JsonObject *
simple_request (void)
{
  g_autoptr(JsonParser) parser = json_parser_new ();

  json_parser_load_from_data (parser, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": "
                                      "\"hi\"}]}", -1, NULL);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static void
test_llm_retries (void)
{
  g_autoptr(Scripted) server = scripted_start (
    "[{\"status\": 408, \"body\": {}}, {\"status\": 409, \"body\": {}}, {\"status\": 500, \"body\": \"oops\"},"
    " {\"status\": 502, \"headers\": {\"x-should-retry\": \"false\"}, \"body\": {\"error\": {\"message\": \"no\"}}}]");
  g_autoptr(GString) seen = g_string_new (NULL);
  g_autoptr(JsonObject) request = simple_request ();
  g_autoptr(SandstepLlm) llm = NULL;
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(GError) error = NULL;
  SandstepLlmOptions options;
  guint attempts = 0;

  g_test_summary ("408, 409 and 5xx are retried; x-should-retry: false stops the retries");
  sandstep_llm_options_init (&options);
  options.base_url = server->base_url;
  options.api_key = "k";
  options.initial_backoff_s = 0.01;
  llm = sandstep_llm_new (&options, &error);
  g_assert_no_error (error);
  sandstep_llm_set_retry_func (llm, count_retry, seen);
  reply = sandstep_llm_chat (llm, request, 0, &attempts, &error);
  g_assert_null (reply);
  g_assert_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_REFUSED);
  sandstep_test_assert_contains (error->message, "HTTP 502 (Bad Gateway): \"no\"");
  g_assert_cmpstr (seen->str, ==, "408,409,500");
  g_assert_cmpuint (attempts, ==, 4);
  g_assert_cmpuint (request_count (server), ==, 4);
}

static void
test_llm_unreachable (void)
{
  g_autoptr(JsonObject) request = simple_request ();
  g_autoptr(GString) seen = g_string_new (NULL);
  g_autoptr(SandstepLlm) llm = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GSocketAddress) address = NULL;
  g_autoptr(GSocketAddress) bound = NULL;
  g_autofree char *url = NULL;
  SandstepLlmOptions options;
  guint attempts = 0;

  g_test_summary ("Connection errors are retried, then reported with the count of attempts");
  /* A port nothing listens on: bind one, then close it. */
  socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
  g_assert_no_error (error);
  address = g_inet_socket_address_new_from_string ("127.0.0.1", 0);
  g_socket_bind (socket, address, FALSE, &error);
  g_assert_no_error (error);
  bound = g_socket_get_local_address (socket, &error);
  g_assert_no_error (error);
  url = g_strdup_printf ("http://127.0.0.1:%u/v1/", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  g_socket_close (socket, NULL);

  sandstep_llm_options_init (&options);
  options.base_url = url;
  options.max_retries = 2;
  options.initial_backoff_s = 0.01;
  llm = sandstep_llm_new (&options, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_suffix (sandstep_llm_get_url (llm), "/v1/chat/completions"));
  sandstep_llm_set_retry_func (llm, count_retry, seen);
  g_assert_null (sandstep_llm_chat (llm, request, 0, &attempts, &error));
  g_assert_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_UNAVAILABLE);
  sandstep_test_assert_contains (error->message, "still failed after 3 attempts");
  g_assert_cmpstr (seen->str, ==, "0,0");
  g_assert_cmpuint (attempts, ==, 3);
}

static void
test_llm_bad_reply (void)
{
  g_autoptr(Scripted) server = scripted_start ("[{\"body\": {\"choices\": []}}]");
  g_autoptr(JsonObject) request = simple_request ();
  g_autoptr(SandstepLlm) llm = NULL;
  g_autoptr(GError) error = NULL;
  SandstepLlmOptions options;

  g_test_summary ("A 200 that is not a chat completion is an error, not a crash");
  sandstep_llm_options_init (&options);
  options.base_url = server->base_url;
  llm = sandstep_llm_new (&options, &error);
  g_assert_no_error (error);
  g_assert_null (sandstep_llm_chat (llm, request, 0, NULL, &error));
  g_assert_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_BAD_RESPONSE);
}

static void
test_llm_deep_reply (void)
{
  g_autofree char *bomb = g_strnfill (200 * 1024, '[');
  g_autoptr(JsonObject) request = simple_request ();

  g_test_summary ("A chat reply nested 200 KB deep (which overflowed json-glib's stack) is refused as a bad reply "
                  "naming the depth limit, as a 200 and as an error status alike");
  for (int i = 0; i < 2; i++)
    {
      g_autofree char *script = g_strdup_printf ("[{\"status\": %d, \"raw\": \"%s\"}]", i == 0 ? 200 : 400, bomb);
      g_autoptr(Scripted) server = scripted_start (script);
      g_autoptr(SandstepLlm) llm = NULL;
      g_autoptr(GError) error = NULL;
      SandstepLlmOptions options;

      sandstep_llm_options_init (&options);
      options.base_url = server->base_url;
      llm = sandstep_llm_new (&options, &error);
      g_assert_no_error (error);
      g_assert_null (sandstep_llm_chat (llm, request, 0, NULL, &error));
      g_assert_nonnull (error);
      if (i == 0)
        {
          g_assert_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_BAD_RESPONSE);
          sandstep_test_assert_contains (error->message, "deeper than 64");
        }
      else
        g_assert_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_REFUSED);
    }
}

int
main (int argc, char **argv)
{
  if (argc >= 2 && strcmp (argv[1], "--serve") == 0)
    return serve_main (argc, argv);

  g_test_init (&argc, &argv, NULL);

#define ADD(path, func) g_test_add (path, AgentFixture, NULL, agent_setup, func, agent_teardown)
  g_test_add_func ("/llm/units", test_llm_units);
  g_test_add_func ("/llm/retries", test_llm_retries);
  g_test_add_func ("/llm/unreachable", test_llm_unreachable);
  g_test_add_func ("/llm/bad-reply", test_llm_bad_reply);
  g_test_add_func ("/llm/deep-reply", test_llm_deep_reply);
  ADD ("/tools/definitions", test_tools_definitions);
  ADD ("/tools/run-command", test_tools_run_command);
  ADD ("/tools/lifetime", test_tools_lifetime);
  ADD ("/tools/deadline", test_tools_deadline);
  ADD ("/tools/files", test_tools_files);
  ADD ("/tools/unknown", test_tools_unknown);
  ADD ("/agent/single-call", test_agent_single_call);
  ADD ("/agent/parallel-calls", test_agent_parallel_calls);
  ADD ("/agent/bad-calls", test_agent_bad_calls);
  ADD ("/agent/retry", test_agent_retry);
  ADD ("/agent/escaped-names", test_agent_escaped_names);
  ADD ("/agent/refused", test_agent_refused);
  ADD ("/agent/max-turns", test_agent_max_turns);
  ADD ("/agent/time-budget/command", test_agent_time_budget_command);
  ADD ("/agent/time-budget/model", test_agent_time_budget_model);
  ADD ("/agent/sandbox-gone", test_agent_sandbox_gone);
  ADD ("/agent/usage", test_agent_usage);
  ADD ("/agent/python", test_agent_python);
  ADD ("/agent/system-prompt", test_agent_system_prompt);
  ADD ("/agent/bounded-memory", test_agent_bounded_memory);
#undef ADD

  return g_test_run ();
}
