/* test-installed.c: what a program outside the build tree ignores.
 *
 * The test hooks (hooks/sandstep-test-hooks.h) let the suites replace DNS
 * for the egress proxy, the port it dials for 443 and the remote module.
 * They must do nothing in an installed sandstep.  This program checks the
 * gate from both sides: run where it was built, it sees the hooks; a copy of
 * it outside the build tree, with the same environment, sees none.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sandstep-test-hooks.h"

static const char *const hooks[] = { "SANDSTEP_TEST_RESOLVE", "SANDSTEP_TEST_HTTPS_PORT", "SANDSTEP_TEST_REMOTE_MODULE" };

/* As a probe: each hook's value as the program sees it, one a line. */
static int
probe (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (hooks); i++)
    {
      const char *value = sandstep_test_hook (hooks[i]);
      printf ("%s=%s\n", hooks[i], value != NULL ? value : "(ignored)");
    }
  return 0;
}

static char *
run_probe (const char *program)
{
  const char *argv[] = { program, "--probe", NULL };
  g_auto(GStrv) envp = g_get_environ ();
  g_autoptr(GError) error = NULL;
  char *out = NULL;
  int status = -1;

  envp = g_environ_setenv (envp, "SANDSTEP_TEST_RESOLVE", "pypi.org=127.0.0.1", TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_TEST_HTTPS_PORT", "8443", TRUE);
  envp = g_environ_setenv (envp, "SANDSTEP_TEST_REMOTE_MODULE", "/tmp/evil.so", TRUE);
  g_spawn_sync (NULL, (char **) argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return out;
}

static void
test_hooks_ignored_when_installed (void)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = g_dir_make_tmp ("sandstep-installed-XXXXXX", NULL);
  g_autofree char *copy = NULL;
  g_autofree char *contents = NULL;
  g_autofree char *in_tree = NULL;
  g_autofree char *installed = NULL;
  gsize len = 0;

  g_test_summary ("test hooks (SANDSTEP_TEST_RESOLVE, SANDSTEP_TEST_HTTPS_PORT, SANDSTEP_TEST_REMOTE_MODULE) work "
                  "in a program of the build tree (or a test copy beside the mark) and are ignored by the same "
                  "program installed elsewhere");
  g_assert_nonnull (self);
  g_assert_nonnull (dir);
  copy = g_build_filename (dir, "test-installed", NULL);
  g_assert_true (g_file_get_contents (self, &contents, &len, NULL));
  g_assert_true (g_file_set_contents (copy, contents, len, NULL));
  g_assert_cmpint (g_chmod (copy, 0755), ==, 0);

  in_tree = run_probe (self);
  g_assert_cmpstr (in_tree, ==, "SANDSTEP_TEST_RESOLVE=pypi.org=127.0.0.1\nSANDSTEP_TEST_HTTPS_PORT=8443\n"
                                "SANDSTEP_TEST_REMOTE_MODULE=/tmp/evil.so\n");
  installed = run_probe (copy);
  g_assert_cmpstr (installed, ==, "SANDSTEP_TEST_RESOLVE=(ignored)\nSANDSTEP_TEST_HTTPS_PORT=(ignored)\n"
                                  "SANDSTEP_TEST_REMOTE_MODULE=(ignored)\n");
  /* The harness's copies for a throwaway user carry the mark, and keep the hooks. */
  {
    g_autofree char *mark = g_build_filename (dir, SANDSTEP_TEST_HOOKS_MARK, NULL);
    g_autofree char *marked = NULL;

    g_assert_true (g_file_set_contents (mark, "", 0, NULL));
    marked = run_probe (copy);
    g_assert_cmpstr (marked, ==, in_tree);
    g_unlink (mark);
  }
  g_unlink (copy);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  if (argc == 2 && strcmp (argv[1], "--probe") == 0)
    return probe ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/installed/test-hooks-ignored", test_hooks_ignored_when_installed);
  return g_test_run ();
}
