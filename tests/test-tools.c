/* test-tools.c: the agent tools, the MCP server and the agent loop, on the fake backend.
 *
 * Everything runs in this process against sandstep-fake-backend.h, so these
 * cases need no user namespaces and no helper: they check what the model
 * reads, how the MCP server answers, and how the loop drives the tools.
 * What only a jail can show (isolation, limits, the real helper) is in
 * test-agent.c, test-mcp.c and the security suites.
 *
 * A new tool behaviour is a row of `tool_rows`: a call and a text its
 * answer must hold.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>

#include "sandstep-agent.h"
#include "sandstep-error.h"
#include "sandstep-fake-backend.h"
#include "sandstep-mcp.h"
#include "sandstep-test-utils.h"
#include "sandstep-tools.h"

typedef struct {
  char *dir;
  SandstepBackend *backend;
  char *handle;
  SandstepAttachment *attachment;
  SandstepToolbox *toolbox;
} Fixture;

static const SandstepIdentity who = { "dag/run", "dag/run/step" };

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepSpec) spec = sandstep_spec_new ();
  gboolean existing = TRUE;

  fx->dir = g_dir_make_tmp ("sandstep-test-tools-XXXXXX", &error);
  g_assert_no_error (error);
  fx->backend = sandstep_fake_backend_new (fx->dir);
  g_hash_table_insert (spec->secrets, g_strdup ("TOKEN"), g_strdup ("sekrit-value-42"));
  fx->handle = sandstep_backend_provision (fx->backend, spec, &who, &existing, &error);
  g_assert_no_error (error);
  g_assert_false (existing);
  fx->attachment = sandstep_backend_attach (fx->backend, fx->handle, &who, 0, NULL, NULL, &error);
  g_assert_no_error (error);
  fx->toolbox = sandstep_toolbox_new (fx->attachment, NULL);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  sandstep_toolbox_free (fx->toolbox);
  sandstep_attachment_detach (fx->attachment);
  sandstep_backend_destroy (fx->backend, fx->handle, &who, NULL);
  sandstep_backend_free (fx->backend);
  g_rmdir (fx->dir);
  g_free (fx->handle);
  g_free (fx->dir);
}

static char *
call (Fixture *fx, const char *name, const char *json, gboolean *out_is_error, GError **error)
{
  g_autoptr(JsonNode) node = json_from_string (json, NULL);

  g_assert_nonnull (node);
  return sandstep_toolbox_call (fx->toolbox, name, json_node_get_object (node), out_is_error, error);
}

/* ---- the toolbox ---- */

typedef struct {
  const char *tool;
  const char *arguments;
  gboolean is_error;
  const char *contains;
} ToolRow;

static const ToolRow tool_rows[] = {
  /* tool             arguments                                                  error  the answer holds */
  { "run_command",    "{\"command\": \"echo out; echo err >&2; exit 3\"}",        FALSE, "[stdout]\nout\n[stderr]\nerr\n[exit code: 3]" },
  { "run_command",    "{\"command\": \"true\"}",                                  FALSE, "(no output)" },
  { "run_command",    "{\"command\": \"sleep 5\", \"timeout_seconds\": 0.3}",     FALSE, "[timed out after 0.3s]" },
  { "run_command",    "{\"command\": \"true\", \"timeout_seconds\": -1}",         TRUE,  "timeout_seconds must be greater than 0, got -1." },
  { "run_command",    "{\"command\": \"echo $TOKEN; echo sekrit-value-42\"}",     FALSE, "***" },
  { "run_command",    "{}",                                                       TRUE,  "command" },
  { "write_file",     "{\"path\": \"notes/a.txt\", \"content\": \"one\\ntwo\\n\"}", FALSE, "Wrote 8 bytes to 'notes/a.txt'." },
  { "read_file",      "{\"path\": \"notes/a.txt\"}",                              FALSE, "one\ntwo" },
  { "read_file",      "{\"path\": \"notes/a.txt\", \"offset\": 2}",               FALSE, "two" },
  { "read_file",      "{\"path\": \"notes/a.txt\", \"limit\": 1}",                FALSE, "[... 1 more line; read on with offset=2]" },
  { "read_file",      "{\"path\": \"missing.txt\"}",                              TRUE,  "The read_file tool failed: 'missing.txt' does not exist" },
  { "read_file",      "{\"path\": \"../../etc/passwd\"}",                         TRUE,  "goes above '/'" },
  { "list_directory", "{\"path\": \"notes\"}",                                    FALSE, "a.txt" },
  { "list_directory", "{}",                                                       FALSE, "notes/" },
  { "no_such_tool",   "{}",                                                       TRUE,  "Unknown tool: 'no_such_tool'" },
};

static void
test_tool_rows (Fixture *fx, gconstpointer data)
{
  g_test_summary ("Each row's call gives the text the model reads, and flags a recoverable failure as an error");
  for (gsize i = 0; i < G_N_ELEMENTS (tool_rows); i++)
    {
      const ToolRow *row = &tool_rows[i];
      g_autoptr(GError) error = NULL;
      gboolean is_error = !row->is_error;
      g_autofree char *text = call (fx, row->tool, row->arguments, &is_error, &error);

      g_test_message ("%s %s -> %s", row->tool, row->arguments, text);
      g_assert_no_error (error);
      g_assert_nonnull (text);
      g_assert_cmpint (is_error, ==, row->is_error);
      sandstep_test_assert_contains (text, row->contains);
      sandstep_test_assert_not_contains (text, "sekrit-value-42");
    }
}

static void
test_read_limit (Fixture *fx, gconstpointer data)
{
  g_autofree char *workspace = sandstep_fake_backend_workspace (fx->backend, fx->handle);
  g_autofree char *big = g_build_filename (workspace, "big.bin", NULL);
  g_autofree char *filler = g_strnfill (6 * 1024 * 1024, 'x');
  g_autoptr(GError) error = NULL;
  gboolean is_error = FALSE;
  g_autofree char *text = NULL;

  g_test_summary ("A file over the read limit is refused with its size, which the error carries as data");
  g_assert_true (g_file_set_contents (big, filler, -1, NULL));
  text = call (fx, "read_file", "{\"path\": \"big.bin\"}", &is_error, &error);
  g_assert_no_error (error);
  g_assert_true (is_error);
  sandstep_test_assert_contains (text, "'big.bin' is 6.0MB, over the 5.0MB read limit.");
}

static void
test_terminal (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  gboolean is_error = FALSE;
  g_autofree char *text = NULL;

  g_test_summary ("A sandbox gone under the tools is terminal: no text, the error, and it names no secret");
  g_assert_true (sandstep_backend_destroy (fx->backend, fx->handle, &who, NULL));
  text = call (fx, "run_command", "{\"command\": \"true\"}", &is_error, &error);
  g_assert_null (text);
  g_assert_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND);
}

/* ---- the backend's shared rules, through the wrappers ---- */

static void
test_claims (Fixture *fx, gconstpointer data)
{
  SandstepIdentity other = { "dag/run", "dag/run/other" };
  SandstepIdentity stranger = { "dag/another-run", "dag/another-run/x" };
  g_autoptr(GError) busy = NULL;
  g_autoptr(GError) waited = NULL;
  g_autoptr(GError) not_owner = NULL;
  gint64 start;

  g_test_summary ("One holder at a time: a refusal names the holder, a wait asks again and says how long, "
                  "another owner is refused");
  g_assert_null (sandstep_backend_attach (fx->backend, fx->handle, &other, 0, NULL, NULL, &busy));
  g_assert_error (busy, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY);
  g_assert_cmpstr (sandstep_error_get_holder (busy), ==, who.holder);
  start = g_get_monotonic_time ();
  g_assert_null (sandstep_backend_attach (fx->backend, fx->handle, &other, 0.2, NULL, NULL, &waited));
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 200 * 1000);
  g_assert_error (waited, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY);
  sandstep_test_assert_contains (waited->message, "still held by 'dag/run/step' after waiting 0.2s");
  g_assert_null (sandstep_backend_attach (fx->backend, fx->handle, &stranger, 0, NULL, NULL, &not_owner));
  g_assert_error (not_owner, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER);
}

static void
test_budget (Fixture *fx, gconstpointer data)
{
  SandstepRunResult result = { 0 };
  SandstepRunRequest request = { .command = "true", .timeout_s = 1e9, .stdin_fd = -1, .stdout_fd = -1,
                                 .stderr_fd = -1 };
  double remaining = sandstep_attachment_remaining_lifetime (fx->attachment);
  SandstepRunResult cut = { 0 };

  g_test_summary ("A command's budget is cut to the sandbox's remaining lifetime, and says so");
  g_assert_true (sandstep_attachment_run_command (fx->attachment, &request, &result, NULL));
  g_assert_true (result.clamped);
  g_assert_cmpfloat (result.applied_timeout_s, <=, remaining);
  g_assert_cmpfloat (sandstep_run_budget (5, 60, &cut), ==, 5);
  g_assert_false (cut.clamped);
  g_assert_cmpfloat (sandstep_run_budget (0, 60, &cut), ==, 60);
  g_assert_true (cut.clamped);
  g_assert_cmpfloat (sandstep_run_budget (90, 60, &cut), ==, 60);
  g_assert_true (cut.clamped);
}

/* ---- the MCP server, in this process ---- */

static void
on_reply (const char *reply, gpointer user_data)
{
  char **out = user_data;

  *out = g_strdup (reply != NULL ? reply : "(none)");
}

/* The reply to @message, running the server's context until it comes. */
static char *
mcp_ask (SandstepMcpServer *server, const char *message)
{
  char *reply = NULL;
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  sandstep_mcp_server_handle (server, message, strlen (message), on_reply, &reply);
  while (reply == NULL && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_nonnull (reply);
  return reply;
}

typedef struct {
  const char *message;
  const char *contains;
} McpRow;

static const McpRow mcp_rows[] = {
  { "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {\"protocolVersion\": \"2025-06-18\"}}",
    "\"protocolVersion\":\"2025-06-18\"" },
  { "{\"jsonrpc\": \"2.0\", \"method\": \"notifications/initialized\"}", "(none)" },
  { "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"ping\"}", "\"result\":{}" },
  { "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/list\"}", "\"name\":\"list_directory\"" },
  { "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {\"name\": \"run_command\", "
    "\"arguments\": {\"command\": \"echo from-mcp\"}}}", "from-mcp" },
  { "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"tools/call\", \"params\": {\"name\": \"read_file\", "
    "\"arguments\": {\"path\": \"nope\"}}}", "\"isError\":true" },
  { "{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": \"tools/call\", \"params\": {\"name\": \"nope\"}}", "-32602" },
  { "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"no/such\"}", "-32601" },
  { "not json", "-32700" },
};

static void
test_mcp (Fixture *fx, gconstpointer data)
{
  g_autoptr(SandstepMcpServer) server = sandstep_mcp_server_new (fx->toolbox, fx->handle);

  g_test_summary ("The MCP server's methods and tool calls, message by message, with no transport");
  for (gsize i = 0; i < G_N_ELEMENTS (mcp_rows); i++)
    {
      g_autofree char *reply = mcp_ask (server, mcp_rows[i].message);

      g_test_message ("%s -> %s", mcp_rows[i].message, reply);
      sandstep_test_assert_contains (reply, mcp_rows[i].contains);
    }
  g_assert_true (sandstep_mcp_server_stop (server, 5));
}

static void
test_mcp_terminal (Fixture *fx, gconstpointer data)
{
  g_autoptr(SandstepMcpServer) server = sandstep_mcp_server_new (fx->toolbox, fx->handle);
  g_autofree char *first = NULL;
  g_autofree char *second = NULL;
  g_autoptr(GError) error = NULL;

  g_test_summary ("A terminal tool failure is answered with isError, ends the server, and every later call "
                  "gets the same failure");
  g_assert_true (sandstep_backend_destroy (fx->backend, fx->handle, &who, NULL));
  first = mcp_ask (server, "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": "
                           "{\"name\": \"list_directory\", \"arguments\": {}}}");
  sandstep_test_assert_contains (first, "The sandbox cannot be used any more");
  sandstep_test_assert_contains (first, "\"isError\":true");
  g_assert_false (sandstep_mcp_server_run (server, &error));
  g_assert_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND);
  second = mcp_ask (server, "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/call\", \"params\": "
                            "{\"name\": \"run_command\", \"arguments\": {\"command\": \"true\"}}}");
  sandstep_test_assert_contains (second, "The sandbox cannot be used any more");
  g_assert_true (sandstep_mcp_server_stop (server, 5));
}

/* ---- the agent loop against a chat endpoint of two replies ---- */

typedef struct {
  GMainContext *context;
  GMainLoop *loop;
  GThread *thread;
  SoupServer *server;
  char *base_url;
  guint served;
  GMutex lock;
  GCond ready;
  gboolean up;
} Chat;

static const char *const chat_replies[] = {
  "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": null, \"tool_calls\": ["
  "{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"run_command\", "
  "\"arguments\": \"{\\\"command\\\": \\\"echo loop-ran\\\"}\"}}, "
  "{\"id\": \"call_2\", \"type\": \"function\", \"function\": {\"name\": \"read_file\", \"arguments\": \"{oops\"}}"
  "]}, \"finish_reason\": \"tool_calls\"}]}",
  "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": \"all done\"}, \"finish_reason\": \"stop\"}]}",
};

static void
chat_handle (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  Chat *chat = data;
  const char *reply = chat_replies[MIN (chat->served, G_N_ELEMENTS (chat_replies) - 1)];

  chat->served++;
  soup_server_message_set_status (msg, 200, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_STATIC, reply, strlen (reply));
}

static gpointer
chat_thread (gpointer data)
{
  Chat *chat = data;
  g_autoptr(GError) error = NULL;
  GSList *uris;

  g_main_context_push_thread_default (chat->context);
  chat->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (chat->server, "/v1/chat/completions", chat_handle, chat, NULL);
  g_assert_true (soup_server_listen_local (chat->server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
  uris = soup_server_get_uris (chat->server);
  chat->base_url = g_strdup_printf ("http://127.0.0.1:%u/v1", g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  g_mutex_lock (&chat->lock);
  chat->up = TRUE;
  g_cond_signal (&chat->ready);
  g_mutex_unlock (&chat->lock);
  g_main_loop_run (chat->loop);
  g_clear_object (&chat->server);
  g_main_context_pop_thread_default (chat->context);
  return NULL;
}

typedef struct {
  SandstepToolbox *toolbox;
  GPtrArray *results;       /* the tool results the loop recorded */
} LoopData;

static char *
loop_call_tool (const char *name, JsonObject *arguments, gboolean *out_is_error, GError **error, gpointer user_data)
{
  LoopData *loop = user_data;

  return sandstep_toolbox_call (loop->toolbox, name, arguments, out_is_error, error);
}

static void
loop_event (const char *type, JsonObject *event, gpointer user_data)
{
  LoopData *loop = user_data;

  if (strcmp (type, "tool_result") == 0)
    g_ptr_array_add (loop->results, g_strdup (json_object_get_string_member (event, "content")));
  json_object_unref (event);
}

static void
test_agent_loop (Fixture *fx, gconstpointer data)
{
  Chat chat = { 0 };
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func (g_free);
  LoopData loop = { fx->toolbox, results };
  SandstepAgentHooks hooks = { loop_call_tool, loop_event, NULL, &loop };
  g_autoptr(JsonArray) tools = sandstep_toolbox_definitions (fx->toolbox);
  SandstepAgentRun run = { .model = "test-model", .system_prompt = "be brief", .prompt = "go", .tools = tools,
                           .max_turns = 5 };
  SandstepLlmOptions options;
  g_autoptr(SandstepLlm) llm = NULL;
  g_autoptr(GError) error = NULL;

  g_test_summary ("The loop answers every call of a reply in order (a malformed one as a tool error) and ends "
                  "with the reply that calls none");
  g_mutex_init (&chat.lock);
  g_cond_init (&chat.ready);
  chat.context = g_main_context_new ();
  chat.loop = g_main_loop_new (chat.context, FALSE);
  chat.thread = g_thread_new ("chat", chat_thread, &chat);
  g_mutex_lock (&chat.lock);
  while (!chat.up)
    g_cond_wait (&chat.ready, &chat.lock);
  g_mutex_unlock (&chat.lock);

  sandstep_llm_options_init (&options);
  options.base_url = chat.base_url;
  options.api_key = "";
  llm = sandstep_llm_new (&options, &error);
  g_assert_no_error (error);
  sandstep_agent_run (llm, &run, &hooks);

  g_assert_cmpint (run.end, ==, SANDSTEP_AGENT_ANSWERED);
  g_assert_cmpstr (run.answer, ==, "all done");
  g_assert_cmpuint (run.turn, ==, 2);
  g_assert_cmpuint (results->len, ==, 2);
  sandstep_test_assert_contains (results->pdata[0], "loop-ran");
  sandstep_test_assert_contains (results->pdata[1], "not valid JSON");
  sandstep_agent_run_clear (&run);

  g_main_loop_quit (chat.loop);
  g_thread_join (chat.thread);
  g_main_loop_unref (chat.loop);
  g_main_context_unref (chat.context);
  g_free (chat.base_url);
  g_mutex_clear (&chat.lock);
  g_cond_clear (&chat.ready);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  ADD ("/tools/rows", test_tool_rows);
  ADD ("/tools/read-limit", test_read_limit);
  ADD ("/tools/terminal", test_terminal);
  ADD ("/backend/claims", test_claims);
  ADD ("/backend/budget", test_budget);
  ADD ("/mcp/in-process", test_mcp);
  ADD ("/mcp/terminal", test_mcp_terminal);
  ADD ("/agent/loop", test_agent_loop);
#undef ADD
  return g_test_run ();
}
