/* test-e2b.c: E2B's SDK against sandstepd's E2B API (docs/e2b.md).
 *
 * Each case starts a sandstepd of its own on loopback, whose token file holds
 * E2B keys ("e2b_" and hex), and runs tests/e2b/sdk.mjs AREA: the official
 * `e2b` SDK from npm, unmodified, with E2B_API_URL and E2B_SANDBOX_URL set to
 * the daemon.  The script prints what each call gave; the checks are here.
 * Without node or the installed SDK the cases skip, or fail under
 * SANDSTEP_TESTS_REQUIRE_NODE=1.
 *
 * Environment: SANDSTEPD (the daemon), G_TEST_SRCDIR.
 */
#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-test-utils.h"

#define CLIENT_TIMEOUT_S 120

typedef struct {
  SandstepTestFixture f;
  char *token_file;
  char *key;                /* an admin key */
  char *key_a;              /* owner=a/ */
  char *key_b;              /* owner=b/ */
  char *key_dag;            /* owner=sandstep-test/: the DAG of the fixture's helper runs */
  char *log;
  SandstepTestDaemon daemon;
  char *extra_args[3];      /* more options for the daemon, NULL-terminated */
  GPid registry_pid;        /* a docker-registry of the case's, or 0 */
} Fixture;

static char *
new_key (void)
{
  return g_strdup_printf ("e2b_%08x%08x%08x%08x%08x", g_random_int (), g_random_int (), g_random_int (),
                          g_random_int (), g_random_int ());
}

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autofree char *tokens = NULL;

  sandstep_test_setup (&fx->f, data);
  fx->token_file = g_build_filename (fx->f.base_dir, "tokens", NULL);
  fx->log = g_build_filename (fx->f.base_dir, "sandstepd.log", NULL);
  fx->key = new_key ();
  fx->key_a = new_key ();
  fx->key_b = new_key ();
  fx->key_dag = new_key ();
  tokens = g_strdup_printf ("%s\n%s owner=a/\n%s owner=b/\n%s owner=%s/\n", fx->key, fx->key_a, fx->key_b,
                            fx->key_dag, fx->f.dag);
  g_assert_true (g_file_set_contents_full (fx->token_file, tokens, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  int status;

  sandstep_test_daemon_clear (&fx->daemon);
  if (fx->registry_pid > 0)
    {
      kill (fx->registry_pid, SIGKILL);
      waitpid (fx->registry_pid, &status, 0);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (fx->extra_args); i++)
    g_free (fx->extra_args[i]);
  g_free (fx->token_file);
  g_free (fx->key);
  g_free (fx->key_a);
  g_free (fx->key_b);
  g_free (fx->key_dag);
  g_free (fx->log);
  sandstep_test_teardown (&fx->f, data);
}

/* The node the SDK runs with: node 20 from tests/e2b/runtime where scripts/deps.sh put one (the host's is
 * older), else the host's when it is 20 or later; NULL otherwise. */
static char *
sdk_node (void)
{
  static const char *const arches[] = { "x64", "arm64" };
  g_autofree char *host = g_find_program_in_path ("node");
  const char *argv[] = { host, "-p", "process.versions.node.split('.')[0]", NULL };
  g_autofree char *major = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (arches); i++)
    {
      g_autofree char *dir = g_strdup_printf ("node-linux-%s", arches[i]);
      char *runtime = g_test_build_filename (G_TEST_DIST, "e2b", "runtime", "node_modules", dir, "bin", "node", NULL);
      if (g_file_test (runtime, G_FILE_TEST_IS_EXECUTABLE))
        return runtime;
      g_free (runtime);
    }
  if (host != NULL && g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &major,
                                    NULL, NULL, NULL) &&
      g_ascii_strtoull (major, NULL, 10) >= 20)
    return g_steal_pointer (&host);
  return NULL;
}

/* TRUE when node and the SDK are here; otherwise skips the case (or fails it
 * under SANDSTEP_TESTS_REQUIRE_NODE=1) with the reason. */
static gboolean
sdk_ready (void)
{
  g_autofree char *node = sdk_node ();
  g_autofree char *sdk = g_test_build_filename (G_TEST_DIST, "e2b", "node_modules", "e2b", "package.json", NULL);
  const char *reason = NULL;

  if (node == NULL)
    reason = "no node 20 or later (the e2b SDK needs it; scripts/test installs one from npm into tests/e2b/runtime "
             "where the host's is older)";
  else if (!g_file_test (sdk, G_FILE_TEST_EXISTS))
    reason = "the e2b SDK is not installed in tests/e2b/node_modules (scripts/test runs npm there; or run: "
             "cd tests/e2b && npm ci)";
  return reason == NULL || sandstep_test_node_missing (reason);
}

static void
server_start (Fixture *fx)
{
  const char *daemon = g_getenv ("SANDSTEPD");
  g_autofree char *token_opt = g_strconcat ("--token-file=", fx->token_file, NULL);
  g_autofree char *state_opt = g_strconcat ("--state-dir=", fx->f.state_dir, NULL);
  const char *argv[] = { daemon, "--listen=127.0.0.1:0", token_opt, state_opt, fx->extra_args[0], fx->extra_args[1],
                         NULL };

  g_assert_nonnull (daemon);
  sandstep_test_daemon_start (&fx->daemon, argv, (const char *const *) fx->f.envp, NULL, fx->log);
}

/* Runs tests/e2b/@name @area [@arg1 [@arg2]] with @key, and returns its report. */
static JsonObject *
run_script_args (Fixture *fx, const char *name, const char *area, const char *key, const char *arg1,
                 const char *arg2)
{
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "e2b", name, NULL);
  g_autofree char *timeout = g_strdup_printf ("%.0f", CLIENT_TIMEOUT_S * sandstep_test_time_scale ());
  g_autofree char *node = sdk_node ();
  const char *argv[] = { "timeout", "-k", "5", timeout, node, script, area, arg1, arg1 != NULL ? arg2 : NULL, NULL };
  g_auto(GStrv) envp = g_strdupv (fx->f.envp);
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) report = NULL;
  int status = -1;

  envp = g_environ_setenv (envp, "E2B_API_URL", fx->daemon.url, TRUE);
  envp = g_environ_setenv (envp, "E2B_SANDBOX_URL", fx->daemon.url, TRUE);
  envp = g_environ_setenv (envp, "E2B_API_KEY", key, TRUE);
  envp = g_environ_setenv (envp, "E2B_OTHER_KEY", fx->key_b, TRUE);
  /* Nothing may reach e2b.app: a call that ignored the URLs would fail to resolve. */
  envp = g_environ_setenv (envp, "E2B_DOMAIN", "e2b.invalid", TRUE);
  g_spawn_sync (fx->f.host_dir, (char **) argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status, &error);
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_autofree char *log = NULL;
      g_file_get_contents (fx->log, &log, NULL, NULL);
      g_test_message ("%s %s failed (wait status %d)\nstdout:\n%s\nstderr:\n%s\nsandstepd's log:\n%s", name,
                      area, status, out, err, log != NULL ? log : "");
      g_assert_not_reached ();
    }
  g_test_message ("%s %s: %s", name, area, out);
  report = sandstep_test_parse_json (out);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (report));
  return json_object_ref (json_node_get_object (report));
}

static JsonObject *
run_script (Fixture *fx, const char *name, const char *area, const char *key)
{
  return run_script_args (fx, name, area, key, NULL, NULL);
}

static JsonObject *
run_sdk (Fixture *fx, const char *area, const char *key)
{
  return run_script (fx, "sdk.mjs", area, key);
}

/* The member @name of @report, an object (a call that threw: {error, message}). */
static JsonObject *
member_object (JsonObject *report, const char *name)
{
  JsonNode *node = json_object_get_member (report, name);

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    g_error ("the report has no object '%s'", name);
  return json_node_get_object (node);
}

/* Asserts that call @name threw @error_name with @text in its message. */
static void
assert_threw (JsonObject *report, const char *name, const char *error_name, const char *text)
{
  JsonObject *o = member_object (report, name);

  g_assert_cmpstr (json_object_get_string_member_with_default (o, "error", ""), ==, error_name);
  sandstep_test_assert_contains (json_object_get_string_member_with_default (o, "message", ""), text);
}

static gboolean
array_has (JsonObject *report, const char *name, const char *value)
{
  JsonArray *array = json_object_get_array_member (report, name);

  for (guint i = 0; i < json_array_get_length (array); i++)
    if (g_strcmp0 (json_array_get_string_element (array, i), value) == 0)
      return TRUE;
  return FALSE;
}

static void
test_lifecycle (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  const char *id, *brief;
  JsonObject *info, *timeout;

  g_test_summary ("Sandbox.create/getInfo/list/connect/setTimeout/kill of the e2b SDK against sandstepd: the ID "
                  "is a handle, timeoutMs its lifetime, setTimeout moves its end either way (a sandbox past it is "
                  "gone), connect's timeout only lengthens it; metadata comes back in getInfo and list, and "
                  "list's metadata filter selects by it; isRunning is true beside a running command, false past "
                  "the timeout and after kill; a bad timeout or metadata, another template, a wrong "
                  "key, a second kill and a killed sandbox's info fail as the SDK expects");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_sdk (fx, "lifecycle", fx->key);
  id = json_object_get_string_member (report, "sandboxId");
  g_assert_true (g_str_has_prefix (id, "sandstep-"));
  info = member_object (report, "info");
  g_assert_cmpstr (json_object_get_string_member (info, "sandboxId"), ==, id);
  g_assert_cmpstr (json_object_get_string_member (info, "templateId"), ==, "base");
  g_assert_cmpstr (json_object_get_string_member (info, "state"), ==, "running");
  g_assert_cmpint (json_object_get_int_member (info, "lifetimeS"), ==, 120);
  g_assert_cmpstr (json_object_get_string_member (member_object (info, "metadata"), "step"), ==, "e2b");
  g_assert_true (array_has (report, "listed", id));
  {
    JsonArray *listed = json_object_get_array_member (report, "listedMetadata");
    g_assert_cmpuint (json_array_get_length (listed), ==, 1);
    JsonObject *metadata = json_array_get_object_element (listed, 0);
    g_assert_cmpstr (json_object_get_string_member (metadata, "step"), ==, "e2b");
    g_assert_cmpstr (json_object_get_string_member (metadata, "a b&c=d"), ==, "x/y=z&w%");
  }
  g_assert_true (array_has (report, "listedByTag", id));
  g_assert_false (array_has (report, "listedByOtherTag", id));
  g_assert_true (array_has (report, "listedByTwoTags", id));
  g_assert_false (array_has (report, "listedBySecondWrong", id));
  g_assert_cmpstr (json_object_get_string_member (report, "connected"), ==, id);
  timeout = member_object (report, "setTimeout");
  g_assert_cmpint (json_object_get_int_member (timeout, "longer"), >=, 595);
  g_assert_cmpint (json_object_get_int_member (timeout, "longer"), <=, 601);
  g_assert_cmpint (json_object_get_int_member (timeout, "shorter"), >=, 55);
  g_assert_cmpint (json_object_get_int_member (timeout, "shorter"), <=, 61);
  timeout = member_object (report, "connectLonger");
  g_assert_cmpint (json_object_get_int_member (timeout, "longer"), >=, 895);
  g_assert_cmpint (json_object_get_int_member (timeout, "longer"), <=, 901);
  g_assert_cmpint (json_object_get_int_member (timeout, "kept"), >=, 880);
  assert_threw (report, "setTimeoutZero", "SandboxError", "400: The sandbox's timeout cannot be set");
  assert_threw (report, "setTimeoutMissing", "SandboxNotFoundError", "sandstep-00000000000000ff");
  brief = json_object_get_string_member (report, "briefId");
  g_assert_cmpstr (json_object_get_string_member (report, "briefBefore"), ==, "alive\n");
  g_assert_true (json_object_get_boolean_member (report, "briefRunning"));
  g_assert_false (json_object_get_boolean_member (report, "briefRunningAfter"));
  assert_threw (report, "briefInfo", "SandboxNotFoundError", brief);
  assert_threw (report, "briefRun", "NotFoundError", brief);
  g_assert_false (array_has (report, "briefListed", brief));
  assert_threw (report, "pause", "SandboxError", "/pause is not served by sandstepd's E2B API");
  assert_threw (report, "metrics", "SandboxError", "/metrics is not served by sandstepd's E2B API");
  /* No snapshot made here: none listed (test_snapshots makes them). */
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "snapshots")), ==, 0);
  assert_threw (report, "badMetadata", "SandboxError", "400: The value of metadata 'n' is not a string");
  assert_threw (report, "otherTemplate", "SandboxError", "Template 'no-such-template' is not served");
  assert_threw (report, "wrongKey", "AuthenticationError", "E2B_API_KEY");
  g_assert_true (json_object_get_boolean_member (report, "running"));
  g_assert_true (json_object_get_boolean_member (report, "killed"));
  g_assert_false (json_object_get_boolean_member (report, "runningAfterKill"));
  g_assert_false (json_object_get_boolean_member (report, "killedAgain"));
  g_assert_false (array_has (report, "listedAfter", id));
  assert_threw (report, "infoAfter", "SandboxNotFoundError", id);
  /* Killed means gone from the state directory, not merely hidden: its metadata too. */
  {
    g_autofree char *sandboxes = g_build_filename (fx->f.state_dir, "sandboxes", NULL);
    g_autofree char *names = sandstep_test_dir_names (sandboxes);
    g_autofree char *meta_name = g_strconcat (id, ".json", NULL);
    g_autofree char *meta = g_build_filename (fx->f.state_dir, "e2b", meta_name, NULL);
    sandstep_test_assert_not_contains (names, id);
    g_assert_false (g_file_test (meta, G_FILE_TEST_EXISTS));
  }
}

static void
test_scoped (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  const char *id;

  g_test_summary ("an E2B key scoped to owner=a/ makes sandboxes under a/; a key scoped to b/ neither lists, "
                  "gets, connects to, sets the timeout of nor kills them (not found, as for a sandbox that never was)");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_sdk (fx, "scoped", fx->key_a);
  id = json_object_get_string_member (report, "sandboxId");
  g_assert_false (array_has (report, "otherList", id));
  assert_threw (report, "otherInfo", "SandboxNotFoundError", id);
  assert_threw (report, "otherConnect", "SandboxNotFoundError", id);
  g_assert_false (json_object_get_boolean_member (report, "otherKill"));
  assert_threw (report, "otherSetTimeout", "SandboxNotFoundError", id);
  /* The other key's setTimeout of 1 s did not touch the sandbox: it still ends at its 120 s. */
  g_assert_cmpint (json_object_get_int_member (report, "endAfterOther"), >=, 100);
  g_assert_true (array_has (report, "ownList", id));
  g_assert_true (json_object_get_boolean_member (report, "killed"));
}

/* The checks of sdk.mjs commands's @report. */
static void
assert_commands (JsonObject *report)
{
  JsonObject *run, *cwd_envs;

  run = member_object (report, "run");
  g_assert_cmpstr (json_object_get_string_member (run, "threw"), ==, "CommandExitError");
  g_assert_cmpint (json_object_get_int_member (run, "exitCode"), ==, 3);
  g_assert_cmpstr (json_object_get_string_member (run, "stdout"), ==, "hi\n");
  g_assert_cmpstr (json_object_get_string_member (run, "stderr"), ==, "oops\n");
  g_assert_cmpstr (json_object_get_string_member (report, "streamed"), ==, "hi\n");
  cwd_envs = member_object (report, "cwdEnvs");
  g_assert_cmpint (json_object_get_int_member (cwd_envs, "exitCode"), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (cwd_envs, "stdout"), ==, "/tmp\nhello e2b\n");
  assert_threw (report, "timeout", "TimeoutError", "deadline_exceeded");
  g_assert_cmpstr (json_object_get_string_member (report, "early"), ==, "ready\n");
  g_assert_cmpstr (json_object_get_string_member (report, "after"), ==, "free\n");
  g_assert_true (json_object_get_boolean_member (report, "killed"));
}

static void
test_commands (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;

  g_test_summary ("commands.run through sandstepd's envd (Connect's JSON streams): `echo hi; exit 3` gives "
                  "stdout 'hi', stderr apart and exit code 3 (CommandExitError); cwd and envs apply; output "
                  "streams as it comes (it arrives before a command's timeout kills it); a killed command "
                  "frees the sandbox for the next");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_sdk (fx, "commands", fx->key);
  assert_commands (report);
}

static void
test_https (Fixture *fx, gconstpointer data)
{
  g_autofree char *openssl = g_find_program_in_path ("openssl");
  g_autofree char *cert = g_build_filename (fx->f.base_dir, "cert.pem", NULL);
  g_autofree char *key = g_build_filename (fx->f.base_dir, "key.pem", NULL);
  g_autoptr(JsonObject) report = NULL;
  g_autoptr(GError) error = NULL;
  int status = -1;

  g_test_summary ("The E2B SDK over HTTPS: sandstepd with --tls-cert and --tls-key, both URLs https:// and node "
                  "trusting the certificate (NODE_EXTRA_CA_CERTS): create, commands.run (streams, exit codes, "
                  "cwd and envs, timeouts, kill) and kill work as over HTTP");
  if (!sdk_ready ())
    return;
  if (openssl == NULL)
    g_error ("openssl is not installed; scripts/deps.sh installs it (apt-get install openssl)");
  {
    const char *argv[] = { openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert,
                           NULL };
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                  NULL, NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  fx->extra_args[0] = g_strconcat ("--tls-cert=", cert, NULL);
  fx->extra_args[1] = g_strconcat ("--tls-key=", key, NULL);
  server_start (fx);
  g_assert_true (g_str_has_prefix (fx->daemon.url, "https://127.0.0.1:"));
  fx->f.envp = g_environ_setenv (fx->f.envp, "NODE_EXTRA_CA_CERTS", cert, TRUE);
  report = run_sdk (fx, "commands", fx->key);
  assert_commands (report);
}

static void
test_background (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  JsonObject *o, *p;
  JsonArray *listed;
  gint64 pid;

  g_test_summary ("commands.run({background: true}) through sandstepd's envd: a handle at once, wait() gives "
                  "the output and exit code; commands.list() shows a running command (its pid and process) "
                  "and not one killed; kill() by the handle ends it and frees the sandbox, a second "
                  "kill or an unknown pid is false; a key of another owner neither lists nor kills; "
                  "beside it, other commands and file calls run at once, and what such a command leaves behind "
                  "goes with it (its process group) while the first runs on, and the other way round; their claim outlives the "
                  "first of them, so a snapshot is busy, and a setTimeout leaves them going and moves the end of a command "
                  "with no timeout of its own; "
                  "commands.connect reconnects to it, and sendStdin to a command started without stdin says so");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_sdk (fx, "background", fx->key);
  o = member_object (report, "ended");
  g_assert_cmpstr (json_object_get_string_member (o, "threw"), ==, "CommandExitError");
  g_assert_cmpint (json_object_get_int_member (o, "exitCode"), ==, 4);
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "bg\n");
  g_assert_cmpstr (json_object_get_string_member (report, "streamed"), ==, "bg\n");
  pid = json_object_get_int_member (report, "pid");
  g_assert_cmpint (pid, >, json_object_get_int_member (o, "pid"));
  listed = json_object_get_array_member (report, "listed");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  p = json_array_get_object_element (listed, 0);
  g_assert_cmpint (json_object_get_int_member (p, "pid"), ==, pid);
  g_assert_cmpstr (json_object_get_string_member (p, "cmd"), ==, "/bin/bash");
  g_assert_cmpstr (json_array_get_string_element (json_object_get_array_member (p, "args"), 2), ==,
                   "echo started; sleep 60");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (p, "envs"), "A"), ==, "b");
  /* Beside it: commands and file calls run at once; what a command leaves goes with it, and the first runs on. */
  g_assert_cmpstr (json_object_get_string_member (report, "beside"), ==, "second\n");
  g_assert_cmpstr (json_object_get_string_member (report, "besideLeaves"), ==, "left\n");
  g_assert_cmpstr (json_object_get_string_member (report, "besideEscapes"), ==, "escaped\n");
  g_assert_cmpstr (json_object_get_string_member (report, "besideFiles"), ==, "written beside");
  listed = json_object_get_array_member (report, "besideList");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  g_assert_cmpint (json_array_get_int_element (listed, 0), ==, pid);
  sandstep_test_assert_contains (json_object_get_string_member (report, "besidePs"), "sleep 60 \n");
  g_assert_null (strstr (json_object_get_string_member (report, "besidePs"), "sleep 601"));
  g_assert_cmpint (json_object_get_int_member (report, "reconnect"), ==, pid);
  /* The first command killed while a second runs beside it: its processes go, the second's stay. */
  g_assert_true (json_object_get_boolean_member (report, "firstKilled"));
  listed = json_object_get_array_member (report, "afterFirst");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  g_assert_cmpint (json_array_get_int_element (listed, 0), ==, json_object_get_int_member (report, "second"));
  sandstep_test_assert_contains (json_object_get_string_member (report, "afterFirstPs"), "sleep 606 \n");
  g_assert_null (strstr (json_object_get_string_member (report, "afterFirstPs"), "sleep 604"));
  g_assert_null (strstr (json_object_get_string_member (report, "afterFirstPs"), "sleep 605"));
  g_assert_true (json_object_get_boolean_member (report, "secondKilled"));
  /* Their claim outlives the first: a snapshot is busy; a setTimeout leaves the calls beside them going. */
  assert_threw (report, "snapshotBeside", "SandboxError", "e2b");
  g_assert_true (json_object_get_boolean_member (report, "setTimeoutBeside"));
  g_assert_cmpstr (json_object_get_string_member (report, "afterSetTimeout"), ==, "still\n");
  listed = json_object_get_array_member (report, "fourthListed");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  g_assert_cmpint (json_array_get_int_element (listed, 0), ==, json_object_get_int_member (report, "fourth"));
  g_assert_true (json_object_get_boolean_member (report, "fourthKilled"));
  /* setTimeout moved the end of a sandbox whose background command had no timeout of its own: it runs on. */
  listed = json_object_get_array_member (report, "extendedListed");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  g_assert_cmpint (json_array_get_int_element (listed, 0), ==, json_object_get_int_member (report, "extended"));
  g_assert_true (json_object_get_boolean_member (report, "extendedKilled"));
  assert_threw (report, "stdin", "SandboxError", "[failed_precondition] Command");
  assert_threw (report, "stdin", "SandboxError", "has no stdin to write: start it with commands.run(cmd, "
                "{background: true, stdin: true})");
  g_assert_true (json_object_get_boolean_member (report, "killed"));
  /* A killed command's wait() ends as envd's does: CommandExitError, killed by SIGKILL (as the shell says it). */
  o = member_object (report, "waited");
  g_assert_cmpstr (json_object_get_string_member (o, "threw"), ==, "CommandExitError");
  g_assert_cmpint (json_object_get_int_member (o, "exitCode"), ==, 128 + SIGKILL);
  g_assert_cmpstr (json_object_get_string_member (o, "error"), ==, "signal: killed");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "listedAfter")), ==, 0);
  g_assert_false (json_object_get_boolean_member (report, "killedAgain"));
  g_assert_false (json_object_get_boolean_member (report, "killedNever"));
  g_assert_cmpstr (json_object_get_string_member (report, "after"), ==, "free\n");
  o = member_object (report, "otherList");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 404);
  g_assert_cmpstr (json_object_get_string_member (member_object (o, "body"), "code"), ==, "not_found");
  o = member_object (report, "otherKill");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 404);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "stillListed")), ==, 1);
  g_assert_true (json_object_get_boolean_member (report, "killedSecond"));
  assert_threw (report, "pty", "SandboxError", "PTYs are not served");
  g_assert_true (json_object_get_boolean_member (report, "killedSandbox"));
}

/* The sleeper's argv as /proc shows it: NUL-separated, and NUL-ended (sizeof counts the string's own NUL). */
#define SLEEPER_ARGV "sleep\0" "654321"

/* TRUE when a process of this host runs `sleep 654321` (the sleeper of detached.mjs), waiting up to @wait_s for
 * it to be gone when @gone. */
static gboolean
sleeper_runs (gboolean gone, int wait_s)
{
  for (int i = 0; i <= wait_s * 10; i++)
    {
      g_autoptr(GDir) dir = g_dir_open ("/proc", 0, NULL);
      gboolean found = FALSE;
      const char *name;

      while (dir != NULL && !found && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *path = g_strdup_printf ("/proc/%s/cmdline", name);
          g_autofree char *cmdline = NULL;
          gsize len = 0;

          if (!g_ascii_isdigit (name[0]) || !g_file_get_contents (path, &cmdline, &len, NULL))
            continue;
          found = len == sizeof SLEEPER_ARGV && memcmp (cmdline, SLEEPER_ARGV, len) == 0;
        }
      if (found != gone)
        return found;
      g_usleep (100 * 1000);
    }
  return !gone;
}

static void
test_detached (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) started = NULL;
  g_autoptr(JsonObject) connected = NULL;
  g_autoptr(JsonObject) sleeper = NULL;
  g_autoptr(JsonObject) killed = NULL;
  g_autoptr(JsonObject) sleeper2 = NULL;
  g_autoptr(JsonObject) ended = NULL;
  g_autofree char *pid = NULL;
  g_autofree char *sleeper_pid = NULL;
  const char *id;
  JsonArray *listed;
  JsonObject *o;

  g_test_summary ("A background command outlives the script that started it (docs/e2b.md): a second node "
                  "process connects to the sandbox, lists the command, sends it stdin, writes a file beside it, "
                  "connects to its pid and "
                  "gets its output from then on (not the 8 MB it wrote while no one was connected, which did not "
                  "stop it) and its end; a third kills a command by its pid, freeing the sandbox; the sandbox's "
                  "kill ends the command that runs in it");
  if (!sdk_ready ())
    return;
  server_start (fx);
  started = run_script (fx, "detached.mjs", "start", fx->key);
  id = json_object_get_string_member (started, "sandboxId");
  pid = g_strdup_printf ("%" G_GINT64_FORMAT, json_object_get_int_member (started, "pid"));
  sandstep_test_assert_contains (json_object_get_string_member (started, "stdout"), "begun");

  connected = run_script_args (fx, "detached.mjs", "connect", fx->key, id, pid);
  listed = json_object_get_array_member (connected, "listed");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  o = json_array_get_object_element (listed, 0);
  g_assert_cmpint (json_object_get_int_member (o, "pid"), ==, json_object_get_int_member (started, "pid"));
  g_assert_true (json_object_get_boolean_member (connected, "sentOne"));
  /* A file call runs beside it (docs/e2b.md, "Commands outlive their script"). */
  g_assert_true (json_object_get_boolean_member (connected, "beside"));
  g_assert_true (json_object_get_boolean_member (connected, "flooded"));
  o = member_object (connected, "connected");
  g_assert_cmpstr (json_object_get_string_member_with_default (o, "threw", ""), ==, "CommandExitError");
  g_assert_cmpint (json_object_get_int_member (o, "exitCode"), ==, 3);
  /* Its output from the connect on: the end, not what came before. */
  g_assert_true (g_str_has_suffix (json_object_get_string_member (connected, "stdout"), "got two\n"));
  g_assert_null (strstr (json_object_get_string_member (connected, "stdout"), "begun"));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (connected, "listedAfter")), ==, 0);

  sleeper = run_script_args (fx, "detached.mjs", "sleeper", fx->key, id, NULL);
  sleeper_pid = g_strdup_printf ("%" G_GINT64_FORMAT, json_object_get_int_member (sleeper, "pid"));
  listed = json_object_get_array_member (sleeper, "listedAfterDisconnect");
  g_assert_cmpuint (json_array_get_length (listed), ==, 1);
  g_assert_cmpint (json_array_get_int_element (listed, 0), ==, json_object_get_int_member (sleeper, "pid"));
  g_assert_true (sleeper_runs (FALSE, 10));
  killed = run_script_args (fx, "detached.mjs", "kill", fx->key, id, sleeper_pid);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (killed, "listed")), ==, 1);
  g_assert_true (json_object_get_boolean_member (killed, "killed"));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (killed, "listedAfter")), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (killed, "after"), ==, "free\n");
  g_assert_false (sleeper_runs (TRUE, 10));

  sleeper2 = run_script_args (fx, "detached.mjs", "sleeper", fx->key, id, NULL);
  g_assert_true (sleeper_runs (FALSE, 10));
  ended = run_script_args (fx, "detached.mjs", "killsandbox", fx->key, id, NULL);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (ended, "listed")), ==, 1);
  g_assert_true (json_object_get_boolean_member (ended, "killedSandbox"));
  g_assert_false (sleeper_runs (TRUE, 10));
}

/* Asserts that request @name of @report was answered @status, its body holding @text. */
static void
assert_answered (JsonObject *report, const char *name, gint64 status, const char *text)
{
  JsonObject *o = member_object (report, name);

  if (json_object_get_int_member_with_default (o, "status", 0) != status)
    g_error ("%s: expected status %" G_GINT64_FORMAT ", got %s", name, status,
             json_to_string (json_object_get_member (report, name), FALSE));
  sandstep_test_assert_contains (json_object_get_string_member_with_default (o, "body", ""), text);
}

static void
test_urls (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  JsonObject *tokens;
  const char *no_sandbox = "The URL's signature is no sandbox's";

  g_test_summary ("uploadUrl() and downloadUrl() of a sandbox created with secure: true, used with plain fetch: "
                  "its envdAccessToken is its own (not the key) and serves envd's calls; a POST of "
                  "multipart/form-data to the upload URL writes the file files.read() reads, a GET of the "
                  "download URL gives its bytes; a changed signature, path, operation or expiration, an expired "
                  "signature, another sandbox's (it opens that one's file only, and not with another's ID), a "
                  "killed sandbox's, an unsigned URL are refused (401); paths follow files.read and files.write");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "urls.mjs", "urls", fx->key);
  tokens = member_object (report, "tokens");
  g_assert_true (g_str_has_prefix (json_object_get_string_member (tokens, "a"), "sandstep-envd-"));
  g_assert_cmpstr (json_object_get_string_member (tokens, "a"), !=, json_object_get_string_member (tokens, "b"));
  g_assert_cmpstr (json_object_get_string_member (report, "command"), ==, "hi\n");
  /* The URL carries a signature, never a token. */
  sandstep_test_assert_contains (json_object_get_string_member (report, "uploadUrl"), "signature=v1_");
  g_assert_null (strstr (json_object_get_string_member (report, "uploadUrl"), "sandstep-envd-"));
  g_assert_null (strstr (json_object_get_string_member (report, "uploadUrl"), fx->key));
  assert_answered (report, "uploaded", 200, "/workspace/up.txt");
  g_assert_cmpstr (json_object_get_string_member (report, "readBack"), ==, "uploaded bytes\n");
  assert_answered (report, "downloaded", 200, "uploaded bytes\n");
  assert_answered (report, "downloadedInTime", 200, "uploaded bytes\n");
  assert_answered (report, "tampered", 401, no_sandbox);
  assert_answered (report, "otherPath", 401, no_sandbox);
  assert_answered (report, "uploadAsDownload", 401, no_sandbox);
  assert_answered (report, "downloadAsUpload", 401, no_sandbox);
  assert_answered (report, "unsigned", 401, "no E2B API key and no signature");
  assert_answered (report, "expired", 401, "The URL's signature expired");
  assert_answered (report, "laterExpiration", 401, no_sandbox);
  assert_answered (report, "otherSandbox", 200, "b bytes\n");
  assert_answered (report, "otherSandboxNamingA", 401, "no E2B API key");
  assert_answered (report, "killedSandbox", 401, no_sandbox);
  /* As files.read and files.write refuse them, so do the URLs. */
  assert_threw (report, "readLink", "FileNotFoundError", "does not exist in the sandbox");
  assert_answered (report, "downloadedLink", 404, "does not exist in the sandbox");
  assert_threw (report, "writeOutside", "InvalidArgumentError", "outside the sandbox's files");
  assert_answered (report, "uploadedOutside", 400, "outside the sandbox's files");
  assert_answered (report, "uploadedTmp", 200, "/tmp/up.txt");
  g_assert_cmpstr (json_object_get_string_member (report, "readTmp"), ==, "tmp bytes\n");
}

static void
test_files (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *escape = g_strdup_printf ("/tmp/sandstep-e2b-escape-%08x", g_random_int ());
  JsonObject *written, *o;
  JsonArray *bytes, *inside;
  JsonArray *listed;

  g_test_summary ("files.write (multipart and octet-stream, several files in one call, gzip-compressed), read (text "
                  "and bytes), list, exists, getInfo (a link's target too), "
                  "makeDir, rename and remove through sandstepd's envd; a command sees what was written; a "
                  "missing file is FileNotFoundError and does not exist; makeDir of a directory there is false, "
                  "over a file or in a read-only place refused; a name full of shell stays a name; "
                  "a path that climbs out stays in the sandbox");
  if (!sdk_ready ())
    return;
  server_start (fx);
  sandstep_test_fixture_setenv (&fx->f, "E2B_ESCAPE", escape);
  report = run_sdk (fx, "files", fx->key);
  written = member_object (report, "written");
  g_assert_cmpstr (json_object_get_string_member (written, "name"), ==, "notes.txt");
  g_assert_cmpstr (json_object_get_string_member (written, "path"), ==, "/workspace/notes.txt");
  g_assert_cmpstr (json_object_get_string_member (report, "read"), ==, "hello from e2b\n");
  g_assert_cmpstr (json_object_get_string_member (report, "readByCommand"), ==, "hello from e2b\n");
  g_assert_cmpstr (json_object_get_string_member (report, "writtenOctet"), ==, "/tmp/b.bin");
  bytes = json_object_get_array_member (report, "readBytes");
  g_assert_cmpuint (json_array_get_length (bytes), ==, 4);
  g_assert_cmpint (json_array_get_int_element (bytes, 0), ==, 0);
  g_assert_cmpint (json_array_get_int_element (bytes, 3), ==, 255);
  listed = json_object_get_array_member (report, "listed");
  g_assert_cmpuint (json_array_get_length (listed), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (listed, 0), ==, "notes.txt:file:/workspace/notes.txt");
  g_assert_cmpstr (json_array_get_string_element (listed, 1), ==, "sub:dir:/workspace/sub");
  g_assert_true (json_object_get_boolean_member (report, "exists"));
  g_assert_true (json_object_get_boolean_member (report, "existsDir"));
  g_assert_false (json_object_get_boolean_member (report, "existsNot"));
  assert_threw (report, "readMissing", "FileNotFoundError", "/workspace/no-such-file");
  /* Several files in one call: each written, in order, each path as files.write takes it. */
  o = member_object (report, "writtenMany");
  {
    JsonArray *paths = json_object_get_array_member (o, "paths");
    JsonArray *three = json_object_get_array_member (o, "three");

    g_assert_cmpuint (json_array_get_length (paths), ==, 3);
    g_assert_cmpstr (json_array_get_string_element (paths, 0), ==, "/workspace/m/one.txt");
    g_assert_cmpstr (json_array_get_string_element (paths, 2), ==, "/tmp/three.bin");
    g_assert_cmpstr (json_object_get_string_member (o, "one"), ==, "one");
    g_assert_cmpstr (json_object_get_string_member (o, "rel"), ==, "two");
    g_assert_cmpuint (json_array_get_length (three), ==, 3);
    g_assert_cmpint (json_array_get_int_element (three, 1), ==, 0);
  }
  /* One that cannot be written fails the call, naming it. */
  assert_threw (report, "writtenManyBad", "InvalidArgumentError", "'/usr/no.txt' is outside the sandbox's files");
  g_assert_true (json_object_get_boolean_member (report, "writtenGzip"));
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenManyWithPath"), "400 ");
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenManyWithPath"),
                                 "POST /files?path= takes one file, not 2");
  g_assert_true (g_str_has_suffix (json_object_get_string_member (report, "writtenManyWithPath"), " false"));
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenUnnamed"), "400 ");
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenUnnamed"), "names no file");
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenBomb"), "413 ");
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenBomb"),
                                 "unpacks to more than 1048576 bytes");
  g_assert_true (g_str_has_suffix (json_object_get_string_member (report, "writtenBomb"), " false"));
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenNotGzip"), "400 ");
  sandstep_test_assert_contains (json_object_get_string_member (report, "writtenNotGzip"), "is not gzip data");
  g_assert_true (json_object_get_boolean_member (report, "made"));
  g_assert_false (json_object_get_boolean_member (report, "madeAgain"));
  g_assert_true (json_object_get_boolean_member (report, "madeRelative"));
  assert_threw (report, "madeOverFile", "InvalidArgumentError", "'/workspace/notes.txt' exists and is not a directory");
  assert_threw (report, "madeReadOnly", "InvalidArgumentError", "only /workspace and /tmp are writable");
  g_assert_true (json_object_get_boolean_member (report, "madeOdd"));
  g_assert_false (json_object_get_boolean_member (report, "pwned"));
  o = member_object (report, "infoDir");
  g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "made");
  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, "dir");
  g_assert_cmpstr (json_object_get_string_member (o, "path"), ==, "/workspace/made");
  o = member_object (report, "infoFile");
  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, "file");
  g_assert_cmpstr (json_object_get_string_member (o, "path"), ==, "/workspace/notes.txt");
  g_assert_cmpint (json_object_get_int_member (o, "size"), ==, strlen ("hello from e2b\n"));
  g_assert_cmpstr (json_object_get_string_member (o, "permissions"), ==, "-rw-r--r--");
  g_assert_cmpint (json_object_get_int_member (o, "mode"), ==, 0644);
  g_assert_cmpstr (json_object_get_string_member (o, "owner"), ==, "root");
  g_assert_cmpint (json_object_get_int_member (o, "modifiedAgoS"), >=, -5);
  g_assert_cmpint (json_object_get_int_member (o, "modifiedAgoS"), <=, CLIENT_TIMEOUT_S * sandstep_test_time_scale ());
  o = member_object (report, "infoLink");
  g_assert_cmpstr (json_object_get_string_member (o, "file"), ==, "file /workspace/link.txt /workspace/notes.txt");
  g_assert_cmpstr (json_object_get_string_member (o, "dir"), ==, "dir /workspace/link-dir /workspace/made");
  g_assert_cmpstr (json_object_get_string_member (o, "plain"), ==, "none");
  g_assert_cmpstr (json_object_get_string_member (o, "nl"), ==, "/workspace/link-nl|/workspace/in\nside");
  g_assert_cmpstr (json_object_get_string_member (o, "end"), ==, "/workspace/link-end|/workspace/end\n");
  o = member_object (report, "infoWorkspace");
  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, "dir");
  g_assert_cmpstr (json_object_get_string_member (o, "path"), ==, "/workspace");
  g_assert_true (json_object_get_boolean_member (report, "existsTmp"));
  assert_threw (report, "infoMissing", "FileNotFoundError", "/workspace/no-such-file");
  o = member_object (report, "renamed");
  g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "moved.txt");
  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, "file");
  g_assert_cmpstr (json_object_get_string_member (o, "path"), ==, "/workspace/made/moved.txt");
  g_assert_false (json_object_get_boolean_member (o, "oldExists"));
  g_assert_cmpstr (json_object_get_string_member (o, "content"), ==, "hello from e2b\n");
  o = member_object (report, "renamedDir");
  g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "made2");
  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, "dir");
  g_assert_cmpstr (json_object_get_string_member (o, "path"), ==, "/tmp/elsewhere/made2");
  inside = json_object_get_array_member (o, "inside");
  g_assert_cmpuint (json_array_get_length (inside), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (inside, 0), ==, "deep");
  g_assert_cmpstr (json_array_get_string_element (inside, 1), ==, "moved.txt");
  o = member_object (report, "renamedNewline");
  g_assert_cmpstr (json_object_get_string_member (o, "moved"), ==, "/workspace/new\nline.txt");
  g_assert_cmpstr (json_object_get_string_member (o, "info"), ==, "/workspace/new\nline.txt");
  g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "new\nline.txt");
  assert_threw (report, "renamedMissing", "FileNotFoundError", "'/workspace/no-such-file' does not exist");
  g_assert_cmpstr (json_object_get_string_member (report, "renamedClimbed"), ==, escape);
  g_assert_false (json_object_get_boolean_member (report, "removed"));
  g_assert_true (json_object_get_boolean_member (report, "removedMissing"));
  assert_threw (report, "removedReadOnly", "InvalidArgumentError", "Removing '/usr/bin/env' failed in the sandbox");
  assert_threw (report, "climbed", "InvalidArgumentError", "goes above '/'");
  g_assert_false (g_file_test (escape, G_FILE_TEST_EXISTS));
  g_assert_true (json_object_get_boolean_member (report, "killed"));
}

static void
test_handed (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *out = NULL;

  g_test_summary ("a make step provisions a sandbox (the helper, owner DAG/RUN) and hands its handle to agent "
                  "code: with a key scoped to owner=DAG/ the SDK connects by the handle, reads the step's file "
                  "and runs in it; a key of another owner cannot connect; the DAG's next step waits for a command the agent "
                  "left running beside another it killed, then finds the agent's files");
  if (!sdk_ready ())
    return;
  server_start (fx);
  handle = sandstep_test_provision (&fx->f, NULL);
  g_free (sandstep_test_run_ok (&fx->f, handle, "echo from make > /workspace/from-make.txt"));
  sandstep_test_fixture_setenv (&fx->f, "E2B_HANDLE", handle);
  report = run_sdk (fx, "handed", fx->key_dag);
  assert_threw (report, "otherConnect", "SandboxNotFoundError", handle);
  g_assert_cmpstr (json_object_get_string_member (report, "sandboxId"), ==, handle);
  g_assert_cmpstr (json_object_get_string_member (report, "read"), ==, "from make\n");
  g_assert_cmpstr (json_object_get_string_member (report, "run"), ==, "from make\n");
  /* What the agent did is there for the DAG's next step, which waits for the command the agent left running. */
  g_assert_true (json_object_get_boolean_member (report, "firstKilled"));
  out = sandstep_test_run_ok (&fx->f, handle, "cat /workspace/agent.txt /workspace/left.txt");
  g_assert_cmpstr (out, ==, "agent\nleft\n");
}

/* TRUE when node and the code interpreter's SDK are here; otherwise skips (or fails) as sdk_ready(). */
static gboolean
code_sdk_ready (void)
{
  g_autofree char *sdk = g_test_build_filename (G_TEST_DIST, "e2b", "node_modules", "@e2b", "code-interpreter",
                                                "package.json", NULL);

  if (!sdk_ready ())
    return FALSE;
  if (!g_file_test (sdk, G_FILE_TEST_EXISTS))
    return sandstep_test_node_missing ("the @e2b/code-interpreter SDK is not installed in tests/e2b/node_modules "
                                       "(scripts/test runs npm there; or run: cd tests/e2b && npm ci)");
  return TRUE;
}

/* The string array @name of @object, joined. */
static char *
joined (JsonObject *object, const char *name)
{
  JsonArray *array = json_object_get_array_member (object, name);
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < json_array_get_length (array); i++)
    g_string_append (out, json_array_get_string_element (array, i));
  return g_string_free (out, FALSE);
}

/* The member @name of an execution's report: its error ({name, value, traceback}), or NULL when it has none. */
static JsonObject *
execution_error (JsonObject *execution)
{
  JsonNode *node = json_object_get_member (execution, "error");

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* Execution @name of code.mjs's report: what runCode gave, not an error it threw. */
static JsonObject *
execution_of (JsonObject *report, const char *name)
{
  JsonObject *o = member_object (report, name);

  if (json_object_has_member (o, "message"))
    g_error ("runCode '%s' threw %s: %s", name, json_object_get_string_member_with_default (o, "error", ""),
             json_object_get_string_member_with_default (o, "message", ""));
  return o;
}

static void
test_code (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *o, *e, *execution, *first;
  JsonArray *lines;

  g_test_summary ("runCode of @e2b/code-interpreter through sandstepd, served by run_python's session: state "
                  "kept between calls; the last expression's value is the main text result; stdout and stderr "
                  "stream to the callbacks as they are written (the first line before the code ends); an "
                  "exception is an error with its name, value and traceback, and the state lives on; a call "
                  "the SDK stops waiting for (timeoutMs) takes the interpreter with it and the next call says "
                  "so; envs apply to their code only; other languages are refused naming what is not served; "
                  "the session holds the sandbox's claim (a command waits, then is refused naming it); a killed "
                  "sandbox is not found");
  if (!code_sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "code.mjs", "code", fx->key);

  o = execution_of (report, "first");
  out = joined (o, "stdout");
  g_assert_cmpstr (out, ==, "set\n");
  g_assert_null (execution_error (o));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "results")), ==, 0);

  o = execution_of (report, "state");
  g_assert_cmpstr (json_object_get_string_member (o, "text"), ==, "42");
  first = json_array_get_object_element (json_object_get_array_member (o, "results"), 0);
  g_assert_true (json_object_get_boolean_member (first, "isMainResult"));
  g_assert_null (execution_error (o));

  o = execution_of (report, "streamed");
  execution = member_object (o, "execution");
  g_clear_pointer (&out, g_free);
  out = joined (execution, "stdout");
  err = joined (execution, "stderr");
  g_assert_cmpstr (out, ==, "one\ntwo\n");
  g_assert_cmpstr (err, ==, "err\n");
  lines = json_object_get_array_member (o, "lines");
  g_assert_cmpuint (json_array_get_length (lines), >=, 3);
  first = json_array_get_object_element (lines, 0);
  /* print() may write "one" and its newline apart. */
  g_assert_true (g_str_has_prefix (json_object_get_string_member (first, "line"), "one"));
  g_assert_false (json_object_get_boolean_member (first, "error"));
  /* "one" came while the code still slept its 2 s. */
  g_assert_cmpint (json_object_get_int_member (first, "at") + 1000, <, json_object_get_int_member (o, "ended"));
  g_assert_true (json_object_get_boolean_member (
    json_array_get_object_element (lines, json_array_get_length (lines) - 1), "error"));

  e = execution_error (execution_of (report, "raised"));
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "ZeroDivisionError");
  g_assert_cmpstr (json_object_get_string_member (e, "value"), ==, "division by zero");
  sandstep_test_assert_contains (json_object_get_string_member (e, "traceback"), "return 1 / 0");
  sandstep_test_assert_contains (json_object_get_string_member (e, "traceback"), "ZeroDivisionError: division by zero");
  g_assert_cmpstr (json_object_get_string_member (execution_of (report, "after"), "text"), ==, "40");
  e = execution_error (execution_of (report, "syntax"));
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "SyntaxError");
  sandstep_test_assert_contains (json_object_get_string_member (e, "traceback"), "y = (");

  o = execution_of (report, "died");
  g_clear_pointer (&out, g_free);
  out = joined (o, "stdout");
  g_assert_cmpstr (out, ==, "bye\n");
  e = execution_error (o);
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "InterpreterDied");
  sandstep_test_assert_contains (json_object_get_string_member (e, "value"), "exit status 3");
  o = execution_of (report, "afterDeath");
  g_clear_pointer (&err, g_free);
  err = joined (o, "stderr");
  sandstep_test_assert_contains (err, "the last one died");
  g_assert_cmpstr (json_object_get_string_member (o, "text"), ==, "40");

  assert_threw (report, "language", "SandboxError", "Language 'js' is not served");
  g_assert_cmpstr (json_object_get_string_member (execution_of (report, "envs"), "text"), ==, "'b|/elsewhere'");
  o = execution_of (report, "envsAfter");
  g_assert_true (g_str_has_prefix (json_object_get_string_member (o, "text"), "'None|"));
  g_assert_null (strstr (json_object_get_string_member (o, "text"), "/elsewhere"));
  assert_threw (report, "envsBadName", "SandboxError", "'A=B' is no environment variable's name");
  /* With the key too, the one context is given (its token's calls are /e2b/code/contexts'). */
  o = member_object (report, "contexts");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 200);
  g_assert_cmpstr (json_object_get_string_member (member_object (o, "body"), "id"), ==, "default");
  /* A command beside the session, which keeps its state. */
  g_assert_cmpstr (json_object_get_string_member (report, "beside"), ==, "free\n");
  g_assert_cmpstr (json_object_get_string_member (execution_of (report, "besideKept"), "text"), ==, "'free40'");

  assert_threw (report, "timeout", "TimeoutError", "Execution timed out");
  o = execution_of (report, "afterTimeout");
  g_clear_pointer (&err, g_free);
  err = joined (o, "stderr");
  sandstep_test_assert_contains (err, "new Python interpreter");
  e = execution_error (o);
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "NameError");
  g_assert_cmpstr (json_object_get_string_member (execution_of (report, "fresh"), "text"), ==, "1");
  g_assert_true (json_object_get_boolean_member (report, "killed"));
  assert_threw (report, "afterKill", "NotFoundError", "not found");
}

static void
test_code_idle (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *o, *e;

  g_test_summary ("a make step hands its sandbox to agent code that runs Python in it (runCode, key scoped to "
                  "owner=DAG/): the code reads the step's file and writes one; a call longer than the session's "
                  "idle time keeps it (idle counts from a call's end); once no code ran for the idle time, the "
                  "claim is given back: a command runs, the next runCode says its interpreter is "
                  "new, and the DAG's next step reads what the code wrote");
  if (!code_sdk_ready ())
    return;
  sandstep_test_fixture_setenv (&fx->f, "SANDSTEP_TEST_E2B_CODE_IDLE_S", "4");
  server_start (fx);
  handle = sandstep_test_provision (&fx->f, NULL);
  g_free (sandstep_test_run_ok (&fx->f, handle, "echo from make > /workspace/from-make.txt"));
  sandstep_test_fixture_setenv (&fx->f, "E2B_HANDLE", handle);
  report = run_script (fx, "code.mjs", "idle", fx->key_dag);
  g_assert_null (execution_error (execution_of (report, "wrote")));
  /* A call of 6 s, then 3 s without one: within the idle time of 4 s counted from the call's end. */
  g_assert_null (execution_error (execution_of (report, "long")));
  o = execution_of (report, "kept");
  g_assert_cmpstr (json_object_get_string_member (o, "text"), ==, "2");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "stderr")), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (report, "command"), ==, "from make\n");
  o = execution_of (report, "afterIdle");
  err = joined (o, "stderr");
  sandstep_test_assert_contains (err, "no code ran for 4 s");
  e = execution_error (o);
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "NameError");
  /* The DAG's next step claims the sandbox the agent left. */
  out = sandstep_test_run_ok (&fx->f, handle, "cat /workspace/from-code.txt");
  g_assert_cmpstr (out, ==, "from make\n");
}

static void
test_code_readme (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;

  g_test_summary ("the code interpreter SDK's README example (Sandbox.create() with no template, x = 1, then "
                  "x+=1; x gives '2') through sandstepd: the SDK's default template code-interpreter-v1 is the "
                  "host-root sandbox, and getInfo names it as asked");
  if (!code_sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "code.mjs", "readme", fx->key);
  g_assert_cmpstr (json_object_get_string_member_with_default (report, "templateId", ""), ==, "code-interpreter-v1");
  g_assert_cmpstr (json_object_get_string_member (report, "text"), ==, "2");
}

/* Asserts that the raw request @name of code.mjs's report was answered @status, its body containing @text. */
static void
assert_raw (JsonObject *report, const char *name, gint64 status, const char *text)
{
  JsonObject *o = member_object (report, name);

  g_test_message ("%s: %" G_GINT64_FORMAT " %s", name, json_object_get_int_member_with_default (o, "status", 0),
                  json_object_get_string_member_with_default (o, "body", ""));
  g_assert_cmpint (json_object_get_int_member_with_default (o, "status", 0), ==, status);
  sandstep_test_assert_contains (json_object_get_string_member_with_default (o, "body", ""), text);
}

static void
test_code_contexts (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *err = NULL;
  JsonObject *o, *e;
  JsonArray *all;

  g_test_summary ("the code interpreter SDK's contexts calls, which carry no key but the sandbox's "
                  "trafficAccessToken from create: listCodeContexts and createCodeContext({language: 'python'}) "
                  "give the one context 'default' (the Python session), runCode in it keeps its state, "
                  "restartCodeContext gives the sandbox back and a new interpreter, Sandbox.connect hands out the same token, a second context (another "
                  "language, cwd or id) and removing 'default' are refused naming why; the token is per sandbox "
                  "and opens only its code routes: as an API key, an access token, on envd, as sandstepd's "
                  "bearer, for another sandbox, altered, or after the sandbox's kill it is refused");
  if (!code_sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "code.mjs", "contexts", fx->key);
  g_assert_true (json_object_get_boolean_member (report, "token"));
  g_assert_true (json_object_get_boolean_member (report, "otherToken"));
  g_assert_true (json_object_get_boolean_member (report, "notKey"));

  all = json_object_get_array_member (report, "list");
  g_assert_cmpuint (json_array_get_length (all), ==, 1);
  o = json_array_get_object_element (all, 0);
  g_assert_cmpstr (json_object_get_string_member (o, "id"), ==, "default");
  g_assert_cmpstr (json_object_get_string_member (o, "language"), ==, "python");
  o = member_object (report, "create");
  g_assert_cmpstr (json_object_get_string_member_with_default (o, "id", ""), ==, "default");
  assert_threw (report, "createJs", "SandboxError", "language 'js' is not served");
  assert_threw (report, "createCwd", "SandboxError", "A second code context");
  g_assert_null (execution_error (execution_of (report, "set")));
  g_assert_cmpstr (json_object_get_string_member (execution_of (report, "kept"), "text"), ==, "5");
  assert_threw (report, "otherContext", "SandboxError", "Code context 'nope' is not served");

  g_assert_true (json_object_get_boolean_member (report, "restart"));
  g_assert_cmpstr (json_object_get_string_member (report, "freed"), ==, "free\n");
  o = execution_of (report, "afterRestart");
  e = execution_error (o);
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "NameError");
  /* A restart asked for is no news on the next call's stderr. */
  err = joined (o, "stderr");
  g_assert_cmpstr (err, ==, "");
  o = member_object (report, "connected");
  g_assert_true (json_object_get_boolean_member (o, "same"));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "contexts")), ==, 1);
  assert_threw (report, "remove", "SandboxError", "is not removed");
  assert_threw (report, "restartOther", "NotFoundError", "not served");

  assert_raw (report, "asApiKey", 401, "wrong E2B API key");
  assert_raw (report, "killWithIt", 401, "wrong E2B API key");
  assert_raw (report, "asAccessToken", 401, "wrong E2B API key");
  assert_raw (report, "onEnvd", 401, "no E2B API key");
  assert_raw (report, "asBearer", 401, "unauthorized");
  assert_raw (report, "otherSandbox", 401, "not the sandbox's");
  assert_raw (report, "otherOwn", 200, "\"default\"");
  assert_raw (report, "forged", 401, "not the sandbox's");
  assert_raw (report, "executeWithIt", 401, "not the sandbox's");
  assert_raw (report, "afterKill", 404, "not found");
}

/* Asserts that case @name of wire.mjs's report ended its stream (HTTP 200) with Connect's @code and @text. */
static void
assert_stream_error (JsonObject *report, const char *name, const char *code, const char *text)
{
  JsonObject *o = member_object (report, name);

  g_test_message ("%s: %s", name, json_object_get_string_member_with_default (o, "message", ""));
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 200);
  g_assert_cmpint (json_object_get_int_member_with_default (o, "endFlags", 0), ==, 2);
  g_assert_cmpstr (json_object_get_string_member_with_default (o, "code", ""), ==, code);
  sandstep_test_assert_contains (json_object_get_string_member_with_default (o, "message", ""), text);
}

static void
test_wire (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  JsonObject *o;

  g_test_summary ("process.Process/Start refuses what the SDK never sends, each with Connect's code and what "
                  "to do: a body shorter than an envelope, an envelope whose length lies or that is followed by "
                  "another, compressed, not JSON, no cmd, a bad environment name, the unary type, no or "
                  "a bad sandbox, another owner's sandbox (not found), no key (401), a body over 1 MiB (413)");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "wire.mjs", "", fx->key);
  assert_stream_error (report, "short", "invalid_argument", "shorter than Connect's 5-byte envelope");
  assert_stream_error (report, "lengthLies", "invalid_argument", "says '100000' bytes");
  assert_stream_error (report, "compressed", "invalid_argument", "no compressed");
  assert_stream_error (report, "twoMessages", "invalid_argument", "send one message");
  assert_stream_error (report, "notJson", "invalid_argument", "JSON");
  assert_stream_error (report, "noCmd", "invalid_argument", "no 'cmd'");
  assert_stream_error (report, "badEnvName", "invalid_argument", "'A=B' cannot be set");
  /* stdin: true is served: the command reads a pipe (test_stdin); /bin/true ends at once. */
  o = member_object (report, "stdin");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 200);
  g_assert_cmpint (json_object_get_int_member (o, "endFlags"), ==, 2);
  g_assert_false (json_object_has_member (o, "code"));
  assert_stream_error (report, "unaryType", "invalid_argument", "application/connect+json, not 'application/json'");
  assert_stream_error (report, "noSandbox", "not_found", "E2b-Sandbox-Id");
  assert_stream_error (report, "badSandbox", "not_found", "'../../etc' not found");
  assert_stream_error (report, "otherOwner", "not_found", "another owner's");
  o = member_object (report, "noKey");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 401);
  o = member_object (report, "tooLarge");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 413);
  /* The same request, well formed, runs: the refusals above are the request's, not the server's. */
  o = member_object (report, "fine");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 200);
  g_assert_cmpint (json_object_get_int_member (o, "endFlags"), ==, 2);
  g_assert_false (json_object_has_member (o, "code"));
}

/* Asserts that case @name of unary.mjs's report answered HTTP @status with E2B's @code (NULL: any) and @text. */
static void
assert_unary (JsonObject *report, const char *name, gint64 status, const char *code, const char *text)
{
  JsonObject *o = member_object (report, name);

  g_test_message ("%s: %s", name, json_object_get_string_member_with_default (o, "message", ""));
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, status);
  if (code != NULL)
    g_assert_cmpstr (json_object_get_string_member_with_default (o, "code", ""), ==, code);
  sandstep_test_assert_contains (json_object_get_string_member_with_default (o, "message", ""), text);
}

static void
test_unary (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  JsonObject *o;

  g_test_summary ("setTimeout, create's metadata, list's filter and envd's Move, MakeDir, Remove, List and "
                  "SendSignal refuse what the SDK never sends, each in E2B's shape with what to do: a timeout "
                  "not a whole positive number of seconds or over ten years, no body, a malformed sandbox; "
                  "metadata not string to string; a filter that does not decode (matches nothing); no source "
                  "or destination, a wrong type, no path, another owner's key, no process, a pid not a number, "
                  "no sandbox; the sandbox's end and workspace stay as they were");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "unary.mjs", "", fx->key);
  assert_unary (report, "timeoutString", 400, NULL, "no whole number 'timeout'");
  assert_unary (report, "timeoutFraction", 400, NULL, "no whole number 'timeout'");
  assert_unary (report, "timeoutNegative", 400, NULL, "lifetime '-5' is not a number of seconds above 0");
  assert_unary (report, "timeoutHuge", 400, NULL, "at most ten years");
  assert_unary (report, "timeoutNotJson", 400, NULL, "send {\"timeout\": SECONDS}");
  assert_unary (report, "timeoutNone", 400, NULL, "no whole number 'timeout'");
  assert_unary (report, "timeoutBadId", 404, NULL, "sandstep's sandbox IDs look like");
  g_assert_cmpint (json_object_get_int_member (report, "endAfter"), >=, 100);
  assert_unary (report, "metadataArray", 400, NULL, "metadata is not an object");
  assert_unary (report, "metadataNested", 400, NULL, "The value of metadata 'a' is not a string");
  o = member_object (report, "filterGarbage");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 200);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "body")), ==, 0);
  assert_unary (report, "moveNoDest", 400, "invalid_argument", "no 'destination'");
  assert_unary (report, "moveNoSource", 400, "invalid_argument", "no 'source'");
  assert_unary (report, "makeDirType", 400, "invalid_argument", "take application/json");
  assert_unary (report, "makeDirNoPath", 400, "invalid_argument", "no 'path'");
  assert_unary (report, "removeOther", 404, "not_found", "another owner's");
  assert_unary (report, "listType", 400, "invalid_argument", "take application/json");
  assert_unary (report, "listNotJson", 400, "invalid_argument", "");
  assert_unary (report, "signalNoProcess", 400, "invalid_argument", "no 'process'");
  assert_unary (report, "signalStringPid", 404, "not_found", "No command with that pid");
  assert_unary (report, "signalNoSandbox", 404, "not_found", "E2b-Sandbox-Id");
  g_assert_true (json_object_get_boolean_member (report, "workspaceKept"));
}

static void
test_stdin (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  JsonObject *o;

  g_test_summary ("A command's stdin and reconnecting to a command through the SDK: run({background: true, "
                  "stdin: true}) reads what sendStdin sends (a string, then bytes) until closeStdin; "
                  "commands.connect(pid) streams what the command writes from then on and its exit code (not "
                  "what it wrote before), and a command killed while connected ends the connected handle as "
                  "killed; sendStdin to a command without stdin, and sendStdin or connect to a pid that runs "
                  "no command, fail saying so, and another owner's key feeds nothing; the sandbox is free after");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_sdk (fx, "stdin", fx->key);
  o = member_object (report, "fed");
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "got hello\nmore\ndone\n");
  g_assert_cmpint (json_object_get_int_member (o, "exitCode"), ==, 0);
  o = member_object (report, "connected");
  g_assert_true (json_object_get_boolean_member (o, "pid"));
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "two-y\n");
  g_assert_cmpstr (json_object_get_string_member (o, "streamed"), ==, "two-y\n");
  g_assert_cmpint (json_object_get_int_member (o, "exitCode"), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (o, "ownStdout"), ==, "one\ntwo-y\n");
  o = member_object (report, "connectedKilled");
  g_assert_cmpstr (json_object_get_string_member (o, "threw"), ==, "CommandExitError");
  g_assert_cmpint (json_object_get_int_member (o, "exitCode"), ==, 128 + SIGKILL);
  g_assert_cmpstr (json_object_get_string_member (o, "error"), ==, "signal: killed");
  assert_threw (report, "noStdin", "SandboxError", "has no stdin to write");
  assert_threw (report, "inputGone", "NotFoundError", "No command with that pid runs");
  assert_threw (report, "connectGone", "NotFoundError", "No command with that pid runs");
  o = member_object (report, "otherInput");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 404);
  g_assert_cmpstr (json_object_get_string_member (o, "code"), ==, "not_found");
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "");
  g_assert_cmpstr (json_object_get_string_member (report, "after"), ==, "free\n");
}

static void
test_snapshots (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  const char *id, *snap;
  JsonObject *o;

  g_test_summary ("E2B's snapshots through the SDK, as sandstep forks: createSnapshot() keeps the sandbox's files "
                  "as they are; Sandbox.create(snapshotId) makes a sandbox of them (its templateId the snapshot, "
                  "its lifetime create's timeout), which changes alone, as the sandbox does; listSnapshots (of "
                  "the sandbox, and all) lists it and list() does not; deleteSnapshot deletes it once; a sandbox "
                  "or a deleted snapshot is no template; a snapshot outlives its sandbox's kill; another owner's key "
                  "neither lists, makes, uses nor deletes one");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_sdk (fx, "snapshots", fx->key);
  id = json_object_get_string_member (report, "sandboxId");
  snap = json_object_get_string_member (report, "snapshot");
  g_assert_true (g_str_has_prefix (snap, "sandstep-"));
  g_assert_cmpstr (snap, !=, id);
  o = member_object (report, "fromSnapshot");
  g_assert_cmpstr (json_object_get_string_member (o, "read"), ==, "step 1");
  g_assert_cmpstr (json_object_get_string_member (o, "run"), ==, "step 1");
  g_assert_cmpstr (json_object_get_string_member (o, "templateId"), ==, snap);
  g_assert_cmpint (json_object_get_int_member (o, "lifetimeS"), >=, 55);
  g_assert_cmpint (json_object_get_int_member (o, "lifetimeS"), <=, 61);
  g_assert_cmpstr (json_object_get_string_member (report, "sandboxAfter"), ==, "step 2");
  g_assert_cmpstr (json_object_get_string_member (report, "snapshotAfter"), ==, "step 1");
  g_assert_true (array_has (report, "listed", snap));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "listed")), ==, 1);
  g_assert_true (array_has (report, "listedAll", snap));
  g_assert_true (array_has (report, "sandboxes", id));
  g_assert_false (array_has (report, "sandboxes", snap));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "otherListed")), ==, 0);
  assert_threw (report, "otherSnapshot", "SandboxNotFoundError", id);
  assert_threw (report, "otherCreate", "SandboxError", "is not a snapshot sandstepd has for this key");
  g_assert_false (json_object_get_boolean_member (report, "otherDelete"));
  assert_threw (report, "fromSandbox", "SandboxError", "is not a snapshot sandstepd has for this key");
  g_assert_false (json_object_get_boolean_member (report, "deleteSandbox"));
  g_assert_true (json_object_get_boolean_member (report, "deleted"));
  g_assert_false (json_object_get_boolean_member (report, "deletedAgain"));
  assert_threw (report, "fromDeleted", "SandboxError", "is not a snapshot sandstepd has for this key");
  assert_threw (report, "snapshotGone", "SandboxNotFoundError", "sandstep-00000000000000ff");
  g_assert_true (json_object_get_boolean_member (report, "killed"));
  g_assert_cmpstr (json_object_get_string_member (report, "afterKill"), ==, "step 2");
  /* Deleted means gone from the state directory, with its record. */
  {
    g_autofree char *sandboxes = g_build_filename (fx->f.state_dir, "sandboxes", NULL);
    g_autofree char *names = sandstep_test_dir_names (sandboxes);
    g_autofree char *meta_name = g_strconcat (snap, ".json", NULL);
    g_autofree char *meta = g_build_filename (fx->f.state_dir, "e2b", meta_name, NULL);
    sandstep_test_assert_not_contains (names, snap);
    g_assert_false (g_file_test (meta, G_FILE_TEST_EXISTS));
  }
}

/* Asserts that the watch events @name (an array of "type:name") hold @event. */
static void
assert_event (JsonObject *report, const char *name, const char *event)
{
  if (!array_has (report, name, event))
    g_error ("the watch '%s' got no '%s'", name, event);
}

static void
test_template (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *image = NULL;
  JsonObject *o;

  g_test_summary ("Sandbox.create(template) with a template other than base: an image's docker:// reference, "
                  "pulled from a loopback registry by sandstepd, and a name sandstepd was started with "
                  "(--e2b-template=NAME=REF) make sandboxes whose root is the image (its /marker, no host /usr), "
                  "whose /workspace files.watchDir watches; "
                  "getInfo and list name the template; a name that is neither is refused naming the configured "
                  "ones, a file's reference (oci:) is refused, and an image the registry lacks is not found");
  if (!sdk_ready ())
    return;
  /* busybox has no bash, so the image's /bin/bash hands the SDK's commands to its sh. */
  fx->registry_pid = sandstep_test_busybox_in_registry (fx->f.host_dir, "e2b/busybox:1", TRUE, &image);
  fx->extra_args[0] = g_strdup_printf ("--e2b-template=box=%s", image);
  server_start (fx);
  fx->f.envp = g_environ_setenv (fx->f.envp, "E2B_TEST_IMAGE", image, TRUE);
  report = run_sdk (fx, "template", fx->key);
  o = member_object (report, "byReference");
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "from the image\nno-host-usr\n");
  g_assert_cmpstr (json_object_get_string_member (o, "templateId"), ==, image);
  g_assert_true (json_object_get_boolean_member (o, "listed"));
  o = member_object (report, "byName");
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "from the image\nno-host-usr\n");
  g_assert_cmpstr (json_object_get_string_member (o, "templateId"), ==, "box");
  g_assert_cmpstr (json_object_get_string_member (o, "connectedTemplate"), ==, "box");
  assert_event (o, "watched", "create:seen.txt");
  o = member_object (report, "base");
  g_assert_cmpstr (json_object_get_string_member (o, "templateId"), ==, "base");
  g_assert_cmpstr (json_object_get_string_member (o, "stdout"), ==, "host-usr\n");
  assert_threw (report, "unknown", "SandboxError", "400: Template 'no-such-template' is not served by sandstepd");
  assert_threw (report, "unknown", "SandboxError", "here: 'box'");
  assert_threw (report, "file", "SandboxError", "names a file");
  assert_threw (report, "missing", "SandboxError", "404: ");
}

/* Asserts that the connection of contract case @name was closed as its answer said, or took a second request. */
static void
assert_connection_kept_or_closed (JsonObject *contract, const char *name)
{
  JsonObject *o = member_object (contract, name);
  const char *connection = json_object_get_string_member_with_default (o, "connection", NULL);

  g_test_message ("%s: Connection '%s', %s", name, connection != NULL ? connection : "(none)",
                  json_object_has_member (o, "second") ? "second request sent" : "closed as said");
  g_assert_cmpint (json_object_get_int_member (o, "status"), ==, 200);
  if (g_strcmp0 (connection, "close") == 0)
    g_assert_true (json_object_get_boolean_member (o, "closed"));
  else
    /* It said nothing (keep-alive): then it must answer the next request, not close under it. */
    g_assert_cmpint (json_object_get_int_member_with_default (o, "second", 0), ==, 200);
}

static void
test_connections (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  JsonObject *contract;
  JsonArray *waited;

  g_test_summary ("Every answer the SDK meets (the platform API's, envd's unary JSON, a command's stream that "
                  "ends, a kill, a killed command's stream) either says 'Connection: close' and closes, or "
                  "answers a second request on the same connection: sandstepd closes each connection after its "
                  "answer, and a close it did not announce lost the client's next call when sent as the close "
                  "came ('fetch failed' right after commands.kill, docs/e2b.md); then rounds of the SDK killing "
                  "a background command and at once listing, stat-ing, getting info and running all succeed");
  if (!sdk_ready ())
    return;
  server_start (fx);
  report = run_script (fx, "killed.mjs", "", fx->key);
  contract = member_object (report, "contract");
  assert_connection_kept_or_closed (contract, "platform");
  assert_connection_kept_or_closed (contract, "unary");
  assert_connection_kept_or_closed (contract, "stream");
  assert_connection_kept_or_closed (contract, "kill");
  assert_connection_kept_or_closed (contract, "killedStream");
  g_assert_true (json_object_get_boolean_member (member_object (contract, "killedStream"), "killed"));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "failures")), ==, 0);
  waited = json_object_get_array_member (report, "waited");
  g_assert_cmpuint (json_array_get_length (waited), ==, json_object_get_int_member (report, "rounds"));
  for (guint i = 0; i < json_array_get_length (waited); i++)
    g_assert_cmpint (json_array_get_int_element (waited, i), ==, 128 + SIGKILL);
}

static void
test_watch (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  g_autofree char *pid = NULL;
  const char *other;
  JsonNode *node;

  g_test_summary ("files.watchDir: events of a file made, written, renamed, chmodded and removed by commands while "
                  "commands and files.read go on (a watch holds no claim); recursive sees subdirectories, made "
                  "ones too, and a flat watch does not; stop() ends it; a path outside /workspace and /tmp, or a "
                  "link to one, is refused, and another owner's key watches nothing; the directory's removal ends "
                  "its watch, and so does a recursive watch past 1000 directories (refused at its start past "
                  "them); kill ends the rest; a snapshot "
                  "ends a watch of its sandbox (its files become a layer); "
                  "the daemon holds one inotify instance for all its watches");
  if (!sdk_ready ())
    return;
  server_start (fx);
  pid = g_strdup_printf ("%d", fx->daemon.pid);
  sandstep_test_fixture_setenv (&fx->f, "E2B_SANDSTEPD_PID", pid);
  report = run_script (fx, "watch.mjs", "watch", fx->key);

  for (guint i = 1; i <= 5; i++)
    {
      g_autofree char *name = g_strdup_printf ("run%u", i);
      g_assert_cmpstr (json_object_get_string_member_with_default (report, name, ""), ==, "ok\n");
    }
  g_assert_cmpstr (json_object_get_string_member_with_default (report, "read", ""), ==, "one\ntwo\n");
  assert_event (report, "flat", "create:a.txt");
  assert_event (report, "flat", "write:a.txt");
  assert_event (report, "flat", "rename:a.txt");
  assert_event (report, "flat", "create:b.txt");
  assert_event (report, "flat", "chmod:b.txt");
  assert_event (report, "flat", "remove:b.txt");
  assert_event (report, "flat", "create:new");
  g_assert_false (array_has (report, "flat", "create:sub/deep.txt"));
  g_assert_false (array_has (report, "flat", "create:new/in-new.txt"));
  assert_event (report, "deep", "create:a.txt");
  assert_event (report, "deep", "remove:b.txt");
  assert_event (report, "deep", "create:sub/deep.txt");
  assert_event (report, "deep", "create:new/in-new.txt");
  assert_event (report, "tmp", "create:x");
  g_assert_false (array_has (report, "tmp", "create:a.txt"));
  /* stop(): onExit, and no event after it. */
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (report, "flatAfterStop")), ==, 0);
  g_assert_cmpstr (json_object_get_string_member_with_default (report, "flatExit", "(none)"), !=, "(none)");
  g_assert_true (json_object_get_boolean_member (report, "deepSawLate"));
  assert_threw (report, "outside", "InvalidArgumentError", "only /workspace and /tmp");
  assert_threw (report, "viaLink", "FileNotFoundError", "/workspace/etc-link");
  assert_threw (report, "viaRootLink", "InvalidArgumentError", "leads outside the sandbox's files");
  assert_threw (report, "missing", "FileNotFoundError", "/workspace/no-such-dir");
  sandstep_test_assert_contains (json_object_get_string_member_with_default (report, "snapshotExit", ""),
                                 "moved into a layer");
  other = json_object_get_string_member_with_default (report, "other", "");
  sandstep_test_assert_contains (other, "not_found");
  g_assert_null (strstr (other, "\"start\""));
  sandstep_test_assert_contains (json_object_get_string_member_with_default (report, "goneExit", ""),
                                 "'/workspace/gone' is gone");
  assert_threw (report, "tooMany", "SandboxError", "takes more than 1000 directories");
  sandstep_test_assert_contains (json_object_get_string_member_with_default (report, "grewExit", ""),
                                 "[resource_exhausted] Watching '/workspace/grow' takes more than 1000 directories");
  g_assert_cmpstr (json_object_get_string_member_with_default (report, "afterGrew", ""), ==, "ok\n");
  /* kill: the kill's own end, or the directory's removal if its event came first. */
  for (guint i = 0; i < 2; i++)
    {
      const char *exit = json_object_get_string_member_with_default (report, i == 0 ? "deepExit" : "tmpExit", "");

      sandstep_test_assert_contains (exit, "[not_found]");
      if (strstr (exit, "was killed") == NULL && strstr (exit, "is gone") == NULL &&
          strstr (exit, "or the sandbox ended") == NULL)
        g_error ("the watch ended at the kill saying '%s'", exit);
    }
  /* One inotify instance for three watches (none before the first): issue 33, counted per user host-wide. */
  node = json_object_get_member (report, "inotifyWatching");
  if (JSON_NODE_HOLDS_NULL (node))
    g_test_message ("sandstepd's fds could not be read: its inotify instances were not counted");
  else
    {
      g_assert_cmpint (json_object_get_int_member (report, "inotifyBefore"), ==, 0);
      g_assert_cmpint (json_node_get_int (node), ==, 1);
    }
}

static void
test_watch_layered (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonObject) report = NULL;
  const char *exit;

  g_test_summary ("files.watchDir of sandboxes whose files are layers (a snapshot's sandbox, and the sandbox "
                  "snapshotted), through their jail's overlay: a command's create, write, rename, chmod and "
                  "remove, a file removed from a lower layer, a subdirectory made, and files.write, are events; "
                  "the watch keeps the jail past its idle time and sees a later command's file; once it stops, the "
                  "jail ends idle; each sandbox's watch sees its own files only; a snapshot of a watched sandbox, "
                  "and a kill, end the watch saying so");
  if (!sdk_ready ())
    return;
  sandstep_test_fixture_setenv (&fx->f, "SANDSTEP_TEST_SUPERVISOR_IDLE_S", "2");
  sandstep_test_fixture_setenv (&fx->f, "E2B_STATE_DIR", fx->f.state_dir);
  server_start (fx);
  report = run_script (fx, "watch.mjs", "layered", fx->key);

  g_assert_cmpstr (json_object_get_string_member_with_default (report, "run1", ""), ==, "ok\n");
  g_assert_true (json_object_get_boolean_member (report, "write"));
  assert_event (report, "deep", "create:a.txt");
  assert_event (report, "deep", "write:a.txt");
  assert_event (report, "deep", "rename:a.txt");
  assert_event (report, "deep", "create:b.txt");
  assert_event (report, "deep", "chmod:b.txt");
  assert_event (report, "deep", "remove:b.txt");
  assert_event (report, "deep", "remove:base.txt");
  assert_event (report, "deep", "create:sub/deep.txt");
  assert_event (report, "deep", "create:new");
  assert_event (report, "deep", "create:new/in-new.txt");
  assert_event (report, "deep", "create:by-files.txt");
  /* Kept past the idle time. */
  g_assert_true (JSON_NODE_HOLDS_NULL (json_object_get_member (report, "exitAfterIdle")));
  g_assert_true (json_object_get_boolean_member (report, "jailAfterIdle"));
  g_assert_cmpstr (json_object_get_string_member_with_default (report, "late", ""), ==, "ok\n");
  g_assert_true (json_object_get_boolean_member (report, "deepSawLate"));
  g_assert_false (json_object_get_boolean_member (report, "jailAfterStop"));
  assert_event (report, "own", "create:mine.txt");
  g_assert_false (array_has (report, "own", "create:a.txt"));
  g_assert_false (array_has (report, "own", "create:late.txt"));
  g_assert_cmpstr (json_object_get_string_member_with_default (report, "snapshot2", ""), !=, "");
  exit = json_object_get_string_member_with_default (report, "ownExit", "");
  sandstep_test_assert_contains (exit, "[not_found]");
  sandstep_test_assert_contains (exit, "moved into a layer");
  exit = json_object_get_string_member_with_default (report, "killExit", "");
  sandstep_test_assert_contains (exit, "[not_found]");
  if (strstr (exit, "was killed") == NULL && strstr (exit, "ended") == NULL)
    g_error ("the watch ended at the kill saying '%s'", exit);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("/e2b/sdk/lifecycle", test_lifecycle);
  ADD ("/e2b/sdk/scoped", test_scoped);
  ADD ("/e2b/sdk/commands", test_commands);
  ADD ("/e2b/sdk/https", test_https);
  ADD ("/e2b/sdk/background", test_background);
  ADD ("/e2b/sdk/detached", test_detached);
  ADD ("/e2b/sdk/urls", test_urls);
  ADD ("/e2b/sdk/files", test_files);
  ADD ("/e2b/sdk/handed", test_handed);
  ADD ("/e2b/code/run", test_code);
  ADD ("/e2b/code/idle", test_code_idle);
  ADD ("/e2b/code/readme", test_code_readme);
  ADD ("/e2b/code/contexts", test_code_contexts);
  ADD ("/e2b/sdk/template", test_template);
  ADD ("/e2b/sdk/stdin", test_stdin);
  ADD ("/e2b/sdk/snapshots", test_snapshots);
  ADD ("/e2b/sdk/watch", test_watch);
  ADD ("/e2b/sdk/watch-layered", test_watch_layered);
  ADD ("/e2b/wire/start", test_wire);
  ADD ("/e2b/wire/unary", test_unary);
  ADD ("/e2b/wire/connections", test_connections);
  return g_test_run ();
}
