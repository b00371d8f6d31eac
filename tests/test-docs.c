/* test-docs.c: the docs say what the program does.
 *
 * docs/reference.md is written from the operator table and the exit
 * statuses (`sandstep-docs markdown`, scripts/update-docs): it must be what
 * this build writes, so that no option, operator or status is missing or
 * stale in it.
 */
#include <glib.h>
#include <string.h>

#include "sandstep-operator.h"

/* What `sandstep-docs WHAT` writes. */
static char *
docs_output (const char *what)
{
  const char *argv[] = { g_getenv ("SANDSTEP_DOCS"), what, NULL };
  g_autofree char *errors = NULL;
  g_autoptr(GError) error = NULL;
  char *written = NULL;
  int status = -1;

  g_assert_nonnull (argv[0]);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &written, &errors, &status,
                               &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return written;
}

static void
test_reference_current (void)
{
  g_autofree char *reference = g_test_build_filename (G_TEST_DIST, "..", "docs", "reference.md", NULL);
  g_autofree char *committed = NULL;
  g_autofree char *written = docs_output ("markdown");
  g_autoptr(GError) error = NULL;

  g_test_summary ("docs/reference.md is what sandstep-docs writes from the operator table: every operator, option "
                  "and exit status, none stale (regenerate it with scripts/update-docs)");
  g_assert_true (g_file_get_contents (reference, &committed, NULL, &error));
  g_assert_no_error (error);
  if (strcmp (committed, written) != 0)
    g_test_message ("docs/reference.md is stale: run scripts/update-docs and commit it");
  g_assert_cmpstr (committed, ==, written);
}

/* The EXAMPLES of the man pages use operators and options the table has: each `sandstep OP --NAME...` and
 * `$(sandbox-OP ... NAME=...)` in them is checked against it. */
static void
test_man_examples (void)
{
  const char *pages[] = { "sandstep", "make" };

  g_test_summary ("Each man page has EXAMPLES, and every operator and option they use is in the operator table");
  for (gsize p = 0; p < G_N_ELEMENTS (pages); p++)
    {
      g_autofree char *page = docs_output (pages[p]);
      const char *examples = strstr (page, ".SH EXAMPLES\n");
      g_auto(GStrv) lines = NULL;
      guint checked = 0;

      g_assert_nonnull (examples);
      lines = g_strsplit (examples, "\n", -1);
      for (char **l = lines + 1; *l != NULL && !g_str_has_prefix (*l, ".SH "); l++)
        {
          g_autofree char *line = g_strdup (*l);
          g_auto(GStrv) words = NULL;
          const SandstepOperator *op = NULL;
          char *call;

          /* troff's escaped dashes back to dashes. */
          for (char *c = line, *o = line;; c++)
            if (!(c[0] == '\\' && c[1] == '-') && (*o++ = *c) == '\0')
              break;
          if (g_str_has_prefix (line, "sandstep "))
            {
              words = g_strsplit (line + strlen ("sandstep "), " ", -1);
              op = sandstep_operator_lookup (words[0]);
              g_test_message ("%s", line);
              g_assert_nonnull (op);
              for (char **w = words + 1; *w != NULL && strcmp (*w, "--") != 0; w++)
                if (g_str_has_prefix (*w, "--"))
                  {
                    g_autofree char *name = g_strndup (*w + 2, strcspn (*w + 2, "="));
                    g_assert_nonnull (sandstep_option_lookup (op, name));
                  }
              checked++;
            }
          else if ((call = strstr (line, "$(sandbox-")) != NULL)
            {
              g_autofree char *head = g_strndup (call + strlen ("$(sandbox-"), strcspn (call, ",)") - strlen ("$(sandbox-"));
              words = g_strsplit (head, " ", -1);
              op = sandstep_operator_lookup (words[0]);
              g_test_message ("%s", line);
              g_assert_nonnull (op);
              for (char **w = words + 1; *w != NULL; w++)
                if (strchr (*w, '=') != NULL && (*w)[0] != '@')
                  {
                    g_autofree char *name = g_strndup (*w, strcspn (*w, "="));
                    g_assert_nonnull (sandstep_option_lookup (op, name));
                  }
              checked++;
            }
        }
      g_assert_cmpuint (checked, >, 0);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/docs/reference-current", test_reference_current);
  g_test_add_func ("/docs/man-examples", test_man_examples);
  return g_test_run ();
}
