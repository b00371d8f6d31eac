/* test-tool-options.c: the options of agent, mcp, tools and call, and the file tools on /data.
 *
 * /options/refused/...  each option's check, with its message, on every
 *                       operator that serves the tools (exit 64, nothing
 *                       claimed);
 * /options/...          what each option changes in what the model reads,
 *                       from the toolbox and from `sandstep call`;
 * /options/prefix/mcp   the prefixed names through the MCP server;
 * /agent-options/...    `sandstep agent` against test-agent's scripted
 *                       server (test-agent --serve): exports on success
 *                       only and all or none, the prefix in the prompt;
 * /data/...             read_file and list_directory on a --mount;
 * /texts/no-cli         no model-facing refusal names a sandstep command.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-mcp.h"
#include "sandstep-test-utils.h"
#include "sandstep-tool-options.h"
#include "sandstep-tools.h"

typedef struct {
  SandstepTestFixture f;
  char *handle;
} Fixture;

static void
setup (Fixture *fx, gconstpointer data)
{
  sandstep_test_setup (&fx->f, data);
}

static void
teardown (Fixture *fx, gconstpointer data)
{
  g_free (fx->handle);
  sandstep_test_teardown (&fx->f, data);
}

static const char *
handle_of (Fixture *fx)
{
  if (fx->handle == NULL)
    fx->handle = sandstep_test_provision (&fx->f, NULL);
  return fx->handle;
}

/* `sandstep OP --handle=H ARGS...` (NULL-terminated). */
static SandstepTestResult *
helper_on (Fixture *fx, const char *op, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  va_list ap;
  const char *arg;

  g_ptr_array_add (argv, g_strdup (op));
  g_ptr_array_add (argv, g_strconcat ("--handle=", handle_of (fx), NULL));
  va_start (ap, op);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (arg));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  return sandstep_test_helper_argv (&fx->f, (const char *const *) argv->pdata, 60);
}

/* ---- refusals ---- */

typedef struct {
  const char *option;
  const char *message;      /* the whole line after "sandstep OP: " */
} RefusalRow;

static const RefusalRow refusal_rows[] = {
  { "--command-timeout=0", "option 'command-timeout': command-timeout must be a positive finite number of seconds, got '0'" },
  { "--command-timeout=-5", "option 'command-timeout': command-timeout must be a positive finite number of seconds, got '-5'" },
  { "--command-timeout=inf", "option 'command-timeout': command-timeout must be a positive finite number of seconds, got 'inf'" },
  { "--command-timeout=nan", "option 'command-timeout': command-timeout must be a positive finite number of seconds, got 'nan'" },
  { "--max-command-timeout=soon", "option 'max-command-timeout': max-command-timeout must be a positive finite number of seconds, got 'soon'" },
  { "--command-timeout=400", "command-timeout (400) must not exceed max-command-timeout (300, the default); lower command-timeout or raise max-command-timeout" },
  { "--max-command-timeout=30", "command-timeout (60, the default) must not exceed max-command-timeout (30); lower command-timeout or raise max-command-timeout" },
  { "--max-output-lines=0", "option 'max-output-lines' must be a whole number of 1 or more, got '0'" },
  { "--max-output-lines=1.5", "option 'max-output-lines' must be a whole number of 1 or more, got '1.5'" },
  { "--max-output-bytes=0", "option 'max-output-bytes': size '0' is not a size: bytes, or a number with K, M or G (5M), above 0" },
  { "--max-read-bytes=lots", "option 'max-read-bytes': size 'lots' is not a size: bytes, or a number with K, M or G (5M), above 0" },
  { "--prefix=my-box", "option 'prefix' must be an identifier (a letter or '_', then letters, digits and '_', at most 48 in all), got 'my-box'; write for example prefix=box" },
  { "--prefix=2box", "option 'prefix' must be an identifier (a letter or '_', then letters, digits and '_', at most 48 in all), got '2box'; write for example prefix=box" },
  { "--prefix=b\xc3\xa9", "option 'prefix' must be an identifier (a letter or '_', then letters, digits and '_', at most 48 in all), got 'b\xc3\xa9'; write for example prefix=box" },
};

static void
test_refused (Fixture *fx, gconstpointer data)
{
  const char *op = data;

  g_test_summary ("Each tool option is checked as Airflow checks its toolset (positive finite budgets, the default "
                  "not above the longest, whole counts and sizes above 0, an identifier for the prefix) and a bad "
                  "one is refused with its message before the sandbox is claimed");
  for (gsize i = 0; i < G_N_ELEMENTS (refusal_rows); i++)
    {
      const RefusalRow *row = &refusal_rows[i];
      g_autofree char *want = g_strdup_printf ("sandstep %s: %s\n", op, row->message);
      g_autoptr(SandstepTestResult) r = NULL;

      if (strcmp (op, "call") == 0)
        r = helper_on (fx, op, row->option, "run_command", "{\"command\": \"touch /workspace/ran\"}", NULL);
      else if (strcmp (op, "agent") == 0)
        r = helper_on (fx, op, "--model=m", row->option, "--", "touch /workspace/ran", NULL);
      else if (strcmp (op, "tools") == 0)
        r = helper_on (fx, op, row->option, "--", "touch ran-on-host", NULL);
      else
        r = helper_on (fx, op, row->option, NULL);
      sandstep_test_assert_status (r, 64);
      g_assert_cmpstr (r->err, ==, want);
      g_assert_cmpstr (r->out, ==, "");
    }
  {
    /* Nothing ran: not the command in the sandbox, not the agent on the host (helpers run in host_dir). */
    g_autofree char *listing = sandstep_test_run_ok (&fx->f, handle_of (fx), "ls /workspace");
    g_autofree char *host_file = sandstep_test_host_path (&fx->f, "ran-on-host");
    g_assert_cmpstr (listing, ==, "");
    g_assert_false (g_file_test (host_file, G_FILE_TEST_EXISTS));
  }
}

/* ---- what the options change ---- */

static SandstepToolbox *
toolbox_with (Fixture *fx, SandstepBackend **out_backend, SandstepAttachment **out_attachment,
              const SandstepToolLimits *limits)
{
  g_autoptr(GError) error = NULL;
  SandstepIdentity who = { fx->f.owner, fx->f.holder };
  const char *handle = handle_of (fx);

  *out_backend = sandstep_local_backend_new (fx->f.state_dir, &error);
  g_assert_no_error (error);
  *out_attachment = sandstep_backend_attach (*out_backend, handle, &who, 0, NULL, NULL, &error);
  g_assert_no_error (error);
  return sandstep_toolbox_new (*out_attachment, limits);
}

static char *
call_tool (SandstepToolbox *toolbox, const char *name, const char *json, gboolean expect_error)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) args = json_from_string (json, &error);
  gboolean is_error = !expect_error;
  char *text;

  g_assert_no_error (error);
  text = sandstep_toolbox_call (toolbox, name, json_node_get_object (args), &is_error, &error);
  g_assert_no_error (error);
  g_assert_nonnull (text);
  if (is_error != expect_error)
    g_error ("%s %s: is_error %d: %s", name, json, is_error, text);
  return text;
}

/* `sandstep call [OPTIONS] TOOL JSON`; @options: space-separated, or NULL. */
static char *
cli_call (Fixture *fx, int status, const char *options, const char *tool, const char *json)
{
  g_auto(GStrv) words = options != NULL ? g_strsplit (options, " ", -1) : g_new0 (char *, 1);
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(SandstepTestResult) r = NULL;

  g_ptr_array_add (argv, g_strdup ("call"));
  g_ptr_array_add (argv, g_strconcat ("--handle=", handle_of (fx), NULL));
  for (char **w = words; *w != NULL; w++)
    g_ptr_array_add (argv, g_strdup (*w));
  g_ptr_array_add (argv, g_strdup (tool));
  g_ptr_array_add (argv, g_strdup (json));
  g_ptr_array_add (argv, NULL);
  r = sandstep_test_helper_argv (&fx->f, (const char *const *) argv->pdata, 60);

  sandstep_test_assert_status (r, status);
  g_assert_true (g_str_has_suffix (r->out, "\n"));
  r->out[strlen (r->out) - 1] = '\0';
  return g_strdup (r->out);
}

static const char *
description_of (JsonArray *defs, guint i)
{
  return json_object_get_string_member (json_array_get_object_element (defs, i), "description");
}

static void
test_applied (Fixture *fx, gconstpointer data)
{
  SandstepBackend *backend = NULL;
  SandstepAttachment *attachment = NULL;
  SandstepToolbox *toolbox = NULL;
  SandstepToolLimits limits;
  g_autoptr(JsonArray) defs = NULL;

  g_test_summary ("The budgets, output bounds and read limit given as options are the ones the model reads about "
                  "and gets, from the toolbox and from 'sandstep call'");
  sandstep_tool_limits_init (&limits);
  limits.default_timeout_s = 0.5;
  limits.max_timeout_s = 1;
  limits.max_output_lines = 4;
  limits.max_output_bytes = 1024;
  limits.max_read_bytes = 10;
  toolbox = toolbox_with (fx, &backend, &attachment, &limits);
  defs = sandstep_toolbox_definitions (toolbox);
  sandstep_test_assert_contains (description_of (defs, 0),
                                 "Commands time out after 0.5s unless you pass timeout_seconds (at most 1s);");
  sandstep_test_assert_contains (description_of (defs, 1), "Returns at most 4 lines or 1.0KB from offset");
  sandstep_test_assert_contains (description_of (defs, 1), "Files over 10B are refused");
  {
    g_autofree char *a = call_tool (toolbox, "run_command", "{\"command\": \"sleep 5\"}", FALSE);
    g_autofree char *b = call_tool (toolbox, "run_command", "{\"command\": \"sleep 5\", \"timeout_seconds\": 30}", FALSE);
    g_autofree char *c = call_tool (toolbox, "run_command", "{\"command\": \"seq 1 10; printf 0123456789ab > f\"}", FALSE);
    g_autofree char *d = call_tool (toolbox, "read_file", "{\"path\": \"f\"}", TRUE);

    g_assert_cmpstr (a, ==, "(no output)\n[timed out after 0.5s]");
    g_assert_cmpstr (b, ==, "(no output)\n[timed out after 1s]");
    /* A quarter of 4 lines from the head, the rest from the tail. */
    g_assert_cmpstr (c, ==, "[stdout]\n1\n[... 6 lines (12B) omitted ...]\n8\n9\n10");
    g_assert_cmpstr (d, ==, "'f' is 12B, over the 10B read limit. Read just the part you need with a shell "
                            "command instead (e.g. head, tail, sed -n, or grep).");
  }
  sandstep_toolbox_free (toolbox);
  sandstep_attachment_detach (attachment);
  sandstep_backend_free (backend);

  {
    g_autofree char *a = cli_call (fx, 0, "--command-timeout=0.5", "run_command", "{\"command\": \"sleep 5\"}");
    g_autofree char *b = cli_call (fx, 0, "--command-timeout=0.5 --max-command-timeout=1", "run_command",
                                   "{\"command\": \"sleep 5\", \"timeout_seconds\": 30}");
    g_autofree char *c = cli_call (fx, 0, "--max-output-lines=4", "run_command", "{\"command\": \"seq 1 10\"}");
    g_autofree char *d = cli_call (fx, 0, "--max-output-bytes=8", "run_command", "{\"command\": \"seq 1 10\"}");
    g_autofree char *e = cli_call (fx, 1, "--max-read-bytes=10", "read_file", "{\"path\": \"f\"}");

    g_assert_cmpstr (a, ==, "(no output)\n[timed out after 0.5s]");
    g_assert_cmpstr (b, ==, "(no output)\n[timed out after 1s]");
    g_assert_cmpstr (c, ==, "[stdout]\n1\n[... 6 lines (12B) omitted ...]\n8\n9\n10");
    /* 8 bytes: "1" from the head (a quarter), "8\n9\n10" from the tail (the marker is not counted). */
    g_assert_cmpstr (d, ==, "[stdout]\n1\n[... 6 lines (12B) omitted ...]\n8\n9\n10");
    g_assert_cmpstr (e, ==, "'f' is 12B, over the 10B read limit. Read just the part you need with a shell "
                            "command instead (e.g. head, tail, sed -n, or grep).");
  }
}

static void
test_prefix (Fixture *fx, gconstpointer data)
{
  SandstepBackend *backend = NULL;
  SandstepAttachment *attachment = NULL;
  SandstepToolbox *toolbox = NULL;
  SandstepToolLimits limits;
  g_autoptr(JsonArray) defs = NULL;
  const char *want[] = { "box_run_command", "box_read_file", "box_write_file", "box_list_directory" };

  g_test_summary ("prefix=box names the tools box_run_command, ...; the plain names are unknown tools, and every "
                  "text that names a tool names the prefixed one");
  sandstep_tool_limits_init (&limits);
  limits.prefix = "box";
  toolbox = toolbox_with (fx, &backend, &attachment, &limits);
  defs = sandstep_toolbox_definitions (toolbox);
  for (guint i = 0; i < 4; i++)
    g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (defs, i), "name"), ==, want[i]);
  sandstep_test_assert_contains (description_of (defs, 1), "(use box_run_command for anything else)");
  {
    g_autofree char *a = call_tool (toolbox, "box_run_command", "{\"command\": \"mkdir -p many && cd many && "
                                                                "seq -w 1 3000 | xargs touch\"}", FALSE);
    g_autofree char *b = call_tool (toolbox, "run_command", "{\"command\": \"true\"}", TRUE);
    g_autofree char *c = call_tool (toolbox, "box_read_file", "{}", TRUE);
    g_autofree char *d = call_tool (toolbox, "box_read_file", "{\"path\": \"many\"}", TRUE);
    g_autofree char *e = call_tool (toolbox, "box_list_directory", "{\"path\": \"many\"}", FALSE);

    g_assert_cmpstr (a, ==, "(no output)");
    g_assert_cmpstr (b, ==, "Unknown tool: 'run_command'. The tools are box_run_command, box_read_file, "
                            "box_write_file and box_list_directory.");
    g_assert_cmpstr (c, ==, "box_read_file needs the argument \"path\" (a string). Call it again with it, e.g. "
                            "{\"path\": \"notes.txt\"}.");
    g_assert_cmpstr (d, ==, "The box_read_file tool failed: '/workspace/many' is a directory; give a file, or list "
                            "it with box_list_directory");
    sandstep_test_assert_contains (e, "[... 1000 entries omitted; see them with box_run_command: ");
  }
  sandstep_toolbox_free (toolbox);
  sandstep_attachment_detach (attachment);
  sandstep_backend_free (backend);
  {
    g_autofree char *a = cli_call (fx, 0, "--prefix=box", "box_run_command", "{\"command\": \"echo hi\"}");
    g_autofree char *b = cli_call (fx, 1, "--prefix=box", "run_command", "{\"command\": \"echo hi\"}");
    g_assert_cmpstr (a, ==, "[stdout]\nhi");
    sandstep_test_assert_contains (b, "Unknown tool: 'run_command'. The tools are box_run_command,");
  }
}

static void
on_reply (const char *reply, gpointer user_data)
{
  *(char **) user_data = g_strdup (reply);
}

static void
test_prefix_mcp (Fixture *fx, gconstpointer data)
{
  SandstepBackend *backend = NULL;
  SandstepAttachment *attachment = NULL;
  SandstepToolbox *toolbox = NULL;
  SandstepToolLimits limits;
  g_autoptr(SandstepMcpServer) server = NULL;
  static const char init[] = "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": "
                             "{\"protocolVersion\": \"2025-11-25\", \"capabilities\": {}, \"clientInfo\": "
                             "{\"name\": \"t\", \"version\": \"1\"}}}";
  static const char list[] = "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/list\"}";
  g_autofree char *init_reply = NULL;
  g_autofree char *list_reply = NULL;

  g_test_summary ("The MCP server lists the prefixed names, and its instructions name the prefixed run_command");
  sandstep_tool_limits_init (&limits);
  limits.prefix = "box";
  toolbox = toolbox_with (fx, &backend, &attachment, &limits);
  server = sandstep_mcp_server_new (toolbox, fx->handle);
  sandstep_mcp_server_handle (server, init, strlen (init), on_reply, &init_reply);
  sandstep_mcp_server_handle (server, list, strlen (list), on_reply, &list_reply);
  g_assert_nonnull (init_reply);
  g_assert_nonnull (list_reply);
  sandstep_test_assert_contains (init_reply, "(box_run_command starts a fresh shell each time");
  sandstep_test_assert_contains (list_reply, "\"name\":\"box_run_command\"");
  sandstep_test_assert_contains (list_reply, "\"name\":\"box_list_directory\"");
  sandstep_test_assert_not_contains (list_reply, "\"name\":\"run_command\"");
  g_clear_pointer (&server, sandstep_mcp_server_free);
  sandstep_toolbox_free (toolbox);
  sandstep_attachment_detach (attachment);
  sandstep_backend_free (backend);
}

/* ---- the agent, against test-agent's scripted server ---- */

typedef struct {
  GPid pid;
  char *url;
  char *log;
} Served;

static void
serve (Fixture *fx, Served *served, const char *script)
{
  g_autofree char *program = g_test_build_filename (G_TEST_BUILT, "test-agent", NULL);
  g_autofree char *script_path = sandstep_test_host_path (&fx->f, "script.json");
  g_autofree char *log_arg = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOChannel) channel = NULL;
  gsize end = 0;
  int out = -1;

  served->log = sandstep_test_host_path (&fx->f, "requests.jsonl");
  log_arg = g_strconcat ("--log=", served->log, NULL);
  g_file_set_contents (script_path, script, -1, &error);
  g_assert_no_error (error);
  {
    const char *argv[] = { program, "--serve", script_path, "--port=0", log_arg, NULL };
    g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &served->pid, NULL,
                              &out, NULL, &error);
  }
  g_assert_no_error (error);
  channel = g_io_channel_unix_new (out);
  g_io_channel_set_close_on_unref (channel, TRUE);
  g_io_channel_read_line (channel, &served->url, NULL, &end, &error);
  g_assert_no_error (error);
  g_assert_nonnull (served->url);
  served->url[end] = '\0';
  sandstep_test_fixture_setenv (&fx->f, "OPENAI_BASE_URL", served->url);
  sandstep_test_fixture_setenv (&fx->f, "OPENAI_API_KEY", "sk-test");
}

static void
unserve (Served *served)
{
  kill (served->pid, SIGTERM);
  waitpid (served->pid, NULL, 0);
  g_spawn_close_pid (served->pid);
  g_free (served->url);
  g_free (served->log);
}

static char *
first_request (Served *served)
{
  g_autofree char *text = NULL;

  g_assert_true (g_file_get_contents (served->log, &text, NULL, NULL));
  return g_strndup (text, strcspn (text, "\n"));
}

static void
test_agent_export (Fixture *fx, gconstpointer data)
{
  Served served = { 0 };
  g_autofree char *out_dir = sandstep_test_host_path (&fx->f, "out");
  g_autofree char *dest = g_build_filename (out_dir, "report.md", NULL);
  g_autofree char *export_arg = g_strdup_printf ("--export=report.md=file://%s", dest);
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *content = NULL;
  g_autofree char *request = NULL;

  g_test_summary ("agent --export copies the files out when the model has answered, and run_command's "
                  "description names them");
  g_mkdir_with_parents (out_dir, 0755);
  serve (fx, &served, "[{\"calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"report.md\", "
                      "\"content\": \"all done\\n\"}}]}, {\"answer\": \"wrote it\"}]");
  r = helper_on (fx, "agent", "--model=m", export_arg, "--", "write the report", NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "wrote it\n");
  sandstep_test_assert_contains (r->err, "sandstep agent: published 1 file\n");
  g_assert_true (g_file_get_contents (dest, &content, NULL, NULL));
  g_assert_cmpstr (content, ==, "all done\n");
  request = first_request (&served);
  sandstep_test_assert_contains (request, "When this run ends well, these files are copied out of the sandbox, so "
                                          "write your results to them before you finish: report.md.");
  unserve (&served);
}

static void
test_agent_export_failed (Fixture *fx, gconstpointer data)
{
  Served served = { 0 };
  g_autofree char *out_dir = sandstep_test_host_path (&fx->f, "out");
  g_autofree char *dest = g_build_filename (out_dir, "report.md", NULL);
  g_autofree char *other = g_build_filename (out_dir, "missing.md", NULL);
  g_autofree char *export_arg = g_strdup_printf ("--export=report.md=file://%s", dest);
  g_autofree char *missing_arg = g_strdup_printf ("--export=missing.md=file://%s", other);
  const char *bad_arg = "--export=report.md=ftp://example.org/r.md";

  g_test_summary ("A run that ends without an answer exports nothing; two exports of which one fails export "
                  "neither; a bad destination is refused before the model is asked");
  g_mkdir_with_parents (out_dir, 0755);
  serve (fx, &served, "[{\"calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"report.md\", "
                      "\"content\": \"half\\n\"}}]}]");
  {
    g_autoptr(SandstepTestResult) r = helper_on (fx, "agent", "--model=m", "--max-turns=1", export_arg, "--",
                                                 "try", NULL);
    sandstep_test_assert_status (r, 2);
    g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
    sandstep_test_assert_not_contains (r->err, "published");
  }
  unserve (&served);
  serve (fx, &served, "[{\"answer\": \"done\"}]");
  {
    g_autoptr(SandstepTestResult) r = helper_on (fx, "agent", "--model=m", export_arg, missing_arg, "--", "go",
                                                 NULL);
    g_assert_cmpint (r->status, !=, 0);
    sandstep_test_assert_contains (r->err, "missing.md");
    g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
    g_assert_false (g_file_test (other, G_FILE_TEST_EXISTS));
    g_autofree char *left = sandstep_test_dir_names (out_dir);
    g_assert_cmpstr (left, ==, "");
  }
  unserve (&served);
  serve (fx, &served, "[{\"answer\": \"done\"}]");
  {
    g_autoptr(SandstepTestResult) r = helper_on (fx, "agent", "--model=m", bad_arg, "--", "go", NULL);
    g_assert_cmpint (r->status, ==, 64);
    sandstep_test_assert_contains (r->err, "ftp://example.org/r.md");
    g_autofree char *log_text = NULL;
    /* The model was never asked. */
    g_file_get_contents (served.log, &log_text, NULL, NULL);
    g_assert_cmpstr (log_text != NULL ? log_text : "", ==, "");
  }
  unserve (&served);
}

static void
test_agent_prefix (Fixture *fx, gconstpointer data)
{
  Served served = { 0 };
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *request = NULL;

  g_test_summary ("agent --prefix=box offers box_run_command and friends, names them in its prompt, and answers "
                  "calls by those names");
  serve (fx, &served, "[{\"calls\": [{\"name\": \"box_run_command\", \"arguments\": {\"command\": \"echo ok\"}}]}, "
                      "{\"answer\": \"{{last_tool_result}}\"}]");
  r = helper_on (fx, "agent", "--model=m", "--prefix=box", "--", "go", NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "[stdout]\nok\n");
  request = first_request (&served);
  sandstep_test_assert_contains (request, "through four tools: box_run_command, box_read_file, box_write_file and "
                                          "box_list_directory.");
  sandstep_test_assert_contains (request, "\"name\":\"box_run_command\"");
  unserve (&served);
}

/* ---- /data ---- */

static void
test_data (Fixture *fx, gconstpointer data)
{
  g_autofree char *docs = sandstep_test_host_path (&fx->f, "docs");
  g_autofree char *sub = g_build_filename (docs, "sub", NULL);
  g_autofree char *a = g_build_filename (docs, "a.txt", NULL);
  g_autofree char *big = g_build_filename (docs, "big.txt", NULL);
  g_autofree char *mount = NULL;
  SandstepBackend *backend = NULL;
  SandstepAttachment *attachment = NULL;
  SandstepToolbox *toolbox = NULL;
  g_autoptr(JsonArray) defs = NULL;

  g_test_summary ("read_file and list_directory read the read-only data of a --mount under /data, refuse what "
                  "is not there as they refuse it elsewhere, and write_file cannot write there");
  g_mkdir_with_parents (sub, 0755);
  g_file_set_contents (a, "line 1\nline 2\nline 3\n", -1, NULL);
  {
    g_autofree char *text = g_strnfill (6 * 1024 * 1024, 'x');
    g_file_set_contents (big, text, -1, NULL);
  }
  sandstep_test_fixture_chown (&fx->f, docs);
  mount = g_strdup_printf ("--mount=%s:/data/docs", docs);
  fx->handle = sandstep_test_provision (&fx->f, mount, NULL);
  toolbox = toolbox_with (fx, &backend, &attachment, NULL);
  defs = sandstep_toolbox_definitions (toolbox);
  sandstep_test_assert_contains (description_of (defs, 1), "and read the data under /data");
  sandstep_test_assert_contains (description_of (defs, 3), "the data under /data can be listed too");
  {
    g_autofree char *r1 = call_tool (toolbox, "read_file", "{\"path\": \"/data/docs/a.txt\"}", FALSE);
    g_autofree char *r2 = call_tool (toolbox, "read_file", "{\"path\": \"/data/docs/a.txt\", \"offset\": 2, "
                                                           "\"limit\": 1}", FALSE);
    g_autofree char *r3 = call_tool (toolbox, "read_file", "{\"path\": \"../data/docs/./sub/../a.txt\"}", FALSE);
    g_autofree char *r4 = call_tool (toolbox, "read_file", "{\"path\": \"/data/docs/none.txt\"}", TRUE);
    g_autofree char *r5 = call_tool (toolbox, "read_file", "{\"path\": \"/data/docs/sub\"}", TRUE);
    g_autofree char *r6 = call_tool (toolbox, "read_file", "{\"path\": \"/data/docs/big.txt\"}", TRUE);
    g_autofree char *l1 = call_tool (toolbox, "list_directory", "{\"path\": \"/data\"}", FALSE);
    g_autofree char *l2 = call_tool (toolbox, "list_directory", "{\"path\": \"/data/docs\"}", FALSE);
    g_autofree char *l3 = call_tool (toolbox, "list_directory", "{\"path\": \"/data/docs/a.txt\"}", TRUE);
    g_autofree char *l4 = call_tool (toolbox, "list_directory", "{\"path\": \"/data/nothing\"}", TRUE);
    g_autofree char *w1 = call_tool (toolbox, "write_file", "{\"path\": \"/data/docs/new.txt\", \"content\": \"x\"}",
                                     TRUE);

    g_assert_cmpstr (r1, ==, "line 1\nline 2\nline 3");
    g_assert_cmpstr (r2, ==, "line 2\n[... 1 more line; read on with offset=3]");
    g_assert_cmpstr (r3, ==, r1);
    g_assert_cmpstr (r4, ==, "The read_file tool failed: '/data/docs/none.txt' does not exist in the sandbox");
    g_assert_cmpstr (r5, ==, "The read_file tool failed: '/data/docs/sub' is a directory; give a file, or list the "
                             "directory");
    g_assert_cmpstr (r6, ==, "'/data/docs/big.txt' is 6.0MB, over the 5.0MB read limit. Read just the part you "
                             "need with a shell command instead (e.g. head, tail, sed -n, or grep).");
    g_assert_cmpstr (l1, ==, "docs/");
    g_assert_cmpstr (l2, ==, "a.txt\nbig.txt\nsub/");
    g_assert_cmpstr (l3, ==, "The list_directory tool failed: '/data/docs/a.txt' is not a directory; read it as a "
                             "file");
    g_assert_cmpstr (l4, ==, "The list_directory tool failed: '/data/nothing' does not exist in the sandbox");
    sandstep_test_assert_contains (w1, "'/data/docs/new.txt' is outside the sandbox's files: only /workspace and "
                                       "/tmp can be read or written by the file tools");
    /* No host path shows. */
    sandstep_test_assert_not_contains (w1, fx->f.host_dir);
    g_assert_false (g_file_test (sub, G_FILE_TEST_IS_REGULAR));
  }
  sandstep_toolbox_free (toolbox);
  sandstep_attachment_detach (attachment);
  sandstep_backend_free (backend);
  {
    g_autofree char *c = cli_call (fx, 0, NULL, "read_file", "{\"path\": \"/data/docs/a.txt\", \"limit\": 1}");
    g_assert_cmpstr (c, ==, "line 1\n[... 2 more lines; read on with offset=2]");
  }
}

/* ---- no sandstep command in what the model reads ---- */

static void
test_no_cli (Fixture *fx, gconstpointer data)
{
  SandstepBackend *backend = NULL;
  SandstepAttachment *attachment = NULL;
  SandstepToolbox *toolbox = NULL;
  static const struct {
    const char *tool, *arguments;
  } refusals[] = {
    { "read_file", "{\"path\": \"d\"}" },
    { "read_file", "{\"path\": \"fifo\"}" },
    { "read_file", "{\"path\": \"loop\"}" },
    { "read_file", "{\"path\": \"big\"}" },
    { "read_file", "{\"path\": \"/etc/passwd\"}" },
    { "read_file", "{\"path\": \"../../x\"}" },
    { "read_file", "{\"path\": \"none\"}" },
    { "write_file", "{\"path\": \"d\", \"content\": \"x\"}" },
    { "write_file", "{\"path\": \"/usr/x\", \"content\": \"x\"}" },
    { "list_directory", "{\"path\": \"big\"}" },
    { "list_directory", "{\"path\": \"none\"}" },
  };
  g_autoptr(JsonArray) defs = NULL;

  g_test_summary ("No text the model reads names a sandstep command it does not have: every refusal of the file "
                  "tools names the tools instead, and so do the descriptions");
  toolbox = toolbox_with (fx, &backend, &attachment, NULL);
  {
    g_autofree char *setup_text = call_tool (toolbox, "run_command",
                                             "{\"command\": \"mkdir d && mkfifo fifo && ln -s loop loop && "
                                             "head -c 6000000 /dev/zero > big\"}", FALSE);
    g_assert_cmpstr (setup_text, ==, "(no output)");
  }
  for (gsize i = 0; i < G_N_ELEMENTS (refusals); i++)
    {
      g_autofree char *text = call_tool (toolbox, refusals[i].tool, refusals[i].arguments, TRUE);
      g_test_message ("%s %s -> %s", refusals[i].tool, refusals[i].arguments, text);
      sandstep_test_assert_not_contains (text, "sandstep ");
      sandstep_test_assert_not_contains (text, "from the host");
    }
  {
    g_autofree char *dir = call_tool (toolbox, "read_file", "{\"path\": \"d\"}", TRUE);
    g_autofree char *fifo = call_tool (toolbox, "read_file", "{\"path\": \"fifo\"}", TRUE);
    sandstep_test_assert_contains (dir, "list it with list_directory");
    sandstep_test_assert_contains (fifo, "with run_command first");
  }
  defs = sandstep_toolbox_definitions (toolbox);
  for (guint i = 0; i < json_array_get_length (defs); i++)
    sandstep_test_assert_not_contains (description_of (defs, i), "sandstep ");
  sandstep_toolbox_free (toolbox);
  sandstep_attachment_detach (attachment);
  sandstep_backend_free (backend);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func, data) g_test_add (path, Fixture, data, setup, func, teardown)
  ADD ("/options/refused/call", test_refused, "call");
  ADD ("/options/refused/agent", test_refused, "agent");
  ADD ("/options/refused/mcp", test_refused, "mcp");
  ADD ("/options/refused/tools", test_refused, "tools");
  ADD ("/options/applied", test_applied, NULL);
  ADD ("/options/prefix", test_prefix, NULL);
  ADD ("/options/prefix/mcp", test_prefix_mcp, NULL);
  ADD ("/agent-options/export", test_agent_export, NULL);
  ADD ("/agent-options/export-failed", test_agent_export_failed, NULL);
  ADD ("/agent-options/prefix", test_agent_prefix, NULL);
  ADD ("/data/read-and-list", test_data, NULL);
  ADD ("/texts/no-cli", test_no_cli, NULL);
#undef ADD
  return g_test_run ();
}
