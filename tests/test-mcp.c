/* test-mcp.c: the MCP server (`sandstep mcp`, `sandstep tools`) against real clients.
 *
 * Each case provisions a real sandbox in its own state directory
 * (sandstep-test-utils.h) and serves its four tools:
 *
 *  - /mcp/sdk/...: the official TypeScript SDK client from npm
 *    (tests/mcp/client.mjs), over stdio and over Streamable HTTP.  Without
 *    node or the installed SDK these skip, or fail when
 *    SANDSTEP_TESTS_REQUIRE_NODE=1 (scripts/test sets it).
 *  - /mcp/stdio/..., /mcp/http/...: raw wire checks that need no node: JSON-RPC
 *    errors, notifications, Origin and Host refusals, sessions.
 *  - /mcp/tools/...: `sandstep tools -- AGENT` with agents that reach the tools
 *    through $SANDSTEP_MCP_URL (node with the SDK, and curl).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixinputstream.h>
#include <json-glib/json-glib.h>

#include "sandstep-error.h"
#include "sandstep-test-utils.h"

/* The newest protocol version the server speaks (operators/sandstep-mcp.h). */
#define LATEST_VERSION "2025-11-25"
/* How long one client or agent run may take. */
#define CLIENT_TIMEOUT_S 90.0
#define LINE_TIMEOUT_S 30.0

/* The bearer token of the HTTP server the case started: raw requests and the
 * SDK client carry it, unless a request brings an Authorization of its own. */
static char *http_token;

typedef struct {
  SandstepTestFixture f;
  char *handle;
  char *handle_arg;     /* "--handle=HANDLE" */
} Fixture;

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  sandstep_test_setup (&fx->f, data);
  fx->handle = sandstep_test_provision (&fx->f, NULL);
  fx->handle_arg = g_strconcat ("--handle=", fx->handle, NULL);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  g_free (fx->handle);
  g_free (fx->handle_arg);
  sandstep_test_teardown (&fx->f, data);
}

/* ---- node and the SDK ---- */

/* TRUE when node and the SDK are here; otherwise skips the case (or fails it
 * under SANDSTEP_TESTS_REQUIRE_NODE=1) with the reason. */
static gboolean
node_client_ready (void)
{
  g_autofree char *node = g_find_program_in_path ("node");
  g_autofree char *sdk = g_test_build_filename (G_TEST_DIST, "mcp", "node_modules", "@modelcontextprotocol", "sdk",
                                                "package.json", NULL);
  const char *reason = NULL;

  if (node == NULL)
    reason = "node is not installed (scripts/test installs Debian's nodejs and npm)";
  else if (!g_file_test (sdk, G_FILE_TEST_EXISTS))
    reason = "@modelcontextprotocol/sdk is not installed in tests/mcp/node_modules (scripts/test runs npm there; "
             "or run: cd tests/mcp && npm ci)";
  return reason == NULL || sandstep_test_node_missing (reason);
}

/* Runs tests/mcp/client.mjs MODE TARGET... with CALLS=@calls and returns its
 * report, asserting that it ran. */
/* @minimal: the SDK starts a stdio server with its default environment (HOME, PATH, ...), as a client
 * configured without an `env` block does. */
static JsonObject *
run_client_full (Fixture *fx, const char *const *client_args, const char *calls, gboolean minimal)
{
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "mcp", "client.mjs", NULL);
  g_autofree char *timeout = g_strdup_printf ("%d", (int) CLIENT_TIMEOUT_S);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) envp = g_strdupv (fx->f.envp);
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) report = NULL;
  int status = -1;

  g_ptr_array_add (argv, (gpointer) "timeout");
  g_ptr_array_add (argv, (gpointer) "-k");
  g_ptr_array_add (argv, (gpointer) "5");
  g_ptr_array_add (argv, timeout);
  g_ptr_array_add (argv, (gpointer) "node");
  g_ptr_array_add (argv, script);
  for (gsize i = 0; client_args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) client_args[i]);
  g_ptr_array_add (argv, NULL);
  envp = g_environ_setenv (envp, "CALLS", calls, TRUE);
  if (http_token != NULL)
    envp = g_environ_setenv (envp, "MCP_TOKEN", http_token, TRUE);
  if (minimal)
    envp = g_environ_setenv (envp, "MINIMAL_ENV", "1", TRUE);

  g_spawn_sync (fx->f.host_dir, (char **) argv->pdata, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status,
                &error);
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_test_message ("client.mjs failed (wait status %d)\nstdout:\n%s\nstderr:\n%s", status, out, err);
      g_assert_not_reached ();
    }
  g_test_message ("client.mjs stderr:\n%s", err);
  report = sandstep_test_parse_json (out);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (report));
  return json_object_ref (json_node_get_object (report));
}

static JsonObject *
run_client (Fixture *fx, const char *const *client_args, const char *calls)
{
  return run_client_full (fx, client_args, calls, FALSE);
}

/* The text of a tools/call result's single text item. */
static const char *
result_text (JsonObject *result)
{
  JsonArray *content = json_object_get_array_member (result, "content");
  JsonObject *item;

  g_assert_nonnull (content);
  g_assert_cmpuint (json_array_get_length (content), ==, 1);
  item = json_array_get_object_element (content, 0);
  g_assert_cmpstr (json_object_get_string_member (item, "type"), ==, "text");
  return json_object_get_string_member (item, "text");
}

static gboolean
result_is_error (JsonObject *result)
{
  return json_object_get_boolean_member_with_default (result, "isError", FALSE);
}

#define SDK_CALLS                                                                                          \
  "[{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo hello-from-mcp\"}},"                  \
  " {\"name\": \"write_file\", \"arguments\": {\"path\": \"notes/round.txt\","                             \
  "                                          \"content\": \"alpha line\\nbeta line\\n\"}},"                 \
  " {\"name\": \"read_file\", \"arguments\": {\"path\": \"notes/round.txt\"}},"                            \
  " {\"name\": \"read_file\", \"arguments\": {\"path\": \"no/such/file.txt\"}},"                           \
  " {\"name\": \"run_command\", \"arguments\": {\"command\": \"cat notes/round.txt\"}},"                    \
  " {\"name\": \"no_such_tool\", \"arguments\": {}}]"

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* What both transports must give the SDK client for SDK_CALLS. */
static void
assert_sdk_report (JsonObject *report)
{
  JsonArray *tools = json_object_get_array_member (report, "tools");
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *joined = NULL;
  JsonObject *call, *result, *error;

  /* initialize: the newest version both speak. */
  g_assert_cmpstr (json_object_get_string_member (report, "protocolVersion"), >=, LATEST_VERSION);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (report, "serverInfo"), "name"), ==,
                   "sandstep");
  g_assert_true (json_object_has_member (json_object_get_object_member (report, "capabilities"), "tools"));

  /* tools/list: the four tools, each with an object schema (the SDK already
   * refused the whole list otherwise). */
  g_assert_cmpuint (json_array_get_length (tools), ==, 4);
  for (guint i = 0; i < json_array_get_length (tools); i++)
    {
      JsonObject *tool = json_array_get_object_element (tools, i);
      JsonObject *schema = json_object_get_object_member (tool, "inputSchema");

      g_assert_nonnull (schema);
      g_assert_cmpstr (json_object_get_string_member (schema, "type"), ==, "object");
      g_assert_nonnull (json_object_get_string_member (tool, "description"));
      g_ptr_array_add (names, g_strdup (json_object_get_string_member (tool, "name")));
    }
  g_ptr_array_sort (names, compare_strings);
  g_ptr_array_add (names, NULL);
  joined = g_strjoinv (",", (char **) names->pdata);
  g_assert_cmpstr (joined, ==, "list_directory,read_file,run_command,write_file");

  /* run_command echo */
  result = json_object_get_object_member (sandstep_test_mcp_call (report, 0, "run_command"), "result");
  g_assert_false (result_is_error (result));
  sandstep_test_assert_contains (result_text (result), "hello-from-mcp");

  /* write_file, then read_file gives it back */
  result = json_object_get_object_member (sandstep_test_mcp_call (report, 1, "write_file"), "result");
  g_assert_false (result_is_error (result));
  result = json_object_get_object_member (sandstep_test_mcp_call (report, 2, "read_file"), "result");
  g_assert_false (result_is_error (result));
  sandstep_test_assert_contains (result_text (result), "alpha line");
  sandstep_test_assert_contains (result_text (result), "beta line");

  /* a tool failure the model can act on: a result with isError */
  result = json_object_get_object_member (sandstep_test_mcp_call (report, 3, "read_file"), "result");
  g_assert_true (result_is_error (result));
  sandstep_test_assert_contains (result_text (result), "no/such/file.txt");

  /* the file is in the sandbox, where commands see it */
  result = json_object_get_object_member (sandstep_test_mcp_call (report, 4, "run_command"), "result");
  g_assert_false (result_is_error (result));
  sandstep_test_assert_contains (result_text (result), "beta line");

  /* an unknown tool: JSON-RPC -32602 */
  call = sandstep_test_mcp_call (report, 5, "no_such_tool");
  g_assert_false (json_object_has_member (call, "result"));
  error = json_object_get_object_member (call, "error");
  g_assert_cmpint (json_object_get_int_member (error, "code"), ==, -32602);
  sandstep_test_assert_contains (json_object_get_string_member (error, "message"), "no_such_tool");
}

static void
test_sdk_stdio (Fixture *fx, gconstpointer data)
{
  const char *args[] = { "stdio", fx->f.helper, "mcp", fx->handle_arg, NULL };
  g_autoptr(JsonObject) report = NULL;

  g_test_summary ("The official SDK client speaks to `sandstep mcp` over stdio: initialize, tools/list, "
                  "tools/call results, isError and an unknown tool.");
  if (!node_client_ready ())
    return;
  report = run_client (fx, args, SDK_CALLS);
  assert_sdk_report (report);
}

static void
test_sdk_stdio_minimal_env (Fixture *fx, gconstpointer data)
{
  g_autofree char *state_option = g_strconcat ("--state-dir=", fx->f.state_dir, NULL);
  g_autofree char *owner_option = g_strconcat ("--owner=", fx->f.owner, NULL);
  const char *bare[] = { "stdio", fx->f.helper, "mcp", fx->handle_arg, NULL };
  const char *configured[] = { "stdio", fx->f.helper, "mcp", fx->handle_arg, state_option, owner_option, NULL };
  const char *calls = "[{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo reached\"}},"
                      "{\"name\":\"list_directory\",\"arguments\":{\"path\":\"/workspace\"}}]";
  g_autoptr(JsonObject) report = NULL;
  g_autoptr(JsonObject) reached = NULL;
  JsonObject *result;

  g_test_summary ("Started by the official SDK client with its minimal default environment (no "
                  "SANDSTEP_STATE_DIR), `sandstep mcp` answers initialize and tools/list and says in every tool "
                  "call's result (isError) why the sandbox is out of reach; with --state-dir the calls run");
  if (!node_client_ready ())
    return;
  report = run_client_full (fx, bare, calls, TRUE);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (report, "serverInfo"), "name"), ==,
                   "sandstep");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "tools")), ==, 4);
  for (guint i = 0; i < 2; i++)
    {
      const char *name = i == 0 ? "run_command" : "list_directory";

      result = json_object_get_object_member (sandstep_test_mcp_call (report, i, name), "result");
      g_assert_true (json_object_get_boolean_member (result, "isError"));
      g_test_message ("%s: %s", name, result_text (result));
      g_assert_null (strstr (result_text (result), "reached\n"));
      sandstep_test_assert_contains (result_text (result), fx->handle);
    }

  reached = run_client_full (fx, configured, calls, TRUE);
  result = json_object_get_object_member (sandstep_test_mcp_call (reached, 0, "run_command"), "result");
  g_assert_false (json_object_get_boolean_member (result, "isError"));
  sandstep_test_assert_contains (result_text (result), "reached");
}

typedef struct {
  SandstepTestProc *proc;
  char *url;
  char *token;
  int stdin_fd;       /* the server's stdin; closing it is EOF */
} HttpServer;

static void
http_server_clear (HttpServer *server)
{
  if (server->stdin_fd >= 0)
    close (server->stdin_fd);
  server->stdin_fd = -1;
  g_clear_pointer (&server->url, g_free);
  g_clear_pointer (&server->token, g_free);
  g_clear_pointer (&http_token, g_free);
}

/* Starts `sandstep mcp --http=ADDR --print-token EXTRA` with @stdin_source
 * on its stdin (-1: a pipe, kept in out->stdin_fd), and reads its URL and
 * token from stderr. */
static void
start_http_server_full (Fixture *fx, const char *address, int stdin_source, HttpServer *out)
{
  g_autofree char *option = g_strconcat ("--http=", address, NULL);
  const char *args[] = { "mcp", fx->handle_arg, option, "--print-token", NULL };
  int pipe_fds[2] = { stdin_source, -1 };
  int target = 0;

  memset (out, 0, sizeof *out);
  if (stdin_source < 0)
    g_assert_cmpint (pipe2 (pipe_fds, O_CLOEXEC), ==, 0);
  out->proc = sandstep_test_spawn_full (&fx->f, args, &pipe_fds[0], &target, 1);
  if (stdin_source < 0)
    close (pipe_fds[0]);
  out->stdin_fd = pipe_fds[1];
  while (out->url == NULL || out->token == NULL)
    {
      g_autofree char *line = sandstep_test_proc_read_err_line (out->proc, LINE_TIMEOUT_S);
      const char *url, *token;

      if (line == NULL)
        {
          g_autoptr(SandstepTestResult) result = sandstep_test_proc_wait (out->proc, 5);
          g_test_message ("sandstep mcp printed no URL and token\nstderr:\n%s", result->err);
          g_assert_not_reached ();
        }
      url = strstr (line, "http://");
      token = strstr (line, "bearer token: ");
      if (url != NULL)
        out->url = g_strdup (url);
      if (token != NULL)
        out->token = g_strdup (token + strlen ("bearer token: "));
    }
  /* 256 bits, as hex. */
  g_assert_cmpuint (strlen (out->token), ==, 64);
  g_assert_cmpuint (strspn (out->token, "0123456789abcdef"), ==, 64);
  g_free (http_token);
  http_token = g_strdup (out->token);
}

static void
start_http_server (Fixture *fx, const char *address, HttpServer *out)
{
  start_http_server_full (fx, address, -1, out);
}

static void
test_sdk_http (Fixture *fx, gconstpointer data)
{
  HttpServer server;
  g_autoptr(JsonObject) report = NULL;
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("The official SDK client, sending the server's bearer token, speaks to `sandstep mcp --http` "
                  "over Streamable HTTP, with a session it ends by DELETE; SIGTERM ends the server.");
  if (!node_client_ready ())
    return;
  start_http_server (fx, "127.0.0.1:0", &server);
  g_assert_true (g_str_has_prefix (server.url, "http://127.0.0.1:"));
  g_assert_true (g_str_has_suffix (server.url, "/mcp"));
  g_assert_false (g_str_has_prefix (server.url, "http://127.0.0.1:0/"));
  {
    const char *args[] = { "http", server.url, NULL };
    report = run_client (fx, args, SDK_CALLS);
  }
  assert_sdk_report (report);
  g_assert_nonnull (json_object_get_string_member (report, "sessionId"));
  g_assert_true (json_object_get_boolean_member (report, "terminated"));

  sandstep_test_proc_kill (server.proc, SIGTERM);
  result = sandstep_test_proc_wait (server.proc, 10);
  sandstep_test_assert_status (result, 128 + SIGTERM);
  http_server_clear (&server);
}

/* ---- raw stdio ---- */

typedef struct {
  GSubprocess *process;
  GOutputStream *in;
  int out_fd;
  GString *buffer;
} StdioServer;

/* Starts `sandstep mcp HANDLE-ARG [HOLDER-ARG]` with pipes on stdin and stdout. */
static StdioServer *
stdio_server_start_full (Fixture *fx, const char *handle_arg, const char *holder_arg)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE |
                                                                       G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr(GError) error = NULL;
  StdioServer *server = g_new0 (StdioServer, 1);

  g_subprocess_launcher_set_environ (launcher, fx->f.envp);
  g_subprocess_launcher_set_cwd (launcher, fx->f.host_dir);
  server->process = g_subprocess_launcher_spawn (launcher, &error, fx->f.helper, "mcp", handle_arg, holder_arg, NULL);
  g_assert_no_error (error);
  server->in = g_subprocess_get_stdin_pipe (server->process);
  server->out_fd = g_unix_input_stream_get_fd (G_UNIX_INPUT_STREAM (g_subprocess_get_stdout_pipe (server->process)));
  server->buffer = g_string_new (NULL);
  return server;
}

static StdioServer *
stdio_server_start (Fixture *fx)
{
  return stdio_server_start_full (fx, fx->handle_arg, NULL);
}

static void
stdio_server_send (StdioServer *server, const char *line)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *data = g_strconcat (line, "\n", NULL);

  g_output_stream_write_all (server->in, data, strlen (data), NULL, NULL, &error);
  g_assert_no_error (error);
}

/* The next line of the server's stdout, or NULL at EOF or after @timeout_s. */
static char *
stdio_server_read_line (StdioServer *server, double timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  for (;;)
    {
      const char *nl = memchr (server->buffer->str, '\n', server->buffer->len);
      struct pollfd pfd = { .fd = server->out_fd, .events = POLLIN };
      char chunk[4096];
      gint64 left;
      ssize_t n;

      if (nl != NULL)
        {
          char *line = g_strndup (server->buffer->str, nl - server->buffer->str);
          g_string_erase (server->buffer, 0, nl - server->buffer->str + 1);
          return line;
        }
      left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        return NULL;
      if (poll (&pfd, 1, (int) (left / 1000) + 1) <= 0)
        continue;
      n = read (server->out_fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return NULL;
      g_string_append_len (server->buffer, chunk, n);
    }
}

/* Sends @request and returns the reply it gets, as parsed JSON. */
static JsonObject *
stdio_call (StdioServer *server, const char *request)
{
  g_autofree char *line = NULL;
  g_autoptr(JsonNode) reply = NULL;

  stdio_server_send (server, request);
  line = stdio_server_read_line (server, LINE_TIMEOUT_S);
  if (line == NULL)
    g_test_message ("no reply to %s", request);
  g_assert_nonnull (line);
  reply = sandstep_test_parse_json (line);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (reply));
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (reply), "jsonrpc"), ==, "2.0");
  return json_object_ref (json_node_get_object (reply));
}

/* Closes stdin and returns the exit status. */
static int
stdio_server_finish (StdioServer *server, gboolean close_stdin)
{
  g_autoptr(GError) error = NULL;
  int status;

  if (close_stdin)
    {
      g_output_stream_close (server->in, NULL, &error);
      g_assert_no_error (error);
    }
  g_subprocess_wait (server->process, NULL, &error);
  g_assert_no_error (error);
  status = g_subprocess_get_if_exited (server->process) ? g_subprocess_get_exit_status (server->process)
                                                         : 128 + g_subprocess_get_term_sig (server->process);
  g_object_unref (server->process);
  g_string_free (server->buffer, TRUE);
  g_free (server);
  return status;
}

static void
assert_error_reply (JsonObject *reply, int code)
{
  JsonObject *error = json_object_get_object_member (reply, "error");

  g_assert_false (json_object_has_member (reply, "result"));
  g_assert_nonnull (error);
  g_assert_cmpint (json_object_get_int_member (error, "code"), ==, code);
  g_assert_nonnull (json_object_get_string_member (error, "message"));
}

#define INITIALIZE(id, version)                                                                       \
  "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"" version \
  "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"raw\",\"version\":\"0\"}}}"

static void
test_stdio_raw (Fixture *fx, gconstpointer data)
{
  StdioServer *server;
  JsonObject *reply;

  g_test_summary ("Raw JSON-RPC over stdio: version negotiation, ping, notifications get no reply, and "
                  "-32700/-32600/-32601/-32602 for broken requests; EOF ends the server with 0.");
  server = stdio_server_start (fx);

  /* A version we do not know: the server answers with its newest. */
  reply = stdio_call (server, INITIALIZE ("1", "2099-01-01"));
  g_assert_cmpint (json_object_get_int_member (reply, "id"), ==, 1);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (reply, "result"),
                                                  "protocolVersion"), ==, LATEST_VERSION);
  json_object_unref (reply);
  /* A version it knows: echoed; a string id stays a string. */
  reply = stdio_call (server, INITIALIZE ("\"init-2\"", "2025-06-18"));
  g_assert_cmpstr (json_object_get_string_member (reply, "id"), ==, "init-2");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (reply, "result"),
                                                  "protocolVersion"), ==, "2025-06-18");
  json_object_unref (reply);

  /* Notifications get no reply: the next line answers the ping after them. */
  stdio_server_send (server, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  stdio_server_send (server, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/no-such-thing\",\"params\":{}}");
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}");
  g_assert_cmpint (json_object_get_int_member (reply, "id"), ==, 7);
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member (reply, "result")), ==, 0);
  json_object_unref (reply);

  /* Malformed JSON: -32700 with a null id. */
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":");
  assert_error_reply (reply, -32700);
  g_assert_true (json_object_get_null_member (reply, "id"));
  json_object_unref (reply);

  /* Unknown method: -32601 with the request's id. */
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/list\"}");
  assert_error_reply (reply, -32601);
  g_assert_cmpint (json_object_get_int_member (reply, "id"), ==, 9);
  json_object_unref (reply);

  /* Not a request: -32600. */
  reply = stdio_call (server, "{\"jsonrpc\":\"1.0\",\"id\":10,\"method\":\"ping\"}");
  assert_error_reply (reply, -32600);
  json_object_unref (reply);
  reply = stdio_call (server, "[{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}]");
  assert_error_reply (reply, -32600);
  json_object_unref (reply);
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}");
  assert_error_reply (reply, -32600);
  json_object_unref (reply);
  /* Issue 30: an id that is no string or integer is refused with a null id, never echoed (1e400 came back as
   * inf.0, which is no JSON). */
  {
    static const char *const bad_ids[] = { "1e400", "-1e400", "1.5", "2e3", "true", "{}", "[1]" };
    for (gsize i = 0; i < G_N_ELEMENTS (bad_ids); i++)
      {
        g_autofree char *line = g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", bad_ids[i]);
        g_test_message ("id %s", bad_ids[i]);
        reply = stdio_call (server, line);
        assert_error_reply (reply, -32600);
        g_assert_true (json_object_get_null_member (reply, "id"));
        json_object_unref (reply);
      }
  }

  /* Bad params: -32602. */
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":"
                              "{\"name\":\"nope\",\"arguments\":{}}}");
  assert_error_reply (reply, -32602);
  json_object_unref (reply);
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\",\"params\":"
                              "{\"name\":\"run_command\",\"arguments\":\"echo hi\"}}");
  assert_error_reply (reply, -32602);
  json_object_unref (reply);
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"initialize\",\"params\":[]}");
  assert_error_reply (reply, -32602);
  json_object_unref (reply);

  /* A tool's own argument check is a result with isError, for the model. */
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"tools/call\",\"params\":"
                              "{\"name\":\"run_command\",\"arguments\":{}}}");
  g_assert_true (result_is_error (json_object_get_object_member (reply, "result")));
  json_object_unref (reply);

  g_assert_cmpint (stdio_server_finish (server, TRUE), ==, 0);
}

static void
test_stdio_deep_json (Fixture *fx, gconstpointer data)
{
  g_autofree char *bomb = g_strnfill (200 * 1024, '[');
  StdioServer *server;
  JsonObject *reply;

  g_test_summary ("a message nesting 200 KB of '[' (which overflowed json-glib's stack) is answered -32700 "
                  "naming the depth limit, and the server goes on");
  server = stdio_server_start (fx);
  reply = stdio_call (server, bomb);
  assert_error_reply (reply, -32700);
  sandstep_test_assert_contains (json_object_get_string_member (json_object_get_object_member (reply, "error"),
                                                                "message"), "deeper than 64");
  json_object_unref (reply);
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
  g_assert_cmpint (json_object_get_int_member (reply, "id"), ==, 2);
  json_object_unref (reply);
  g_assert_cmpint (stdio_server_finish (server, TRUE), ==, 0);
}

static void
test_stdio_ping_while_running (Fixture *fx, gconstpointer data)
{
  StdioServer *server;
  JsonObject *reply;
  g_autofree char *line = NULL;
  g_autoptr(JsonNode) last = NULL;

  g_test_summary ("A long tool call does not block the server: ping is answered first; requests still "
                  "running at EOF are answered before the server ends.");
  server = stdio_server_start (fx);
  reply = stdio_call (server, INITIALIZE ("1", LATEST_VERSION));
  json_object_unref (reply);

  stdio_server_send (server, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                             "\"run_command\",\"arguments\":{\"command\":\"sleep 2; echo slow-done\"}}}");
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
  g_assert_cmpint (json_object_get_int_member (reply, "id"), ==, 3);
  json_object_unref (reply);

  /* Close stdin while the command runs: its reply still comes. */
  g_output_stream_close (server->in, NULL, NULL);
  line = stdio_server_read_line (server, LINE_TIMEOUT_S);
  g_assert_nonnull (line);
  last = sandstep_test_parse_json (line);
  g_assert_cmpint (json_object_get_int_member (json_node_get_object (last), "id"), ==, 2);
  sandstep_test_assert_contains (result_text (json_object_get_object_member (json_node_get_object (last), "result")),
                                 "slow-done");
  g_assert_cmpint (stdio_server_finish (server, FALSE), ==, 0);
}

/* Starts a stdio server on the sandbox, initializes it and runs one command in it. */
static StdioServer *
stdio_server_alive (Fixture *fx, const char *handle_arg, const char *holder_arg)
{
  StdioServer *server = stdio_server_start_full (fx, handle_arg, holder_arg);
  JsonObject *reply = stdio_call (server, INITIALIZE ("1", LATEST_VERSION));

  json_object_unref (reply);
  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":\"alive\",\"method\":\"tools/call\",\"params\":"
                              "{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo still-alive\"}}}");
  sandstep_test_assert_contains (result_text (json_object_get_object_member (reply, "result")), "still-alive");
  json_object_unref (reply);
  return server;
}

static void
test_stdio_busy (Fixture *fx, gconstpointer data)
{
  StdioServer *first, *second;
  JsonObject *reply, *result;
  gint64 started;

  g_test_summary ("A second `sandstep mcp` on a sandbox another client holds answers at once: initialize, and "
                  "each tool call isError naming the holder (not after --wait's 600 s of a make step)");
  first = stdio_server_alive (fx, fx->handle_arg, "--holder=mcp-first");
  started = g_get_monotonic_time ();
  second = stdio_server_start_full (fx, fx->handle_arg, "--holder=mcp-second");
  /* A server still waiting for the sandbox reads nothing: this reply would not come within LINE_TIMEOUT_S. */
  reply = stdio_call (second, INITIALIZE ("1", LATEST_VERSION));
  json_object_unref (reply);
  reply = stdio_call (second, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                              "{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo second-ran\"}}}");
  result = json_object_get_object_member (reply, "result");
  g_assert_true (json_object_get_boolean_member (result, "isError"));
  sandstep_test_assert_contains (result_text (result), "is held by");
  sandstep_test_assert_contains (result_text (result), "mcp-first");
  g_assert_null (strstr (result_text (result), "second-ran"));
  json_object_unref (reply);
  g_assert_cmpint (g_get_monotonic_time () - started, <, (gint64) (LINE_TIMEOUT_S * G_USEC_PER_SEC));
  /* The first client's session is untouched. */
  reply = stdio_call (first, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":"
                             "{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo first-ran\"}}}");
  sandstep_test_assert_contains (result_text (json_object_get_object_member (reply, "result")), "first-ran");
  json_object_unref (reply);
  g_assert_cmpint (stdio_server_finish (second, TRUE), ==, 0);
  g_assert_cmpint (stdio_server_finish (first, TRUE), ==, 0);
}

static void
test_stdio_terminal (Fixture *fx, gconstpointer data)
{
  const char *holder_arg = "--holder=mcp-terminal";
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;
  g_autofree char *lifetime_arg = NULL;
  StdioServer *server;
  JsonObject *reply, *result;
  gint64 lifetime_s;
  int status;

  g_test_summary ("A tool call that finds the sandbox unusable (its lifetime is over) is answered with isError "
                  "and the message, then the server exits non-zero without waiting for EOF.");
  {
    /* The first call must come before the lifetime ends on however slow a host: the lifetime is four
     * times what the same start and call took on a sandbox of an hour here, and at least 3 s. */
    g_autofree char *probe = sandstep_test_provision (&fx->f, "--holder=mcp-terminal-probe", NULL);
    g_autofree char *probe_arg = g_strconcat ("--handle=", probe, NULL);
    gint64 started = g_get_monotonic_time ();

    server = stdio_server_alive (fx, probe_arg, "--holder=mcp-terminal-probe");
    lifetime_s = MAX (3, 4 * (g_get_monotonic_time () - started) / G_USEC_PER_SEC + 1);
    g_assert_cmpint (stdio_server_finish (server, TRUE), ==, 0);
  }
  lifetime_arg = g_strdup_printf ("--lifetime=%" G_GINT64_FORMAT "s", lifetime_s);
  handle = sandstep_test_provision (&fx->f, lifetime_arg, holder_arg, NULL);
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  server = stdio_server_alive (fx, handle_arg, holder_arg);
  sandstep_test_wait_until_expired (&fx->f, handle, lifetime_s + 60);

  reply = stdio_call (server, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                              "\"run_command\",\"arguments\":{\"command\":\"echo never\"}}}");
  result = json_object_get_object_member (reply, "result");
  g_assert_nonnull (result);
  g_assert_true (result_is_error (result));
  sandstep_test_assert_not_contains (result_text (result), "never\n");
  json_object_unref (reply);

  status = stdio_server_finish (server, FALSE);
  g_assert_cmpint (status, !=, 0);
  g_assert_cmpint (status, <, 128);
}

/* ---- raw HTTP ---- */

typedef struct {
  guint status;
  char *headers;      /* the response's header lines, lowercased names */
  char *body;
} HttpReply;

static void
http_reply_free (HttpReply *reply)
{
  g_free (reply->headers);
  g_free (reply->body);
  g_free (reply);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HttpReply, http_reply_free)

/* The value of response header @name, or NULL. */
static char *
http_header (HttpReply *reply, const char *name)
{
  g_auto(GStrv) lines = g_strsplit (reply->headers, "\r\n", -1);

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      const char *colon = strchr (lines[i], ':');
      if (colon != NULL && (gsize) (colon - lines[i]) == strlen (name) &&
          g_ascii_strncasecmp (lines[i], name, colon - lines[i]) == 0)
        return g_strstrip (g_strdup (colon + 1));
    }
  return NULL;
}

/* One HTTP/1.1 exchange written by hand, so that Host and Origin are exactly
 * what a browser or an attacker would send.  @extra_headers: "Name: value\r\n"... */
static HttpReply *
http_request (const char *url, const char *method, const char *path, const char *extra_headers, const char *body)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) request = g_string_new (NULL);
  g_autoptr(GString) response = g_string_new (NULL);
  GInputStream *in;
  HttpReply *reply = g_new0 (HttpReply, 1);
  const char *end, *space;
  char chunk[4096];
  gssize n;

  g_assert_nonnull (uri);
  g_socket_client_set_timeout (client, (guint) LINE_TIMEOUT_S);
  g_socket_client_set_enable_proxy (client, FALSE);
  connection = g_socket_client_connect_to_host (client, g_uri_get_host (uri), g_uri_get_port (uri), NULL, &error);
  g_assert_no_error (error);

  g_string_append_printf (request, "%s %s HTTP/1.1\r\n", method, path);
  if (extra_headers == NULL || strstr (extra_headers, "Host:") == NULL)
    g_string_append_printf (request, "Host: %s:%d\r\n", g_uri_get_host (uri), g_uri_get_port (uri));
  if (http_token != NULL && (extra_headers == NULL || strstr (extra_headers, "Authorization:") == NULL))
    g_string_append_printf (request, "Authorization: Bearer %s\r\n", http_token);
  if (extra_headers != NULL)
    g_string_append (request, extra_headers);
  if (body != NULL)
    {
      if (extra_headers == NULL || strstr (extra_headers, "Content-Type:") == NULL)
        g_string_append (request, "Content-Type: application/json\r\n");
      g_string_append (request, "Accept: application/json, text/event-stream\r\n");
      g_string_append_printf (request, "Content-Length: %zu\r\n", strlen (body));
    }
  g_string_append (request, "Connection: close\r\n\r\n");
  if (body != NULL)
    g_string_append (request, body);
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (connection)), request->str, request->len,
                             NULL, NULL, &error);
  g_assert_no_error (error);

  in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  while ((n = g_input_stream_read (in, chunk, sizeof chunk, NULL, &error)) > 0)
    g_string_append_len (response, chunk, n);
  g_assert_no_error (error);

  end = strstr (response->str, "\r\n\r\n");
  g_assert_nonnull (end);
  g_assert_true (g_str_has_prefix (response->str, "HTTP/1.1 "));
  space = response->str + strlen ("HTTP/1.1 ");
  reply->status = (guint) g_ascii_strtoull (space, NULL, 10);
  reply->headers = g_strndup (response->str, end - response->str);
  reply->body = g_strdup (end + 4);
  return reply;
}

static HttpReply *
http_post (const char *url, const char *extra_headers, const char *body)
{
  return http_request (url, "POST", "/mcp", extra_headers, body);
}

static JsonObject *
http_json (HttpReply *reply)
{
  g_autoptr(JsonNode) node = sandstep_test_parse_json (reply->body);
  g_autofree char *type = http_header (reply, "Content-Type");

  g_assert_cmpstr (type, ==, "application/json");
  g_assert_true (JSON_NODE_HOLDS_OBJECT (node));
  return json_object_ref (json_node_get_object (node));
}


#define PING "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}"

static void
test_http_stdin_dev_null (Fixture *fx, gconstpointer data)
{
  HttpServer server;
  g_autoptr(SandstepTestResult) result = NULL;
  int null_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  g_test_summary ("`sandstep mcp --http` with stdin on /dev/null (a service manager's) serves until a signal: "
                  "stdin's EOF ends it only where stdin is a pipe");
  g_assert_cmpint (null_fd, >=, 0);
  start_http_server_full (fx, "127.0.0.1:0", null_fd, &server);
  close (null_fd);
  /* EOF on /dev/null comes at once: a server that took it as the end is gone well before this. */
  g_usleep (G_USEC_PER_SEC);
  for (int i = 0; i < 2; i++)
    {
      g_autoptr(HttpReply) reply = http_post (server.url, NULL, PING);
      g_assert_cmpuint (reply->status, ==, 200);
    }
  sandstep_test_proc_kill (server.proc, SIGTERM);
  result = sandstep_test_proc_wait (server.proc, 10);
  g_assert_false (result->timed_out);
  sandstep_test_assert_status (result, 128 + SIGTERM);
  http_server_clear (&server);
}

static void
test_http_raw (Fixture *fx, gconstpointer data)
{
  HttpServer server;
  const char *url;
  g_autofree char *session = NULL;
  g_autofree char *session_header = NULL;
  g_autofree char *allow = NULL;
  SandstepTestProc *proc;
  g_autoptr(SandstepTestResult) result = NULL;
  HttpReply *reply;
  JsonObject *object;

  g_test_summary ("Raw Streamable HTTP: JSON replies, 202 for notifications, sessions and DELETE, GET 405, "
                  "-32700/-32601, and 403 for a foreign Origin or Host (DNS rebinding).");
  start_http_server (fx, "127.0.0.1:0", &server);
  url = server.url;
  proc = server.proc;

  /* initialize: JSON, and a session. */
  reply = http_post (url, NULL, INITIALIZE ("1", LATEST_VERSION));
  g_assert_cmpuint (reply->status, ==, 200);
  object = http_json (reply);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (object, "result"),
                                                  "protocolVersion"), ==, LATEST_VERSION);
  json_object_unref (object);
  session = http_header (reply, "Mcp-Session-Id");
  g_assert_nonnull (session);
  g_assert_cmpuint (strlen (session), >=, 32);
  http_reply_free (reply);
  session_header = g_strdup_printf ("Mcp-Session-Id: %s\r\nMCP-Protocol-Version: " LATEST_VERSION "\r\n", session);

  /* a notification: 202, no body */
  reply = http_post (url, session_header, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  g_assert_cmpuint (reply->status, ==, 202);
  g_assert_cmpstr (reply->body, ==, "");
  http_reply_free (reply);

  /* ping, in the session and without one (sessions are optional) */
  reply = http_post (url, session_header, PING);
  g_assert_cmpuint (reply->status, ==, 200);
  object = http_json (reply);
  g_assert_cmpint (json_object_get_int_member (object, "id"), ==, 5);
  g_assert_true (json_object_has_member (object, "result"));
  json_object_unref (object);
  http_reply_free (reply);
  reply = http_post (url, NULL, PING);
  g_assert_cmpuint (reply->status, ==, 200);
  http_reply_free (reply);

  /* a tool call */
  reply = http_post (url, session_header, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
                                          "{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo via-http\"}}}");
  g_assert_cmpuint (reply->status, ==, 200);
  object = http_json (reply);
  sandstep_test_assert_contains (result_text (json_object_get_object_member (object, "result")), "via-http");
  json_object_unref (object);
  http_reply_free (reply);

  /* malformed JSON: 400 with -32700 */
  reply = http_post (url, session_header, "{\"jsonrpc\":");
  g_assert_cmpuint (reply->status, ==, 400);
  object = http_json (reply);
  assert_error_reply (object, -32700);
  json_object_unref (object);
  http_reply_free (reply);

  /* unknown method: -32601 */
  reply = http_post (url, session_header, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"prompts/list\"}");
  g_assert_cmpuint (reply->status, ==, 200);
  object = http_json (reply);
  assert_error_reply (object, -32601);
  json_object_unref (object);
  http_reply_free (reply);

  /* Origin: none or loopback is fine, anything else 403 */
  reply = http_post (url, "Origin: http://localhost:3000\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 200);
  http_reply_free (reply);
  reply = http_post (url, "Origin: http://127.0.0.1\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 200);
  http_reply_free (reply);
  reply = http_post (url, "Origin: http://evil.example\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 403);
  http_reply_free (reply);
  reply = http_post (url, "Origin: null\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 403);
  http_reply_free (reply);

  /* Host: a rebinding name is refused, loopback names are not */
  reply = http_post (url, "Host: evil.example:80\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 403);
  http_reply_free (reply);
  reply = http_post (url, "Host: 127.0.0.1.evil.example\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 403);
  http_reply_free (reply);
  reply = http_post (url, "Host: localhost\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 200);
  http_reply_free (reply);

  /* GET: no server stream here */
  reply = http_request (url, "GET", "/mcp", "Accept: text/event-stream\r\n", NULL);
  g_assert_cmpuint (reply->status, ==, 405);
  allow = http_header (reply, "Allow");
  sandstep_test_assert_contains (allow, "POST");
  http_reply_free (reply);

  /* only /mcp */
  reply = http_request (url, "POST", "/other", NULL, PING);
  g_assert_cmpuint (reply->status, ==, 404);
  http_reply_free (reply);

  /* a protocol version it does not speak: 400 */
  reply = http_post (url, "MCP-Protocol-Version: 1999-01-01\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 400);
  http_reply_free (reply);

  /* an unknown session: 404; DELETE ends ours, which is then unknown */
  reply = http_post (url, "Mcp-Session-Id: 00000000000000000000000000000000\r\n", PING);
  g_assert_cmpuint (reply->status, ==, 404);
  http_reply_free (reply);
  reply = http_request (url, "DELETE", "/mcp", session_header, NULL);
  g_assert_cmpuint (reply->status, ==, 204);
  http_reply_free (reply);
  reply = http_post (url, session_header, PING);
  g_assert_cmpuint (reply->status, ==, 404);
  http_reply_free (reply);

  sandstep_test_proc_kill (proc, SIGINT);
  result = sandstep_test_proc_wait (proc, 10);
  sandstep_test_assert_status (result, 128 + SIGINT);
  http_server_clear (&server);
}

static void
test_http_unauthorized (Fixture *fx, gconstpointer data)
{
  static const char *const wrong[] = {
    "X-No-Auth: 1\r\n",                                    /* none (http_request adds none with a header of its own) */
    "Authorization: Bearer not-the-token\r\n",
    "Authorization: Basic dXNlcjpwYXNz\r\n",
    "Authorization: Bearer\r\n",
  };
  HttpServer server;
  g_autofree char *prefixed = NULL;
  g_autofree char *lower = NULL;
  g_autoptr(SandstepTestResult) result = NULL;
  g_autofree char *marker = sandstep_test_host_path (&fx->f, "planted");

  g_test_summary ("Every request to `sandstep mcp --http` needs the server's bearer token: without it, or with a "
                  "wrong one, 401 with WWW-Authenticate: Bearer, and nothing runs in the sandbox; the right one "
                  "is accepted in any case of the scheme");
  start_http_server (fx, "127.0.0.1:0", &server);
  for (gsize i = 0; i < G_N_ELEMENTS (wrong); i++)
    {
      const char *calls[] = {
        PING,
        "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\","
        "\"arguments\":{\"command\":\"echo planted > /workspace/planted\"}}}",
      };
      for (gsize j = 0; j < G_N_ELEMENTS (calls); j++)
        {
          g_autoptr(HttpReply) reply = NULL;
          g_autofree char *authenticate = NULL;
          const char *extra = wrong[i];
          g_autofree char *headers = NULL;

          /* "X-No-Auth" is a header of the test's: it carries no Authorization at all. */
          if (g_str_has_prefix (extra, "X-No-Auth"))
            {
              g_autofree char *saved = g_steal_pointer (&http_token);
              reply = http_post (server.url, NULL, calls[j]);
              http_token = g_steal_pointer (&saved);
            }
          else
            reply = http_post (server.url, extra, calls[j]);
          g_assert_cmpuint (reply->status, ==, 401);
          authenticate = http_header (reply, "WWW-Authenticate");
          g_assert_cmpstr (authenticate, ==, "Bearer");
          headers = g_ascii_strdown (reply->headers, -1);
          g_assert_null (strstr (headers, "mcp-session-id"));
        }
    }
  /* Nothing ran: the sandbox has no file from the refused call. */
  {
    g_autoptr(HttpReply) reply = http_post (server.url, NULL,
                                            "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":"
                                            "{\"name\":\"run_command\",\"arguments\":{\"command\":"
                                            "\"ls /workspace/planted 2>&1 || echo none-planted\"}}}");
    g_autoptr(JsonObject) object = NULL;

    g_assert_cmpuint (reply->status, ==, 200);
    object = http_json (reply);
    sandstep_test_assert_contains (result_text (json_object_get_object_member (object, "result")), "none-planted");
  }
  /* The scheme is case-insensitive (RFC 7235). */
  prefixed = g_strdup_printf ("Authorization: bearer %s\r\n", server.token);
  {
    g_autoptr(HttpReply) reply = http_post (server.url, prefixed, PING);
    g_assert_cmpuint (reply->status, ==, 200);
  }
  g_assert_false (g_file_test (marker, G_FILE_TEST_EXISTS));

  /* EOF on stdin ends `sandstep mcp --http`, as it does over stdio. */
  close (server.stdin_fd);
  server.stdin_fd = -1;
  result = sandstep_test_proc_wait (server.proc, 15);
  g_assert_false (result->timed_out);
  sandstep_test_assert_status (result, 0);
  http_server_clear (&server);
}

static void
test_http_token_file (Fixture *fx, gconstpointer data)
{
  g_autofree char *file = sandstep_test_host_path (&fx->f, "mcp.token");
  g_autofree char *option = g_strconcat ("--token-file=", file, NULL);
  g_autofree char *token = NULL;
  g_autoptr(SandstepTestResult) missing = NULL;
  g_autoptr(SandstepTestResult) result = NULL;
  const char *args[] = { "mcp", fx->handle_arg, "--http=127.0.0.1:0", option, NULL };
  SandstepTestProc *proc;
  int pipe_fds[2];
  int target = 0;
  struct stat st;
  g_autofree char *url = NULL;

  g_test_summary ("`sandstep mcp --http` writes its token to --token-file (mode 0600, never shown on stderr) or "
                  "prints it with --print-token; with neither it refuses to start (64)");
  missing = sandstep_test_helper (&fx->f, "mcp", fx->handle_arg, "--http=127.0.0.1:0", NULL);
  sandstep_test_assert_status (missing, SANDSTEP_EXIT_USAGE);
  sandstep_test_assert_contains (missing->err, "--token-file");

  umask (0);
  g_assert_cmpint (pipe2 (pipe_fds, O_CLOEXEC), ==, 0);
  proc = sandstep_test_spawn_full (&fx->f, args, &pipe_fds[0], &target, 1);
  umask (022);
  close (pipe_fds[0]);
  while (url == NULL)
    {
      g_autofree char *line = sandstep_test_proc_read_err_line (proc, LINE_TIMEOUT_S);
      g_assert_nonnull (line);
      if (strstr (line, "http://") != NULL)
        url = g_strdup (strstr (line, "http://"));
    }
  g_assert_true (g_file_get_contents (file, &token, NULL, NULL));
  g_strchomp (token);
  g_assert_cmpuint (strlen (token), ==, 64);
  g_assert_cmpint (stat (file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  http_token = g_strdup (token);
  {
    g_autoptr(HttpReply) reply = http_post (url, NULL, PING);
    g_assert_cmpuint (reply->status, ==, 200);
  }
  g_clear_pointer (&http_token, g_free);
  close (pipe_fds[1]);
  result = sandstep_test_proc_wait (proc, 15);
  sandstep_test_assert_status (result, 0);
  sandstep_test_assert_not_contains (result->err, token);
}

/* A chunked body of @mib MiB, sent as fast as the server takes it; returns the HTTP status. */
static guint
post_chunked (const char *url, guint mib)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *head = NULL;
  g_autofree char *chunk = g_strnfill (1024 * 1024, ' ');
  g_autofree char *size_line = g_strdup_printf ("%x\r\n", 1024 * 1024);
  GOutputStream *out;
  char answer[4096] = "";
  gssize n;

  g_socket_client_set_timeout (client, (guint) LINE_TIMEOUT_S);
  g_socket_client_set_enable_proxy (client, FALSE);
  connection = g_socket_client_connect_to_host (client, g_uri_get_host (uri), g_uri_get_port (uri), NULL, &error);
  g_assert_no_error (error);
  out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  head = g_strdup_printf ("POST /mcp HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
                          "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                          g_uri_get_host (uri), g_uri_get_port (uri), http_token);
  g_output_stream_write_all (out, head, strlen (head), NULL, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < mib; i++)
    if (!g_output_stream_write_all (out, size_line, strlen (size_line), NULL, NULL, NULL) ||
        !g_output_stream_write_all (out, chunk, 1024 * 1024, NULL, NULL, NULL) ||
        !g_output_stream_write_all (out, "\r\n", 2, NULL, NULL, NULL))
      break;   /* the server answered and closed */
  g_output_stream_write_all (out, "0\r\n\r\n", 5, NULL, NULL, NULL);
  n = g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (connection)), answer, sizeof answer - 1, NULL,
                           NULL);
  g_assert_cmpint (n, >, 0);
  answer[n] = '\0';
  g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 "));
  return (guint) g_ascii_strtoull (answer + strlen ("HTTP/1.1 "), NULL, 10);
}

static guint64
rss_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int) pid);
  g_autofree char *text = NULL;
  const char *line;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  line = strstr (text, "VmHWM:");
  g_assert_nonnull (line);
  return g_ascii_strtoull (line + strlen ("VmHWM:"), NULL, 10);
}

static void
test_http_chunked_limit (Fixture *fx, gconstpointer data)
{
  HttpServer server;
  g_autoptr(SandstepTestResult) result = NULL;
  guint64 peak;

  g_test_summary ("a chunked body of 300 MiB is refused (413) at the 64 MiB limit without being held: the "
                  "server's peak memory stays under 128 MiB, and it goes on serving");
  start_http_server (fx, "127.0.0.1:0", &server);
  g_assert_cmpuint (post_chunked (server.url, 300), ==, 413);
  peak = rss_kib (sandstep_test_proc_pid (server.proc));
  g_test_message ("peak RSS of sandstep mcp: %" G_GUINT64_FORMAT " KiB", peak);
  g_assert_cmpuint (peak, <, 128 * 1024);
  {
    g_autoptr(HttpReply) reply = http_post (server.url, NULL, PING);
    g_assert_cmpuint (reply->status, ==, 200);
  }
  {
    /* Nesting is checked before parsing here too. */
    g_autofree char *bomb = g_strnfill (200 * 1024, '[');
    g_autoptr(HttpReply) reply = http_post (server.url, NULL, bomb);
    g_assert_cmpuint (reply->status, ==, 400);
    sandstep_test_assert_contains (reply->body, "deeper than 64");
  }
  sandstep_test_proc_kill (server.proc, SIGTERM);
  result = sandstep_test_proc_wait (server.proc, 10);
  sandstep_test_assert_status (result, 128 + SIGTERM);
  http_server_clear (&server);
}

static void
test_http_refuses_non_loopback (Fixture *fx, gconstpointer data)
{
  const char *addresses[] = { "--http=0.0.0.0:0", "--http=192.0.2.1:8080", "--http=[::]:0", "--http=example.com:80",
                              "--http=127.0.0.1:99999", "--http=127.0.0.1" };

  g_test_summary ("`sandstep mcp --http` serves loopback only and says so; a bad address is a usage error.");
  for (gsize i = 0; i < G_N_ELEMENTS (addresses); i++)
    {
      g_autoptr(SandstepTestResult) result = sandstep_test_helper (&fx->f, "mcp", fx->handle_arg, addresses[i], NULL);

      sandstep_test_assert_status (result, SANDSTEP_EXIT_USAGE);
      sandstep_test_assert_contains (result->err, "loopback");
      g_assert_cmpstr (result->out, ==, "");
    }
}

/* ---- sandstep tools -- AGENT ---- */

static void
test_tools_node_agent (Fixture *fx, gconstpointer data)
{
  g_autofree char *agent = g_test_build_filename (G_TEST_DIST, "mcp", "agent.mjs", NULL);
  g_autofree char *command = g_strdup_printf ("node '%s' 'echo agent-was-here; uname -n' 7", agent);
  const char *args[] = { "tools", fx->handle_arg, "--", command, NULL };
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("`sandstep tools -- AGENT`: an SDK agent finds the tools at $SANDSTEP_MCP_URL, lists them, runs a "
                  "command; its output and exit status are the step's.");
  if (!node_client_ready ())
    return;
  result = sandstep_test_helper_argv (&fx->f, args, CLIENT_TIMEOUT_S);
  sandstep_test_assert_status (result, 7);
  sandstep_test_assert_contains (result->out, "tools: list_directory,read_file,run_command,write_file\n");
  sandstep_test_assert_contains (result->out, "isError: false\n");
  sandstep_test_assert_contains (result->out, "agent-was-here");
  sandstep_test_assert_contains (result->err, "http://127.0.0.1:");
}

/* An agent in shell with curl: the wire as any HTTP client sees it. */
static const char curl_agent[] =
  "set -e\n"
  "case \"$SANDSTEP_MCP_URL\" in http://127.0.0.1:*/mcp) ;; *) echo \"bad url $SANDSTEP_MCP_URL\"; exit 90;; esac\n"
  "post () { curl -sS --noproxy '*' --fail-with-body -H 'Content-Type: application/json' "
  "  -H \"Authorization: Bearer $SANDSTEP_MCP_TOKEN\" "
  "  -H 'Accept: application/json, text/event-stream' -d \"$1\" \"$SANDSTEP_MCP_URL\"; echo; }\n"
  "post '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\","
  "\"capabilities\":{},\"clientInfo\":{\"name\":\"curl\",\"version\":\"0\"}}}'\n"
  "post '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}'\n"
  "post '{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\","
  "\"arguments\":{\"command\":\"echo curl-agent-ran\"}}}'\n"
  "curl -sS --noproxy '*' -o /dev/null -w '%{http_code}\\n' -H 'Content-Type: application/json' "
  "  -d '{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}' \"$SANDSTEP_MCP_URL\"\n"
  "exit 5\n";

static void
test_tools_curl_agent (Fixture *fx, gconstpointer data)
{
  g_autofree char *curl = g_find_program_in_path ("curl");
  g_autofree char *script = NULL;
  g_autofree char *command = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepTestResult) result = NULL;
  g_auto(GStrv) lines = NULL;

  g_test_summary ("`sandstep tools -- AGENT` with a curl agent: initialize, tools/list and tools/call over "
                  "$SANDSTEP_MCP_URL; the agent's exit status is the step's.");
  if (curl == NULL)
    {
      g_test_skip ("curl is not installed");
      return;
    }
  script = sandstep_test_host_path (&fx->f, "agent.sh");
  g_file_set_contents (script, curl_agent, -1, &error);
  g_assert_no_error (error);
  command = g_strdup_printf ("sh '%s'", script);
  {
    const char *args[] = { "tools", fx->handle_arg, "--", command, NULL };
    result = sandstep_test_helper_argv (&fx->f, args, CLIENT_TIMEOUT_S);
  }
  sandstep_test_assert_status (result, 5);
  lines = g_strsplit (result->out, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), >=, 3);
  sandstep_test_assert_contains (lines[0], "\"protocolVersion\":\"2025-11-25\"");
  sandstep_test_assert_contains (lines[1], "\"run_command\"");
  sandstep_test_assert_contains (lines[1], "\"list_directory\"");
  sandstep_test_assert_contains (lines[2], "curl-agent-ran");
  sandstep_test_assert_contains (lines[2], "\"isError\":false");
  /* Without the token, the same endpoint refuses. */
  g_assert_cmpuint (g_strv_length (lines), >=, 4);
  g_assert_cmpstr (lines[3], ==, "401");
}

static void
test_tools_exit_and_environment (Fixture *fx, gconstpointer data)
{
  g_autoptr(SandstepTestResult) result = NULL;
  g_autoptr(SandstepTestResult) missing = NULL;

  g_test_summary ("The agent runs on the host with $SANDSTEP_MCP_URL set; its status, even from a signal, is the "
                  "step's; no agent command is a usage error.");
  result = sandstep_test_helper (&fx->f, "tools", fx->handle_arg, "--",
                                 "echo \"url=$SANDSTEP_MCP_URL\"; echo \"token=${#SANDSTEP_MCP_TOKEN}\"; exit 3", NULL);
  sandstep_test_assert_status (result, 3);
  sandstep_test_assert_contains (result->out, "url=http://127.0.0.1:");
  sandstep_test_assert_contains (result->out, "/mcp\n");
  sandstep_test_assert_contains (result->out, "token=64\n");
  /* The token is the agent's alone: never on the step's output. */
  sandstep_test_assert_not_contains (result->err, "token");
  g_clear_pointer (&result, sandstep_test_result_free);

  result = sandstep_test_helper (&fx->f, "tools", fx->handle_arg, "--", "kill -TERM $$", NULL);
  sandstep_test_assert_status (result, 128 + SIGTERM);

  missing = sandstep_test_helper (&fx->f, "tools", fx->handle_arg, NULL);
  sandstep_test_assert_status (missing, SANDSTEP_EXIT_USAGE);
  sandstep_test_assert_contains (missing->err, "SANDSTEP_MCP_URL");
}

static void
test_tools_interrupted (Fixture *fx, gconstpointer data)
{
  g_autofree char *seconds = sandstep_test_unique_seconds (1000);
  g_autofree char *command = g_strdup_printf ("exec sleep %s", seconds);
  const char *sleep_argv[] = { "sleep", seconds, NULL };
  SandstepTestProc *proc;
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("SIGTERM to `sandstep tools` ends the agent it started, by its pid, and the step fails with "
                  "128+15.");
  proc = sandstep_test_spawn (&fx->f, "tools", fx->handle_arg, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (sleep_argv, TRUE, LINE_TIMEOUT_S));
  sandstep_test_proc_kill (proc, SIGTERM);
  result = sandstep_test_proc_wait (proc, 15);
  sandstep_test_assert_status (result, 128 + SIGTERM);
  g_assert_true (sandstep_test_wait_for_process (sleep_argv, FALSE, 5));
}

static void
test_tools_interrupted_stubborn_agent (Fixture *fx, gconstpointer data)
{
  g_autofree char *seconds = sandstep_test_unique_seconds (1000);
  g_autofree char *command = g_strdup_printf ("trap '' TERM; exec sleep %s", seconds);
  const char *sleep_argv[] = { "sleep", seconds, NULL };
  SandstepTestProc *proc;
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("An agent that ignores SIGTERM is killed after the grace period; the step still fails with "
                  "128+15.");
  proc = sandstep_test_spawn (&fx->f, "tools", fx->handle_arg, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (sleep_argv, TRUE, LINE_TIMEOUT_S));
  sandstep_test_proc_kill (proc, SIGTERM);
  result = sandstep_test_proc_wait (proc, 20);
  sandstep_test_assert_status (result, 128 + SIGTERM);
  sandstep_test_assert_contains (result->err, "killing it");
  g_assert_true (sandstep_test_wait_for_process (sleep_argv, FALSE, 5));
}

/* A connection to @url's port on 127.0.0.1 that sends nothing; its fd. */
static int
idle_connection (const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  struct sockaddr_in address = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  address.sin_port = htons (g_uri_get_port (uri));
  g_assert_cmpint (connect (fd, (struct sockaddr *) &address, sizeof address), ==, 0);
  return fd;
}

static void
test_http_idle_connections (Fixture *fx, gconstpointer data)
{
  enum { IDLE = 200, FD_LIMIT = 128 };
  HttpServer server;
  struct rlimit saved, low;
  int idle[IDLE];
  g_autoptr(SandstepTestResult) result = NULL;

  g_test_summary ("issue 30 item 7: idle loopback connections (more than the server has descriptors for: its "
                  "limit is lowered to 128) neither stop `sandstep mcp --http` from answering while they stay "
                  "open nor after they close; half of them send a partial request line");
  /* The server inherits a low descriptor limit, so that a bounded number of connections reaches it. */
  g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &saved), ==, 0);
  low = saved;
  low.rlim_cur = FD_LIMIT;
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &low), ==, 0);
  start_http_server (fx, "127.0.0.1:0", &server);
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &saved), ==, 0);
  {
    g_autoptr(HttpReply) reply = http_post (server.url, NULL, PING);
    g_assert_cmpuint (reply->status, ==, 200);
  }
  for (int i = 0; i < IDLE; i++)
    {
      idle[i] = idle_connection (server.url);
      if (i % 2 == 1)
        g_assert_cmpint (write (idle[i], "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", 38), ==, 38);
    }
  /* The server keeps at most 32 of them that sent no request (per address) and closes the rest, oldest
   * first: wait for that. */
  {
    gint64 end = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
    int closed = 0;

    while (g_get_monotonic_time () < end)
      {
        closed = 0;
        for (int i = 0; i < IDLE; i++)
          {
            struct pollfd pfd = { .fd = idle[i], .events = POLLIN | POLLRDHUP };
            if (poll (&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)))
              closed++;
          }
        if (closed >= IDLE - 32)
          break;
        g_usleep (50 * 1000);
      }
    g_test_message ("%d of %d idle connections closed by the server", closed, IDLE);
    g_assert_cmpint (closed, >=, IDLE - 32);
  }
  /* While the rest are open, and once they are closed, requests are answered. */
  for (int round = 0; round < 2; round++)
    {
      for (int k = 0; k < 3; k++)
        {
          g_autoptr(HttpReply) reply = http_post (server.url, NULL, PING);
          g_assert_cmpuint (reply->status, ==, 200);
        }
      if (round == 0)
        for (int i = 0; i < IDLE; i++)
          close (idle[i]);
    }
  close (server.stdin_fd);
  server.stdin_fd = -1;
  result = sandstep_test_proc_wait (server.proc, 15);
  g_assert_false (result->timed_out);
  http_server_clear (&server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* A server that ended early is an assertion on a write, not a dead test program. */
  signal (SIGPIPE, SIG_IGN);

#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  ADD ("/mcp/sdk/stdio", test_sdk_stdio);
  ADD ("/mcp/sdk/stdio-minimal-env", test_sdk_stdio_minimal_env);
  ADD ("/mcp/sdk/http", test_sdk_http);
  ADD ("/mcp/stdio/raw", test_stdio_raw);
  ADD ("/mcp/stdio/ping-while-running", test_stdio_ping_while_running);
  ADD ("/mcp/stdio/deep-json", test_stdio_deep_json);
  ADD ("/mcp/stdio/terminal-error", test_stdio_terminal);
  ADD ("/mcp/stdio/busy", test_stdio_busy);
  ADD ("/mcp/http/raw", test_http_raw);
  ADD ("/mcp/http/refuses-non-loopback", test_http_refuses_non_loopback);
  ADD ("/mcp/http/unauthorized", test_http_unauthorized);
  ADD ("/mcp/http/token-file", test_http_token_file);
  ADD ("/mcp/http/stdin-dev-null", test_http_stdin_dev_null);
  ADD ("/mcp/http/chunked-limit", test_http_chunked_limit);
  ADD ("/mcp/http/idle-connections", test_http_idle_connections);
  ADD ("/mcp/tools/node-agent", test_tools_node_agent);
  ADD ("/mcp/tools/curl-agent", test_tools_curl_agent);
  ADD ("/mcp/tools/exit-and-environment", test_tools_exit_and_environment);
  ADD ("/mcp/tools/interrupted", test_tools_interrupted);
  ADD ("/mcp/tools/interrupted-stubborn-agent", test_tools_interrupted_stubborn_agent);
#undef ADD

  return g_test_run ();
}
