/* test-tool-endings.c: what a model reads when a command dies, in a real sandbox.
 *
 * Every row makes a command end by a limit, a signal, its budget or a
 * refused connection, and checks the exact text the model reads twice:
 * from the toolbox in this process (as the agent loop and MCP serve it)
 * and from `sandstep call run_command`.  Then `sandstep run`'s line for a
 * signal, each row of the recovery-hint table, and the egress reasons in
 * the model's words.  test-tool-endings-remote runs it all again through a
 * sandstepd, whose refusals come back with the command's result.
 */
#include <glib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-egress.h"
#include "sandstep-ending.h"
#include "sandstep-error.h"
#include "sandstep-test-utils.h"
#include "sandstep-tools.h"

typedef struct {
  SandstepTestFixture f;
} Fixture;

static void
setup (Fixture *fx, gconstpointer data)
{
  sandstep_test_setup (&fx->f, data);
}

static void
teardown (Fixture *fx, gconstpointer data)
{
  sandstep_test_teardown (&fx->f, data);
}

/* A sandbox provisioned with @args under its own holder, so sandboxes of
 * different specs can stand side by side. */
static char *
provision_as (Fixture *fx, const char *holder, const char *const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(SandstepTestResult) r = NULL;

  g_ptr_array_add (argv, g_strdup ("provision"));
  g_ptr_array_add (argv, g_strconcat ("--holder=", holder, NULL));
  for (; args != NULL && *args != NULL; args++)
    g_ptr_array_add (argv, g_strdup (*args));
  g_ptr_array_add (argv, NULL);
  r = sandstep_test_helper_argv (&fx->f, (const char *const *) argv->pdata, 60);
  sandstep_test_assert_status (r, 0);
  g_strchomp (r->out);
  g_ptr_array_add (fx->f.handles, g_strdup (r->out));
  return g_strdup (r->out);
}

/* @tool with @json through `sandstep call`; its stdout less the final newline. */
static char *
cli_call (Fixture *fx, const char *handle, const char *holder, const char *tool, const char *json)
{
  g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
  g_autofree char *holder_arg = g_strconcat ("--holder=", holder, NULL);
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (&fx->f, "call", handle_arg, holder_arg, tool, json, NULL);

  sandstep_test_assert_status (r, 0);
  g_assert_true (g_str_has_suffix (r->out, "\n"));
  r->out[strlen (r->out) - 1] = '\0';
  return g_strdup (r->out);
}

/* run_command @json through the toolbox, attached as @holder; asserts success. */
static char *
toolbox_call (Fixture *fx, const char *handle, const char *holder, const char *tool, const char *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepBackend) backend = NULL;
  SandstepIdentity who = { fx->f.owner, holder };
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(SandstepToolbox) toolbox = NULL;
  g_autoptr(JsonNode) args = json_from_string (json, &error);
  gboolean is_error = TRUE;
  char *text;

  /* Through the sandstepd of with-sandstepd.sh (test-tool-endings-remote) the
   * toolbox is the helper's: this program cannot load the remote backend's
   * module, which needs the symbols the helper exports. */
  if (g_getenv ("SANDSTEP_BACKEND") != NULL)
    return cli_call (fx, handle, holder, tool, json);
  backend = sandstep_local_backend_new (fx->f.state_dir, &error);
  g_assert_no_error (error);
  attachment = sandstep_backend_attach (backend, handle, &who, 0, NULL, NULL, &error);
  g_assert_no_error (error);
  toolbox = sandstep_toolbox_new (attachment, NULL);
  text = sandstep_toolbox_call (toolbox, tool, json_node_get_object (args), &is_error, &error);
  g_assert_no_error (error);
  g_assert_false (is_error);
  return text;
}

typedef struct {
  const char *what;
  const char *provision[3];
  gboolean needs_cgroup;     /* the memory and process limits are a cgroup's */
  gboolean needs_curl;
  const char *arguments;
  const char *text;          /* exactly what the model reads */
} EndingRow;

static const EndingRow ending_rows[] = {
  { "segfault", { NULL }, FALSE, FALSE,
    "{\"command\": \"kill -SEGV $$\"}",
    "(no output)\n[exit code: 139]\n[killed by SIGSEGV]" },
  { "abort", { NULL }, FALSE, FALSE,
    "{\"command\": \"echo before; kill -ABRT $$\"}",
    "[stdout]\nbefore\n[exit code: 134]\n[killed by SIGABRT]" },
  { "memory", { "--memory=64M", NULL }, TRUE, FALSE,
    "{\"command\": \"dd if=/dev/zero of=/dev/null bs=256M count=1 2>/dev/null\"}",
    "(no output)\n[exit code: 137]\n[killed: the sandbox's memory limit (64M) was reached; use less memory]" },
  { "cpu-time", { "--cpu-time=1", NULL }, FALSE, FALSE,
    "{\"command\": \"while :; do :; done\"}",
    "(no output)\n[exit code: 152]\n[killed: the sandbox's CPU time limit (1s per process) was reached; do less "
    "work in one process]" },
  { "pids", { "--pids=16", NULL }, TRUE, FALSE,
    /* dash gives up with status 2 when it cannot fork. */
    "{\"command\": \"for i in $(seq 40); do sleep 2 & done 2>/dev/null; wait\"}",
    "(no output)\n[exit code: 2]\n[limit: the sandbox's process limit (16) was reached, so forks failed; run "
    "fewer processes at once]" },
  { "file-size", { "--disk=1M", NULL }, FALSE, FALSE,
    "{\"command\": \"head -c 2000000 /dev/zero > big\"}",
    /* The shell says so too, as it does for a child a signal ended. */
    "[stderr]\nFile size limit exceeded\n[exit code: 153]\n[killed: the sandbox's file size limit (1M) was reached; "
    "write smaller files]" },
  { "timeout", { NULL }, FALSE, FALSE,
    "{\"command\": \"sleep 10\", \"timeout_seconds\": 0.5}",
    "(no output)\n[timed out after 0.5s]" },
  { "egress-host", { "--allow=svc.test", NULL }, FALSE, TRUE,
    "{\"command\": \"curl -sf -o /dev/null https://example.org/ || exit 7\"}",
    "(no output)\n[exit code: 7]\n[network: refused example.org:443: not in the allowlist]" },
  { "egress-plain-http", { "--allow=svc.test", NULL }, FALSE, TRUE,
    "{\"command\": \"curl -sf -o /dev/null http://svc.test/ || exit 7\"}",
    "(no output)\n[exit code: 7]\n[network: refused http://svc.test/: plain HTTP is not allowed; use HTTPS]" },
  { "egress-port", { "--allow=svc.test", NULL }, FALSE, TRUE,
    "{\"command\": \"curl -sf -o /dev/null https://svc.test:8443/ || exit 7\"}",
    "(no output)\n[exit code: 7]\n[network: refused svc.test:8443: this host is allowed over HTTPS on port 443 "
    "only]" },
};

/* One row of ending_rows: its own case, so that a row this host cannot run is counted as a skip. */
static void
test_endings (Fixture *fx, gconstpointer data)
{
  const EndingRow *row = data;
  g_autofree char *holder = g_strdup_printf ("%s/%s", fx->f.owner, row->what);
  g_autofree char *handle = NULL;
  g_autofree char *in_process = NULL;
  g_autofree char *from_cli = NULL;

  g_test_summary ("A command ended by a signal, the memory, CPU-time or process limit, its budget or a refused "
                  "connection says so in one line after the exit code, the same from the toolbox and from "
                  "'sandstep call run_command'");
  if (row->needs_cgroup && sandstep_test_skip_without_cgroup ("the limit"))
    return;
  if (row->needs_curl && !g_file_test ("/usr/bin/curl", G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("curl is not installed (it runs inside the jail from the host's /usr)");
      return;
    }
  handle = provision_as (fx, holder, row->provision);
  in_process = toolbox_call (fx, handle, holder, "run_command", row->arguments);
  g_test_message ("%s: %s", row->what, in_process);
  g_assert_cmpstr (in_process, ==, row->text);
  from_cli = cli_call (fx, handle, holder, "run_command", row->arguments);
  g_assert_cmpstr (from_cli, ==, row->text);
}

static void
test_run_signal (Fixture *fx, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (&fx->f, NULL);
  g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
  g_autoptr(SandstepTestResult) segv = sandstep_test_helper (&fx->f, "run", h, "--", "kill -SEGV $$", NULL);
  g_autoptr(SandstepTestResult) term = sandstep_test_helper (&fx->f, "run", h, "--", "kill -TERM $$", NULL);
  g_autoptr(SandstepTestResult) plain = sandstep_test_helper (&fx->f, "run", h, "--", "exit 3", NULL);

  g_test_summary ("'sandstep run' says on stderr which signal killed the command, and nothing for a plain exit");
  sandstep_test_assert_status (segv, 128 + SIGSEGV);
  g_assert_cmpstr (segv->err, ==, "sandstep run: the command was killed by SIGSEGV (exit status 139)\n");
  sandstep_test_assert_status (term, 128 + SIGTERM);
  g_assert_cmpstr (term->err, ==, "sandstep run: the command was killed by SIGTERM (exit status 143)\n");
  sandstep_test_assert_status (plain, 3);
  g_assert_cmpstr (plain->err, ==, "");
}

typedef struct {
  const char *what;
  gboolean allow;            /* provision with --allow=svc.test instead of no network */
  gboolean needs_curl;
  const char *command;
  const char *hint;          /* NULL: no hint line */
} HintRow;

#define SUDO_HINT "[hint: there is no working sudo here, and none is needed: commands already run as root (uid 0) " \
                  "inside the sandbox; run the command without sudo]"

static const HintRow hint_rows[] = {
  { "python", FALSE, FALSE, "python -c 'print(1)'", "[hint: there is no 'python' command here; run python3]" },
  /* sudo from the host's /usr where it is installed, "not found" where it is not. */
  { "sudo", FALSE, FALSE, "sudo id", SUDO_HINT },
  /* What sudo 1.9 (Debian 12's) says in a sandbox, so that the row is checked on hosts without sudo too. */
  { "sudo-installed", FALSE, FALSE, "echo 'sudo: PERM_SUDOERS: setresuid(-1, 1, -1): Invalid argument' >&2; "
                                    "echo 'sudo: no valid sudoers sources found, quitting' >&2; exit 1", SUDO_HINT },
  { "sudo-nosuid", FALSE, FALSE, "echo \"sudo: effective uid is not 0, is /usr/bin/sudo on a file system with the "
                                 "'nosuid' option set or an NFS file system without root privileges?\" >&2; exit 1",
    SUDO_HINT },
  { "read-only", FALSE, FALSE, "touch /usr/new-file", "[hint: only /workspace and /tmp are writable (the system "
                                                      "and /data are read-only); write under /workspace instead]" },
  { "no-network", FALSE, TRUE, "curl -sS https://example.org/", "[hint: this sandbox has no network access, so "
                                                                "nothing can be downloaded or installed; work with "
                                                                "what is already here]" },
  /* The network row is for network=none only: an allowlist refusal says so itself. */
  { "allowlist-no-hint", TRUE, TRUE, "curl -sS https://example.org/", NULL },
  { "success-no-hint", FALSE, FALSE, "echo python: not found", NULL },
};

static void
test_hints (Fixture *fx, gconstpointer data)
{
  g_autofree char *none_holder = g_strdup_printf ("%s/hints-none", fx->f.owner);
  g_autofree char *allow_holder = g_strdup_printf ("%s/hints-allow", fx->f.owner);
  g_autofree char *none = provision_as (fx, none_holder, NULL);
  g_autofree char *allow = provision_as (fx, allow_holder, (const char *const[]) { "--allow=svc.test", NULL });
  g_autofree char *python3 = NULL;

  g_test_summary ("Each row of the recovery-hint table: the mistake made in a real sandbox ends its result with "
                  "the row's hint; a command that succeeded, or a refusal the allowlist explains, gets none");
  for (gsize i = 0; i < G_N_ELEMENTS (hint_rows); i++)
    {
      const HintRow *row = &hint_rows[i];
      g_autoptr(JsonNode) node = json_node_init_string (json_node_alloc (), row->command);
      g_autofree char *command = json_to_string (node, FALSE);
      g_autofree char *json = g_strdup_printf ("{\"command\": %s}", command);
      g_autofree char *text = NULL;

      if (row->needs_curl && !g_file_test ("/usr/bin/curl", G_FILE_TEST_IS_EXECUTABLE))
        {
          g_test_message ("%s: skipped: curl is not installed", row->what);
          continue;
        }
      text = toolbox_call (fx, row->allow ? allow : none, row->allow ? allow_holder : none_holder, "run_command",
                           json);
      g_test_message ("%s: %s", row->what, text);
      if (row->hint != NULL)
        {
          g_autofree char *last_line = g_strconcat ("\n", row->hint, NULL);
          g_assert_true (g_str_has_suffix (text, last_line));
        }
      else
        sandstep_test_assert_not_contains (text, "[hint:");
    }
  /* The python row's advice holds: python3 is there. */
  python3 = toolbox_call (fx, none, none_holder, "run_command", "{\"command\": \"python3 -c 'print(6*7)'\"}");
  g_assert_cmpstr (python3, ==, "[stdout]\n42");
}

static GList *
fake_resolve (const char *host, GError **error)
{
  if (g_strcmp0 (host, "inside.test") == 0)
    return g_list_prepend (NULL, g_inet_address_new_from_string ("10.9.9.9"));
  g_set_error (error, G_RESOLVER_ERROR, G_RESOLVER_ERROR_NOT_FOUND, "no such name");
  return NULL;
}

static void
test_egress_words (void)
{
  g_autoptr(GPtrArray) hosts = g_ptr_array_new ();
  g_autoptr(GPtrArray) cidrs = g_ptr_array_new ();
  g_autoptr(SandstepEgress) egress = NULL;
  g_autoptr(GError) error = NULL;
  static const struct {
    const char *host;
    guint16 port;
    const char *words;
  } rows[] = {
    { "example.org", 443, "[network: refused example.org:443: not in the allowlist]" },
    { "192.0.2.7", 443, "[network: refused 192.0.2.7:443: not in the allowlist]" },
    { "svc.test", 80, "[network: refused svc.test:80: this host is allowed over HTTPS on port 443 only]" },
    { "gone.test", 443, "[network: refused gone.test:443: the name does not resolve]" },
    { "inside.test", 443, "[network: refused inside.test:443: the name resolves to an internal address]" },
  };

  g_test_summary ("Each reason the egress policy gives for a refusal reaches the model in short words");
  g_ptr_array_add (hosts, "svc.test");
  g_ptr_array_add (hosts, "gone.test");
  g_ptr_array_add (hosts, "inside.test");
  g_ptr_array_add (cidrs, "198.51.100.0/24");
  egress = sandstep_egress_new (hosts, cidrs, &error);
  g_assert_no_error (error);
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *reason = NULL;
      g_autofree char *notice = NULL;
      g_autofree char *words = NULL;
      GList *dial = sandstep_egress_decide (egress, rows[i].host, rows[i].port, fake_resolve, &reason);

      g_assert_null (dial);
      g_assert_nonnull (reason);
      notice = g_strdup_printf (SANDSTEP_EGRESS_NOTICE_PREFIX "%s:%u: %s", rows[i].host, rows[i].port, reason);
      words = sandstep_egress_notice_for_model (notice);
      g_assert_cmpstr (words, ==, rows[i].words);
    }
  /* A reason the table does not know is kept whole; a line that is no refusal gives none. */
  {
    g_autofree char *other = sandstep_egress_notice_for_model (SANDSTEP_EGRESS_NOTICE_PREFIX "x:1: a new rule");
    g_assert_cmpstr (other, ==, "[network: refused x:1: a new rule]");
    g_assert_null (sandstep_egress_notice_for_model ("something else"));
  }
}

static void
test_notices_bounded (void)
{
  g_autoptr(SandstepNotices) notices = sandstep_notices_new ();
  SandstepRunResult result = { .exit_status = 7 };
  g_autofree char *ending = NULL;

  g_test_summary ("A command that is refused many times gets each distinct refusal once, five at most, and a "
                  "count of the rest");
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 8; i++)
      {
        g_autofree char *notice = g_strdup_printf (SANDSTEP_EGRESS_NOTICE_PREFIX "h%d.test:443: h%d.test is not an "
                                                   "allowed host", i, i);
        sandstep_notices_add (notices, notice);
      }
  ending = sandstep_command_ending (NULL, &result, notices, NULL, NULL);
  g_assert_cmpstr (ending, ==, "\n[network: refused h0.test:443: not in the allowlist]"
                               "\n[network: refused h1.test:443: not in the allowlist]"
                               "\n[network: refused h2.test:443: not in the allowlist]"
                               "\n[network: refused h3.test:443: not in the allowlist]"
                               "\n[network: refused h4.test:443: not in the allowlist]"
                               "\n[network: 3 more refused]");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/endings/egress-words", test_egress_words);
  g_test_add_func ("/endings/notices-bounded", test_notices_bounded);
  for (gsize i = 0; i < G_N_ELEMENTS (ending_rows); i++)
    {
      g_autofree char *path = g_strconcat ("/endings/exact-texts/", ending_rows[i].what, NULL);
      g_test_add (path, Fixture, &ending_rows[i], setup, test_endings, teardown);
    }
  g_test_add ("/endings/run-signal", Fixture, NULL, setup, test_run_signal, teardown);
  g_test_add ("/endings/hints", Fixture, NULL, setup, test_hints, teardown);
  return g_test_run ();
}
