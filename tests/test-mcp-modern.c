/* test-mcp-modern.c: the MCP revision of 2026-07-28 beside 2025-11-25, structured tool results, and the
 * official conformance suite.
 *
 * Each case provisions a real sandbox (with a secret to mask) and serves its tools:
 *
 *  - /mcp-modern/stdio/raw, /mcp-modern/http/raw: the 2026-07-28 wire by hand: server/discover,
 *    resultType, cache hints, -32022 for a version we do not speak, -32020 when the HTTP headers disagree
 *    with the body, 404 for an unknown method; and a legacy initialize on the same server.
 *  - /mcp-modern/sdk-v2/...: the official v2 SDK client from npm (tests/mcp/client-v2.mjs), pinned to
 *    2026-07-28 (no fallback) over stdio and HTTP, and in its 'auto' mode.
 *  - /mcp-modern/sdk-v1/structured: the official v1 SDK (2025-11-25), whose client checks each
 *    structuredContent against the tool's outputSchema: exit code, signal, timeout, cut output, masking.
 *  - /mcp-modern/conformance: @modelcontextprotocol/conformance's server scenarios that apply to a tool
 *    server, against `sandstep mcp --http` with its bearer token.
 *
 * Without node or the npm packages of tests/mcp these skip, or fail under SANDSTEP_TESTS_REQUIRE_NODE=1
 * (scripts/test sets it), saying which is missing.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "sandstep-test-utils.h"

#define MODERN "2026-07-28"
#define LEGACY "2025-11-25"
#define SECRET_VALUE "modern-sekrit-4711"
#define CLIENT_TIMEOUT_S 120
#define LINE_TIMEOUT_S 30.0

typedef struct {
  SandstepTestFixture f;
  char *handle;
  char *handle_arg;
} Fixture;

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  sandstep_test_setup (&fx->f, data);
  sandstep_test_fixture_setenv (&fx->f, "MODERN_SECRET", SECRET_VALUE);
  fx->handle = sandstep_test_provision (&fx->f, "--secret=MODERN_SECRET", NULL);
  fx->handle_arg = g_strconcat ("--handle=", fx->handle, NULL);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  g_free (fx->handle);
  g_free (fx->handle_arg);
  sandstep_test_teardown (&fx->f, data);
}

static JsonObject *
parse_object (const char *text)
{
  g_autoptr(JsonNode) node = sandstep_test_parse_json (text);

  g_assert_true (JSON_NODE_HOLDS_OBJECT (node));
  return json_object_ref (json_node_get_object (node));
}

/* ---- node and the npm packages ---- */

/* TRUE when node and every package of tests/mcp/package.json are installed; otherwise skips the case, or
 * fails it under SANDSTEP_TESTS_REQUIRE_NODE=1, saying what is missing. */
static gboolean
node_ready (void)
{
  static const char *const packages[] = {
    "@modelcontextprotocol/sdk", "@modelcontextprotocol/client", "@modelcontextprotocol/conformance", "glob",
  };
  g_autofree char *node = g_find_program_in_path ("node");
  g_autofree char *reason = NULL;

  if (node == NULL)
    reason = g_strdup ("node is not installed (scripts/test installs Debian's nodejs and npm)");
  for (gsize i = 0; reason == NULL && i < G_N_ELEMENTS (packages); i++)
    {
      g_autofree char *manifest = g_test_build_filename (G_TEST_DIST, "mcp", "node_modules", packages[i],
                                                         "package.json", NULL);
      if (!g_file_test (manifest, G_FILE_TEST_EXISTS))
        reason = g_strdup_printf ("%s is not installed in tests/mcp/node_modules (scripts/test runs npm ci there; "
                                  "or run: . scripts/deps.sh; sandstep_ensure_mcp_client)", packages[i]);
    }
  return reason == NULL || sandstep_test_node_missing (reason);
}

/* Runs `node NODE_ARGS...` in tests/mcp with @env (NAME, VALUE pairs, NULL-terminated) added; returns its
 * stdout, and its exit status in *@out_status. */
static char *
run_node (Fixture *fx, const char *const *node_args, const char *const *env, int *out_status, char **out_err)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "mcp", NULL);
  g_autofree char *timeout = g_strdup_printf ("%d", CLIENT_TIMEOUT_S);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) envp = g_strdupv (fx->f.envp);
  g_autoptr(GError) error = NULL;
  char *out = NULL;
  int status = -1;

  g_ptr_array_add (argv, (gpointer) "timeout");
  g_ptr_array_add (argv, (gpointer) "-k");
  g_ptr_array_add (argv, (gpointer) "5");
  g_ptr_array_add (argv, timeout);
  g_ptr_array_add (argv, (gpointer) "node");
  for (gsize i = 0; node_args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) node_args[i]);
  g_ptr_array_add (argv, NULL);
  for (gsize i = 0; env != NULL && env[i] != NULL; i += 2)
    envp = g_environ_setenv (envp, env[i], env[i + 1], TRUE);

  g_spawn_sync (dir, (char **) argv->pdata, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, out_err, &status, &error);
  g_assert_no_error (error);
  *out_status = g_spawn_check_wait_status (status, NULL) ? 0 : (WIFEXITED (status) ? WEXITSTATUS (status) : -1);
  return out;
}

/* Runs a client script and returns its report, asserting that it ran. */
static JsonObject *
run_client (Fixture *fx, const char *const *node_args, const char *const *env)
{
  g_autofree char *err = NULL;
  g_autofree char *out = NULL;
  int status;

  out = run_node (fx, node_args, env, &status, &err);
  if (status != 0)
    {
      g_test_message ("node %s failed (exit %d)\nstdout:\n%s\nstderr:\n%s", node_args[0], status, out, err);
      g_assert_not_reached ();
    }
  g_test_message ("%s stderr:\n%s", node_args[0], err);
  return parse_object (out);
}

/* ---- `sandstep mcp --http` ---- */

typedef struct {
  SandstepTestProc *proc;
  char *url;
  char *token;
  int stdin_fd;
} HttpServer;

static void
http_server_start (Fixture *fx, HttpServer *out)
{
  const char *args[] = { "mcp", fx->handle_arg, "--http=127.0.0.1:0", "--print-token", NULL };
  int pipe_fds[2];
  int target = 0;

  memset (out, 0, sizeof *out);
  g_assert_cmpint (pipe2 (pipe_fds, O_CLOEXEC), ==, 0);
  out->proc = sandstep_test_spawn_full (&fx->f, args, &pipe_fds[0], &target, 1);
  close (pipe_fds[0]);
  out->stdin_fd = pipe_fds[1];
  while (out->url == NULL || out->token == NULL)
    {
      g_autofree char *line = sandstep_test_proc_read_err_line (out->proc, LINE_TIMEOUT_S);
      const char *url, *token;

      g_assert_nonnull (line);
      url = strstr (line, "http://");
      token = strstr (line, "bearer token: ");
      if (url != NULL)
        out->url = g_strdup (url);
      if (token != NULL)
        out->token = g_strdup (token + strlen ("bearer token: "));
    }
}

/* EOF on its stdin ends it, with 0. */
static void
http_server_stop (HttpServer *server)
{
  g_autoptr(SandstepTestResult) result = NULL;

  close (server->stdin_fd);
  result = sandstep_test_proc_wait (server->proc, 30);
  sandstep_test_assert_status (result, 0);
  g_free (server->url);
  g_free (server->token);
}

typedef struct {
  guint status;
  char *body;
  char *session;     /* Mcp-Session-Id, or NULL */
} HttpReply;

static void
http_reply_free (HttpReply *reply)
{
  g_free (reply->body);
  g_free (reply->session);
  g_free (reply);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HttpReply, http_reply_free)

/* POSTs @body with the token and @headers ("Name", "value" pairs, NULL-terminated). */
static HttpReply *
http_post (HttpServer *server, const char *body, const char *const *headers)
{
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autoptr(SoupMessage) msg = soup_message_new ("POST", server->url);
  g_autoptr(GBytes) request = g_bytes_new (body, strlen (body));
  g_autoptr(GBytes) response = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *authorization = g_strconcat ("Bearer ", server->token, NULL);
  SoupMessageHeaders *request_headers = soup_message_get_request_headers (msg);
  HttpReply *reply = g_new0 (HttpReply, 1);

  soup_session_set_timeout (session, (guint) LINE_TIMEOUT_S);
  soup_message_headers_replace (request_headers, "Authorization", authorization);
  soup_message_headers_replace (request_headers, "Accept", "application/json, text/event-stream");
  for (gsize i = 0; headers != NULL && headers[i] != NULL; i += 2)
    soup_message_headers_replace (request_headers, headers[i], headers[i + 1]);
  soup_message_set_request_body_from_bytes (msg, "application/json", request);
  response = soup_session_send_and_read (session, msg, NULL, &error);
  g_assert_no_error (error);
  reply->status = soup_message_get_status (msg);
  reply->body = g_strndup (g_bytes_get_data (response, NULL), g_bytes_get_size (response));
  reply->session = g_strdup (soup_message_headers_get_one (soup_message_get_response_headers (msg), "Mcp-Session-Id"));
  return reply;
}

/* ---- messages ---- */

#define META(version)                                                                                            \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" version "\","                                      \
  "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"raw\",\"version\":\"0\"},"                                 \
  "\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define MODERN_REQUEST(id, method, params)                                                                       \
  "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"" method "\",\"params\":{" params META (MODERN) "}}"
#define DISCOVER(id) MODERN_REQUEST (id, "server/discover", "")
#define TOOLS_LIST(id) MODERN_REQUEST (id, "tools/list", "")
#define RUN_COMMAND(id, command) \
  MODERN_REQUEST (id, "tools/call", "\"name\":\"run_command\",\"arguments\":{\"command\":\"" command "\"},")
#define INITIALIZE(id)                                                                                           \
  "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"" LEGACY       \
  "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"raw\",\"version\":\"0\"}}}"

static JsonObject *
result_of (JsonObject *reply)
{
  if (!json_object_has_member (reply, "result"))
    {
      g_autoptr(JsonNode) node = json_node_init_object (json_node_alloc (), reply);
      g_autofree char *text = json_to_string (node, FALSE);
      g_test_message ("not a result: %s", text);
    }
  g_assert_true (json_object_has_member (reply, "result"));
  return json_object_get_object_member (reply, "result");
}

static void
assert_error (JsonObject *reply, int code, const char *needle)
{
  JsonObject *error = json_object_get_object_member (reply, "error");

  g_assert_false (json_object_has_member (reply, "result"));
  g_assert_nonnull (error);
  g_assert_cmpint (json_object_get_int_member (error, "code"), ==, code);
  if (needle != NULL)
    sandstep_test_assert_contains (json_object_get_string_member (error, "message"), needle);
}

/* What every 2026-07-28 result carries. */
static void
assert_modern_result (JsonObject *result)
{
  JsonObject *meta = json_object_get_object_member (result, "_meta");

  g_assert_cmpstr (json_object_get_string_member (result, "resultType"), ==, "complete");
  g_assert_nonnull (meta);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (meta,
                                                    "io.modelcontextprotocol/serverInfo"), "name"), ==, "sandstep");
}

static void
assert_discover (JsonObject *result)
{
  JsonArray *versions = json_object_get_array_member (result, "supportedVersions");

  assert_modern_result (result);
  g_assert_cmpuint (json_array_get_length (versions), ==, 1);
  g_assert_cmpstr (json_array_get_string_element (versions, 0), ==, MODERN);
  g_assert_true (json_object_has_member (json_object_get_object_member (result, "capabilities"), "tools"));
  sandstep_test_assert_contains (json_object_get_string_member (result, "instructions"), "sandbox");
  g_assert_cmpint (json_object_get_int_member (result, "ttlMs"), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (result, "cacheScope"), ==, "private");
}

/* run_command's outputSchema, as tools/list gives it; the other tools have none. */
static void
assert_tool_schemas (JsonArray *tools)
{
  g_assert_cmpuint (json_array_get_length (tools), ==, 4);
  for (guint i = 0; i < json_array_get_length (tools); i++)
    {
      JsonObject *tool = json_array_get_object_element (tools, i);
      JsonObject *schema;

      if (g_strcmp0 (json_object_get_string_member (tool, "name"), "run_command") != 0)
        {
          g_assert_false (json_object_has_member (tool, "outputSchema"));
          continue;
        }
      schema = json_object_get_object_member (tool, "outputSchema");
      g_assert_nonnull (schema);
      g_assert_cmpstr (json_object_get_string_member (schema, "type"), ==, "object");
      g_assert_cmpuint (json_array_get_length (json_object_get_array_member (schema, "required")), ==, 8);
      g_assert_true (json_object_has_member (json_object_get_object_member (schema, "properties"), "exitCode"));
    }
}

/* The text the model reads and the structured result of one run_command. */
static JsonObject *
assert_structured (JsonObject *result, const char *text_needle)
{
  JsonArray *content = json_object_get_array_member (result, "content");
  JsonObject *structured = json_object_get_object_member (result, "structuredContent");

  g_assert_false (json_object_get_boolean_member_with_default (result, "isError", FALSE));
  g_assert_cmpuint (json_array_get_length (content), ==, 1);
  sandstep_test_assert_contains (json_object_get_string_member (json_array_get_object_element (content, 0), "text"),
                                 text_needle);
  g_assert_nonnull (structured);
  return structured;
}

/* ---- stdio, by hand ---- */

/* Feeds @lines to `sandstep mcp` on stdin, closes it, and returns the replies by id (as text). */
static GHashTable *
stdio_session (Fixture *fx, const char *const *lines)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE |
                                                                       G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) input = g_string_new (NULL);
  g_autofree char *out = NULL;
  g_auto(GStrv) replies = NULL;
  GHashTable *by_id = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) json_object_unref);

  for (gsize i = 0; lines[i] != NULL; i++)
    g_string_append_printf (input, "%s\n", lines[i]);
  g_subprocess_launcher_set_environ (launcher, fx->f.envp);
  g_subprocess_launcher_set_cwd (launcher, fx->f.host_dir);
  process = g_subprocess_launcher_spawn (launcher, &error, fx->f.helper, "mcp", fx->handle_arg, NULL);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (process, input->str, NULL, &out, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (process));
  g_assert_cmpint (g_subprocess_get_exit_status (process), ==, 0);

  replies = g_strsplit (out, "\n", -1);
  for (gsize i = 0; replies[i] != NULL; i++)
    {
      JsonObject *reply;
      JsonNode *id;

      if (replies[i][0] == '\0')
        continue;
      reply = parse_object (replies[i]);
      id = json_object_get_member (reply, "id");
      g_assert_nonnull (id);
      g_hash_table_insert (by_id, JSON_NODE_HOLDS_NULL (id) ? g_strdup ("null") : json_to_string (id, FALSE), reply);
    }
  return by_id;
}

static void
test_stdio_raw (Fixture *fx, gconstpointer data)
{
  const char *lines[] = {
    DISCOVER ("1"),
    TOOLS_LIST ("2"),
    RUN_COMMAND ("3", "echo modern-out; echo modern-err >&2; echo $MODERN_SECRET; exit 3"),
    MODERN_REQUEST ("4", "ping", ""),
    MODERN_REQUEST ("5", "initialize", ""),
    "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\",\"params\":{" META ("1999-01-01") "}}",
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
    "\"io.modelcontextprotocol/protocolVersion\":\"" MODERN "\"}}}",
    "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"server/discover\"}",
    INITIALIZE ("9"),
    "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\"}",
    MODERN_REQUEST ("\"str-11\"", "tools/call", "\"name\":\"no_such_tool\",\"arguments\":{},"),
    NULL,
  };
  g_autoptr(GHashTable) replies = NULL;
  JsonObject *result, *structured, *error, *data_object;
  JsonArray *supported;

  g_test_summary ("2026-07-28 over stdio by hand: server/discover, resultType and cache hints, structuredContent "
                  "(masked), no ping or initialize in that era, -32022 with the supported versions, -32602 without "
                  "clientCapabilities; and the legacy era on the same server.");
  replies = stdio_session (fx, lines);

  assert_discover (result_of (g_hash_table_lookup (replies, "1")));

  result = result_of (g_hash_table_lookup (replies, "2"));
  assert_modern_result (result);
  g_assert_cmpint (json_object_get_int_member (result, "ttlMs"), ==, 0);
  assert_tool_schemas (json_object_get_array_member (result, "tools"));

  result = result_of (g_hash_table_lookup (replies, "3"));
  assert_modern_result (result);
  structured = assert_structured (result, "[exit code: 3]");
  g_assert_cmpint (json_object_get_int_member (structured, "exitCode"), ==, 3);
  g_assert_cmpstr (json_object_get_string_member (structured, "ended"), ==, "exit");
  g_assert_true (json_object_get_null_member (structured, "signal"));
  g_assert_false (json_object_get_boolean_member (structured, "timedOut"));
  g_assert_cmpstr (json_object_get_string_member (structured, "stdout"), ==, "modern-out\n***");
  g_assert_cmpstr (json_object_get_string_member (structured, "stderr"), ==, "modern-err");

  assert_error (g_hash_table_lookup (replies, "4"), -32601, "not part of MCP " MODERN);
  assert_error (g_hash_table_lookup (replies, "5"), -32601, "initialize");

  error = json_object_get_object_member (g_hash_table_lookup (replies, "6"), "error");
  assert_error (g_hash_table_lookup (replies, "6"), -32022, "'1999-01-01'");
  data_object = json_object_get_object_member (error, "data");
  g_assert_cmpstr (json_object_get_string_member (data_object, "requested"), ==, "1999-01-01");
  supported = json_object_get_array_member (data_object, "supported");
  g_assert_cmpstr (json_array_get_string_element (supported, 0), ==, MODERN);
  g_assert_cmpstr (json_array_get_string_element (supported, 1), ==, LEGACY);

  assert_error (g_hash_table_lookup (replies, "7"), -32602, "clientCapabilities");
  assert_error (g_hash_table_lookup (replies, "8"), -32601, "server/discover belongs to MCP " MODERN);

  /* The legacy era on the same process: initialize, and results without the new envelope. */
  result = result_of (g_hash_table_lookup (replies, "9"));
  g_assert_cmpstr (json_object_get_string_member (result, "protocolVersion"), ==, LEGACY);
  result = result_of (g_hash_table_lookup (replies, "10"));
  g_assert_false (json_object_has_member (result, "resultType"));
  assert_tool_schemas (json_object_get_array_member (result, "tools"));

  /* An unknown tool is -32602, and a string id stays a string. */
  assert_error (g_hash_table_lookup (replies, "\"str-11\""), -32602, "no_such_tool");
}

/* ---- HTTP, by hand ---- */

static void
test_http_raw (Fixture *fx, gconstpointer data)
{
  HttpServer server;
  g_autoptr(HttpReply) reply = NULL;
  g_autoptr(JsonObject) object = NULL;

  g_test_summary ("2026-07-28 over HTTP by hand: no session, headers that mirror the body (-32020 and 400 when "
                  "one is missing or differs), 404 for an unknown method, 400 and -32022 for an unknown version; "
                  "legacy initialize on the same endpoint still opens a session.");
  http_server_start (fx, &server);

  {
    const char *headers[] = { "MCP-Protocol-Version", MODERN, "Mcp-Method", "server/discover", NULL };
    reply = http_post (&server, DISCOVER ("1"), headers);
  }
  g_assert_cmpuint (reply->status, ==, 200);
  g_assert_null (reply->session);
  object = parse_object (reply->body);
  assert_discover (result_of (object));
  g_clear_pointer (&object, json_object_unref);
  g_clear_pointer (&reply, http_reply_free);

  {
    const char *headers[] = { "MCP-Protocol-Version", MODERN, "Mcp-Method", "tools/call", "Mcp-Name", "run_command",
                              NULL };
    reply = http_post (&server, RUN_COMMAND ("2", "echo over-http"), headers);
  }
  g_assert_cmpuint (reply->status, ==, 200);
  object = parse_object (reply->body);
  assert_modern_result (result_of (object));
  g_assert_cmpstr (json_object_get_string_member (assert_structured (result_of (object), "over-http"), "stdout"), ==,
                   "over-http");
  g_clear_pointer (&object, json_object_unref);
  g_clear_pointer (&reply, http_reply_free);

  /* Refusals: what the headers say against the body, an unknown method, an unknown version. */
  {
    static const struct {
      const char *body;
      const char *headers[7];
      guint status;
      int code;
      const char *needle;
    } refusals[] = {
      { RUN_COMMAND ("3", "echo never"), { "MCP-Protocol-Version", MODERN, "Mcp-Method", "tools/call", NULL },
        400, -32020, "the Mcp-Name header is missing" },
      { TOOLS_LIST ("4"), { "MCP-Protocol-Version", MODERN, "Mcp-Method", "tools/call", NULL },
        400, -32020, "the Mcp-Method header says \"tools/call\"" },
      { TOOLS_LIST ("5"), { "Mcp-Method", "tools/list", NULL }, 400, -32020, "MCP-Protocol-Version" },
      { MODERN_REQUEST ("6", "resources/list", ""), { "MCP-Protocol-Version", MODERN, "Mcp-Method", "resources/list",
                                                       NULL }, 404, -32601, "resources/list" },
      { "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{" META ("1999-01-01") "}}",
        { "MCP-Protocol-Version", "1999-01-01", "Mcp-Method", "tools/list", NULL }, 400, -32022, "1999-01-01" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS (refusals); i++)
      {
        reply = http_post (&server, refusals[i].body, refusals[i].headers);
        g_assert_cmpuint (reply->status, ==, refusals[i].status);
        object = parse_object (reply->body);
        assert_error (object, refusals[i].code, refusals[i].needle);
        g_assert_cmpint (json_object_get_int_member (object, "id"), ==, (gint64) i + 3);
        g_clear_pointer (&object, json_object_unref);
        g_clear_pointer (&reply, http_reply_free);
      }
  }

  /* legacy on the same endpoint */
  reply = http_post (&server, INITIALIZE ("8"), NULL);
  g_assert_cmpuint (reply->status, ==, 200);
  g_assert_nonnull (reply->session);
  object = parse_object (reply->body);
  g_assert_cmpstr (json_object_get_string_member (result_of (object), "protocolVersion"), ==, LEGACY);
  g_assert_false (json_object_has_member (result_of (object), "resultType"));
  g_clear_pointer (&object, json_object_unref);
  g_clear_pointer (&reply, http_reply_free);

  http_server_stop (&server);
}

/* ---- the official SDK clients ---- */

#define SDK_CALLS                                                                                        \
  "[{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo sdk-out; echo $MODERN_SECRET >&2\"}}," \
  " {\"name\": \"run_command\", \"arguments\": {\"command\": \"kill -SEGV $$\"}},"                        \
  " {\"name\": \"read_file\", \"arguments\": {\"path\": \"no/such/file\"}},"                              \
  " {\"name\": \"no_such_tool\", \"arguments\": {}}]"

/* What the v2 client must see for SDK_CALLS in the 2026-07-28 era. */
static void
assert_v2_report (JsonObject *report)
{
  JsonObject *result, *structured, *error;

  g_assert_cmpstr (json_object_get_string_member (report, "era"), ==, "modern");
  g_assert_cmpstr (json_object_get_string_member (report, "protocolVersion"), ==, MODERN);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (report, "serverInfo"), "name"), ==,
                   "sandstep");
  sandstep_test_assert_contains (json_object_get_string_member (report, "instructions"), "sandbox");
  assert_tool_schemas (json_object_get_array_member (report, "tools"));

  result = json_object_get_object_member (sandstep_test_mcp_call (report, 0, "run_command"), "result");
  structured = assert_structured (result, "sdk-out");
  g_assert_cmpstr (json_object_get_string_member (structured, "stdout"), ==, "sdk-out");
  g_assert_cmpstr (json_object_get_string_member (structured, "stderr"), ==, "***");
  g_assert_cmpint (json_object_get_int_member (structured, "exitCode"), ==, 0);

  result = json_object_get_object_member (sandstep_test_mcp_call (report, 1, "run_command"), "result");
  structured = assert_structured (result, "[exit code: 139]");
  g_assert_cmpint (json_object_get_int_member (structured, "exitCode"), ==, 139);
  g_assert_cmpstr (json_object_get_string_member (structured, "ended"), ==, "signal");
  g_assert_cmpstr (json_object_get_string_member (structured, "signal"), ==, "SIGSEGV");

  /* A tool failure: isError, and no structuredContent. */
  result = json_object_get_object_member (sandstep_test_mcp_call (report, 2, "read_file"), "result");
  g_assert_true (json_object_get_boolean_member (result, "isError"));
  g_assert_false (json_object_has_member (result, "structuredContent"));

  error = json_object_get_object_member (sandstep_test_mcp_call (report, 3, "no_such_tool"), "error");
  g_assert_nonnull (error);
  sandstep_test_assert_contains (json_object_get_string_member (error, "message"), "no_such_tool");
}

static void
test_sdk_v2_stdio (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;

  g_test_summary ("The official v2 SDK client, pinned to 2026-07-28 (no fallback), over stdio: discover, tools "
                  "with outputSchema, structuredContent it validates, isError, an unknown tool.");
  if (!node_ready ())
    return;
  {
    const char *args[] = { "client-v2.mjs", "stdio", fx->f.helper, "mcp", fx->handle_arg, NULL };
    const char *env[] = { "ERA", MODERN, "CALLS", SDK_CALLS, NULL };
    report = run_client (fx, args, env);
  }
  assert_v2_report (report);
}

static void
test_sdk_v2_http (Fixture *fx, gconstpointer data)
{
  HttpServer server;

  g_test_summary ("The official v2 SDK client over Streamable HTTP with the bearer token: pinned to 2026-07-28, "
                  "and in its 'auto' mode, which probes server/discover and takes the modern era.");
  if (!node_ready ())
    return;
  http_server_start (fx, &server);
  for (guint i = 0; i < 2; i++)
    {
      const char *args[] = { "client-v2.mjs", "http", server.url, NULL };
      const char *env[] = { "ERA", i == 0 ? MODERN : "auto", "CALLS", SDK_CALLS, "MCP_TOKEN", server.token, NULL };
      g_autoptr(JsonObject) report = run_client (fx, args, env);

      assert_v2_report (report);
    }
  http_server_stop (&server);
}

static void
test_sdk_v1_structured (Fixture *fx, gconstpointer data)
{
  const char *calls =
    "[{\"name\": \"run_command\", \"arguments\": {\"command\": \"sleep 30\", \"timeout_seconds\": 1}},"
    " {\"name\": \"run_command\", \"arguments\": {\"command\": \"seq 1 5000; echo $MODERN_SECRET\"}},"
    " {\"name\": \"run_command\", \"arguments\": {\"command\": \"echo to-stderr >&2; exit 7\"}}]";
  const char *args[] = { "client.mjs", "stdio", fx->f.helper, "mcp", fx->handle_arg, NULL };
  const char *env[] = { "CALLS", calls, NULL };
  g_autoptr(JsonObject) report = NULL;
  JsonObject *structured, *result;
  const char *out;

  g_test_summary ("The official v1 SDK client (2025-11-25), which checks structuredContent against outputSchema: "
                  "a timeout, output cut at 2000 lines with its secret masked, stderr and an exit code.");
  if (!node_ready ())
    return;
  report = run_client (fx, args, env);
  g_assert_cmpstr (json_object_get_string_member (report, "protocolVersion"), ==, LEGACY);
  assert_tool_schemas (json_object_get_array_member (report, "tools"));

  structured = assert_structured (json_object_get_object_member (sandstep_test_mcp_call (report, 0, "run_command"), "result"),
                                  "[timed out after 1s]");
  g_assert_true (json_object_get_boolean_member (structured, "timedOut"));
  g_assert_true (json_object_get_null_member (structured, "exitCode"));
  g_assert_cmpstr (json_object_get_string_member (structured, "ended"), ==, "timeout");
  g_assert_cmpfloat (json_object_get_double_member (structured, "timeoutSeconds"), ==, 1);
  g_assert_false (json_object_get_boolean_member (structured, "outputTruncated"));

  result = json_object_get_object_member (sandstep_test_mcp_call (report, 1, "run_command"), "result");
  structured = assert_structured (result, "[... 3001 lines (14.2KB) omitted ...]");
  g_assert_true (json_object_get_boolean_member (structured, "outputTruncated"));
  out = json_object_get_string_member (structured, "stdout");
  g_assert_true (g_str_has_prefix (out, "1\n2\n"));
  g_assert_true (g_str_has_suffix (out, "4999\n5000\n***"));
  sandstep_test_assert_not_contains (out, SECRET_VALUE);
  /* The same stream as the text shows, marker and all. */
  {
    JsonArray *content = json_object_get_array_member (result, "content");
    g_autofree char *text = g_strconcat ("[stdout]\n", out, NULL);

    g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (content, 0), "text"), ==, text);
  }

  structured = assert_structured (json_object_get_object_member (sandstep_test_mcp_call (report, 2, "run_command"), "result"),
                                  "[exit code: 7]");
  g_assert_cmpint (json_object_get_int_member (structured, "exitCode"), ==, 7);
  g_assert_cmpstr (json_object_get_string_member (structured, "stdout"), ==, "");
  g_assert_cmpstr (json_object_get_string_member (structured, "stderr"), ==, "to-stderr");
  g_assert_false (json_object_get_boolean_member (structured, "outputTruncated"));
}

static void
test_sdk_v1_python (Fixture *fx, gconstpointer data)
{
  const char *calls =
    "[{\"name\": \"run_python\", \"arguments\": {\"code\": \"n = 6\\nprint('out')\\nn * 7\"}},"
    " {\"name\": \"run_python\", \"arguments\": {\"code\": \"n / 0\"}}]";
  const char *args[] = { "client.mjs", "stdio", fx->f.helper, "mcp", fx->handle_arg, "--python", NULL };
  const char *env[] = { "CALLS", calls, NULL };
  g_autoptr(JsonObject) report = NULL;
  JsonObject *structured;

  g_test_summary ("run_python's structuredContent passes the official v1 SDK's check against its outputSchema: "
                  "stdout, the value, and a traceback in one session.");
  if (!node_ready ())
    return;
  if (!g_file_test ("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("python3 is not installed in /usr/bin, so the sandbox has none (apt-get install python3)");
      return;
    }
  report = run_client (fx, args, env);
  structured = assert_structured (json_object_get_object_member (sandstep_test_mcp_call (report, 0, "run_python"), "result"),
                                  "[value]\n42");
  g_assert_cmpstr (json_object_get_string_member (structured, "stdout"), ==, "out");
  g_assert_cmpstr (json_object_get_string_member (structured, "value"), ==, "42");
  g_assert_true (json_object_get_null_member (structured, "error"));
  g_assert_false (json_object_get_boolean_member (structured, "restarted"));
  structured = assert_structured (json_object_get_object_member (sandstep_test_mcp_call (report, 1, "run_python"), "result"),
                                  "ZeroDivisionError");
  g_assert_true (json_object_get_null_member (structured, "value"));
  sandstep_test_assert_contains (json_object_get_string_member (structured, "error"), "ZeroDivisionError: division by zero");
}

/* ---- the conformance suite ---- */

/* The suite's server scenarios that apply to a server of tools only (the others need fixture tools,
 * resources, prompts, logging or completions).  server-sse-multiple-streams checks that concurrent POSTs
 * are each answered. */
static const char *const conformance_scenarios[] = {
  "server-initialize", "ping", "tools-list", "dns-rebinding-protection", "server-sse-multiple-streams",
};

/* Runs one scenario; returns the suite's exit status, and the statuses of its checks (from checks.json,
 * joined by spaces) in *@out_statuses. */
static int
run_conformance (Fixture *fx, HttpServer *server, const char *scenario, gboolean with_token, gboolean as_node18,
                 char **out_statuses)
{
  g_autofree char *results_name = g_strconcat (with_token ? "" : "no-token-", as_node18 ? "node18-" : "", scenario,
                                               NULL);
  g_autofree char *results = sandstep_test_host_path (&fx->f, results_name);
  g_autofree char *suite = g_test_build_filename (G_TEST_DIST, "mcp", "node_modules", "@modelcontextprotocol",
                                                  "conformance", "dist", "index.js", NULL);
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  const char *env[] = { "MCP_URL", server->url, "MCP_TOKEN", server->token, NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GDir) dir = NULL;
  g_autoptr(GString) statuses = g_string_new (NULL);
  const char *name;
  int status;

  /* as_node18: node 18's globals (Debian 12's node) on whatever node runs here; the shim must restore them. */
  if (as_node18)
    {
      g_ptr_array_add (args, "--import");
      g_ptr_array_add (args, "./as-node18.mjs");
    }
  g_ptr_array_add (args, "--import");
  g_ptr_array_add (args, "./globsync-shim.mjs");
  if (with_token)
    {
      g_ptr_array_add (args, "--import");
      g_ptr_array_add (args, "./with-token.mjs");
    }
  for (const char *const *a = (const char *const[]) { suite, "server", "--url", server->url, "--scenario", scenario,
                                                      "-o", results, NULL };
       *a != NULL; a++)
    g_ptr_array_add (args, (gpointer) *a);
  g_ptr_array_add (args, NULL);
  out = run_node (fx, (const char *const *) args->pdata, env, &status, &err);
  g_test_message ("conformance %s (exit %d):\n%s\n%s", scenario, status, out, err);
  dir = g_dir_open (results, 0, NULL);
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (results, name, "checks.json", NULL);
      g_autofree char *text = NULL;
      g_autoptr(JsonNode) checks = NULL;

      if (!g_file_get_contents (path, &text, NULL, NULL))
        continue;
      checks = sandstep_test_parse_json (text);
      for (guint i = 0; i < json_array_get_length (json_node_get_array (checks)); i++)
        g_string_append_printf (statuses, "%s%s", statuses->len > 0 ? " " : "",
                                json_object_get_string_member (json_array_get_object_element (
                                  json_node_get_array (checks), i), "status"));
    }
  *out_statuses = g_string_free (g_steal_pointer (&statuses), FALSE);
  return status;
}

static void
test_conformance (Fixture *fx, gconstpointer data)
{
  HttpServer server;

  g_test_summary ("The official conformance suite (@modelcontextprotocol/conformance, on node 18 or 20 through "
                  "globsync-shim.mjs: fs.globSync and the global File) passes its tool-server scenarios against "
                  "`sandstep mcp --http`, with the bearer token, also with node 18's globals; without the token the "
                  "same suite fails.");
  if (!node_ready ())
    return;
  http_server_start (fx, &server);
  for (gsize i = 0; i < G_N_ELEMENTS (conformance_scenarios); i++)
    {
      g_autofree char *statuses = NULL;
      int status = run_conformance (fx, &server, conformance_scenarios[i], TRUE, FALSE, &statuses);

      g_test_message ("%s: %s", conformance_scenarios[i], statuses);
      g_assert_cmpint (status, ==, 0);
      sandstep_test_assert_contains (statuses, "SUCCESS");
      sandstep_test_assert_not_contains (statuses, "FAILURE");
      sandstep_test_assert_not_contains (statuses, "WARNING");
    }
  /* The token is what lets the suite in: the same scenario without it fails. */
  {
    g_autofree char *statuses = NULL;
    int status = run_conformance (fx, &server, "tools-list", FALSE, FALSE, &statuses);

    g_assert_cmpint (status, !=, 0);
  }
  /* With node 18's globals (no global File: "ReferenceError: File is not defined" as the suite loads). */
  {
    g_autofree char *statuses = NULL;
    int status = run_conformance (fx, &server, "server-initialize", TRUE, TRUE, &statuses);

    g_test_message ("server-initialize as node 18: %s", statuses);
    g_assert_cmpint (status, ==, 0);
    sandstep_test_assert_contains (statuses, "SUCCESS");
    sandstep_test_assert_not_contains (statuses, "FAILURE");
  }
  http_server_stop (&server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  ADD ("/mcp-modern/stdio/raw", test_stdio_raw);
  ADD ("/mcp-modern/http/raw", test_http_raw);
  ADD ("/mcp-modern/sdk-v2/stdio", test_sdk_v2_stdio);
  ADD ("/mcp-modern/sdk-v2/http", test_sdk_v2_http);
  ADD ("/mcp-modern/sdk-v1/structured", test_sdk_v1_structured);
  ADD ("/mcp-modern/sdk-v1/python", test_sdk_v1_python);
  ADD ("/mcp-modern/conformance", test_conformance);
#undef ADD
  return g_test_run ();
}
