/* test-install.c: `meson install` into a staging directory, and
 * examples/quickstart run against the installed tree only.
 *
 * The build under test is installed with DESTDIR (meson install
 * --no-rebuild --destdir), which is how a package is staged; sandstep's
 * programs find each other below whatever prefix they sit in
 * (hooks/sandstep-paths.h), so the staged tree runs whole.  Paths come from
 * tests/meson.build: SANDSTEP_TEST_MESON, SANDSTEP_TEST_BUILD_ROOT and the
 * install directories SANDSTEP_TEST_{PREFIX,BINDIR,SBINDIR,LIBEXECDIR,MANDIR,DATADIR}.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "sandstep-store.h"
#include "sandstep-teardown.h"
#include "sandstep-test-utils.h"

typedef struct {
  char *dir;      /* mkdtemp'd: the DESTDIR, the work copy, the state */
  char *destdir;
  char *prefix;   /* DESTDIR + the configured prefix */
  char *state;
} Staged;

static const char *
need_env (const char *name)
{
  const char *value = g_getenv (name);

  if (value == NULL || value[0] == '\0')
    g_error ("%s is not set; run this test through meson test", name);
  return value;
}

/* DESTDIR + an install directory the build was configured with. */
static char *
staged_path (Staged *s, const char *variable, const char *rest)
{
  return g_build_filename (s->destdir, need_env (variable), rest, NULL);
}

static int
remove_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return remove (path) == 0 || errno == ENOENT ? 0 : -1;
}

static void
staged_free (Staged *s)
{
  if (s == NULL)
    return;
  /* What a failed case left: its sandboxes go, with their supervisors and cgroups. */
  if (s->state != NULL && g_file_test (s->state, G_FILE_TEST_IS_DIR))
    {
      g_autoptr(SandstepStore) store = sandstep_store_open (s->state, NULL);
      g_autoptr(GPtrArray) handles = store != NULL ? sandstep_store_list (store) : NULL;
      for (guint i = 0; handles != NULL && i < handles->len; i++)
        sandstep_sandbox_destroy (store, handles->pdata[i], -1, NULL);
    }
  nftw (s->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  g_free (s->dir);
  g_free (s->destdir);
  g_free (s->prefix);
  g_free (s->state);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Staged, staged_free)

/* Runs @argv in @cwd with @envp; returns the exit status (-1: a signal), stdout and stderr. */
static int
spawn (const char *cwd, const char *const *argv, char **envp, char **out, char **err)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *shown = g_strjoinv (" ", (char **) argv);
  int status = 0;

  g_test_message ("$ %s", shown);
  g_spawn_sync (cwd, (char **) argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, out, err, &status, &error);
  g_assert_no_error (error);
  g_test_message ("wait status %d\n--- stdout\n%s--- stderr\n%s---", status, out && *out ? *out : "",
                  err && *err ? *err : "");
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* The environment of the installed tree's user: no build tree anywhere. */
static char **
user_environment (Staged *s)
{
  static const char *const unset[] = {
    "SANDSTEP", "SANDSTEP_PLUGIN", "SANDSTEPD", "SANDSTEP_REMOTE_MODULE", "SANDSTEP_BACKEND", "MAKEFLAGS", "MAKELEVEL",
    "MFLAGS", "SANDSTEP_RUN", "SANDSTEP_TOP", "SANDSTEP_DAG", "SANDSTEP_OWNER", "SANDSTEP_HOLDER", "G_TEST_SRCDIR",
    "G_TEST_BUILDDIR", "SANDSTEP_STEP_ENDS", "LD_LIBRARY_PATH",
  };
  char **envp = g_get_environ ();

  for (gsize i = 0; i < G_N_ELEMENTS (unset); i++)
    envp = g_environ_unsetenv (envp, unset[i]);
  envp = g_environ_setenv (envp, "PATH", "/usr/local/bin:/usr/bin:/bin", TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_STATE_DIR", s->state, TRUE);
  envp = g_environ_setenv (envp, "LC_ALL", "C", TRUE);
  return envp;
}

/* Whether this user may run `meson install` of the build: it writes BUILD/meson-logs/install-log.txt,
 * which a user who did not make the build (the suite run as another user) may not; else skips, saying so. */
static gboolean
build_installable (void)
{
  g_autofree char *logs = g_build_filename (need_env ("SANDSTEP_TEST_BUILD_ROOT"), "meson-logs", NULL);
  g_autofree char *log = g_build_filename (logs, "install-log.txt", NULL);

  if (access (logs, W_OK) == 0 && (access (log, F_OK) < 0 || access (log, W_OK) == 0))
    return TRUE;
  g_test_skip_printf ("meson install writes '%s', which uid %u may not write (another user made this build): "
                      "build as this user to test the install", log, (unsigned) getuid ());
  return FALSE;
}

/* Runs the case @func where this user may install the build. */
static void
installable_case (gconstpointer func)
{
  if (build_installable ())
    ((GTestFunc) func) ();
}

static Staged *
stage (void)
{
  g_autoptr(GError) error = NULL;
  Staged *s = g_new0 (Staged, 1);
  g_autofree char *out = NULL, *err = NULL;

  s->dir = g_dir_make_tmp ("sandstep-install-XXXXXX", &error);
  g_assert_no_error (error);
  s->destdir = g_build_filename (s->dir, "destdir", NULL);
  s->prefix = g_build_filename (s->destdir, need_env ("SANDSTEP_TEST_PREFIX"), NULL);
  s->state = g_build_filename (s->dir, "state", NULL);
  {
    const char *argv[] = { need_env ("SANDSTEP_TEST_MESON"), "install", "-C", need_env ("SANDSTEP_TEST_BUILD_ROOT"),
                           "--no-rebuild", "--quiet", "--destdir", s->destdir, NULL };
    g_assert_cmpint (spawn (NULL, argv, NULL, &out, &err), ==, 0);
  }
  return s;
}

/* What a package holds: the helper, its internal programs, the plugin,
 * sandstepd, the man pages, the bash completion and sandstep.pc, whose
 * plugin variable names the installed plugin. */
static void
test_install_files (void)
{
  g_autoptr(Staged) s = stage ();
  static const struct { const char *dir, *name; } files[] = {
    { "SANDSTEP_TEST_BINDIR", "sandstep" },
    { "SANDSTEP_TEST_SBINDIR", "sandstepd" },
    { "SANDSTEP_TEST_LIBEXECDIR", "sandstep-core" },
    { "SANDSTEP_TEST_LIBEXECDIR", "sandstep-net" },
    { "SANDSTEP_TEST_LIBEXECDIR", "sandstep-init" },
    { "SANDSTEP_TEST_LIBEXECDIR", "sandstep-supervise" },
    { "SANDSTEP_TEST_LIBEXECDIR", "sandstep-remote.so" },
    { "SANDSTEP_TEST_PLUGINDIR", "sandstep.so" },
    { "SANDSTEP_TEST_MANDIR", "man1/sandstep.1" },
    { "SANDSTEP_TEST_MANDIR", "man7/sandstep-make.7" },
    { "SANDSTEP_TEST_MANDIR", "man8/sandstepd.8" },
    { "SANDSTEP_TEST_DATADIR", "bash-completion/completions/sandstep" },
    { "SANDSTEP_TEST_DATADIR", "pkgconfig/sandstep.pc" },
  };
  g_auto(GStrv) envp = user_environment (s);

  g_test_summary ("meson install puts the helper in bindir, its programs in libexecdir, the plugin, sandstepd, "
                  "man pages written from the operator table, a bash completion and sandstep.pc");
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = staged_path (s, files[i].dir, files[i].name);
      g_test_message ("%s", path);
      g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
    }
  {
    /* The pkg-config variable a Makefile loads, moved to the staging prefix as a package build would. */
    g_autofree char *pc_dir = staged_path (s, "SANDSTEP_TEST_DATADIR", "pkgconfig");
    g_autofree char *define = g_strconcat ("prefix=", s->prefix, NULL);
    g_autofree char *plugin = staged_path (s, "SANDSTEP_TEST_PLUGINDIR", "sandstep.so");
    g_autofree char *expected = g_strconcat (plugin, "\n", NULL);
    g_autofree char *out = NULL, *err = NULL;
    const char *argv[] = { "pkg-config", "--define-variable", define, "--variable=plugin", "sandstep", NULL };
    g_auto(GStrv) pc_env = g_environ_setenv (g_strdupv (envp), "PKG_CONFIG_PATH", pc_dir, TRUE);

    g_assert_cmpint (spawn (NULL, argv, pc_env, &out, &err), ==, 0);
    g_assert_cmpstr (out, ==, expected);
  }
  {
    /* The man pages name every operator and the placeholders of the table. */
    g_autofree char *page = staged_path (s, "SANDSTEP_TEST_MANDIR", "man1/sandstep.1");
    g_autofree char *text = NULL;
    g_assert_true (g_file_get_contents (page, &text, NULL, NULL));
    g_assert_true (g_str_has_prefix (text, ".TH sandstep 1 "));
    g_assert_nonnull (strstr (text, ".SS list\n"));
    g_assert_nonnull (strstr (text, "\\-\\-to=FILE"));
  }
  {
    g_autofree char *completion = staged_path (s, "SANDSTEP_TEST_DATADIR", "bash-completion/completions/sandstep");
    g_autofree char *script = g_strdup_printf (". '%s'; COMP_WORDS=(sandstep get --t); COMP_CWORD=2; _sandstep; "
                                               "echo \"${COMPREPLY[*]}\"", completion);
    const char *argv[] = { "bash", "-c", script, NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint (spawn (NULL, argv, envp, &out, &err), ==, 0);
    g_assert_cmpstr (out, ==, "--to=\n");
  }
  {
    g_autofree char *helper = staged_path (s, "SANDSTEP_TEST_BINDIR", "sandstep");
    const char *argv[] = { helper, "help", "get", NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint (spawn (NULL, argv, envp, &out, &err), ==, 0);
    g_assert_true (g_str_has_prefix (out, "Usage: sandstep get "));
  }
}

/* Runs PARSER on PROFILE without loading it into the kernel (-Q) or touching a cache (-K, -T); ROOT: where
 * Debian's apparmor package was unpacked (scripts/deps.sh), whose includes and features it reads, or NULL for the
 * host's /etc/apparmor.d.  Returns the exit status; ERR: what it said. */
static int
parse_profile (const char *parser, const char *root, const char *profile, char **err)
{
  g_autofree char *includes = root != NULL ? g_build_filename (root, "etc", "apparmor.d", NULL) : NULL;
  g_autofree char *features = root != NULL ? g_build_filename (root, "usr", "share", "apparmor-features",
                                                               "features", NULL) : NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL;

  g_ptr_array_add (argv, (gpointer) parser);
  if (root != NULL)
    {
      /* The package's parser.conf names the host's features file; ours is beside it. */
      g_ptr_array_add (argv, "--config-file=/dev/null");
      g_ptr_array_add (argv, "--base");
      g_ptr_array_add (argv, includes);
      g_ptr_array_add (argv, "--Include");
      g_ptr_array_add (argv, includes);
      g_ptr_array_add (argv, "--policy-features");
      g_ptr_array_add (argv, features);
    }
  g_ptr_array_add (argv, "-Q");
  g_ptr_array_add (argv, "-K");
  g_ptr_array_add (argv, "-T");
  g_ptr_array_add (argv, (gpointer) profile);
  g_ptr_array_add (argv, NULL);
  return spawn (NULL, (const char **) argv->pdata, NULL, &out, err);
}

/* The AppArmor profile: a profile that does not parse fails apparmor.service at boot. */
static void
test_install_apparmor_profile (void)
{
  g_autofree char *parser = g_find_program_in_path ("apparmor_parser");
  g_autofree char *unpacked = g_test_build_filename (G_TEST_DIST, "apparmor", "root", NULL);
  const char *root = NULL;
  g_autoptr(Staged) s = NULL;
  g_autofree char *profile = NULL;
  g_autofree char *text = NULL;
  g_autofree char *err = NULL;
  gboolean abi4 = g_file_test ("/etc/apparmor.d/abi/4.0", G_FILE_TEST_EXISTS);
  int status;

  g_test_summary ("the AppArmor profile meson install ships parses with this host's apparmor_parser, or Debian's "
                  "where the host has none (Debian 12's 3.0 has no abi/4.0 and no userns rule, and refuses a "
                  "profile that names them); where the host has ABI 4.0 (Ubuntu 24.04) it grants userns to both "
                  "programs");
  if (parser == NULL && g_file_test ("/usr/sbin/apparmor_parser", G_FILE_TEST_IS_EXECUTABLE))
    parser = g_strdup ("/usr/sbin/apparmor_parser");
  if (parser == NULL)
    {
      /* scripts/test unpacks Debian's apparmor package there (sandstep_ensure_apparmor_parser). */
      parser = g_build_filename (unpacked, "sbin", "apparmor_parser", NULL);
      root = unpacked;
    }
  if (!g_file_test (parser, G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("apparmor_parser is not installed (Debian's apparmor package) and scripts/test could not unpack "
                   "it into tests/apparmor/root, so the profile cannot be parsed here");
      return;
    }
  g_test_message ("parser: %s", parser);
  s = stage ();
  profile = staged_path (s, "SANDSTEP_TEST_SYSCONFDIR", "apparmor.d/sandstep");
  g_assert_true (g_file_get_contents (profile, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, abi4 ? "\nabi <abi/4.0>,\n" : "\nabi <abi/3.0>,\n"));
  if (abi4)
    {
      const char *second = strstr (text, "  userns,\n");
      g_assert_nonnull (second);
      g_assert_nonnull (strstr (second + 1, "  userns,\n"));
    }
  status = parse_profile (parser, root, profile, &err);
  if (status != 0)
    g_test_message ("apparmor_parser: %s", err);
  g_assert_cmpint (status, ==, 0);

  if (!abi4)
    {
      /* The parser checks what it reads: the profile as AppArmor 4 hosts get it is refused here, as Debian 12's
       * apparmor.service refused it at boot ("Could not open 'abi/4.0'"). */
      g_autoptr(GString) as_abi4 = g_string_new (text);
      g_autofree char *refused = g_build_filename (s->dir, "sandstep-abi4", NULL);

      g_assert_cmpuint (g_string_replace (as_abi4, "\nabi <abi/3.0>,\n", "\nabi <abi/4.0>,\n", 1), ==, 1);
      g_assert_true (g_file_set_contents (refused, as_abi4->str, -1, NULL));
      g_clear_pointer (&err, g_free);
      g_assert_cmpint (parse_profile (parser, root, refused, &err), !=, 0);
      g_assert_nonnull (strstr (err, "abi/4.0"));
    }
}

/* examples/quickstart with the installed plugin, which renders the
 * installed helper by its absolute path; the helper's own chain (the core,
 * the supervisor) is the installed one. */
static void
test_install_quickstart (void)
{
  g_autoptr(Staged) s = stage ();
  g_auto(GStrv) envp = user_environment (s);
  g_autofree char *plugin = staged_path (s, "SANDSTEP_TEST_PLUGINDIR", "sandstep.so");
  g_autofree char *helper = staged_path (s, "SANDSTEP_TEST_BINDIR", "sandstep");
  g_autofree char *source = g_test_build_filename (G_TEST_DIST, "..", "examples", "quickstart", NULL);
  g_autofree char *work = g_build_filename (s->dir, "quickstart", NULL);
  g_autofree char *plugin_arg = g_strconcat ("SANDSTEP_PLUGIN=", plugin, NULL);
  g_autofree char *rendered = g_strdup_printf ("'%s' provision ", helper);
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;

  g_test_summary ("examples/quickstart runs against the installed tree only: the installed plugin renders the "
                  "installed helper's absolute path, and the supervisor that runs the commands is the installed one");
  {
    /* A command run by the installed helper runs under the installed supervisor. */
    const char *provision[] = { helper, "provision", NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr(GArray) pids = NULL;
    int status;

    g_assert_cmpint (spawn (NULL, provision, envp, &handle, &err), ==, 0);
    g_strstrip (handle);
    handle_arg = g_strconcat ("--handle=", handle, NULL);
    {
      const char *run[] = { helper, "run", handle_arg, "--", "echo", "installed", NULL };
      g_clear_pointer (&err, g_free);
      status = spawn (NULL, run, envp, &out, &err);
      /* As test-plugin does: where this machine cannot run a jail, say why, unless told to fail. */
      if (status == 125 && g_strcmp0 (g_getenv ("SANDSTEP_TESTS_MUST_SANDBOX"), "1") != 0)
        {
          g_test_skip_printf ("the helper cannot run sandboxes here (set SANDSTEP_TESTS_MUST_SANDBOX=1 to fail): %s",
                              err);
          return;
        }
      g_assert_cmpint (status, ==, 0);
      g_assert_cmpstr (out, ==, "installed\n");
    }
    {
      const char *supervisor[] = { "sandstep", "--supervisor", handle, NULL };
      pids = sandstep_test_find_processes (supervisor);
    }
    g_assert_cmpuint (pids->len, ==, 1);
    {
      g_autofree char *link = g_strdup_printf ("/proc/%d/exe", (int) g_array_index (pids, GPid, 0));
      g_autofree char *exe = g_file_read_link (link, NULL);
      g_autofree char *expected = staged_path (s, "SANDSTEP_TEST_LIBEXECDIR", "sandstep-supervise");
      g_assert_cmpstr (exe, ==, expected);
    }
    {
      const char *destroy[] = { helper, "destroy", handle_arg, NULL };
      g_clear_pointer (&out, g_free);
      g_clear_pointer (&err, g_free);
      g_assert_cmpint (spawn (NULL, destroy, envp, &out, &err), ==, 0);
    }
  }
  {
    const char *argv[] = { "cp", "-r", source, s->dir, NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint (spawn (NULL, argv, envp, &out, &err), ==, 0);
  }
  {
    const char *argv[] = { "make", plugin_arg, NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_autofree char *report = g_build_filename (work, "report.txt", NULL);
    g_assert_cmpint (spawn (work, argv, envp, &out, &err), ==, 0);
    g_assert_true (g_str_has_prefix (out, rendered));
    g_assert_true (g_file_test (report, G_FILE_TEST_IS_REGULAR));
  }
  {
    g_autoptr(SandstepStore) store = sandstep_store_open (s->state, NULL);
    g_autoptr(GPtrArray) left = sandstep_store_list (store);
    g_assert_cmpuint (left->len, ==, 0);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/install/files", test_install_files, installable_case);
  g_test_add_data_func ("/install/quickstart", test_install_quickstart, installable_case);
  g_test_add_data_func ("/install/apparmor-profile", test_install_apparmor_profile, installable_case);
  return g_test_run ();
}
