/* test-docs.c: the docs say what the program does.
 *
 * docs/reference.md is written from the operator table and the exit
 * statuses (`sandstep-docs markdown`, scripts/update-docs): it must be what
 * this build writes, so that no option, operator or status is missing or
 * stale in it.
 */
#include <glib.h>
#include <string.h>

static void
test_reference_current (void)
{
  const char *docs = g_getenv ("SANDSTEP_DOCS");
  g_autofree char *reference = g_test_build_filename (G_TEST_DIST, "..", "docs", "reference.md", NULL);
  g_autofree char *committed = NULL;
  g_autofree char *written = NULL;
  g_autofree char *errors = NULL;
  g_autoptr(GError) error = NULL;
  const char *argv[] = { docs, "markdown", NULL };
  int status = -1;

  g_test_summary ("docs/reference.md is what sandstep-docs writes from the operator table: every operator, option "
                  "and exit status, none stale (regenerate it with scripts/update-docs)");
  g_assert_nonnull (docs);
  g_assert_true (g_file_get_contents (reference, &committed, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &written, &errors, &status,
                               &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  if (strcmp (committed, written) != 0)
    g_test_message ("docs/reference.md is stale: run scripts/update-docs and commit it");
  g_assert_cmpstr (committed, ==, written);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/docs/reference-current", test_reference_current);
  return g_test_run ();
}
