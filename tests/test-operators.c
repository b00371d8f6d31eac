/* test-operators.c: the operator table (sandstep-operators.c), the one truth for what the helper accepts.
 *
 * The table must stay sorted with unique names, every operator and option
 * must explain itself in the usage text, the flags must agree, and every
 * option kind must accept a good value and refuse a bad one with its name.
 * A new operator or option needs nothing here unless it brings a new kind.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-operator.h"
#include "sandstep-run-wire.h"

/* The operators that speak HTTP live in sandstep-net: weak in the table, so a
 * program that does not link them (this one, the lean helper) has no run function. */
static const char *const http_operators[] = { "agent", "mcp", "tools" };

static gboolean
is_http (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (http_operators); i++)
    if (strcmp (http_operators[i], name) == 0)
      return TRUE;
  return FALSE;
}

static void
test_sorted_unique (void)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  g_assert_cmpuint (n, >, 0);
  for (gsize i = 1; i < n; i++)
    g_assert_cmpint (strcmp (ops[i - 1].name, ops[i].name), <, 0);
  for (gsize i = 0; i < n; i++)
    {
      g_assert_true (sandstep_operator_lookup (ops[i].name) == &ops[i]);
      g_assert_cmpstr (ops[i].summary, !=, "");
      g_assert_nonnull (ops[i].operands);
      if (!is_http (ops[i].name))
        g_assert_nonnull (ops[i].run);
      /* Holding a sandbox means naming one. */
      if (ops[i].flags & SANDSTEP_OP_CLAIMS)
        g_assert_true (ops[i].flags & SANDSTEP_OP_HANDLE);
      /* Free text comes after "--" or as operands, and the usage says which. */
      if (ops[i].text == SANDSTEP_TEXT_COMMAND)
        g_assert_true (g_str_has_prefix (ops[i].operands, "-- "));
      if (ops[i].text == SANDSTEP_TEXT_NONE)
        g_assert_cmpstr (ops[i].operands, ==, "");
    }
  g_assert_null (sandstep_operator_lookup ("no-such-operator"));
}

static void
test_options (void)
{
  static const char *const common[] = { "owner", "holder", "backend" };
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  for (gsize i = 0; i < n; i++)
    {
      g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

      for (const SandstepOption *o = ops[i].options; o->name != NULL; o++)
        {
          g_test_message ("%s --%s", ops[i].name, o->name);
          g_assert_false (g_hash_table_contains (seen, o->name));
          g_hash_table_add (seen, (gpointer) o->name);
          g_assert_cmpstr (o->help, !=, "");
          g_assert_true ((o->kind == SANDSTEP_OPTION_CHOICE) == (o->choices != NULL));
          g_assert_true (sandstep_option_lookup (&ops[i], o->name) == o);
        }
      for (gsize c = 0; c < G_N_ELEMENTS (common); c++)
        g_assert_nonnull (sandstep_option_lookup (&ops[i], common[c]));
      g_assert_true ((sandstep_option_lookup (&ops[i], "handle") != NULL) == !!(ops[i].flags & SANDSTEP_OP_HANDLE));
      g_assert_true ((sandstep_option_lookup (&ops[i], "wait") != NULL) == !!(ops[i].flags & SANDSTEP_OP_CLAIMS));
    }
}

static void
test_usage (void)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);
  g_autofree char *all = sandstep_operator_usage (NULL);

  for (gsize i = 0; i < n; i++)
    {
      g_autofree char *usage = sandstep_operator_usage (&ops[i]);
      g_autofree char *head = g_strdup_printf ("Usage: sandstep %s ", ops[i].name);

      g_assert_nonnull (strstr (all, ops[i].summary));
      g_assert_true (g_str_has_prefix (usage, head));
      for (const SandstepOption *o = ops[i].options; o->name != NULL; o++)
        {
          g_autofree char *flag = g_strdup_printf ("--%s", o->name);
          g_assert_nonnull (strstr (usage, flag));
          g_assert_nonnull (strstr (usage, o->help));
        }
    }
}

typedef struct {
  SandstepOptionKind kind;
  const char *choices;
  const char *good;
  const char *bad;
} KindRow;

static const KindRow kind_rows[] = {
  /* kind                       choices      good     bad */
  { SANDSTEP_OPTION_STRING,     NULL,        "x",     "" },
  { SANDSTEP_OPTION_DURATION,   NULL,        "30m",   "0" },
  { SANDSTEP_OPTION_KEEP,       NULL,        "0",     "-1" },
  { SANDSTEP_OPTION_SECONDS,    NULL,        "2.5",   "0" },
  { SANDSTEP_OPTION_WAIT,       NULL,        "0",     "soon" },
  { SANDSTEP_OPTION_COUNT,      NULL,        "3",     "0" },
  { SANDSTEP_OPTION_SIZE,       NULL,        "5M",    "5T" },
  { SANDSTEP_OPTION_CHOICE,     "a|b",       "b",     "c" },
  { SANDSTEP_OPTION_FLAG,       NULL,        NULL,    "yes" },
  { SANDSTEP_OPTION_IDENTIFIER, NULL,        "box_2", "my-box" },
  { SANDSTEP_OPTION_IDENTIFIER, NULL,        "_x",    "2box" },
  { SANDSTEP_OPTION_IDENTIFIER, NULL,        "B",     "b\xc3\xa9" },
  { SANDSTEP_OPTION_IDENTIFIER, NULL,        "a23456789012345678901234567890123456789012345678",
                                                      "a234567890123456789012345678901234567890123456789" },
};

static void
test_option_kinds (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (kind_rows); i++)
    {
      SandstepOption option = { "opt-name", kind_rows[i].kind, FALSE, kind_rows[i].choices, "help" };
      g_autoptr(GError) error = NULL;

      g_test_message ("kind %d: '%s' / '%s'", kind_rows[i].kind, kind_rows[i].good, kind_rows[i].bad);
      g_assert_true (sandstep_option_check (&option, kind_rows[i].good, NULL));
      g_assert_false (sandstep_option_check (&option, kind_rows[i].bad, &error));
      g_assert_true (error->domain == SANDSTEP_USAGE_ERROR);
      g_assert_nonnull (strstr (error->message, "opt-name"));
    }
}

/* The static front reads some options of `run` itself (sandstep-run-wire.h): each must be an option of the
 * table's `run`, one that takes a value, as the core reads it; and every option of `run` the front does not
 * read sends the run to the core. */
static void
test_front_run_options (void)
{
  static const SandstepRunOption front[] = { SANDSTEP_RUN_OPTIONS };
  const SandstepOperator *run = sandstep_operator_lookup ("run");

  g_test_summary ("The options the static front reads of 'sandstep run' are the operator table's, with values");
  g_assert_nonnull (run);
  for (gsize i = 0; i < G_N_ELEMENTS (front); i++)
    {
      const SandstepOption *option = sandstep_option_lookup (run, front[i].name);
      g_test_message ("--%s", front[i].name);
      g_assert_nonnull (option);
      g_assert_cmpint (option->kind, !=, SANDSTEP_OPTION_FLAG);
      g_assert_false (option->repeatable);
      for (gsize j = 0; j < i; j++)
        g_assert_cmpint (front[j].field, !=, front[i].field);
    }
}

/* What the bash completion replies for @line (COMP_LINE, the cursor at its
 * end), split into COMP_WORDS as bash does by default (@words, the last one
 * being completed), in @dir; one reply a line. */
static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static char *
complete (const char *dir, const char *script, const char *line, const char *words)
{
  /* Sorted, as readline shows them: file names come in the directory's order, which is the file system's. */
  const char *driver = "source \"$1\"; COMP_LINE=$2; COMP_POINT=${#2}; read -ra COMP_WORDS <<< \"$3\"; "
                       "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sandstep; printf '%s\\n' \"${COMPREPLY[@]}\" | "
                       "LC_ALL=C sort";
  const char *argv[] = { "/bin/bash", "--norc", "-c", driver, "bash", script, line, words, NULL };
  g_autoptr(GError) error = NULL;
  char *out = NULL;
  int status = 0;

  g_spawn_sync (dir, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return out;
}

/* The bash completion completes option names, and values too (issue 34,
 * 4): every choice option's words, @FILE for a handle from the *.sbx files
 * here, and file names for a FILE. */
static void
test_completion (void)
{
  const char *docs = g_getenv ("SANDSTEP_DOCS");
  const char *argv[] = { docs, "completion", NULL };
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *top = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *script = NULL;
  int status = 0;
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  if (docs == NULL || !g_file_test ("/bin/bash", G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("needs SANDSTEP_DOCS (the built sandstep-docs) and /bin/bash");
      return;
    }
  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &text, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  top = g_dir_make_tmp ("sandstep-completion-XXXXXX", &error);
  g_assert_no_error (error);
  /* The script beside the directory where files are completed, not in it. */
  script = g_build_filename (top, "sandstep.bash", NULL);
  dir = g_build_filename (top, "here", NULL);
  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  g_file_set_contents (script, text, -1, &error);
  g_assert_no_error (error);
  for (const char *const *f = (const char *const[]) { "box.sbx", "notes.txt", NULL }; *f != NULL; f++)
    {
      g_autofree char *path = g_build_filename (dir, *f, NULL);
      g_file_set_contents (path, "", 0, &error);
      g_assert_no_error (error);
    }

  {
    g_autofree char *got = complete (dir, script, "sandstep run --ti", "sandstep run --ti");
    g_assert_cmpstr (got, ==, "--timeout=\n");
  }
  for (gsize i = 0; i < n; i++)
    {
      gsize n_groups = 0;
      const SandstepOption *const *groups = sandstep_operator_option_groups (&ops[i], &n_groups);

      for (gsize g = 0; g < n_groups; g++)
        for (const SandstepOption *o = groups[g]; o->name != NULL; o++)
          {
            g_autofree char *line = g_strdup_printf ("sandstep %s --%s=", ops[i].name, o->name);
            g_autofree char *words = g_strdup_printf ("sandstep %s --%s =", ops[i].name, o->name);
            g_autofree char *expected = NULL;
            g_autofree char *got = NULL;

            if (o->kind == SANDSTEP_OPTION_CHOICE)
              {
                g_auto(GStrv) choices = g_strsplit (o->choices, "|", -1);
                g_autofree char *joined = NULL;

                qsort (choices, g_strv_length (choices), sizeof (char *), compare_strings);
                joined = g_strjoinv ("\n", choices);
                expected = g_strconcat (joined, "\n", NULL);
              }
            else if (strcmp (o->name, "handle") == 0)
              expected = g_strdup ("@box.sbx\n");
            else if (g_strcmp0 (o->metavar, "FILE") == 0)
              expected = g_strdup ("box.sbx\nnotes.txt\n");
            else
              continue;
            got = complete (dir, script, line, words);
            if (g_strcmp0 (got, expected) != 0)
              g_error ("'%s': completed '%s', expected '%s'", line, got, expected);
          }
    }
  {
    /* After '@' (a word break, as '=' is), readline completes what follows it. */
    g_autofree char *got = complete (dir, script, "sandstep run --handle=@b", "sandstep run --handle =@ b");
    g_assert_cmpstr (got, ==, "box.sbx\n");
  }
  for (const char *const *f = (const char *const[]) { "box.sbx", "notes.txt", NULL }; *f != NULL; f++)
    {
      g_autofree char *path = g_build_filename (dir, *f, NULL);
      g_unlink (path);
    }
  g_rmdir (dir);
  g_unlink (script);
  g_rmdir (top);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/operators/sorted-unique", test_sorted_unique);
  g_test_add_func ("/operators/options", test_options);
  g_test_add_func ("/operators/usage", test_usage);
  g_test_add_func ("/operators/option-kinds", test_option_kinds);
  g_test_add_func ("/operators/front-run-options", test_front_run_options);
  g_test_add_func ("/operators/completion", test_completion);
  return g_test_run ();
}
