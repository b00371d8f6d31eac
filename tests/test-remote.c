/* test-remote.c: sandstepd and the remote backend, end to end.
 *
 * Each case starts its own sandstepd (its own token file and state directory,
 * on 127.0.0.1, port 0 unless it needs to restart on the same port) and stops
 * it by its pid; the `sandstep` helper talks to it through SANDSTEP_BACKEND
 * and SANDSTEP_TOKEN_FILE, exactly as a make step would.  The three-host case
 * makes network namespaces (tests/netns-hosts.sh) and deletes them again.
 *
 * The local behaviour suite runs a second time through a daemon as the meson
 * test test-helper-remote (tests/with-sandstepd.sh); this file covers what
 * only a daemon has: leases on connections, restarts, many clients, hosts,
 * bad requests, TLS.
 *
 * Environment: SANDSTEP (the helper), SANDSTEPD (the daemon), G_TEST_SRCDIR.
 * SANDSTEP_TESTS_MUST_SANDBOX=1 turns "cannot make sandboxes or namespaces
 * here" skips into failures.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-remote.h"
#include "sandstep-store.h"
#include "sandstep-token.h"
#include "sandstep-test-utils.h"
#include "sandstep-token-libc.h"

#define HELPER_TIMEOUT_S 60.0

/* ---- processes ---- */

static SandstepTestResult *
run_argv (const char *const *argv, char **envp, double timeout_s)
{
  return sandstep_test_proc_wait (sandstep_test_proc_start (argv, (const char *const *) envp, NULL), timeout_s);
}

/* ---- skipping ---- */

static gboolean
must_sandbox (void)
{
  return g_strcmp0 (g_getenv ("SANDSTEP_TESTS_MUST_SANDBOX"), "1") == 0;
}

static gboolean
skip_because (const char *reason)
{
  if (must_sandbox ())
    {
      g_test_message ("SANDSTEP_TESTS_MUST_SANDBOX=1 but: %s", reason);
      g_test_fail ();
      return TRUE;
    }
  g_test_skip (reason);
  return TRUE;
}

/* ---- a sandstepd of our own ---- */

typedef struct {
  char *dir;
  char *state_dir;
  char *token_file;
  char *token;
  char *log;
  char *listen;
  char **prefix;            /* e.g. {"ip", "netns", "exec", NS}: where it runs */
  char **extra;             /* more options */
  SandstepTestDaemon daemon;
} Server;

static void
server_init (Server *s, const char *dir, const char *listen)
{
  memset (s, 0, sizeof *s);
  s->dir = g_strdup (dir);
  s->state_dir = g_build_filename (dir, "state", NULL);
  s->token_file = g_build_filename (dir, "token", NULL);
  s->log = g_build_filename (dir, "sandstepd.log", NULL);
  s->listen = g_strdup (listen);
  s->token = g_strdup_printf ("%08x%08x%08x%08x", g_random_int (), g_random_int (), g_random_int (), g_random_int ());
  g_assert_true (g_file_set_contents_full (s->token_file, s->token, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
}

static void
server_start (Server *s)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  const char *daemon = g_getenv ("SANDSTEPD");

  g_assert_nonnull (daemon);
  for (char **p = s->prefix; p != NULL && *p != NULL; p++)
    g_ptr_array_add (argv, g_strdup (*p));
  g_ptr_array_add (argv, g_strdup (daemon));
  g_ptr_array_add (argv, g_strconcat ("--listen=", s->listen, NULL));
  g_ptr_array_add (argv, g_strconcat ("--token-file=", s->token_file, NULL));
  g_ptr_array_add (argv, g_strconcat ("--state-dir=", s->state_dir, NULL));
  for (char **p = s->extra; p != NULL && *p != NULL; p++)
    g_ptr_array_add (argv, g_strdup (*p));
  g_ptr_array_add (argv, NULL);
  sandstep_test_daemon_start (&s->daemon, (const char *const *) argv->pdata, NULL, NULL, s->log);
}

static void
server_clear (Server *s)
{
  sandstep_test_daemon_clear (&s->daemon);
  g_free (s->dir);
  g_free (s->state_dir);
  g_free (s->token_file);
  g_free (s->token);
  g_free (s->log);
  g_free (s->listen);
  g_strfreev (s->prefix);
  g_strfreev (s->extra);
}

static guint64
server_rss_kib (Server *s)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int) s->daemon.pid);
  g_autofree char *text = NULL;
  const char *line;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  line = strstr (text, "VmRSS:");
  g_assert_nonnull (line);
  return g_ascii_strtoull (line + strlen ("VmRSS:"), NULL, 10);
}

static int
server_port (Server *s)
{
  const char *colon = strrchr (s->daemon.url, ':');

  g_assert_nonnull (colon);
  return atoi (colon + 1);
}

/* ---- the fixture: one daemon, a scratch directory, one DAG run's identity ---- */

typedef struct {
  char *dir;
  char *host_dir;
  char *helper;
  char *run;
  char *owner;
  char *holder;
  Server server;
  char **envp;
} Fixture;

static char **
helper_env (Fixture *f, const char *backend)
{
  char **envp = g_get_environ ();
  g_autofree char *local = g_build_filename (f->dir, "local-state", NULL);

  envp = g_environ_unsetenv (envp, "SANDSTEP_TOKEN");
  envp = g_environ_unsetenv (envp, "SANDSTEP_BACKEND");
  if (backend != NULL)
    envp = g_environ_setenv (envp, "SANDSTEP_BACKEND", backend, TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_TOKEN_FILE", f->server.token_file, TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_OWNER", f->owner, TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_HOLDER", f->holder, TRUE);
  /* Anything that wrongly went local would land here, not in a real state directory. */
  envp = g_environ_setenv (envp, "SANDSTEP_STATE_DIR", local, TRUE);
  return envp;
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  const char *listen = data != NULL ? data : "127.0.0.1:0";

  memset (f, 0, sizeof *f);
  f->helper = g_strdup (g_getenv ("SANDSTEP"));
  g_assert_nonnull (f->helper);
  g_assert_nonnull (g_getenv ("SANDSTEPD"));
  f->dir = g_dir_make_tmp ("sandstep-remote-XXXXXX", &error);
  g_assert_no_error (error);
  f->host_dir = g_build_filename (f->dir, "host", NULL);
  g_assert_cmpint (g_mkdir (f->host_dir, 0700), ==, 0);
  f->run = g_strdup_printf ("run-%d-%08x", (int) getpid (), g_random_int ());
  f->owner = g_strdup_printf ("sandstep-test/%s", f->run);
  f->holder = g_strdup_printf ("%s/main", f->owner);
  server_init (&f->server, f->dir, listen);
}

static void
fixture_start (Fixture *f)
{
  server_start (&f->server);
  g_strfreev (f->envp);
  f->envp = helper_env (f, f->server.daemon.url);
}

static SandstepTestResult *helper_env_run (Fixture *f, char **envp, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* Destroys every sandbox a case left on its daemon, through the daemon while
 * it runs (else, or where it refuses, through the local helper on its state
 * directory), so that no supervisor outlives the case; asserts none is left. */
static void
destroy_leftovers (Fixture *f)
{
  g_autoptr(SandstepStore) store = f->server.state_dir != NULL ? sandstep_store_open (f->server.state_dir, NULL) : NULL;
  g_autoptr(GPtrArray) handles = store != NULL ? sandstep_store_list (store) : NULL;
  g_autoptr(GPtrArray) left = NULL;
  gboolean serving = f->server.daemon.pid > 0 && f->server.daemon.url != NULL;

  for (guint i = 0; handles != NULL && i < handles->len; i++)
    {
      const char *name = handles->pdata[i];
      g_autoptr(SandstepRecord) record = sandstep_store_load (store, name, NULL);
      g_autofree char *owner = g_strconcat ("--owner=", record != NULL ? record->owner : f->owner, NULL);
      g_autoptr(SandstepTestResult) remote = NULL;

      if (serving)
        {
          g_autofree char *handle = g_strdup_printf ("--handle=%s/%s", f->server.daemon.url, name);
          g_auto(GStrv) envp = helper_env (f, f->server.daemon.url);
          remote = helper_env_run (f, envp, "destroy", handle, owner, NULL);
        }
      if (remote == NULL || remote->status != 0)
        {
          g_autofree char *handle = g_strconcat ("--handle=", name, NULL);
          g_auto(GStrv) envp = helper_env (f, NULL);
          g_autoptr(SandstepTestResult) local = NULL;

          envp = g_environ_setenv (envp, "SANDSTEP_STATE_DIR", f->server.state_dir, TRUE);
          local = helper_env_run (f, envp, "destroy", "--backend=local", handle, owner, NULL);
          sandstep_test_assert_status (local, 0);
        }
    }
  if (handles != NULL && handles->len > 0)
    g_test_message ("destroyed the %u sandboxes the case left on its daemon", handles->len);
  if (store != NULL)
    {
      left = sandstep_store_list (store);
      g_assert_cmpuint (left->len, ==, 0);
    }
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  destroy_leftovers (f);
  server_clear (&f->server);
  if (f->dir != NULL)
    {
      g_autofree char *quoted = g_shell_quote (f->dir);
      g_autofree char *command = g_strdup_printf ("rm -rf %s", quoted);
      g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL);
    }
  g_strfreev (f->envp);
  g_free (f->dir);
  g_free (f->host_dir);
  g_free (f->helper);
  g_free (f->run);
  g_free (f->owner);
  g_free (f->holder);
}

static SandstepTestResult *
helper_v (Fixture *f, char **envp, const char *const *prefix, double timeout_s, const char *first, va_list ap)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();

  for (gsize i = 0; prefix != NULL && prefix[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) prefix[i]);
  g_ptr_array_add (argv, f->helper);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer) a);
  g_ptr_array_add (argv, NULL);
  return run_argv ((const char *const *) argv->pdata, envp, timeout_s);
}

static SandstepTestResult *helper (Fixture *f, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* `sandstep ARGS...` against the fixture's daemon. */
static SandstepTestResult *
helper (Fixture *f, const char *first, ...)
{
  va_list ap;
  SandstepTestResult *r;

  va_start (ap, first);
  r = helper_v (f, f->envp, NULL, HELPER_TIMEOUT_S, first, ap);
  va_end (ap);
  return r;
}

/* `sandstep ARGS...` with @envp. */
static SandstepTestResult *
helper_env_run (Fixture *f, char **envp, const char *first, ...)
{
  va_list ap;
  SandstepTestResult *r;

  va_start (ap, first);
  r = helper_v (f, envp, NULL, HELPER_TIMEOUT_S, first, ap);
  va_end (ap);
  return r;
}

static SandstepTestProc *helper_spawn (Fixture *f, const char *first, ...) G_GNUC_NULL_TERMINATED;

static SandstepTestProc *
helper_spawn (Fixture *f, const char *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  va_list ap;

  g_ptr_array_add (argv, f->helper);
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  return sandstep_test_proc_start ((const char *const *) argv->pdata, (const char *const *) f->envp, NULL);
}

static char *
provision (Fixture *f, const char *holder)
{
  g_autofree char *holder_arg = g_strconcat ("--holder=", holder != NULL ? holder : f->holder, NULL);
  g_autoptr(SandstepTestResult) r = helper (f, "provision", holder_arg, NULL);

  sandstep_test_assert_status (r, 0);
  g_strchomp (r->out);
  g_assert_true (g_str_has_prefix (r->out, f->server.daemon.url));
  g_assert_true (sandstep_handle_is_valid (r->out));
  return g_strdup (r->out);
}

/* Can this machine make sandboxes at all?  Asked once, through the local helper. */
static gboolean
jails_work (Fixture *f, char **out_reason)
{
  static gsize once;
  static char *reason;

  if (g_once_init_enter (&once))
    {
      g_auto(GStrv) envp = helper_env (f, "local");
      const char *provision_argv[] = { f->helper, "provision", "--holder=probe", NULL };
      g_autoptr(SandstepTestResult) p = run_argv (provision_argv, envp, HELPER_TIMEOUT_S);

      if (p->status != 0)
        reason = g_strdup_printf ("the local helper cannot provision here: %s", p->err);
      else
        {
          g_autofree char *h = g_strconcat ("--handle=", g_strstrip (p->out), NULL);
          const char *run_argv_[] = { f->helper, "run", h, "--holder=probe", "--", "true", NULL };
          g_autoptr(SandstepTestResult) r = run_argv (run_argv_, envp, HELPER_TIMEOUT_S);
          if (r->status != 0)
            reason = g_strdup_printf ("the helper cannot run sandboxes here: %s", r->err);
        }
      g_once_init_leave (&once, 1);
    }
  *out_reason = g_strdup (reason);
  return reason == NULL;
}

#define SKIP_IF_NO_JAIL(f)                                 \
  G_STMT_START                                             \
  {                                                        \
    g_autofree char *why_ = NULL;                          \
    if (!jails_work ((f), &why_))                          \
      {                                                    \
        skip_because (why_);                               \
        return;                                            \
      }                                                    \
  }                                                        \
  G_STMT_END

/* ---- handles ---- */

static void
test_handles (void)
{
  static const char *const valid[] = {
    "sandstep-0123456789abcdef",
    "http://127.0.0.1:7700/sandstep-0123456789abcdef",
    "https://sandboxes.example.org/sandstep-0123456789abcdef",
    "https://sandboxes.example.org:8443/team/a/sandstep-0123456789abcdef",
    "http://[::1]:7700/sandstep-0123456789abcdef",
  };
  static const char *const invalid[] = {
    "", "None", "sandstep-0123", "sandstep-0123456789ABCDEF",
    "http://127.0.0.1:7700/sandstep-0123",
    "http://127.0.0.1:7700/sandstep-0123456789abcdef/",
    "http://user:pw@127.0.0.1:7700/sandstep-0123456789abcdef",
    "http://127.0.0.1:7700/sandstep-0123456789abcdef?x=1",
    "http://127.0.0.1:7700/sandstep-0123456789abcdef#x",
    "http://127.0.0.1:7700/../sandstep-0123456789abcdef",
    "http://127.0.0.1:7700//sandstep-0123456789abcdef",
    "http://127.0.0.1:7700/%2e%2e/sandstep-0123456789abcdef",
    "http:///sandstep-0123456789abcdef",
    "http://ho st/sandstep-0123456789abcdef",
    "ftp://127.0.0.1/sandstep-0123456789abcdef",
    "http://127.0.0.1:7700/sandstep-0123456789abcdef\n",
  };
  g_autofree char *server = NULL;
  g_autofree char *local = NULL;

  g_test_summary ("a remote handle names its server: http(s)://HOST[:PORT][/PREFIX]/sandstep-<16 hex>, and nothing "
                  "else passes (no user info, query, fragment, dot segments or encoding)");
  for (gsize i = 0; i < G_N_ELEMENTS (valid); i++)
    {
      g_test_message ("valid: %s", valid[i]);
      g_assert_true (sandstep_handle_is_valid (valid[i]));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (invalid); i++)
    {
      g_test_message ("invalid: %s", invalid[i]);
      g_assert_false (sandstep_handle_is_valid (invalid[i]));
    }
  g_assert_true (sandstep_handle_split ("https://h.example:8443/a/b/sandstep-0123456789abcdef", &server, &local));
  g_assert_cmpstr (server, ==, "https://h.example:8443/a/b");
  g_assert_cmpstr (local, ==, "sandstep-0123456789abcdef");
}

/* ---- starting ---- */

static void
test_listen_refuses_open_port_without_token (Fixture *f, gconstpointer data)
{
  g_autofree char *state = g_strconcat ("--state-dir=", f->server.state_dir, NULL);
  const char *argv[] = { g_getenv ("SANDSTEPD"), "--listen=0.0.0.0:0", state, NULL };
  g_autoptr(SandstepTestResult) r = run_argv (argv, NULL, 10);

  g_test_summary ("sandstepd refuses to listen beyond loopback without a token (exit 64, saying why)");
  sandstep_test_assert_status (r, SANDSTEP_EXIT_USAGE);
  sandstep_test_assert_contains (r->err, "without a token");
}

/* ---- a round trip of every operator ---- */

static void
test_round_trip (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *src = g_build_filename (f->host_dir, "src", NULL);
  g_autofree char *sub = g_build_filename (src, "sub", NULL);
  g_autofree char *a = g_build_filename (src, "a.txt", NULL);
  g_autofree char *b = g_build_filename (sub, "b.txt", NULL);
  g_autofree char *link = g_build_filename (src, "link", NULL);
  g_autofree char *src_slash = g_strconcat (src, "/", NULL);
  g_autofree char *exported = g_build_filename (f->host_dir, "exported.txt", NULL);
  g_autofree char *export_pair = g_strconcat ("src/sub/b.txt=file://", exported, NULL);
  g_autofree char *contents = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *record;

  g_test_summary ("every operator works through sandstepd with the same outputs as locally: provision prints a "
                  "handle naming the server; run streams both streams and exits with the command's status; "
                  "put/ls/get/export move files; describe shows the record; release destroys");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);

  {
    g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--", "echo out; echo err >&2; pwd; exit 7", NULL);
    sandstep_test_assert_status (r, 7);
    g_assert_cmpstr (r->out, ==, "out\n/workspace\n");
    g_assert_cmpstr (r->err, ==, "err\n");
  }
  g_assert_cmpint (g_mkdir_with_parents (sub, 0755), ==, 0);
  sandstep_test_write_file (a, "alpha\n", -1);
  sandstep_test_write_file (b, "beta\n", -1);
  g_assert_cmpint (chmod (a, 0750), ==, 0);
  g_assert_cmpint (symlink ("a.txt", link), ==, 0);
  {
    g_autoptr(SandstepTestResult) r = helper (f, "put", h, src_slash, "/workspace/src/", NULL);
    sandstep_test_assert_status (r, 0);
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "ls", h, "src", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "a.txt\nlink\nsub/\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--",
                                              "stat -c '%a %F' src/a.txt src/link; cat src/link src/sub/b.txt", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "750 regular file\n777 symbolic link\nalpha\nbeta\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "get", h, "src/sub/b.txt", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "beta\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "export", h, export_pair, NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_true (g_file_get_contents (exported, &contents, NULL, NULL));
    g_assert_cmpstr (contents, ==, "beta\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "get", h, "../../etc/passwd", NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
    sandstep_test_assert_contains (r->err, "goes above '/'");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "describe", h, NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_true (json_parser_load_from_data (parser, r->out, -1, NULL));
    record = json_node_get_object (json_parser_get_root (parser));
    g_assert_cmpstr (json_object_get_string_member (record, "handle"), ==, handle);
    g_assert_cmpstr (json_object_get_string_member (record, "owner"), ==, f->owner);
    g_assert_cmpstr (json_object_get_string_member (record, "server"), ==, f->server.daemon.url);
  }
  {
    g_autofree char *other = g_strconcat ("--owner=", f->owner, "-other", NULL);
    g_autoptr(SandstepTestResult) r = helper (f, "describe", h, other, NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_NOT_OWNER);
    sandstep_test_assert_contains (r->err, handle);
    sandstep_test_assert_contains (r->err, "is not owned by");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "release", h, NULL);
    g_autoptr(SandstepTestResult) gone = NULL;
    sandstep_test_assert_status (r, 0);
    gone = helper (f, "describe", h, NULL);
    sandstep_test_assert_status (gone, SANDSTEP_EXIT_NO_SANDBOX);
  }
}

/* ---- leases: a claim lives as long as its holder's connection ---- */

static void
test_image_through_server (Fixture *f, gconstpointer data)
{
  g_autofree char *holder_arg = g_strconcat ("--holder=", f->holder, NULL);
  g_autofree char *image = g_build_filename (f->host_dir, "image:t", NULL);
  g_autofree char *image_arg = NULL, *image_ref = NULL;
  g_autofree char *h = NULL;
  GPid registry_pid;
  g_autoptr(SandstepTestResult) r = NULL, run = NULL, described = NULL;

  g_test_summary ("issue 27: provision --image through sandstepd: the reference travels, the server pulls it from a "
                  "loopback registry into its own store, and the sandbox's root is the image; a file's reference "
                  "(oci:) is refused, as the server would read its own host's files for the client");
  SKIP_IF_NO_JAIL (f);
  registry_pid = sandstep_test_busybox_in_registry (f->host_dir, "remote/busybox:1", FALSE, &image_ref);
  image_arg = g_strconcat ("--image=", image_ref, NULL);
  {
    g_autofree char *file_arg = g_strconcat ("--image=oci:", image, NULL);
    g_autoptr(SandstepTestResult) refused = NULL;
    fixture_start (f);
    refused = helper (f, "provision", holder_arg, file_arg, NULL);
    sandstep_test_assert_status (refused, 76);
    g_assert_nonnull (strstr (refused->err, "names a file on this machine"));
  }
  r = helper (f, "provision", holder_arg, image_arg, NULL);
  sandstep_test_assert_status (r, 0);
  g_strchomp (r->out);
  h = g_strconcat ("--handle=", r->out, NULL);
  run = helper (f, "run", h, "--", "cat /marker; [ -e /usr/bin/env ] || echo no-host-usr", NULL);
  sandstep_test_assert_status (run, 0);
  g_assert_cmpstr (run->out, ==, "from the image\nno-host-usr\n");
  described = helper (f, "describe", h, NULL);
  sandstep_test_assert_status (described, 0);
  g_assert_nonnull (strstr (described->out, "\"digest\" : \"sha256:"));
  {
    /* The server's store is under its --state-dir, as the helper's is under its own. */
    g_autofree char *records = g_build_filename (f->server.state_dir, "images", "images", NULL);
    g_autoptr(GDir) dir = g_dir_open (records, 0, NULL);
    const char *name;
    guint json = 0;
    while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
      json += g_str_has_suffix (name, ".json");
    g_assert_cmpuint (json, ==, 1);
  }
  {
    g_autoptr(SandstepTestResult) destroyed = helper (f, "destroy", h, NULL);
    sandstep_test_assert_status (destroyed, 0);
  }
  kill (registry_pid, SIGKILL);
  waitpid (registry_pid, NULL, 0);
}

/* TRUE while @pid has not ended (a zombie has). */
static gboolean
pid_running (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree char *stat = NULL;
  const char *end;

  if (!g_file_get_contents (path, &stat, NULL, NULL) || (end = strrchr (stat, ')')) == NULL)
    return FALSE;
  return end[1] == ' ' && end[2] != 'Z';
}

static void
test_fork_through_server (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL, *h = NULL, *hf = NULL;
  g_auto(GStrv) forks = NULL;

  g_test_summary ("issue 28: fork, checkpoint and rollback through sandstepd: the forks' handles name the server, "
                  "each fork starts with the parent's files and changes alone; a rollback on the server brings "
                  "back what was removed; destroy --with-forks takes the forks there too");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  {
    g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--", "echo base > a", NULL);
    sandstep_test_assert_status (r, 0);
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "fork", h, "--count=2", NULL);
    sandstep_test_assert_status (r, 0);
    forks = g_strsplit (g_strchomp (r->out), "\n", -1);
    g_assert_cmpuint (g_strv_length (forks), ==, 2);
    g_assert_true (g_str_has_prefix (forks[0], f->server.daemon.url));
  }
  hf = g_strconcat ("--handle=", forks[0], NULL);
  {
    g_autoptr(SandstepTestResult) r = helper (f, "run", hf, "--", "cat a; echo fork > a", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "base\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "get", h, "a", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "base\n");
  }
  {
    g_autoptr(SandstepTestResult) cp = helper (f, "checkpoint", hf, "mine", NULL);
    g_autoptr(SandstepTestResult) rm = NULL, rb = NULL, list = NULL, after = NULL;
    sandstep_test_assert_status (cp, 0);
    rm = helper (f, "run", hf, "--", "rm a", NULL);
    sandstep_test_assert_status (rm, 0);
    rb = helper (f, "rollback", hf, "mine", NULL);
    sandstep_test_assert_status (rb, 0);
    after = helper (f, "get", hf, "a", NULL);
    sandstep_test_assert_status (after, 0);
    g_assert_cmpstr (after->out, ==, "fork\n");
    list = helper (f, "checkpoint", hf, "--list", NULL);
    sandstep_test_assert_status (list, 0);
    g_assert_cmpstr (list->out, ==, "mine\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "destroy", h, "--with-forks", NULL);
    g_autoptr(SandstepTestResult) gone = NULL;
    sandstep_test_assert_status (r, 0);
    gone = helper (f, "describe", hf, NULL);
    sandstep_test_assert_status (gone, 66);
  }
}

static void
test_image_gc_race_through_server (Fixture *f, gconstpointer data)
{
  g_autofree char *holder_arg = g_strconcat ("--holder=", f->holder, NULL);
  g_autofree char *image_arg = NULL, *image_ref = NULL, *images = NULL, *locks = NULL, *h = NULL;
  g_auto(GStrv) gc_env = NULL;
  g_autoptr(SandstepTestResult) r = NULL, run = NULL;
  GPid registry_pid;
  guint gcs = 0;
  SandstepTestProc *p;

  g_test_summary ("issue 27: `gc --images` on the server's store, run again and again while sandstepd pulls the "
                  "image of a provision, removes nothing the provision uses: the server holds the store from its "
                  "pull until the sandbox is among the image's users");
  SKIP_IF_NO_JAIL (f);
  registry_pid = sandstep_test_busybox_in_registry (f->host_dir, "remote/busybox:1", FALSE, &image_ref);
  image_arg = g_strconcat ("--image=", image_ref, NULL);
  /* The server's store, named, for gc to work on (SANDSTEP_IMAGE_DIR wins over --state-dir). The server's
   * pull waits under the layer's lock: gc is asked while it is under way. */
  images = g_build_filename (f->dir, "server-images", NULL);
  g_setenv ("SANDSTEP_IMAGE_DIR", images, TRUE);
  g_setenv ("SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS", "700", TRUE);
  fixture_start (f);
  g_unsetenv ("SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS");
  g_unsetenv ("SANDSTEP_IMAGE_DIR");
  locks = g_build_filename (images, "locks", NULL);
  gc_env = helper_env (f, NULL);
  gc_env = g_environ_setenv (gc_env, "SANDSTEP_IMAGE_DIR", images, TRUE);
  p = helper_spawn (f, "provision", holder_arg, image_arg, NULL);
  for (int i = 0; i < 300; i++)
    {
      g_autoptr(GDir) dir = g_dir_open (locks, 0, NULL);
      guint n = 0;
      while (dir != NULL && g_dir_read_name (dir) != NULL)
        n++;
      /* The config's lock and the layer's. */
      if (n >= 2)
        break;
      g_usleep (20000);
    }
  while (pid_running (sandstep_test_proc_pid (p)))
    {
      g_autoptr(SandstepTestResult) gc = helper_env_run (f, gc_env, "gc", "--images", NULL);
      sandstep_test_assert_status (gc, 0);
      gcs++;
    }
  g_test_message ("%u gc --images ran during the provision", gcs);
  g_assert_cmpuint (gcs, >, 0);
  r = sandstep_test_proc_wait (p, HELPER_TIMEOUT_S);
  sandstep_test_assert_status (r, 0);
  g_strchomp (r->out);
  h = g_strconcat ("--handle=", r->out, NULL);
  run = helper (f, "run", h, "--", "cat /marker", NULL);
  sandstep_test_assert_status (run, 0);
  g_assert_cmpstr (run->out, ==, "from the image\n");
  {
    g_autoptr(SandstepTestResult) destroyed = helper (f, "destroy", h, NULL);
    sandstep_test_assert_status (destroyed, 0);
  }
  kill (registry_pid, SIGKILL);
  waitpid (registry_pid, NULL, 0);
}

static void
test_disconnect_kills_command (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (1000);
  g_autofree char *command = g_strdup_printf ("sleep %s", seconds);
  const char *marker[] = { "sleep", seconds, NULL };
  g_autoptr(SandstepTestResult) killed = NULL;
  g_autoptr(SandstepTestResult) next = NULL;
  SandstepTestProc *p;

  g_test_summary ("a caller that disconnects mid-command has its command killed, and its claim ends with its "
                  "connection: the next holder proceeds at once (--wait=0)");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  p = helper_spawn (f, "run", h, "--holder=dag/run/killed", "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 10));
  sandstep_test_proc_kill (p, SIGKILL);
  killed = sandstep_test_proc_wait (p, 10);
  g_assert_cmpint (killed->status, ==, 128 + SIGKILL);
  g_assert_true (sandstep_test_wait_for_process (marker, FALSE, 3));
  next = helper (f, "run", h, "--holder=dag/run/next", "--wait=0", "--", "echo next", NULL);
  sandstep_test_assert_status (next, 0);
  g_assert_cmpstr (next->out, ==, "next\n");
}

/* A run by @holder that holds the sandbox until hold_end (): a caller that must find it held finds it so
 * however slow the host, where a `sleep 2` would end first under an emulated CPU.  *out_seconds names its
 * sleep for hold_end. */
static SandstepTestProc *
hold_start (Fixture *f, const char *h, const char *holder, char **out_seconds)
{
  g_autofree char *holder_arg = g_strconcat ("--holder=", holder, NULL);
  g_autofree char *command = NULL;
  SandstepTestProc *holding;

  *out_seconds = sandstep_test_unique_seconds (1000);
  command = g_strdup_printf ("echo started; sleep %s; echo ended", *out_seconds);
  holding = helper_spawn (f, "run", h, holder_arg, "--", command, NULL);
  while (strstr (sandstep_test_proc_out (holding), "started") == NULL)
    g_assert_true (sandstep_test_proc_pump (holding, 0.1) ||
                   strstr (sandstep_test_proc_out (holding), "started") != NULL);
  /* The sleep itself, which hold_end ends: a sandbox's processes weigh less than the host's, and on a busy host its
   * shell may start the sleep well after it said "started". */
  {
    const char *marker[] = { "sleep", *out_seconds, NULL };
    g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 30));
  }
  return holding;
}

/* Ends the hold's command (its sleep, so that the command itself ends well) and waits for its run. */
static void
hold_end (SandstepTestProc *holding, const char *seconds)
{
  const char *marker[] = { "sleep", seconds, NULL };
  g_autoptr(GArray) pids = sandstep_test_find_processes (marker);
  g_autoptr(SandstepTestResult) r = NULL;

  g_assert_cmpuint (pids->len, ==, 1);
  g_assert_cmpint (kill (g_array_index (pids, GPid, 0), SIGTERM), ==, 0);
  r = sandstep_test_proc_wait (holding, HELPER_TIMEOUT_S);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "started\nended\n");
}

/* Reads @p until its stderr holds @text: a waiting caller has said whom it waits for. */
static void
pump_until_err (SandstepTestProc *p, const char *text)
{
  double timeout_s = HELPER_TIMEOUT_S * sandstep_test_time_scale ();
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  while (strstr (sandstep_test_proc_err (p), text) == NULL)
    {
      if (!sandstep_test_proc_pump (p, 0.1) || g_get_monotonic_time () > deadline)
        {
          sandstep_test_assert_contains (sandstep_test_proc_err (p), text);
          return;
        }
    }
}

static void
test_claim_busy_and_wait (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = NULL;
  g_autoptr(SandstepTestResult) refused = NULL;
  g_autoptr(SandstepTestResult) waited = NULL;
  SandstepTestProc *holding;
  SandstepTestProc *waiting;

  g_test_summary ("another holder is refused (75) with --wait=0, naming the holder; with --wait it says whom it "
                  "waits for and proceeds when the claim ends");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  holding = hold_start (f, h, "dag/run/first", &seconds);
  refused = helper (f, "run", h, "--holder=dag/run/second", "--wait=0", "--", "true", NULL);
  sandstep_test_assert_status (refused, SANDSTEP_EXIT_BUSY);
  sandstep_test_assert_contains (refused->err, "is held by 'dag/run/first'");
  sandstep_test_assert_contains (refused->err, handle);
  waiting = helper_spawn (f, "run", h, "--holder=dag/run/third", "--wait=30", "--", "echo third", NULL);
  pump_until_err (waiting, "is held by 'dag/run/first'; waiting up to 30s");
  hold_end (holding, seconds);
  waited = sandstep_test_proc_wait (waiting, 30);
  sandstep_test_assert_status (waited, 0);
  g_assert_cmpstr (waited->out, ==, "third\n");
}

/* ---- a command's stdin, and a run in one request ---- */

/* `sh -c SCRIPT` started with the fixture's environment; $SANDSTEP is the helper. */
static SandstepTestProc *
shell_spawn (Fixture *f, const char *script)
{
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_auto(GStrv) envp = g_environ_setenv (g_strdupv (f->envp), "SANDSTEP", f->helper, TRUE);

  return sandstep_test_proc_start (argv, (const char *const *) envp, NULL);
}

static SandstepTestResult *
shell (Fixture *f, const char *script)
{
  return sandstep_test_proc_wait (shell_spawn (f, script), HELPER_TIMEOUT_S);
}

static void
test_run_stdin (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *input = g_build_filename (f->host_dir, "input.txt", NULL);
  g_autofree char *big = g_build_filename (f->host_dir, "big.bin", NULL);
  g_autofree char *script = NULL;

  g_test_summary ("a remote run gives the command the caller's stdin: a pipe's bytes, a file's, none from an "
                  "empty pipe or /dev/null; a stdin over the server's --max-upload is refused, naming stdin and "
                  "the limit, and the command never runs");
  SKIP_IF_NO_JAIL (f);
  f->server.extra = g_strdupv ((char *[]) { "--max-upload=64K", NULL });
  fixture_start (f);
  handle = provision (f, NULL);
  {
    script = g_strdup_printf ("printf 'a\\nb\\n' | \"$SANDSTEP\" run --handle=%s -- cat", handle);
    g_autoptr(SandstepTestResult) r = shell (f, script);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "a\nb\n");
    g_clear_pointer (&script, g_free);
  }
  {
    script = g_strdup_printf (": | \"$SANDSTEP\" run --handle=%s -- 'wc -c; echo end'", handle);
    g_autoptr(SandstepTestResult) r = shell (f, script);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "0\nend\n");
    g_clear_pointer (&script, g_free);
  }
  {
    /* The tests' helpers run with stdin on /dev/null. */
    g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--", "wc -c; echo end", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "0\nend\n");
  }
  {
    sandstep_test_write_file (input, "from a file\n", -1);
    script = g_strdup_printf ("\"$SANDSTEP\" run --handle=%s -- 'tr a-z A-Z' < '%s'", handle, input);
    g_autoptr(SandstepTestResult) r = shell (f, script);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "FROM A FILE\n");
    g_clear_pointer (&script, g_free);
  }
  {
    g_autofree char *text = g_strnfill (100 * 1024, 'x');
    sandstep_test_write_file (big, text, -1);
    script = g_strdup_printf ("cat '%s' | \"$SANDSTEP\" run --handle=%s -- 'touch ran; wc -c'", big, handle);
    g_autoptr(SandstepTestResult) r = shell (f, script);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
    sandstep_test_assert_contains (r->err, "stdin is larger than the server's limit of 65536 bytes");
    sandstep_test_assert_contains (r->err, "--max-upload");
    g_assert_cmpstr (r->out, ==, "");
    g_clear_pointer (&script, g_free);
  }
  {
    g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--", "test -e ran && echo ran || echo never", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "never\n");
  }
}

static void
test_run_stdin_waits (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = NULL;
  g_autofree char *script = NULL;
  g_autoptr(SandstepTestResult) waited = NULL;
  SandstepTestProc *holding;
  SandstepTestProc *waiting;

  g_test_summary ("a run that waits for another holder still gives its command all of its stdin once it runs");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  holding = hold_start (f, h, "dag/run/first", &seconds);
  script = g_strdup_printf ("printf 'one\\ntwo\\n' | \"$SANDSTEP\" run --handle=%s --holder=dag/run/second "
                            "--wait=30 -- 'cat; echo ran'", handle);
  waiting = shell_spawn (f, script);
  pump_until_err (waiting, "is held by 'dag/run/first'");
  hold_end (holding, seconds);
  waited = sandstep_test_proc_wait (waiting, 30);
  sandstep_test_assert_status (waited, 0);
  g_assert_cmpstr (waited->out, ==, "one\ntwo\nran\n");
}

static void
test_run_one_request (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *log = NULL;
  g_autofree char *path = NULL;
  gsize before;
  guint requests = 0;

  g_test_summary ("a remote `run` is one HTTP request: claim, command and status in one exchange "
                  "(POST .../claim-run), and the next run finds the sandbox free at once (--wait=0)");
  SKIP_IF_NO_JAIL (f);
  g_setenv ("SANDSTEPD_DEBUG", "1", TRUE);
  fixture_start (f);
  g_unsetenv ("SANDSTEPD_DEBUG");
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  g_assert_true (g_file_get_contents (f->server.log, &log, &before, NULL));
  g_clear_pointer (&log, g_free);
  for (int i = 0; i < 3; i++)
    {
      g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--wait=0", "--", "echo ok", NULL);
      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, "ok\n");
    }
  g_assert_true (g_file_get_contents (f->server.log, &log, NULL, NULL));
  path = g_strdup_printf ("POST /v1/sandboxes/%s/", strrchr (handle, '/') + 1);
  for (const char *p = log + before; (p = strstr (p, path)) != NULL; p += strlen (path))
    {
      requests++;
      g_assert_true (g_str_has_prefix (p + strlen (path), "claim-run\n"));
    }
  g_assert_cmpuint (requests, ==, 3);
}

static void
test_run_front_and_core_agree (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *command;
    const char *timeout;
  } cases[] = {
    { "printf 'out\\n'; printf 'err\\n' >&2; exit 7", "30" },
    { "printf '\\001\\377\\000x'; printf 'caf\\303\\251\\n' >&2", "30" },
    { "kill -KILL $$", "30" },
    { "echo started; sleep 5", "1" },
    { "seq 20000 | tail -n 1", "2.5" },
  };
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *libs = g_build_filename (f->host_dir, "no-soup", NULL);
  g_autofree char *fake = g_build_filename (libs, "libsoup-3.0.so.0", NULL);
  g_autofree char *curl_path = g_find_program_in_path ("curl");

  g_test_summary ("a plain remote run (the shape make renders: an owner, a holder, the configured server, no "
                  "stdin) is served by `sandstep` itself, without loading the HTTP stack, and says and exits "
                  "exactly as sandstep-core does for the same command: output, status, budget messages, an "
                  "allowlist's refusal");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *timeout = g_strconcat ("--timeout=", cases[i].timeout, NULL);
      /* "--wait=0e0" is a value only the core reads: it takes that run. */
      g_autoptr(SandstepTestResult) front = helper (f, "run", h, "--wait=0", timeout, "--", cases[i].command, NULL);
      g_autoptr(SandstepTestResult) core = helper (f, "run", h, "--wait=0e0", timeout, "--", cases[i].command, NULL);

      g_test_message ("%s: %d, %s", cases[i].command, front->status, front->err);
      g_assert_cmpint (front->status, ==, core->status);
      g_assert_cmpstr (front->out, ==, core->out);
      g_assert_cmpstr (front->err, ==, core->err);
    }
  if (curl_path != NULL)
    {
      /* An allowlist's refusal comes back with the result, said the same by both. */
      g_autofree char *holder = g_strdup_printf ("--holder=%s/allow", f->owner);
      g_autoptr(SandstepTestResult) made = helper (f, "provision", "--allow=svc.test", holder, NULL);
      g_autofree char *allow_h = NULL;
      const char *curl = "curl -sf -o /dev/null https://example.org/ || exit 7";

      sandstep_test_assert_status (made, 0);
      allow_h = g_strconcat ("--handle=", g_strstrip (made->out), NULL);
      {
        g_autoptr(SandstepTestResult) front = helper (f, "run", allow_h, "--wait=0", "--", curl, NULL);
        g_autoptr(SandstepTestResult) core = helper (f, "run", allow_h, "--wait=0e0", "--", curl, NULL);
        sandstep_test_assert_status (front, 7);
        sandstep_test_assert_contains (front->err, "sandstep run: ");
        sandstep_test_assert_contains (front->err, "example.org:443");
        g_assert_cmpint (front->status, ==, core->status);
        g_assert_cmpstr (front->err, ==, core->err);
      }
    }
  else
    g_test_message ("curl is missing: the allowlist's refusal was not compared");
  /* A broken libsoup: the core cannot speak HTTP, the front still runs a plain step. */
  g_assert_cmpint (g_mkdir_with_parents (libs, 0755), ==, 0);
  sandstep_test_write_file (fake, "not a library\n", -1);
  {
    g_auto(GStrv) envp = g_environ_setenv (g_strdupv (f->envp), "LD_LIBRARY_PATH", libs, TRUE);
    g_autoptr(SandstepTestResult) plain = helper_env_run (f, envp, "run", h, "--wait=0", "--", "echo plain", NULL);
    g_autoptr(SandstepTestResult) other = helper_env_run (f, envp, "run", h, "--wait=0e0", "--", "echo other", NULL);

    sandstep_test_assert_status (plain, 0);
    g_assert_cmpstr (plain->out, ==, "plain\n");
    sandstep_test_assert_status (other, SANDSTEP_EXIT_INTERNAL);
    sandstep_test_assert_contains (other->err, "cannot be loaded");
  }
}

/* ---- the daemon killed mid-command, and back ---- */

static void
test_crash_and_restart (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (1000);
  g_autofree char *command = g_strdup_printf ("echo evidence > kept.txt; echo started; sleep %s", seconds);
  const char *marker[] = { "sleep", seconds, NULL };
  g_autoptr(SandstepTestResult) interrupted = NULL;
  g_autofree char *listen = NULL;
  SandstepTestProc *p;

  g_test_summary ("sandstepd SIGKILLed mid-command: the caller hears the server went away and its files are "
                  "intact, the command dies with it; restarted on the same port, the sandbox, its files and its "
                  "owner are all there and the claim is free");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  p = helper_spawn (f, "run", h, "--", command, NULL);
  while (strstr (sandstep_test_proc_out (p), "started") == NULL)
    g_assert_true (sandstep_test_proc_pump (p, 0.1) || strstr (sandstep_test_proc_out (p), "started") != NULL);
  g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 10));

  sandstep_test_daemon_stop (&f->server.daemon, SIGKILL);
  interrupted = sandstep_test_proc_wait (p, 10);
  sandstep_test_assert_status (interrupted, SANDSTEP_EXIT_INTERNAL);
  sandstep_test_assert_contains (interrupted->err, "went away while the command ran");
  sandstep_test_assert_contains (interrupted->err, "its files are intact; run it again");
  /* The jail died with the worker, which died with the daemon. */
  g_assert_true (sandstep_test_wait_for_process (marker, FALSE, 5));

  {
    g_autoptr(SandstepTestResult) down = helper (f, "describe", h, NULL);
    sandstep_test_assert_status (down, SANDSTEP_EXIT_INTERNAL);
    sandstep_test_assert_contains (down->err, "Cannot reach the sandbox server");
  }

  listen = g_strdup_printf ("127.0.0.1:%d", server_port (&f->server));
  g_free (f->server.listen);
  f->server.listen = g_steal_pointer (&listen);
  server_start (&f->server);
  {
    g_autoptr(SandstepTestResult) d = helper (f, "describe", h, NULL);
    g_autoptr(SandstepTestResult) get = helper (f, "get", h, "kept.txt", NULL);
    g_autoptr(SandstepTestResult) again = helper (f, "run", h, "--wait=0", "--holder=dag/run/after", "--",
                                                  "cat kept.txt", NULL);
    sandstep_test_assert_status (d, 0);
    sandstep_test_assert_contains (d->out, f->owner);
    sandstep_test_assert_status (get, 0);
    g_assert_cmpstr (get->out, ==, "evidence\n");
    sandstep_test_assert_status (again, 0);
    g_assert_cmpstr (again->out, ==, "evidence\n");
  }
}

/* ---- many clients ---- */

#define N_CLIENTS 64
#define N_SANDBOXES 8

static void
test_many_clients (Fixture *f, gconstpointer data)
{
  char *handles[N_SANDBOXES];
  SandstepTestProc *procs[N_CLIENTS];
  gint64 started;

  g_test_summary ("64 clients run commands in 8 sandboxes at once: every result is right, and no two holders "
                  "are ever inside one sandbox together (a mkdir lock inside witnesses it), within 120 s");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  for (int i = 0; i < N_SANDBOXES; i++)
    {
      g_autofree char *holder = g_strdup_printf ("%s/box%d", f->owner, i);
      handles[i] = provision (f, holder);
    }
  started = g_get_monotonic_time ();
  for (int i = 0; i < N_CLIENTS; i++)
    {
      g_autofree char *h = g_strconcat ("--handle=", handles[i % N_SANDBOXES], NULL);
      g_autofree char *holder = g_strdup_printf ("--holder=%s/client%d", f->owner, i);
      g_autofree char *command = g_strdup_printf (
        "mkdir /workspace/lock || exit 42; echo %d > /workspace/who; sleep 0.05; "
        "test \"$(cat /workspace/who)\" = %d || exit 43; rmdir /workspace/lock; echo client-%d; echo side-%d >&2",
        i, i, i, i);
      procs[i] = helper_spawn (f, "run", h, holder, "--wait=120", "--", command, NULL);
    }
  for (int i = 0; i < N_CLIENTS; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_proc_wait (procs[i], 150);
      g_autofree char *out = g_strdup_printf ("client-%d\n", i);
      g_autofree char *err_line = g_strdup_printf ("side-%d\n", i);
      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, out);
      sandstep_test_assert_contains (r->err, err_line);
    }
  g_test_message ("64 clients done in %.1fs", (g_get_monotonic_time () - started) / (double) G_USEC_PER_SEC);
  g_assert_cmpfloat ((g_get_monotonic_time () - started) / (double) G_USEC_PER_SEC, <, 120);
  for (int i = 0; i < N_SANDBOXES; i++)
    {
      g_autofree char *h = g_strconcat ("--handle=", handles[i], NULL);
      g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--wait=0", "--",
                                                "test -e /workspace/lock && echo left || echo clean", NULL);
      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, "clean\n");
      g_free (handles[i]);
    }
}

/* ---- many clients on few workers (issue 33) ---- */

#define BURST_CLIENTS 200
#define BURST_SANDBOXES 50
#define BURST_OWNERS 10
#define BURST_MAX_CLAIMS "16"

/* The worker processes @daemon has now. */
static guint
count_workers (GPid daemon)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/task/%d/children", (int) daemon, (int) daemon);
  g_autofree char *children = NULL;
  g_auto(GStrv) pids = NULL;
  guint n = 0;

  g_assert_true (g_file_get_contents (path, &children, NULL, NULL));
  pids = g_strsplit_set (g_strstrip (children), " ", -1);
  for (gsize i = 0; pids[i] != NULL; i++)
    if (pids[i][0] != '\0')
      n++;
  return n;
}

static void
test_burst_waits_for_workers (Fixture *f, gconstpointer data)
{
  char *handles[BURST_SANDBOXES];
  char *owners[BURST_OWNERS];
  SandstepTestProc *procs[BURST_CLIENTS];

  g_test_bug ("33");
  g_test_summary ("200 clients at once, 4 to a sandbox, 50 sandboxes of 10 owners, against a sandstepd of "
                  "--max-claims=16: no request fails (a claim beyond the workers waits for one instead of being "
                  "refused), every output is its own, and the daemon never has more than 16 workers");
  SKIP_IF_NO_JAIL (f);
  f->server.extra = g_strdupv ((char *[]) { "--max-claims=" BURST_MAX_CLAIMS, NULL });
  fixture_start (f);
  for (int i = 0; i < BURST_OWNERS; i++)
    owners[i] = g_strdup_printf ("--owner=%s-o%d", f->owner, i);
  for (int i = 0; i < BURST_SANDBOXES; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=%s-o%d/box%d", f->owner, i % BURST_OWNERS, i);
      g_autoptr(SandstepTestResult) r = helper (f, "provision", owners[i % BURST_OWNERS], holder, NULL);

      sandstep_test_assert_status (r, 0);
      handles[i] = g_strconcat ("--handle=", g_strchomp (r->out), NULL);
    }
  for (int i = 0; i < BURST_CLIENTS; i++)
    {
      int box = i % BURST_SANDBOXES;
      g_autofree char *holder = g_strdup_printf ("--holder=%s-o%d/client%d", f->owner, box % BURST_OWNERS, i);
      g_autofree char *command = g_strdup_printf ("echo client-%d", i);

      procs[i] = helper_spawn (f, "run", handles[box], owners[box % BURST_OWNERS], holder, "--wait=120", "--",
                               command, NULL);
    }
  for (int i = 0; i < BURST_CLIENTS; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_proc_wait (procs[i], 150);
      g_autofree char *out = g_strdup_printf ("client-%d\n", i);

      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, out);
      if (i % 20 == 0)
        g_assert_cmpuint (count_workers (f->server.daemon.pid), <=, atoi (BURST_MAX_CLAIMS));
    }
  g_assert_cmpuint (count_workers (f->server.daemon.pid), <=, atoi (BURST_MAX_CLAIMS));
  for (int i = 0; i < BURST_SANDBOXES; i++)
    g_free (handles[i]);
  for (int i = 0; i < BURST_OWNERS; i++)
    g_free (owners[i]);
}

#define LONG_CLIENTS 8

static void
test_long_commands_get_workers (Fixture *f, gconstpointer data)
{
  char *handles[LONG_CLIENTS];
  SandstepTestProc *procs[LONG_CLIENTS];
  guint most = 0;
  gboolean running = TRUE;

  g_test_bug ("33");
  g_test_summary ("8 commands of 5 s at once, each in its own sandbox: claims wait for workers that come back only "
                  "while some do; with every worker held, more start, so all 8 run at once (8 workers seen while "
                  "they run) and every one succeeds");
  SKIP_IF_NO_JAIL (f);
  fixture_start (f);
  for (int i = 0; i < LONG_CLIENTS; i++)
    {
      g_autofree char *holder = g_strdup_printf ("%s/long%d", f->owner, i);
      g_autofree char *handle = provision (f, holder);

      handles[i] = g_strconcat ("--handle=", handle, NULL);
    }
  for (int i = 0; i < LONG_CLIENTS; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=%s/long-client%d", f->owner, i);
      procs[i] = helper_spawn (f, "run", handles[i], holder, "--", "sleep 5; echo long", NULL);
    }
  while (running)
    {
      most = MAX (most, count_workers (f->server.daemon.pid));
      running = FALSE;
      for (int i = 0; i < LONG_CLIENTS; i++)
        running |= sandstep_test_proc_pump (procs[i], 0);
      g_usleep (20 * 1000);
    }
  for (int i = 0; i < LONG_CLIENTS; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_proc_wait (procs[i], 10);

      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, "long\n");
      g_free (handles[i]);
    }
  g_test_message ("at most %u workers while they ran", most);
  g_assert_cmpuint (most, >=, LONG_CLIENTS);
}

#define FAIR_SLOW_CLIENTS 10

static void
test_slow_owner_does_not_starve (Fixture *f, gconstpointer data)
{
  g_autofree char *slow_owner = g_strdup_printf ("--owner=%s-slow", f->owner);
  g_autofree char *quick_owner = g_strdup_printf ("--owner=%s-quick", f->owner);
  g_autofree char *quick_holder = g_strdup_printf ("--holder=%s-quick/box", f->owner);
  g_autofree char *quick_handle = NULL;
  char *slow_handles[FAIR_SLOW_CLIENTS];
  SandstepTestProc *procs[FAIR_SLOW_CLIENTS + 1];
  gboolean done[FAIR_SLOW_CLIENTS + 1] = { FALSE };
  int n_done = 0, quick_place = -1;

  g_test_bug ("33");
  g_test_summary ("On a sandstepd of --max-claims=2, one owner's 10 commands of a second each wait for the two "
                  "workers; another owner's one command, sent after them, is served in its owner's turn, before "
                  "most of the first owner's (not after all of them), and none of them is refused");
  SKIP_IF_NO_JAIL (f);
  f->server.extra = g_strdupv ((char *[]) { "--max-claims=2", NULL });
  fixture_start (f);
  for (int i = 0; i < FAIR_SLOW_CLIENTS; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=%s-slow/box%d", f->owner, i);
      g_autoptr(SandstepTestResult) r = helper (f, "provision", slow_owner, holder, NULL);

      sandstep_test_assert_status (r, 0);
      slow_handles[i] = g_strconcat ("--handle=", g_strchomp (r->out), NULL);
    }
  {
    g_autoptr(SandstepTestResult) r = helper (f, "provision", quick_owner, quick_holder, NULL);

    sandstep_test_assert_status (r, 0);
    quick_handle = g_strconcat ("--handle=", g_strchomp (r->out), NULL);
  }
  for (int i = 0; i < FAIR_SLOW_CLIENTS; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=%s-slow/client%d", f->owner, i);

      procs[i] = helper_spawn (f, "run", slow_handles[i], slow_owner, holder, "--", "sleep 1; echo slow", NULL);
    }
  /* The slow owner's commands are in line before the quick one's comes. */
  g_usleep (G_USEC_PER_SEC / 2);
  procs[FAIR_SLOW_CLIENTS] = helper_spawn (f, "run", quick_handle, quick_owner, quick_holder, "--", "echo quick",
                                           NULL);
  /* The order in which they end (their pipes close when they exit). */
  while (n_done < FAIR_SLOW_CLIENTS + 1)
    {
      for (int i = 0; i < FAIR_SLOW_CLIENTS + 1; i++)
        if (!done[i] && !sandstep_test_proc_pump (procs[i], 0))
          {
            g_autoptr(SandstepTestResult) r = sandstep_test_proc_wait (procs[i], 10);

            sandstep_test_assert_status (r, 0);
            g_assert_cmpstr (r->out, ==, i == FAIR_SLOW_CLIENTS ? "quick\n" : "slow\n");
            done[i] = TRUE;
            if (i == FAIR_SLOW_CLIENTS)
              quick_place = n_done;
            n_done++;
          }
      g_usleep (5000);
    }
  g_test_message ("the quick owner's command ended after %d of the slow owner's %d", quick_place, FAIR_SLOW_CLIENTS);
  /* In turn it comes after at most the two that ran and the one each worker takes next; in one line, last. */
  g_assert_cmpint (quick_place, <=, FAIR_SLOW_CLIENTS / 2);
  for (int i = 0; i < FAIR_SLOW_CLIENTS; i++)
    g_free (slow_handles[i]);
}

/* ---- bad requests ---- */

typedef struct {
  guint status;
  char *body;
} Answer;

static void
answer_clear (Answer *a)
{
  g_free (a->body);
}

static SoupSession *
plain_session (void)
{
  SoupSession *session = soup_session_new_with_options ("timeout", 30, NULL);

  soup_session_set_proxy_resolver (session, NULL);
  return session;
}

/* One request with @body (NULL: none); @token NULL: no Authorization. */
static void
request (SoupSession *session, const char *method, const char *url, const char *token, const char *content_type,
         GBytes *body, const char *claim, Answer *out)
{
  g_autoptr(SoupMessage) msg = soup_message_new (method, url);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) answer = NULL;

  g_assert_nonnull (msg);
  if (token != NULL)
    {
      g_autofree char *value = g_strconcat ("Bearer ", token, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", value);
    }
  if (claim != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (msg), "X-Sandstep-Claim", claim);
  if (body != NULL)
    soup_message_set_request_body_from_bytes (msg, content_type ? content_type : "application/json", body);
  answer = soup_session_send_and_read (session, msg, NULL, &error);
  g_assert_no_error (error);
  out->status = soup_message_get_status (msg);
  out->body = g_strndup (g_bytes_get_data (answer, NULL), g_bytes_get_size (answer));
}

/* Asserts the answer is a JSON error {code, message, hint} with @status and @code. */
static void
assert_error (const Answer *a, guint status, const char *code)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;

  if (a->status != status)
    g_test_message ("answer %u (expected %u): %s", a->status, status, a->body);
  g_assert_cmpuint (a->status, ==, status);
  g_assert_true (json_parser_load_from_data (parser, a->body, -1, NULL));
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  o = json_node_get_object (json_parser_get_root (parser));
  if (g_strcmp0 (json_object_get_string_member_with_default (o, "code", NULL), code) != 0)
    g_test_message ("answer: %s (expected code %s)", a->body, code);
  g_assert_cmpstr (json_object_get_string_member_with_default (o, "code", NULL), ==, code);
  g_assert_nonnull (json_object_get_string_member_with_default (o, "message", NULL));
  g_assert_nonnull (json_object_get_string_member_with_default (o, "hint", NULL));
}

/* Sends raw bytes on a fresh connection; returns what came back (until close or 2 s). */
static char *
raw_exchange (Server *s, const char *data, gsize len)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) out = g_string_new (NULL);
  GOutputStream *output;
  GSocket *socket;
  char buf[4096];
  gssize n;

  g_socket_client_set_enable_proxy (client, FALSE);
  connection = g_socket_client_connect_to_host (client, "127.0.0.1", server_port (s), NULL, &error);
  g_assert_no_error (error);
  output = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  g_output_stream_write_all (output, data, len, NULL, NULL, NULL);
  socket = g_socket_connection_get_socket (connection);
  g_socket_set_timeout (socket, 2);
  while ((n = g_socket_receive (socket, buf, sizeof buf, NULL, NULL)) > 0)
    g_string_append_len (out, buf, n);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static char *
api (Server *s, const char *path)
{
  return g_strconcat (s->daemon.url, path, NULL);
}

static GBytes *
text_bytes (const char *text)
{
  return g_bytes_new (text, strlen (text));
}

static void
test_bad_requests (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupSession) session = plain_session ();
  Server *s = &f->server;
  const char *token = s->token;
  g_autofree char *handle = NULL;
  g_autofree char *local = NULL;
  g_autofree char *server_url = NULL;
  g_autofree char *describe_url = NULL;
  g_autofree char *log = NULL;
  g_autoptr(GBytes) identity = NULL;

  g_test_summary ("every class of bad request gets the right HTTP status and a JSON error {code, message, hint}: "
                  "missing or wrong token (401, logged without the token), malformed JSON, a body too large, "
                  "unknown routes and methods, bad handles, path traversal, unknown claims, JSON nested 200 KB deep; and "
                  "the daemon lives on");
  fixture_start (f);
  identity = text_bytes ("{\"owner\":\"o\",\"holder\":\"o/h\"}");
  describe_url = api (s, "/v1/sandboxes/sandstep-0123456789abcdef/describe");

  {
    Answer a = { 0 };
    request (session, "POST", describe_url, NULL, NULL, identity, NULL, &a);
    assert_error (&a, 401, "unauthorized");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    request (session, "POST", describe_url, "not-the-token", NULL, identity, NULL, &a);
    assert_error (&a, 401, "unauthorized");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autoptr(GBytes) body = text_bytes ("{\"owner\": \"o\", \"holder\": ");
    request (session, "POST", describe_url, token, NULL, body, NULL, &a);
    assert_error (&a, 400, "bad-json");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autoptr(GBytes) body = text_bytes ("[1, 2, 3]");
    request (session, "POST", describe_url, token, NULL, body, NULL, &a);
    assert_error (&a, 400, "bad-json");
    answer_clear (&a);
  }
  {
    /* 200 KB of '[' overflowed json-glib's stack, and the daemon with it. */
    Answer a = { 0 };
    g_autofree char *bomb = g_strnfill (200 * 1024, '[');
    g_autoptr(GBytes) body = text_bytes (bomb);
    request (session, "POST", describe_url, token, NULL, body, NULL, &a);
    assert_error (&a, 400, "bad-json");
    sandstep_test_assert_contains (a.body, "deeper than 64");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autoptr(GBytes) body = text_bytes ("{\"owner\": 7}");
    request (session, "POST", describe_url, token, NULL, body, NULL, &a);
    assert_error (&a, 400, "bad-request");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    gsize len = 2 * 1024 * 1024;
    g_autofree char *big = g_malloc (len);
    g_autoptr(GBytes) body = NULL;
    memset (big, ' ', len);
    big[0] = '{';
    big[len - 1] = '}';
    body = g_bytes_new_take (g_steal_pointer (&big), len);
    request (session, "POST", describe_url, token, NULL, body, NULL, &a);
    assert_error (&a, 413, "body-too-large");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autofree char *url = api (s, "/v1/nothing-here");
    request (session, "POST", url, token, NULL, identity, NULL, &a);
    assert_error (&a, 404, "no-route");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    request (session, "GET", describe_url, token, NULL, NULL, NULL, &a);
    assert_error (&a, 405, "method");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autofree char *url = api (s, "/v1/sandboxes/sandstep-XYZ/describe");
    request (session, "POST", url, token, NULL, identity, NULL, &a);
    assert_error (&a, 400, "bad-handle");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autofree char *url = api (s, "/v1/sandboxes/..%2F..%2Fetc/describe");
    request (session, "POST", url, token, NULL, identity, NULL, &a);
    g_assert_cmpuint (a.status, ==, 400);
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    request (session, "POST", describe_url, token, NULL, identity, NULL, &a);
    assert_error (&a, 404, "not-found");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autofree char *url = api (s, "/v1/sandboxes/sandstep-0123456789abcdef/run");
    g_autoptr(GBytes) body = text_bytes ("{\"claim\":\"c-nope\",\"command\":\"true\"}");
    request (session, "POST", url, token, NULL, body, NULL, &a);
    assert_error (&a, 409, "no-claim");
    answer_clear (&a);
  }
  {
    Answer a = { 0 };
    g_autofree char *url = api (s, "/v1/sandboxes/sandstep-0123456789abcdef/write?path=x");
    g_autoptr(GBytes) body = text_bytes ("data");
    request (session, "POST", url, token, "application/octet-stream", body, "c-nope", &a);
    assert_error (&a, 409, "no-claim");
    answer_clear (&a);
  }
  {
    /* Not even HTTP: libsoup answers 400 (no JSON: it never became a request) and the daemon is unmoved. */
    g_autofree char *back = raw_exchange (s, "GARBAGE\r\n\r\n", strlen ("GARBAGE\r\n\r\n"));
    g_assert_true (g_str_has_prefix (back, "HTTP/1."));
    sandstep_test_assert_contains (back, " 400 ");
  }

  /* With a sandbox: traversal in file paths, malformed uploads. */
  {
    g_autofree char *why = NULL;
    if (jails_work (f, &why))
      {
        g_autofree char *claim_url = NULL;
        g_autofree char *read_url = NULL;
        g_autofree char *put_url = NULL;
        g_autofree char *write_url = NULL;
        g_autofree char *claim_body = g_strdup_printf ("{\"owner\":\"%s\",\"holder\":\"%s\"}", f->owner, f->holder);
        g_autoptr(SoupMessage) claim_msg = NULL;
        g_autoptr(GInputStream) claim_stream = NULL;
        g_autoptr(GDataInputStream) lines = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonParser) parser = json_parser_new ();
        g_autofree char *first = NULL;
        const char *claim;
        g_autofree char *auth = g_strconcat ("Bearer ", token, NULL);
        g_autoptr(GBytes) claim_bytes = text_bytes (claim_body);

        handle = provision (f, NULL);
        g_assert_true (sandstep_handle_split (handle, &server_url, &local));
        claim_url = g_strdup_printf ("%s/v1/sandboxes/%s/claim", s->daemon.url, local);
        claim_msg = soup_message_new ("POST", claim_url);
        soup_message_headers_replace (soup_message_get_request_headers (claim_msg), "Authorization", auth);
        soup_message_set_request_body_from_bytes (claim_msg, "application/json", claim_bytes);
        claim_stream = soup_session_send (session, claim_msg, NULL, &error);
        g_assert_no_error (error);
        g_assert_cmpuint (soup_message_get_status (claim_msg), ==, 200);
        lines = g_data_input_stream_new (claim_stream);
        first = g_data_input_stream_read_line (lines, NULL, NULL, &error);
        g_assert_no_error (error);
        g_assert_true (json_parser_load_from_data (parser, first, -1, NULL));
        claim = json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "claim");

        read_url = g_strdup_printf ("%s/v1/sandboxes/%s/read", s->daemon.url, local);
        {
          Answer a = { 0 };
          g_autofree char *text = g_strdup_printf ("{\"claim\":\"%s\",\"path\":\"../../../etc/passwd\"}", claim);
          g_autoptr(GBytes) body = text_bytes (text);
          request (session, "POST", read_url, token, NULL, body, NULL, &a);
          assert_error (&a, 400, "path-escapes");
          answer_clear (&a);
        }
        {
          Answer a = { 0 };
          g_autofree char *text = g_strdup_printf ("{\"claim\":\"%s\",\"path\":\"/etc/passwd\"}", claim);
          g_autoptr(GBytes) body = text_bytes (text);
          request (session, "POST", read_url, token, NULL, body, NULL, &a);
          assert_error (&a, 400, "path-escapes");
          answer_clear (&a);
        }
        put_url = g_strdup_printf ("%s/v1/sandboxes/%s/put?dest=/workspace/&name=up&contents=0", s->daemon.url, local);
        {
          /* An entry that climbs out of the upload. */
          Answer a = { 0 };
          g_autoptr(GBytes) body = text_bytes ("{\"path\":\"\",\"type\":\"dir\",\"mode\":493}\n"
                                               "{\"path\":\"../../escape\",\"type\":\"file\",\"mode\":420,\"size\":1}\nx"
                                               "{\"end\":true}\n");
          request (session, "POST", put_url, token, "application/x-sandstep-entries", body, claim, &a);
          assert_error (&a, 400, "usage");
          answer_clear (&a);
        }
        {
          /* A link, then a file through it. */
          Answer a = { 0 };
          g_autoptr(GBytes) body = text_bytes ("{\"path\":\"\",\"type\":\"dir\",\"mode\":493}\n"
                                               "{\"path\":\"l\",\"type\":\"link\",\"target\":\"/etc\"}\n"
                                               "{\"path\":\"l/owned\",\"type\":\"file\",\"mode\":420,\"size\":1}\nx"
                                               "{\"end\":true}\n");
          request (session, "POST", put_url, token, "application/x-sandstep-entries", body, claim, &a);
          g_assert_cmpuint (a.status, >=, 400);
          g_assert_false (g_file_test ("/etc/owned", G_FILE_TEST_EXISTS));
          answer_clear (&a);
        }
        {
          /* Cut short: no end line. */
          Answer a = { 0 };
          g_autoptr(GBytes) body = text_bytes ("{\"path\":\"\",\"type\":\"file\",\"mode\":420,\"size\":10}\nabc");
          request (session, "POST", put_url, token, "application/x-sandstep-entries", body, claim, &a);
          assert_error (&a, 400, "usage");
          answer_clear (&a);
        }
        write_url = g_strdup_printf ("%s/v1/sandboxes/%s/write?path=../../../../tmp/x", s->daemon.url, local);
        {
          Answer a = { 0 };
          g_autoptr(GBytes) body = text_bytes ("data");
          request (session, "POST", write_url, token, "application/octet-stream", body, claim, &a);
          assert_error (&a, 400, "path-escapes");
          answer_clear (&a);
        }
        g_input_stream_close (claim_stream, NULL, NULL);
      }
  }

  /* Still serving. */
  {
    Answer a = { 0 };
    g_autofree char *url = api (s, "/v1/health");
    request (session, "GET", url, token, NULL, NULL, NULL, &a);
    g_assert_cmpuint (a.status, ==, 200);
    answer_clear (&a);
  }
  g_assert_true (g_file_get_contents (s->log, &log, NULL, NULL));
  sandstep_test_assert_contains (
    log, "refused POST /v1/sandboxes/sandstep-0123456789abcdef/describe from 127.0.0.1: no token");
  sandstep_test_assert_contains (log, "a wrong token");
  g_assert_null (strstr (log, token));
  g_assert_null (strstr (log, "not-the-token"));
}

#define LOOP_REQUESTS 2000
#define LOOP_SECONDS 20

static void
test_bad_request_loop (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupSession) session = plain_session ();
  Server *s = &f->server;
  g_autofree char *describe_url = NULL;
  g_autofree char *nothing_url = NULL;
  g_autofree char *run_url = NULL;
  g_autoptr(GBytes) broken = text_bytes ("{\"owner\": ");
  g_autoptr(GBytes) identity = text_bytes ("{\"owner\":\"o\",\"holder\":\"o/h\"}");
  g_autoptr(GBytes) unclaimed = text_bytes ("{\"claim\":\"c-nope\",\"command\":\"true\"}");
  g_autoptr(GBytes) big = NULL;
  guint64 before, after;
  gint64 deadline;
  guint done = 0;

  g_test_summary ("2000 malformed requests (or 20 s of them) of every kind: no crash, every one answered, and "
                  "the daemon's RSS grows by less than 20 MiB");
  fixture_start (f);
  describe_url = api (s, "/v1/sandboxes/sandstep-0123456789abcdef/describe");
  nothing_url = api (s, "/v1/x/y/z");
  run_url = api (s, "/v1/sandboxes/sandstep-0123456789abcdef/run");
  {
    gsize len = 1536 * 1024;
    char *data = g_malloc (len);
    memset (data, 'x', len);
    big = g_bytes_new_take (data, len);
  }
  /* Warm up first: the first requests allocate what every later one reuses. */
  for (int i = 0; i < 50; i++)
    {
      Answer a = { 0 };
      request (session, "POST", describe_url, s->token, NULL, broken, NULL, &a);
      answer_clear (&a);
    }
  before = server_rss_kib (s);
  deadline = g_get_monotonic_time () + LOOP_SECONDS * G_USEC_PER_SEC;
  for (; done < LOOP_REQUESTS && g_get_monotonic_time () < deadline; done++)
    {
      Answer a = { 0 };
      switch (done % 7)
        {
        case 0: request (session, "POST", describe_url, s->token, NULL, broken, NULL, &a); break;
        case 1: request (session, "POST", describe_url, "wrong", NULL, identity, NULL, &a); break;
        case 2: request (session, "POST", nothing_url, s->token, NULL, identity, NULL, &a); break;
        case 3: request (session, "POST", describe_url, s->token, NULL, big, NULL, &a); break;
        case 4: request (session, "POST", run_url, s->token, NULL, unclaimed, NULL, &a); break;
        case 5: request (session, "PUT", describe_url, s->token, NULL, identity, NULL, &a); break;
        case 6:
          {
            g_autofree char *back = raw_exchange (s, "POST /v1/gc HTTP/1.1\r\nContent-Length: x\r\n\r\n", 43);
            a.status = 400;
            a.body = g_strdup (back);
            break;
          }
        }
      g_assert_cmpuint (a.status, >=, 400);
      answer_clear (&a);
    }
  after = server_rss_kib (s);
  g_test_message ("%u requests; daemon RSS %" G_GUINT64_FORMAT " KiB before, %" G_GUINT64_FORMAT " KiB after", done,
                  before, after);
  g_assert_cmpuint (done, >=, 200);
  g_assert_cmpint ((gint64) after - (gint64) before, <, 20 * 1024);
  g_assert_cmpint (kill (s->daemon.pid, 0), ==, 0);
}

/* ---- three hosts ---- */

typedef struct {
  char *prefix;
  char *script;
  gboolean up;
} Hosts;

static gboolean
hosts_up (Hosts *hosts, char **out_reason)
{
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *ip = g_find_program_in_path ("ip");

  hosts->prefix = g_strdup_printf ("sandstep-test-%d", (int) getpid ());
  hosts->script = g_build_filename (srcdir != NULL ? srcdir : ".", "netns-hosts.sh", NULL);
  if (getuid () != 0)
    {
      *out_reason = g_strdup ("network namespaces need root");
      return FALSE;
    }
  if (ip == NULL)
    {
      *out_reason = g_strdup ("iproute2's 'ip' is missing");
      return FALSE;
    }
  {
    const char *sweep[] = { "/bin/sh", hosts->script, "sweep", NULL };
    const char *up[] = { "/bin/sh", hosts->script, "up", hosts->prefix, NULL };
    g_autoptr(SandstepTestResult) swept = run_argv (sweep, NULL, 30);
    g_autoptr(SandstepTestResult) r = run_argv (up, NULL, 30);
    if (r->status != 0)
      {
        *out_reason = g_strdup_printf ("cannot make network namespaces here: %s", r->err);
        return FALSE;
      }
  }
  hosts->up = TRUE;
  return TRUE;
}

static void
hosts_down (Hosts *hosts)
{
  if (hosts->up)
    {
      const char *down[] = { "/bin/sh", hosts->script, "down", hosts->prefix, NULL };
      g_autoptr(SandstepTestResult) r = run_argv (down, NULL, 30);
      g_autofree char *list = NULL;
      g_spawn_command_line_sync ("ip netns list", &list, NULL, NULL, NULL);
      g_assert_null (strstr (list ? list : "", hosts->prefix));
    }
  g_free (hosts->prefix);
  g_free (hosts->script);
}

static char **
netns_prefix (Hosts *hosts, const char *host)
{
  g_autofree char *ns = g_strdup_printf ("%s-%s", hosts->prefix, host);
  const char *prefix[] = { "ip", "netns", "exec", ns, NULL };

  return g_strdupv ((char **) prefix);
}

static SandstepTestResult *helper_on (Fixture *f, Hosts *hosts, const char *host, char **envp, const char *first, ...)
  G_GNUC_NULL_TERMINATED;

/* `sandstep ARGS...` on one of the hosts. */
static SandstepTestResult *
helper_on (Fixture *f, Hosts *hosts, const char *host, char **envp, const char *first, ...)
{
  g_auto(GStrv) prefix = netns_prefix (hosts, host);
  g_autofree char *ip = g_find_program_in_path ("ip");
  va_list ap;
  SandstepTestResult *r;

  g_free (prefix[0]);
  prefix[0] = g_strdup (ip);
  va_start (ap, first);
  r = helper_v (f, envp, (const char *const *) prefix, HELPER_TIMEOUT_S, first, ap);
  va_end (ap);
  return r;
}

static void
test_three_hosts (Fixture *f, gconstpointer data)
{
  Hosts hosts = { 0 };
  g_autofree char *why = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_auto(GStrv) env_a = NULL;
  g_auto(GStrv) env_c = NULL;
  const char *server = "http://10.231.1.2:7700";

  g_test_summary ("three hosts (network namespaces A, B, C; 10.231.x.0/24 addresses that exist only inside "
                  "them): a step on A provisions through sandstepd on B; a step on C attaches by the handle "
                  "(no backend given, B listed in C's servers file) and reads the files A left; unlisted, C "
                  "refuses to send B its token");
  SKIP_IF_NO_JAIL (f);
  if (!hosts_up (&hosts, &why))
    {
      hosts_down (&hosts);
      skip_because (why);
      return;
    }
  f->server.prefix = netns_prefix (&hosts, "b");
  g_free (f->server.listen);
  /* Inside B only: its two veth addresses and its own loopback. */
  f->server.listen = g_strdup ("0.0.0.0:7700");
  server_start (&f->server);

  env_a = helper_env (f, server);
  /* Plain http between the namespaces, said so. */
  env_a = g_environ_setenv (env_a, "SANDSTEP_ALLOW_HTTP", "1", TRUE);
  env_a = g_environ_setenv (env_a, "SANDSTEP_HOLDER", "sandstep-test/three-hosts/provision", TRUE);
  {
    g_autoptr(SandstepTestResult) r = helper_on (f, &hosts, "a", env_a, "provision", NULL);
    sandstep_test_assert_status (r, 0);
    handle = g_strdup (g_strstrip (r->out));
    g_assert_true (g_str_has_prefix (handle, "http://10.231.1.2:7700/sandstep-"));
  }
  h = g_strconcat ("--handle=", handle, NULL);
  env_a = g_environ_setenv (env_a, "SANDSTEP_HOLDER", "sandstep-test/three-hosts/step-a", TRUE);
  {
    g_autoptr(SandstepTestResult) r = helper_on (f, &hosts, "a", env_a, "run", h, "--",
                                                 "echo left-by-a > a.txt; hostname", NULL);
    sandstep_test_assert_status (r, 0);
  }

  /* C knows the handle and the token, and trusts B once its servers file lists it. */
  env_c = helper_env (f, NULL);
  env_c = g_environ_setenv (env_c, "SANDSTEP_ALLOW_HTTP", "1", TRUE);
  env_c = g_environ_setenv (env_c, "SANDSTEP_HOLDER", "sandstep-test/three-hosts/step-c", TRUE);
  {
    g_autoptr(SandstepTestResult) r = helper_on (f, &hosts, "c", env_c, "get", h, "a.txt", NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_USAGE);
    sandstep_test_assert_contains (r->err, "sends its token only to");
  }
  {
    g_autofree char *config = g_build_filename (f->dir, "config-c", NULL);
    g_autofree char *servers = g_build_filename (config, "sandstep", "servers", NULL);
    g_autofree char *servers_dir = g_path_get_dirname (servers);
    g_autofree char *text = g_strdup_printf ("# the team's sandbox server\n%s\n", server);

    g_assert_cmpint (g_mkdir_with_parents (servers_dir, 0700), ==, 0);
    sandstep_test_write_file (servers, text, -1);
    env_c = g_environ_setenv (env_c, "XDG_CONFIG_HOME", config, TRUE);
  }
  {
    g_autoptr(SandstepTestResult) r = helper_on (f, &hosts, "c", env_c, "get", h, "a.txt", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "left-by-a\n");
  }
  {
    g_autoptr(SandstepTestResult) r = helper_on (f, &hosts, "c", env_c, "ls", h, NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "a.txt\n");
  }
  {
    /* From this machine's own namespace, B's addresses do not exist. */
    g_autoptr(SandstepTestResult) r = helper (f, "describe", h, NULL);
    g_assert_cmpint (r->status, !=, 0);
  }
  sandstep_test_daemon_stop (&f->server.daemon, SIGTERM);
  hosts_down (&hosts);
}

/* `sandstep ARGS...` on one of the hosts, under a hostname of its own (a UTS namespace). */
static SandstepTestResult *helper_named (Fixture *f, Hosts *hosts, const char *host, char **envp,
                                         const char *first, ...)
  G_GNUC_NULL_TERMINATED;

static SandstepTestResult *
helper_named (Fixture *f, Hosts *hosts, const char *host, char **envp, const char *first, ...)
{
  g_autofree char *ip = g_find_program_in_path ("ip");
  g_autofree char *unshare = g_find_program_in_path ("unshare");
  g_autofree char *ns = g_strdup_printf ("%s-%s", hosts->prefix, host);
  g_autofree char *name = g_strdup_printf ("host-%s", host);
  const char *prefix[] = { ip, "netns", "exec", ns, unshare, "-u", "/bin/sh", "-c", "hostname \"$0\" && exec \"$@\"",
                           name, NULL };
  va_list ap;
  SandstepTestResult *r;

  va_start (ap, first);
  r = helper_v (f, envp, prefix, HELPER_TIMEOUT_S, first, ap);
  va_end (ap);
  return r;
}

static void
test_hosts_same_owner (Fixture *f, gconstpointer data)
{
  Hosts hosts = { 0 };
  g_autofree char *why = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *run = g_strdup_printf ("r%d-%08x", (int) getpid (), g_random_int ());
  g_autofree char *owner = g_strdup_printf ("nightly/%s", run);
  g_autofree char *unshare = g_find_program_in_path ("unshare");
  g_auto(GStrv) env = NULL;
  const char *server = "http://10.231.1.2:7700";
  const char *steps[] = { "a", "b", "c" };

  g_test_summary ("a step on another host presents the run's owner (SANDSTEP_DAG/SANDSTEP_RUN), never one made "
                  "from its host name: hosts A, B (the server's) and C, network namespaces each with a hostname of "
                  "its own, all reach the sandbox A provisioned as the owner nightly/RUN; a step of another run, "
                  "or one without the run (whose default would be USER@host-c), is refused (67)");
  SKIP_IF_NO_JAIL (f);
  if (unshare == NULL)
    {
      skip_because ("util-linux's unshare is missing");
      return;
    }
  if (!hosts_up (&hosts, &why))
    {
      hosts_down (&hosts);
      skip_because (why);
      return;
    }
  f->server.prefix = netns_prefix (&hosts, "b");
  g_free (f->server.listen);
  f->server.listen = g_strdup ("0.0.0.0:7700");
  server_start (&f->server);
  g_free (f->server.daemon.url);
  f->server.daemon.url = g_strdup (server);

  /* What travels with a step: the run, the DAG, the token (the file's path here), the server. */
  env = helper_env (f, server);
  env = g_environ_unsetenv (env, "SANDSTEP_OWNER");
  env = g_environ_setenv (env, "SANDSTEP_RUN", run, TRUE);
  env = g_environ_setenv (env, "SANDSTEP_DAG", "nightly", TRUE);
  env = g_environ_setenv (env, "SANDSTEP_ALLOW_HTTP", "1", TRUE);
  env = g_environ_setenv (env, "SANDSTEP_HOLDER", "nightly/provision", TRUE);
  {
    g_autoptr(SandstepTestResult) r = helper_named (f, &hosts, "a", env, "provision", NULL);
    sandstep_test_assert_status (r, 0);
    handle = g_strdup (g_strstrip (r->out));
  }
  h = g_strconcat ("--handle=", handle, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (steps); i++)
    {
      g_autofree char *holder = g_strdup_printf ("nightly/step-%s", steps[i]);
      g_autofree char *command = g_strdup_printf ("echo %s >> steps; cat steps", steps[i]);
      g_autofree char *expected = NULL;
      g_auto(GStrv) env_i = g_environ_setenv (g_strdupv (env), "SANDSTEP_HOLDER", holder, TRUE);
      g_autoptr(SandstepTestResult) r = helper_named (f, &hosts, steps[i], env_i, "run", h, "--", command, NULL);
      g_autoptr(SandstepTestResult) d = helper_named (f, &hosts, steps[i], env_i, "describe", h, NULL);
      g_autoptr(JsonParser) parser = json_parser_new ();

      sandstep_test_assert_status (r, 0);
      expected = g_strjoinv ("\n", (char **) (const char *[]) { "a", i >= 1 ? "b" : NULL, i >= 2 ? "c" : NULL, NULL });
      g_assert_true (g_str_has_prefix (r->out, expected));
      sandstep_test_assert_status (d, 0);
      g_assert_true (json_parser_load_from_data (parser, d->out, -1, NULL));
      g_assert_cmpstr (json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "owner"),
                       ==, owner);
    }
  {
    g_auto(GStrv) other = g_environ_setenv (g_strdupv (env), "SANDSTEP_RUN", "another-run", TRUE);
    g_autoptr(SandstepTestResult) r = helper_named (f, &hosts, "c", other, "run", h, "--", "echo never", NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_NOT_OWNER);
    sandstep_test_assert_contains (r->err, "is not owned by 'nightly/another-run'");
    g_assert_cmpstr (r->out, ==, "");
  }
  {
    g_auto(GStrv) none = g_environ_unsetenv (g_strdupv (env), "SANDSTEP_RUN");
    g_autoptr(SandstepTestResult) r = helper_named (f, &hosts, "c", none, "run", h, "--", "echo never", NULL);
    /* The default a step without its run would have: C's own host name. */
    g_autofree char *fallback = g_strdup_printf ("is not owned by '%s@host-c'", g_get_user_name ());
    sandstep_test_assert_status (r, SANDSTEP_EXIT_NOT_OWNER);
    sandstep_test_assert_contains (r->err, fallback);
  }
  {
    /* Gone through the daemon before it stops; from C, by the run's owner. */
    g_autoptr(SandstepTestResult) r = helper_named (f, &hosts, "c", env, "destroy", h, NULL);
    sandstep_test_assert_status (r, 0);
  }
  sandstep_test_daemon_stop (&f->server.daemon, SIGTERM);
  hosts_down (&hosts);
}

/* ---- TLS ---- */

static void
test_tls (Fixture *f, gconstpointer data)
{
  g_autofree char *openssl = g_find_program_in_path ("openssl");
  g_autofree char *cert = g_build_filename (f->dir, "cert.pem", NULL);
  g_autofree char *key = g_build_filename (f->dir, "key.pem", NULL);
  g_autofree char *cert_arg = g_strconcat ("--tls-cert=", cert, NULL);
  g_autofree char *key_arg = g_strconcat ("--tls-key=", key, NULL);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;

  g_test_summary ("with --tls-cert and --tls-key sandstepd serves https; a client trusting the certificate "
                  "(SANDSTEP_CA_FILE) works, one that does not is refused with a clear error");
  SKIP_IF_NO_JAIL (f);
  if (openssl == NULL)
    {
      g_test_skip ("openssl is missing: no certificate can be made");
      return;
    }
  {
    const char *argv[] = { openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert,
                           NULL };
    g_autoptr(SandstepTestResult) r = run_argv (argv, NULL, 60);
    sandstep_test_assert_status (r, 0);
  }
  f->server.extra = g_strdupv ((char *[]) { cert_arg, key_arg, NULL });
  fixture_start (f);
  g_assert_true (g_str_has_prefix (f->server.daemon.url, "https://"));
  f->envp = g_environ_setenv (f->envp, "SANDSTEP_CA_FILE", cert, TRUE);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  {
    g_autoptr(SandstepTestResult) r = helper (f, "run", h, "--", "echo over-tls", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "over-tls\n");
  }
  f->envp = g_environ_unsetenv (f->envp, "SANDSTEP_CA_FILE");
  {
    g_autoptr(SandstepTestResult) r = helper (f, "describe", h, NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_INTERNAL);
    sandstep_test_assert_contains (r->err, "Cannot reach the sandbox server");
  }
}

/* ---- who may talk to the server ---- */

/* `sandstep ARGS...` with the token @token ($SANDSTEP_TOKEN) and the owner @owner. */
static SandstepTestResult *
helper_as (Fixture *f, const char *token, const char *owner, const char *const *args)
{
  g_auto(GStrv) envp = g_strdupv (f->envp);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();

  envp = g_environ_unsetenv (envp, "SANDSTEP_TOKEN_FILE");
  envp = g_environ_setenv (envp, "SANDSTEP_TOKEN", token, TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_OWNER", owner, TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_HOLDER", owner, TRUE);
  g_ptr_array_add (argv, f->helper);
  for (gsize i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  return run_argv ((const char *const *) argv->pdata, envp, HELPER_TIMEOUT_S);
}

static void
test_own_token (Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename (f->server.state_dir, "sandstepd.token", NULL);
  g_autofree char *first = NULL;
  g_autofree char *again = NULL;
  g_autoptr(SoupSession) session = plain_session ();
  g_autofree char *health = NULL;
  struct stat st;

  g_test_summary ("without --token-file sandstepd still requires a token, also on loopback: it makes one in "
                  "STATE/sandstepd.token (0600), says where, refuses requests without it (401) and keeps it "
                  "across restarts; clients that name the file get in");
  /* The fixture's daemon, started without the fixture's token file. */
  g_strfreev (f->server.extra);
  f->server.extra = NULL;
  g_free (f->server.token_file);
  f->server.token_file = g_strdup (path);
  {
    /* server_start passes --token-file: run the daemon without it here. */
    g_autofree char *state = g_strconcat ("--state-dir=", f->server.state_dir, NULL);
    const char *argv[] = { g_getenv ("SANDSTEPD"), "--listen=127.0.0.1:0", state, NULL };

    for (int round = 0; round < 2; round++)
      {
        SandstepTestDaemon daemon = { 0 };
        g_autofree char *log = g_strdup_printf ("%s/own-token-%d.log", f->server.dir, round);
        g_autofree char *said = NULL;

        sandstep_test_daemon_start (&daemon, argv, NULL, NULL, log);
        /* The log says where the token is, and never the token. */
        for (int i = 0; i < 50 && (said == NULL || strstr (said, "sandstepd.token") == NULL); i++)
          {
            g_clear_pointer (&said, g_free);
            g_file_get_contents (log, &said, NULL, NULL);
            if (said == NULL || strstr (said, "sandstepd.token") == NULL)
              g_usleep (100 * 1000);
          }
        g_assert_nonnull (said);
        sandstep_test_assert_contains (said, path);
        g_assert_cmpint (stat (path, &st), ==, 0);
        g_assert_cmpint (st.st_mode & 0777, ==, 0600);
        g_assert_true (g_file_get_contents (path, round == 0 ? &first : &again, NULL, NULL));
        g_strchomp (round == 0 ? first : again);
        g_assert_null (strstr (said, round == 0 ? first : again));
        health = g_strconcat (daemon.url, "/v1/health", NULL);
        {
          Answer a = { 0 };
          request (session, "GET", health, NULL, NULL, NULL, NULL, &a);
          g_assert_cmpuint (a.status, ==, 401);
          answer_clear (&a);
        }
        {
          Answer a = { 0 };
          request (session, "GET", health, round == 0 ? first : again, NULL, NULL, NULL, &a);
          g_assert_cmpuint (a.status, ==, 200);
          answer_clear (&a);
        }
        {
          g_auto(GStrv) envp = helper_env (f, daemon.url);
          const char *provision_argv[] = { f->helper, "provision", NULL };
          g_autoptr(SandstepTestResult) made = NULL;

          envp = g_environ_setenv (envp, "SANDSTEP_TOKEN_FILE", path, TRUE);
          made = run_argv (provision_argv, envp, HELPER_TIMEOUT_S);
          sandstep_test_assert_status (made, 0);
        }
        g_clear_pointer (&health, g_free);
        sandstep_test_daemon_clear (&daemon);
      }
  }
  /* A restart keeps the token: clients keep working. */
  g_assert_cmpstr (first, ==, again);
  g_assert_cmpuint (strlen (first), ==, 64);
}

static void
test_web_pages_refused (Fixture *f, gconstpointer data)
{
  static const char *const names[] = { "--server-name=sandboxes.example.org", NULL };
  g_autoptr(SoupSession) session = plain_session ();
  Server *s = &f->server;
  g_autofree char *describe_url = NULL;
  g_autoptr(GBytes) identity = text_bytes ("{\"owner\":\"o\",\"holder\":\"o/h\"}");
  g_autofree char *log = NULL;

  g_test_summary ("a web page cannot reach sandstepd: a request with an Origin header is refused (403) even with "
                  "the token, a body that is not application/json (text/plain, a form: a simple POST) gets 415, "
                  "and a Host that is not one of the server's names (DNS rebinding) gets 403");
  s->extra = g_strdupv ((char **) names);
  fixture_start (f);
  describe_url = api (s, "/v1/sandboxes/sandstep-0123456789abcdef/describe");
  {
    Answer a = { 0 };
    g_autoptr(SoupMessage) msg = soup_message_new ("POST", describe_url);
    g_autofree char *auth = g_strconcat ("Bearer ", s->token, NULL);
    g_autoptr(GBytes) answer = NULL;

    soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
    soup_message_headers_replace (soup_message_get_request_headers (msg), "Origin", "https://evil.example");
    soup_message_set_request_body_from_bytes (msg, "application/json", identity);
    answer = soup_session_send_and_read (session, msg, NULL, NULL);
    a.status = soup_message_get_status (msg);
    a.body = g_strndup (g_bytes_get_data (answer, NULL), g_bytes_get_size (answer));
    assert_error (&a, 403, "origin");
    answer_clear (&a);
  }
  for (int i = 0; i < 3; i++)
    {
      static const char *const types[] = { "text/plain", "application/x-www-form-urlencoded", "multipart/form-data" };
      Answer a = { 0 };
      request (session, "POST", describe_url, s->token, types[i], identity, NULL, &a);
      assert_error (&a, 415, "content-type");
      answer_clear (&a);
    }
  {
    /* DNS rebinding: a name of the page's own that now points at this server. */
    g_autofree char *request_text = g_strdup_printf ("POST /v1/sandboxes/sandstep-0123456789abcdef/describe HTTP/1.1\r\n"
                                                     "Host: rebind.evil.example:%d\r\nAuthorization: Bearer %s\r\n"
                                                     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                                                     "Connection: close\r\n\r\n%s",
                                                     server_port (s), s->token,
                                                     strlen ("{\"owner\":\"o\",\"holder\":\"o/h\"}"),
                                                     "{\"owner\":\"o\",\"holder\":\"o/h\"}");
    g_autofree char *back = raw_exchange (s, request_text, strlen (request_text));
    sandstep_test_assert_contains (back, " 403 ");
    sandstep_test_assert_contains (back, "bad-host");
  }
  for (int i = 0; i < 3; i++)
    {
      static const char *const ours[] = { "sandboxes.example.org", "localhost", "127.0.0.1" };
      g_autofree char *request_text = g_strdup_printf ("GET /v1/health HTTP/1.1\r\nHost: %s:%d\r\n"
                                                       "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
                                                       ours[i], server_port (s), s->token);
      g_autofree char *back = raw_exchange (s, request_text, strlen (request_text));
      sandstep_test_assert_contains (back, " 200 ");
    }
  /* Issue 30: an address literal is ours only when the server listens on it (here 127.0.0.1). */
  for (int i = 0; i < 4; i++)
    {
      static const char *const others[] = { "10.11.12.13", "127.0.0.2", "[::1]", "[::ffff:7f00:1]" };
      g_autofree char *request_text = g_strdup_printf ("GET /v1/health HTTP/1.1\r\nHost: %s:%d\r\n"
                                                       "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
                                                       others[i], server_port (s), s->token);
      g_autofree char *back = raw_exchange (s, request_text, strlen (request_text));
      g_test_message ("Host %s", others[i]);
      sandstep_test_assert_contains (back, " 403 ");
      sandstep_test_assert_contains (back, "bad-host");
    }
  g_assert_true (g_file_get_contents (s->log, &log, NULL, NULL));
  sandstep_test_assert_contains (log, "Origin 'https://evil.example'");
  sandstep_test_assert_contains (log, "Host 'rebind.evil.example");
}

/* Polls `describe` of @h under @token and @owner until its lifetime is over; fails after @timeout_s. */
static void
wait_expired_as (Fixture *f, const char *token, const char *owner, const char *h, double timeout_s)
{
  const char *describe[] = { "describe", h, NULL };
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * sandstep_test_time_scale () * G_USEC_PER_SEC);

  for (;;)
    {
      g_autoptr(SandstepTestResult) r = helper_as (f, token, owner, describe);
      g_autoptr(JsonParser) parser = json_parser_new ();

      sandstep_test_assert_status (r, 0);
      g_assert_true (json_parser_load_from_data (parser, r->out, -1, NULL));
      if (json_object_get_int_member (json_node_get_object (json_parser_get_root (parser)), "remaining_seconds") == 0)
        return;
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (100 * 1000);
    }
}

static void
test_owner_tokens (Fixture *f, gconstpointer data)
{
  g_autofree char *admin = g_strdup_printf ("admin-%08x%08x", g_random_int (), g_random_int ());
  g_autofree char *nightly = g_strdup_printf ("nightly-%08x%08x", g_random_int (), g_random_int ());
  g_autofree char *weekly = g_strdup_printf ("weekly-%08x%08x", g_random_int (), g_random_int ());
  g_autofree char *file = NULL;
  g_autofree char *n_owner = g_strdup_printf ("nightly/%s", f->run);
  g_autofree char *w_owner = g_strdup_printf ("weekly/%s", f->run);
  g_autofree char *n_handle = NULL;
  g_autofree char *w_handle = NULL;
  g_autofree char *n_h = NULL;
  g_autofree char *w_h = NULL;
  g_autofree char *lifetime_arg = NULL;
  g_autoptr(SoupSession) session = plain_session ();

  g_test_summary ("tokens bound to owner prefixes: a token touches only sandboxes of the owners it covers, is "
                  "refused (403) for others, naming the caller's owner and never the sandbox's; gc without an "
                  "admin token reclaims only what the token covers, and list shows only those; a claim is usable only "
                  "under a token that covers its owner; a one-token file stays an admin token");
  file = g_strdup_printf ("# sandstepd tokens\n%s\n\n%s owner=nightly/\n%s owner=weekly/\n", admin, nightly, weekly);
  g_assert_true (g_file_set_contents_full (f->server.token_file, file, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
  fixture_start (f);
  {
    /* What comes before the gc below must happen within the lifetime on however slow a host: it is ten
     * times what two provisions took here (about a dozen calls come before the gc), and at least 3 s. */
    g_autofree char *n_probe = g_strdup_printf ("--holder=%s/probe", n_owner);
    g_autofree char *w_probe = g_strdup_printf ("--holder=%s/probe", w_owner);
    gint64 started = g_get_monotonic_time ();
    g_autoptr(SandstepTestResult) a = helper_as (f, nightly, n_owner, (const char *[]) { "provision", n_probe, NULL });
    g_autoptr(SandstepTestResult) b = helper_as (f, weekly, w_owner, (const char *[]) { "provision", w_probe, NULL });

    sandstep_test_assert_status (a, 0);
    sandstep_test_assert_status (b, 0);
    lifetime_arg = g_strdup_printf ("--lifetime=%" G_GINT64_FORMAT "s",
                                    MAX (3, 10 * (g_get_monotonic_time () - started) / G_USEC_PER_SEC + 1));
  }
  {
    const char *args[] = { "provision", lifetime_arg, NULL };
    g_autoptr(SandstepTestResult) n = helper_as (f, nightly, n_owner, args);
    g_autoptr(SandstepTestResult) w = helper_as (f, weekly, w_owner, args);
    sandstep_test_assert_status (n, 0);
    sandstep_test_assert_status (w, 0);
    n_handle = g_strstrip (g_strdup (n->out));
    w_handle = g_strstrip (g_strdup (w->out));
    n_h = g_strconcat ("--handle=", n_handle, NULL);
    w_h = g_strconcat ("--handle=", w_handle, NULL);
  }
  /* The nightly token may not act as a weekly owner. */
  {
    const char *args[] = { "provision", NULL };
    g_autoptr(SandstepTestResult) r = helper_as (f, nightly, w_owner, args);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_NOT_OWNER);
    sandstep_test_assert_contains (r->err, w_owner);
    sandstep_test_assert_contains (r->err, "covers owners under 'nightly/' only");
  }
  /* ... and, as its own owner, learns nothing of the weekly sandbox's owner. */
  {
    const char *describe[] = { "describe", w_h, NULL };
    const char *destroy[] = { "destroy", w_h, NULL };
    const char *run[] = { "ls", w_h, NULL };
    const char *const *calls[] = { describe, destroy, run };

    for (gsize i = 0; i < G_N_ELEMENTS (calls); i++)
      {
        g_autoptr(SandstepTestResult) r = helper_as (f, nightly, n_owner, calls[i]);
        sandstep_test_assert_status (r, SANDSTEP_EXIT_NOT_OWNER);
        sandstep_test_assert_contains (r->err, n_owner);
        g_assert_null (strstr (r->err, "weekly"));
      }
  }
  /* Listing, the nightly token sees the nightly sandbox and nothing of the weekly one. */
  {
    g_autofree char *n_local = NULL, *w_local = NULL, *n_server = NULL, *w_server = NULL;
    const char *list[] = { "list", NULL };
    g_autoptr(SandstepTestResult) r = helper_as (f, nightly, n_owner, list);
    g_autoptr(SandstepTestResult) all = helper_as (f, admin, "anyone/at-all", list);

    g_assert_true (sandstep_handle_split (n_handle, &n_server, &n_local));
    g_assert_true (sandstep_handle_split (w_handle, &w_server, &w_local));
    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_contains (r->out, n_local);
    g_assert_null (strstr (r->out, w_local));
    g_assert_null (strstr (r->out, "weekly"));
    sandstep_test_assert_status (all, 0);
    sandstep_test_assert_contains (all->out, n_local);
    sandstep_test_assert_contains (all->out, w_local);
  }
  /* A claim made under the weekly token is no claim of the nightly token's. */
  {
    g_autofree char *local = NULL;
    g_autofree char *server_url = NULL;
    g_autofree char *claim_url = NULL;
    g_autofree char *list_url = NULL;
    g_autofree char *auth = g_strconcat ("Bearer ", weekly, NULL);
    g_autofree char *body_text = g_strdup_printf ("{\"owner\":\"%s\",\"holder\":\"%s/raw\"}", w_owner, w_owner);
    g_autoptr(GBytes) body = text_bytes (body_text);
    g_autoptr(SoupMessage) msg = NULL;
    g_autoptr(GInputStream) stream = NULL;
    g_autoptr(GDataInputStream) lines = NULL;
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autofree char *first = NULL;
    const char *claim;
    g_autofree char *list_text = NULL;
    g_autoptr(GBytes) list_body = NULL;

    g_assert_true (sandstep_handle_split (w_handle, &server_url, &local));
    claim_url = g_strdup_printf ("%s/v1/sandboxes/%s/claim", f->server.daemon.url, local);
    msg = soup_message_new ("POST", claim_url);
    soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
    soup_message_set_request_body_from_bytes (msg, "application/json", body);
    stream = soup_session_send (session, msg, NULL, NULL);
    g_assert_nonnull (stream);
    g_assert_cmpuint (soup_message_get_status (msg), ==, 200);
    lines = g_data_input_stream_new (stream);
    first = g_data_input_stream_read_line (lines, NULL, NULL, NULL);
    g_assert_nonnull (first);
    g_assert_true (json_parser_load_from_data (parser, first, -1, NULL));
    claim = json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "claim");
    list_url = g_strdup_printf ("%s/v1/sandboxes/%s/list", f->server.daemon.url, local);
    list_text = g_strdup_printf ("{\"claim\":\"%s\",\"path\":\"/workspace\"}", claim);
    list_body = text_bytes (list_text);
    {
      Answer a = { 0 };
      request (session, "POST", list_url, nightly, NULL, list_body, NULL, &a);
      assert_error (&a, 409, "no-claim");
      answer_clear (&a);
    }
    {
      Answer a = { 0 };
      request (session, "POST", list_url, weekly, NULL, list_body, NULL, &a);
      g_assert_cmpuint (a.status, ==, 200);
      answer_clear (&a);
    }
    g_input_stream_close (stream, NULL, NULL);
  }
  /* Past both lifetimes: the nightly token's gc reclaims the nightly sandbox only. */
  wait_expired_as (f, nightly, n_owner, n_h, 120);
  wait_expired_as (f, weekly, w_owner, w_h, 120);
  {
    const char *gc[] = { "gc", NULL };
    const char *describe_w[] = { "describe", w_h, NULL };
    g_autoptr(SandstepTestResult) r = helper_as (f, nightly, n_owner, gc);
    g_autoptr(SandstepTestResult) still = NULL;

    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_contains (r->out, n_handle);
    g_assert_null (strstr (r->out, w_handle));
    still = helper_as (f, weekly, w_owner, describe_w);
    sandstep_test_assert_status (still, 0);
  }
  /* The admin token (a line of its own, as the one-token file of before) reclaims every owner's. */
  {
    const char *gc[] = { "gc", NULL };
    g_autoptr(SandstepTestResult) r = helper_as (f, admin, "anyone/at-all", gc);
    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_contains (r->out, w_handle);
  }
}

static void
test_token_only_to_its_server (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) trap = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new_from_string ("127.0.0.1", 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autofree char *foreign = NULL;
  g_autofree char *file = g_build_filename (f->host_dir, "planted.sbx", NULL);
  g_autofree char *arg = g_strconcat ("--handle=@", file, NULL);
  g_autoptr(GSocket) caught = NULL;

  g_test_summary ("the client sends its token only to the server it was configured for: a handle file naming "
                  "another server is refused (64) before any connection, and plain http:// to a host beyond "
                  "loopback is refused unless SANDSTEP_ALLOW_HTTP=1");
  g_assert_no_error (error);
  fixture_start (f);
  /* Another server, as a planted handle file would name it; it must never hear from us. */
  g_socket_bind (trap, any, TRUE, &error);
  g_assert_no_error (error);
  g_socket_listen (trap, &error);
  g_assert_no_error (error);
  g_socket_set_blocking (trap, FALSE);
  bound = g_socket_get_local_address (trap, &error);
  g_assert_no_error (error);
  foreign = g_strdup_printf ("http://127.0.0.1:%u/sandstep-0123456789abcdef",
                             g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  sandstep_test_write_file (file, foreign, -1);
  {
    g_autoptr(SandstepTestResult) r = helper (f, "get", arg, "secret.txt", NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_USAGE);
    sandstep_test_assert_contains (r->err, "sends its token only to");
    sandstep_test_assert_contains (r->err, f->server.daemon.url);
  }
  caught = g_socket_accept (trap, NULL, NULL);
  g_assert_null (caught);
  /* Plain http beyond loopback: refused, unless said so. */
  {
    g_auto(GStrv) envp = helper_env (f, "http://192.0.2.1:7700");
    const char *argv[] = { f->helper, "describe", "--handle=sandstep-0123456789abcdef", NULL };
    g_autoptr(SandstepTestResult) r = run_argv (argv, envp, HELPER_TIMEOUT_S);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_USAGE);
    sandstep_test_assert_contains (r->err, "plain http:// beyond loopback");
    sandstep_test_assert_contains (r->err, "SANDSTEP_ALLOW_HTTP=1");
  }
}

static void
test_token_file_errors (Fixture *f, gconstpointer data)
{
  static const char *const bad[] = {
    "secret-one owner=nightly\n",           /* a prefix must end in '/' */
    "secret-two owner=\n",
    "secret-three superuser\n",
    "secret-four owner=a/ extra\n",
    "# only a comment\n\n",
    "owner=nightly/\n",                     /* a scope alone once became an admin token of that text */
    "admin\n",
    "   owner=weekly/   # no token\n",
    "secret-five owner=a/ trailing words\n",
  };
  g_autofree char *state = g_strconcat ("--state-dir=", f->server.state_dir, NULL);
  g_autofree char *option = g_strconcat ("--token-file=", f->server.token_file, NULL);

  g_test_summary ("a token file sandstepd cannot read is refused at start (64), naming the file and the line, "
                  "never the token");
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *argv[] = { g_getenv ("SANDSTEPD"), "--listen=127.0.0.1:0", state, option, NULL };
      g_autoptr(SandstepTestResult) r = NULL;

      /* Written afresh: in place, a shorter row would keep the end of the one before. */
      g_unlink (f->server.token_file);
      g_assert_true (g_file_set_contents_full (f->server.token_file, bad[i], -1, G_FILE_SET_CONTENTS_NONE, 0600,
                                               NULL));
      r = run_argv (argv, NULL, 10);
      g_test_message ("row %zu: status %d: %s", i, r->status, r->err);
      sandstep_test_assert_status (r, SANDSTEP_EXIT_USAGE);
      sandstep_test_assert_contains (r->err, f->server.token_file);
      g_assert_null (strstr (r->err, "secret-"));
    }
}

/* docs/remote.md's token file, comments and all, read by the one grammar (hooks/sandstep-token-libc.h). */
static void
test_token_file_lines (void)
{
  static const char readme[] = "# /etc/sandstep/tokens (0600)\n"
                               "3f9ce1              # a token alone: an admin token (every owner; gc reclaims all)\n"
                               "a77d02 admin        # the same, said\n"
                               "91be4c owner=nightly/   # only owners that start with \"nightly/\" (the DAG \"nightly\")\n";
  static const struct { const char *line; SandstepTokenLineKind kind; const char *token; const char *prefix; } rows[] = {
    { "",                                   SANDSTEP_TOKEN_LINE_EMPTY, NULL, NULL },
    { "   # note",                          SANDSTEP_TOKEN_LINE_EMPTY, NULL, NULL },
    { "abc",                                SANDSTEP_TOKEN_LINE_ENTRY, "abc", NULL },
    { "  abc\t admin  ",                    SANDSTEP_TOKEN_LINE_ENTRY, "abc", NULL },
    { "abc owner=n/ # c",                   SANDSTEP_TOKEN_LINE_ENTRY, "abc", "n/" },
    { "ab#c#",                              SANDSTEP_TOKEN_LINE_ENTRY, "ab#c#", NULL },
    { "x+/y= # base64 with padding",        SANDSTEP_TOKEN_LINE_ENTRY, "x+/y=", NULL },
    { "owner=nightly/",                     SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "admin",                              SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "admin owner=a/",                     SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "abc owner=nightly",                  SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "abc owner=",                         SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "abc superuser",                      SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "abc admin extra",                    SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
    { "t\xc3\xa9st",                        SANDSTEP_TOKEN_LINE_BAD, NULL, NULL },
  };
  g_autofree char *dir = g_dir_make_tmp ("sandstep-test-tokens-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "tokens", NULL);
  g_autofree char *client = g_build_filename (dir, "client", NULL);
  g_autoptr(SandstepTokenSet) set = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *token = NULL;
  const SandstepTokenEntry *e;

  g_test_summary ("issue 30 item 14: token-file lines parse strictly (a scope alone is refused, never an admin "
                  "token whose secret is its text) and docs/remote.md's example with '#' comments works");
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      SandstepTokenLine line;
      SandstepTokenLineKind kind = sandstep_token_line_parse (rows[i].line, strlen (rows[i].line), &line);

      g_test_message ("row %zu: '%s'", i, rows[i].line);
      g_assert_cmpint (kind, ==, rows[i].kind);
      if (kind != SANDSTEP_TOKEN_LINE_ENTRY)
        continue;
      g_assert_cmpmem (line.token, line.token_len, rows[i].token, strlen (rows[i].token));
      if (rows[i].prefix == NULL)
        g_assert_null (line.prefix);
      else
        g_assert_cmpmem (line.prefix, line.prefix_len, rows[i].prefix, strlen (rows[i].prefix));
    }

  g_assert_true (g_file_set_contents (path, readme, -1, NULL));
  set = sandstep_token_set_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (sandstep_token_set_size (set), ==, 3);
  e = sandstep_token_set_match (set, "Bearer 3f9ce1");
  g_assert_nonnull (e);
  g_assert_null (e->owner_prefix);
  e = sandstep_token_set_match (set, "Bearer a77d02");
  g_assert_nonnull (e);
  g_assert_null (e->owner_prefix);
  e = sandstep_token_set_match (set, "Bearer 91be4c");
  g_assert_nonnull (e);
  g_assert_cmpstr (e->owner_prefix, ==, "nightly/");
  g_assert_null (sandstep_token_set_match (set, "Bearer #"));
  g_assert_null (sandstep_token_set_match (set, "Bearer 3f9ce1              # a token alone: an admin token "
                                                "(every owner; gc reclaims all)"));

  /* A client's file: the same lines. */
  g_assert_true (g_file_set_contents (client, "# mine\n\n  91be4c owner=nightly/  # comment\n", -1, NULL));
  token = sandstep_token_read_file (client, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (token, ==, "91be4c");
  g_clear_pointer (&token, g_free);
  g_assert_true (g_file_set_contents (client, "owner=zq9secret/\n", -1, NULL));
  token = sandstep_token_read_file (client, &error);
  g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
  g_assert_null (strstr (error->message, "zq9secret"));
  g_assert_null (token);

  g_unlink (path);
  g_unlink (client);
  g_rmdir (dir);
}

/* ---- gc ---- */

static void
test_gc_spares_live (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupSession) session = plain_session ();
  Server *s = &f->server;
  g_autofree char *gc_url = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  const char *bodies[] = { "{\"expired_only\":false}", "{\"run\":null,\"expired_only\":false}",
                           "{\"expired_only\":false,\"broken\":true}" };

  g_test_summary ("issue 30 item 8: POST /v1/gc {\"expired_only\":false} without a run is refused (400) and ends no "
                  "live sandbox (it destroyed every one the token reached); with the run named it still does");
  fixture_start (f);
  gc_url = api (s, "/v1/gc");
  {
    g_autoptr(SandstepTestResult) r = helper (f, "provision", "--lifetime=10m", NULL);
    sandstep_test_assert_status (r, 0);
    handle = g_strstrip (g_strdup (r->out));
    h = g_strconcat ("--handle=", handle, NULL);
  }
  for (gsize i = 0; i < G_N_ELEMENTS (bodies); i++)
    {
      g_autoptr(GBytes) body = text_bytes (bodies[i]);
      Answer a = { 0 };

      request (session, "POST", gc_url, s->token, NULL, body, NULL, &a);
      g_test_message ("%s: %u %s", bodies[i], a.status, a.body);
      assert_error (&a, 400, "bad-request");
      g_assert_nonnull (strstr (a.body, "expired_only"));
      g_free (a.body);
      {
        g_autoptr(SandstepTestResult) r = helper (f, "describe", h, NULL);
        sandstep_test_assert_status (r, 0);
      }
    }
  /* The run named: its live sandbox goes, as `sandstep gc --run=RUN` does. */
  {
    g_autoptr(SandstepTestResult) r = helper (f, "gc", "--run", f->run, NULL);
    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_contains (r->out, handle);
  }
}

/* ---- slow and hostile clients ---- */

/* A TCP connection to the fixture's server from @source (e.g. "127.0.0.2"); its fd. */
static int
connect_from (Server *s, const char *source)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
  g_autoptr(GSocketAddress) from = g_inet_socket_address_new_from_string (source, 0);
  g_autoptr(GSocketAddress) to = g_inet_socket_address_new_from_string ("127.0.0.1", server_port (s));
  int fd;

  g_assert_no_error (error);
  g_socket_bind (socket, from, FALSE, &error);
  g_assert_no_error (error);
  g_socket_connect (socket, to, NULL, &error);
  g_assert_no_error (error);
  fd = dup (g_socket_get_fd (socket));
  g_assert_cmpint (fd, >=, 0);
  return fd;
}

/* TRUE once the server has closed @fd (EOF or reset), within @timeout_s. */
static gboolean
closed_within (int fd, double timeout_s)
{
  struct pollfd pfd = { fd, POLLIN | POLLRDHUP, 0 };
  char buf[4096];

  for (gint64 end = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC); g_get_monotonic_time () < end;)
    {
      ssize_t n;
      if (poll (&pfd, 1, 100) <= 0)
        continue;
      n = recv (fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return TRUE;
    }
  return FALSE;
}

static void
assert_health (Fixture *f)
{
  g_autoptr(SoupSession) session = plain_session ();
  g_autofree char *url = api (&f->server, "/v1/health");
  Answer a = { 0 };
  gint64 start = g_get_monotonic_time ();

  request (session, "GET", url, f->server.token, NULL, NULL, NULL, &a);
  g_assert_cmpuint (a.status, ==, 200);
  g_test_message ("an authenticated request took %.1f ms", (g_get_monotonic_time () - start) / 1000.0);
  answer_clear (&a);
}

static void
test_slow_deadlines (Fixture *f, gconstpointer data)
{
  static const char *const extra[] = { "--header-timeout=2", "--idle-timeout=2", NULL };
  static const char partial_head[] = "POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  g_autofree char *partial_body = NULL;
  int silent, slow_head, slow_body;

  g_test_summary ("sandstepd shuts a connection that sends no request within --header-timeout, or only part of "
                  "its headers, and one whose body stops coming for --idle-timeout; others are served meanwhile");
  f->server.extra = g_strdupv ((char **) extra);
  fixture_start (f);
  silent = connect_from (&f->server, "127.0.0.2");
  slow_head = connect_from (&f->server, "127.0.0.2");
  slow_body = connect_from (&f->server, "127.0.0.3");
  g_assert_cmpint (write (slow_head, partial_head, strlen (partial_head)), >, 0);
  partial_body = g_strdup_printf ("POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                                  "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"owner\":",
                                  f->server.token);
  g_assert_cmpint (write (slow_body, partial_body, strlen (partial_body)), >, 0);
  assert_health (f);
  g_assert_true (closed_within (silent, 8));
  g_assert_true (closed_within (slow_head, 8));
  g_assert_true (closed_within (slow_body, 8));
  assert_health (f);
  close (silent);
  close (slow_head);
  close (slow_body);
}

static void
test_slow_half_open_evicted (Fixture *f, gconstpointer data)
{
  int fds[40];
  guint closed = 0;

  g_test_summary ("a peer holds at most 32 connections that have sent no request: a 33rd and later evict its "
                  "oldest, and a client elsewhere is served at once all along");
  fixture_start (f);
  for (gsize i = 0; i < G_N_ELEMENTS (fds); i++)
    fds[i] = connect_from (&f->server, "127.0.0.4");
  assert_health (f);
  for (gsize i = 0; i < G_N_ELEMENTS (fds); i++)
    if (closed_within (fds[i], i < 8 ? 3 : 0.05))
      closed++;
  g_test_message ("%u of %zu half-open connections were closed", closed, G_N_ELEMENTS (fds));
  g_assert_cmpuint (closed, ==, G_N_ELEMENTS (fds) - 32);
  for (gsize i = 0; i < G_N_ELEMENTS (fds); i++)
    close (fds[i]);
}

/* The daemon's CPU time (user and system), in seconds. */
static double
server_cpu_s (Server *s)
{
  return sandstep_test_cpu_seconds (s->daemon.pid);
}

static void
test_slow_descriptors_run_out (Fixture *f, gconstpointer data)
{
  static const char *const prefix[] = { "prlimit", "--nofile=64:64", NULL };
  g_autofree char *prlimit = g_find_program_in_path ("prlimit");
  g_autofree char *log = NULL;
  GArray *fds = g_array_new (FALSE, FALSE, sizeof (int));
  double before, after;

  g_test_summary ("when file descriptors run out, sandstepd backs off instead of spinning on its listening "
                  "socket (its CPU stays low while connections keep coming), frees the oldest half-open one, and "
                  "serves an authenticated client");
  if (prlimit == NULL)
    {
      g_test_skip ("prlimit (util-linux) is not installed");
      return;
    }
  f->server.prefix = g_strdupv ((char **) prefix);
  fixture_start (f);
  /* Far more half-open connections, from 16 peers, than 64 descriptors hold. */
  for (int i = 0; i < 160; i++)
    {
      g_autofree char *source = g_strdup_printf ("127.0.1.%d", 1 + i % 16);
      int fd = connect_from (&f->server, source);
      g_array_append_val (fds, fd);
    }
  g_usleep (G_USEC_PER_SEC / 2);
  before = server_cpu_s (&f->server);
  g_usleep (3 * G_USEC_PER_SEC);
  after = server_cpu_s (&f->server);
  g_test_message ("sandstepd spent %.2f s of CPU in 3 s with its descriptors used up", after - before);
  g_assert_cmpfloat (after - before, <, 0.5);
  assert_health (f);
  g_assert_true (g_file_get_contents (f->server.log, &log, NULL, NULL));
  sandstep_test_assert_contains (log, "cannot accept connections");
  for (guint i = 0; i < fds->len; i++)
    close (g_array_index (fds, int, i));
  g_array_unref (fds);
}

static void
test_slow_chunked_put_limit (Fixture *f, gconstpointer data)
{
  static const char *const extra[] = { "--max-upload=1K", NULL };
  g_autoptr(SoupSession) session = plain_session ();
  g_autofree char *handle = NULL;
  g_autofree char *server_url = NULL;
  g_autofree char *local = NULL;
  g_autofree char *claim_url = NULL;
  g_autofree char *auth = NULL;
  g_autofree char *body_text = NULL;
  g_autoptr(GBytes) body = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GDataInputStream) lines = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *first = NULL;
  const char *claim;
  guint64 rss_before, rss_after;
  int fd;
  g_autofree char *head = NULL;
  GString *chunk = g_string_new (NULL);
  char answer[8192] = "";
  gssize n;
  guint64 sent = 0;

  g_test_summary ("--max-upload holds for a chunked put body of link entries (one once passed 81 MB under a "
                  "1 KiB limit): refused with 413 after about the limit, the daemon's memory unmoved");
  SKIP_IF_NO_JAIL (f);
  f->server.extra = g_strdupv ((char **) extra);
  fixture_start (f);
  handle = provision (f, NULL);
  g_assert_true (sandstep_handle_split (handle, &server_url, &local));
  claim_url = g_strdup_printf ("%s/v1/sandboxes/%s/claim", f->server.daemon.url, local);
  auth = g_strconcat ("Bearer ", f->server.token, NULL);
  body_text = g_strdup_printf ("{\"owner\":\"%s\",\"holder\":\"%s\"}", f->owner, f->holder);
  body = text_bytes (body_text);
  msg = soup_message_new ("POST", claim_url);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
  soup_message_set_request_body_from_bytes (msg, "application/json", body);
  stream = soup_session_send (session, msg, NULL, NULL);
  g_assert_nonnull (stream);
  lines = g_data_input_stream_new (stream);
  first = g_data_input_stream_read_line (lines, NULL, NULL, NULL);
  g_assert_nonnull (first);
  g_assert_true (json_parser_load_from_data (parser, first, -1, NULL));
  claim = json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "claim");

  rss_before = server_rss_kib (&f->server);
  fd = connect_from (&f->server, "127.0.0.1");
  head = g_strdup_printf ("POST /v1/sandboxes/%s/put?dest=/workspace/&name=up&contents=0 HTTP/1.1\r\n"
                          "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\nX-Sandstep-Claim: %s\r\n"
                          "Content-Type: application/x-sandstep-entries\r\nTransfer-Encoding: chunked\r\n\r\n",
                          local, f->server.token, claim);
  g_assert_cmpint (write (fd, head, strlen (head)), ==, (ssize_t) strlen (head));
  {
    static const char top[] = "{\"path\":\"\",\"type\":\"dir\",\"mode\":493}\n";
    g_string_append_printf (chunk, "%zx\r\n%s\r\n", strlen (top), top);
    g_assert_cmpint (write (fd, chunk->str, chunk->len), ==, (ssize_t) chunk->len);
    sent += chunk->len;
  }
  /* Up to 80 MB of link entries, each new, as long as the server takes them. */
  for (int i = 0; i < 800; i++)
    {
      struct pollfd pfd = { fd, POLLOUT, 0 };
      GString *entries = g_string_new (NULL);

      for (int j = 0; j < 1000; j++)
        g_string_append_printf (entries, "{\"path\":\"l%09d\",\"type\":\"link\",\"target\":\"/etc/passwd\"}\n",
                                i * 1000 + j);
      g_string_truncate (chunk, 0);
      g_string_append_printf (chunk, "%zx\r\n%s\r\n", entries->len, entries->str);
      g_string_free (entries, TRUE);
      if (poll (&pfd, 1, 5000) <= 0 || (pfd.revents & (POLLERR | POLLHUP)) != 0)
        break;
      if (send (fd, chunk->str, chunk->len, MSG_NOSIGNAL) < 0)
        break;
      sent += chunk->len;
    }
  n = recv (fd, answer, sizeof answer - 1, 0);
  if (n > 0)
    answer[n] = '\0';
  g_test_message ("sent %" G_GUINT64_FORMAT " bytes before the answer: %.40s", sent, answer);
  sandstep_test_assert_contains (answer, " 413 ");
  /* Stopped near the limit: what was sent past it sat in socket buffers. */
  g_assert_cmpuint (sent, <, 16 * 1024 * 1024);
  rss_after = server_rss_kib (&f->server);
  g_assert_cmpuint (rss_after, <, rss_before + 20 * 1024);
  close (fd);
  g_string_free (chunk, TRUE);
  g_input_stream_close (stream, NULL, NULL);

  /* The helper's own put over the limit hears why, as locally. */
  {
    g_autofree char *big = g_build_filename (f->host_dir, "big.bin", NULL);
    g_autofree char *junk = g_strnfill (64 * 1024, 'x');
    g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(SandstepTestResult) r = NULL;

    sandstep_test_write_file (big, junk, -1);
    r = helper (f, "put", h, big, "/workspace/big.bin", NULL);
    sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
    sandstep_test_assert_contains (r->err, "limit of 1024 bytes");
  }
}

static void
test_deep_tree_destroy (Fixture *f, gconstpointer data)
{
  /* sandstepd's threads get the stack its rlimit says when it starts: 1 MiB here. */
  static const char *const prefix[] = { "prlimit", "--stack=1048576", NULL };
  static const char command[] =
    "python3 -c \"import os\n"
    "fd = os.open('.', os.O_RDONLY)\n"
    "for i in range(20000):\n"
    "    os.mkdir('d', dir_fd=fd)\n"
    "    down = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
    "    os.close(fd)\n"
    "    fd = down\n\"";
  g_autofree char *prlimit = g_find_program_in_path ("prlimit");
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autoptr(SandstepTestResult) made = NULL;
  g_autoptr(SandstepTestResult) destroyed = NULL;

  /* 20,000 levels, not the 50,000 of test-recovery: far beyond a 1 MiB stack, and removed within the client's
   * 60 s reply deadline on a loaded disk too (the removal runs before sandstepd answers). */
  g_test_summary ("a command builds a chain of 20,000 nested directories (through directory fds); sandstepd, "
                  "on a 1 MiB stack, destroys that sandbox and stays up: its removal recursed once per level and "
                  "sandstepd died of SIGSEGV on that destroy, and again on every provision after a restart");
  SKIP_IF_NO_JAIL (f);
  if (prlimit == NULL)
    {
      g_test_skip ("prlimit (util-linux) is not installed");
      return;
    }
  f->server.prefix = g_strdupv ((char **) prefix);
  fixture_start (f);
  handle = provision (f, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  made = sandstep_test_proc_wait (helper_spawn (f, "run", h, "--", command, NULL), 300);
  sandstep_test_assert_status (made, 0);
  destroyed = sandstep_test_proc_wait (helper_spawn (f, "destroy", h, NULL), 300);
  sandstep_test_assert_status (destroyed, 0);
  g_assert_cmpint (kill (f->server.daemon.pid, 0), ==, 0);
  assert_health (f);
  for (gsize i = 0; i < 2; i++)
    {
      g_autofree char *dir = g_build_filename (f->server.state_dir, i == 0 ? "sandboxes" : "trash", NULL);
      g_autoptr(GDir) listing = g_dir_open (dir, 0, NULL);
      /* Nothing left of it, nor of anything else: the case made only this sandbox. */
      g_assert_null (listing != NULL ? g_dir_read_name (listing) : NULL);
    }
  {
    g_autofree char *again = provision (f, "dag/run/after");
    g_assert_nonnull (again);
  }
}

/* ---- a claim's wait for a worker is bounded (issue 33) ---- */

static void
test_wait_has_a_deadline (Fixture *f, gconstpointer data)
{
  g_autofree char *long_holder = g_strdup_printf ("--holder=%s/long", f->owner);
  g_autofree char *other_box_holder = g_strdup_printf ("%s/other-box", f->owner);
  g_autofree char *long_box = NULL;
  g_autofree char *other_box = NULL;
  g_autofree char *long_handle = NULL;
  g_autofree char *url = NULL;
  g_autofree char *line = NULL;
  g_autoptr(SoupSession) session = soup_session_new_with_options ("timeout", 90, NULL);
  g_autoptr(GBytes) body = NULL;
  g_autoptr(SandstepTestResult) held = NULL;
  Answer answer = { 0 };
  SandstepTestProc *holding;

  g_test_bug ("33");
  g_test_summary ("On a sandstepd of --max-claims=1 whose one worker runs a command of 35 s, a second claim-run "
                  "waits for a worker at most 30 s, then is answered 503 saying so (and ran nothing); the first "
                  "command is untouched");
  SKIP_IF_NO_JAIL (f);
  f->server.extra = g_strdupv ((char *[]) { "--max-claims=1", NULL });
  fixture_start (f);
  soup_session_set_proxy_resolver (session, NULL);
  long_box = provision (f, f->holder);
  other_box = provision (f, other_box_holder);
  long_handle = g_strconcat ("--handle=", long_box, NULL);
  holding = helper_spawn (f, "run", long_handle, long_holder, "--", "sleep 35; echo held", NULL);
  g_usleep (G_USEC_PER_SEC);
  url = g_strconcat (f->server.daemon.url, "/v1/sandboxes/", strrchr (other_box, '/') + 1, "/claim-run", NULL);
  line = g_strdup_printf ("{\"owner\":\"%s\",\"holder\":\"%s/other\",\"command\":\"touch /workspace/ran\","
                          "\"timeout_s\":0}\n", f->owner, f->owner);
  body = g_bytes_new (line, strlen (line));
  request (session, "POST", url, f->server.token, "application/x-sandstep-run", body, NULL, &answer);
  g_assert_cmpuint (answer.status, ==, 503);
  sandstep_test_assert_contains (answer.body, "too-many-claims");
  sandstep_test_assert_contains (answer.body, "had no free worker for 30 s");
  answer_clear (&answer);
  held = sandstep_test_proc_wait (holding, 60);
  sandstep_test_assert_status (held, 0);
  g_assert_cmpstr (held->out, ==, "held\n");
  {
    g_autofree char *handle = g_strconcat ("--handle=", other_box, NULL);
    g_autoptr(SandstepTestResult) r = helper (f, "run", handle, "--",
                                              "test -e /workspace/ran && echo ran || echo not-run", NULL);

    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "not-run\n");
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);

#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  g_test_add_func ("/remote/handles", test_handles);
  ADD ("/remote/listen/refuses-open-port-without-token", test_listen_refuses_open_port_without_token);
  ADD ("/remote/round-trip", test_round_trip);
  ADD ("/remote/image", test_image_through_server);
  ADD ("/remote/fork", test_fork_through_server);
  ADD ("/remote/image-gc-race", test_image_gc_race_through_server);
  ADD ("/remote/claim/disconnect-kills-command", test_disconnect_kills_command);
  ADD ("/remote/claim/busy-and-wait", test_claim_busy_and_wait);
  ADD ("/remote/run/stdin", test_run_stdin);
  ADD ("/remote/run/stdin-after-waiting", test_run_stdin_waits);
  ADD ("/remote/run/one-request", test_run_one_request);
  ADD ("/remote/run/front-and-core-agree", test_run_front_and_core_agree);
  ADD ("/remote/crash/sigkill-and-restart", test_crash_and_restart);
  ADD ("/remote/destroy/deep-tree", test_deep_tree_destroy);
  ADD ("/remote/many-clients", test_many_clients);
  ADD ("/remote/density/burst-waits-for-workers", test_burst_waits_for_workers);
  ADD ("/remote/density/slow-owner-does-not-starve", test_slow_owner_does_not_starve);
  ADD ("/remote/density/long-commands-get-workers", test_long_commands_get_workers);
  ADD ("/remote/density/wait-has-a-deadline", test_wait_has_a_deadline);
  ADD ("/remote/bad-input/every-class", test_bad_requests);
  ADD ("/remote/bad-input/loop-rss", test_bad_request_loop);
  ADD ("/remote/hosts/three-namespaces", test_three_hosts);
  ADD ("/remote/hosts/same-owner-every-host", test_hosts_same_owner);
  ADD ("/remote/tls", test_tls);
  ADD ("/remote/auth/own-token", test_own_token);
  ADD ("/remote/auth/web-pages-refused", test_web_pages_refused);
  ADD ("/remote/auth/owner-tokens", test_owner_tokens);
  ADD ("/remote/gc/spares-live", test_gc_spares_live);
  ADD ("/remote/auth/token-file-errors", test_token_file_errors);
  g_test_add_func ("/remote/auth/token-file-lines", test_token_file_lines);
  ADD ("/remote/auth/token-only-to-its-server", test_token_only_to_its_server);
  ADD ("/remote/slow/deadlines", test_slow_deadlines);
  ADD ("/remote/slow/half-open-evicted", test_slow_half_open_evicted);
  ADD ("/remote/slow/descriptors-run-out", test_slow_descriptors_run_out);
  ADD ("/remote/slow/chunked-put-limit", test_slow_chunked_put_limit);
#undef ADD

  return g_test_run ();
}
