/* test-docs.c: the docs say what the program does.
 *
 * docs/reference.md is written from the operator table and the exit
 * statuses (`sandstep-docs markdown`, scripts/update-docs): it must be what
 * this build writes, so that no option, operator or status is missing or
 * stale in it.
 *
 * The pages a user reads (README.md, NEWS.md, SECURITY.md, the .md files of docs/ and
 * the README.md of each example) cannot drift from the program: every `sandstep ...`
 * command line of their sh and console blocks and every $(sandbox-NAME ...)
 * call anywhere in them names a real operator and real options (with values
 * the table accepts, but in a console block, which may show a refusal), every relative link reaches a file (and a heading) that
 * exists, the help the README shows is what `sandstep --help` prints, and
 * README.md stays within 300 lines.  docs/security.md has a row for each attack case, and docs/hacking.md one for
 * each test hook the programs read (hooks/sandstep-test-hooks.h lists them).
 */
#include <glib.h>
#include <string.h>

#include "sandstep-operator.h"

#define README_MAX_LINES 300

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

/* The pages a user reads, relative to the source root. */
static GPtrArray *
doc_pages (void)
{
  const char *top[] = { "README.md", "NEWS.md", "SECURITY.md" };
  g_autofree char *root = g_test_build_filename (G_TEST_DIST, "..", NULL);
  g_autofree char *docs = g_build_filename (root, "docs", NULL);
  g_autofree char *examples = g_build_filename (root, "examples", NULL);
  GPtrArray *pages = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = NULL;
  const char *name;

  for (gsize i = 0; i < G_N_ELEMENTS (top); i++)
    g_ptr_array_add (pages, g_strdup (top[i]));
  dir = g_dir_open (docs, 0, &error);
  g_assert_no_error (error);
  while ((name = g_dir_read_name (dir)) != NULL)
    if (g_str_has_suffix (name, ".md"))
      g_ptr_array_add (pages, g_build_filename ("docs", name, NULL));
  g_clear_pointer (&dir, g_dir_close);
  dir = g_dir_open (examples, 0, &error);
  g_assert_no_error (error);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *readme = g_build_filename (examples, name, "README.md", NULL);

      if (g_file_test (readme, G_FILE_TEST_IS_REGULAR))
        g_ptr_array_add (pages, g_build_filename ("examples", name, "README.md", NULL));
    }
  return pages;
}

static char *
read_page (const char *page)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "..", page, NULL);
  g_autoptr(GError) error = NULL;
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_no_error (error);
  return text;
}

/* Each line of @text with what a reader needs to judge it: the info string of the fenced block it is in ("" for
 * a fence without one, NULL outside blocks); the fences themselves are not lines. */
typedef void (*LineFunc) (const char *page, guint number, const char *fence, const char *line, gpointer data);

static void
each_line (const char *page, const char *text, LineFunc func, gpointer data)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  g_autofree char *fence = NULL;

  for (guint i = 0; lines[i] != NULL; i++)
    {
      const char *stripped = lines[i] + strspn (lines[i], " ");

      if (g_str_has_prefix (stripped, "```"))
        {
          if (fence == NULL)
            fence = g_strstrip (g_strdup (stripped + 3));
          else
            g_clear_pointer (&fence, g_free);
          continue;
        }
      func (page, i + 1, fence, lines[i], data);
    }
}

/* A value is checked against its option when @check_value and it holds nothing the shell or make would expand
 * (a console block may show a value refused, with the refusal). */
static void
check_option (const char *where, const SandstepOperator *op, const char *name, const char *value,
              gboolean check_value)
{
  const SandstepOption *option = sandstep_option_lookup (op, name);
  g_autoptr(GError) error = NULL;

  if (option == NULL)
    g_test_message ("%s: '%s' has no option '%s' (see docs/reference.md)", where, op->name, name);
  g_assert_nonnull (option);
  if (value == NULL)
    {
      if (option->kind != SANDSTEP_OPTION_FLAG && op->text == SANDSTEP_TEXT_NONE)
        g_test_message ("%s: option '%s' of '%s' takes a value", where, name, op->name);
      return;
    }
  if (check_value && strchr (value, '$') == NULL && !sandstep_option_check (option, value, &error))
    g_test_message ("%s: %s", where, error->message);
  g_assert_no_error (error);
}

/* One `sandstep OPERATOR ARGS` (or the rendered '/path/to/sandstep' OPERATOR ARGS) of a shell line, after any
 * NAME=VALUE or `env -u NAME` in front of it; each pipeline or list member on its own. */
static guint
check_command_line (const char *where, const char *command, gboolean check_values)
{
  g_auto(GStrv) argv = NULL;
  g_autoptr(GError) error = NULL;
  guint checked = 0;

  if (!g_shell_parse_argv (command, NULL, &argv, &error))
    {
      g_test_message ("%s: cannot read '%s' as a shell line: %s", where, command, error->message);
      g_assert_no_error (error);
    }
  for (char **w = argv; *w != NULL;)
    {
      const SandstepOperator *op;
      char **start;

      while (*w != NULL && (strchr (*w, '=') != NULL && g_ascii_isalpha (**w) && g_ascii_isupper (**w)))
        w++;
      if (*w != NULL && strcmp (*w, "env") == 0)
        for (w++; *w != NULL && (strcmp (*w, "-u") == 0 || strchr (*w, '=') != NULL || w[-1][0] == '-');)
          w++;
      start = w;
      /* To the end of this member of the pipeline or list. */
      while (*w != NULL && strcmp (*w, "|") != 0 && strcmp (*w, "&&") != 0 && strcmp (*w, "||") != 0 &&
             strcmp (*w, ";") != 0)
        w++;
      if (*w != NULL)
        *w++ = NULL;
      if (*start == NULL || !(strcmp (*start, "sandstep") == 0 || g_str_has_suffix (*start, "/sandstep")))
        continue;
      checked++;
      if (start[1] == NULL || strcmp (start[1], "--help") == 0)
        continue;
      if (strcmp (start[1], "help") == 0)
        {
          if (start[2] != NULL)
            g_assert_nonnull (sandstep_operator_lookup (start[2]));
          continue;
        }
      op = sandstep_operator_lookup (start[1]);
      if (op == NULL)
        g_test_message ("%s: no operator '%s' in '%s'", where, start[1], command);
      g_assert_nonnull (op);
      for (char **a = start + 2; *a != NULL && strcmp (*a, "--") != 0; a++)
        {
          g_autofree char *name = NULL;
          const char *eq;

          if ((*a)[0] == '>' || (*a)[0] == '<' || g_str_has_prefix (*a, "2>"))
            break;
          if (!g_str_has_prefix (*a, "--") || strcmp (*a, "--help") == 0)
            continue;
          eq = strchr (*a, '=');
          name = eq != NULL ? g_strndup (*a + 2, eq - (*a + 2)) : g_strdup (*a + 2);
          check_option (where, op, name, eq != NULL ? eq + 1 : NULL, check_values);
        }
    }
  return checked;
}

typedef struct {
  GString *pending;  /* a command continued with a backslash */
  guint checked;
} Commands;

static void
command_line (const char *page, guint number, const char *fence, const char *line, gpointer data)
{
  Commands *c = data;
  g_autofree char *where = g_strdup_printf ("%s:%u", page, number);
  g_autofree char *text = NULL;
  const char *command = NULL;

  if (fence == NULL || (strcmp (fence, "sh") != 0 && strcmp (fence, "console") != 0))
    return;
  text = g_strstrip (g_strdup (line));
  if (c->pending->len > 0)
    command = text;
  else if (strcmp (fence, "console") == 0)
    {
      /* A prompt: "$ ", or a host's "hostA$ "; a rendered line of make's own. */
      const char *dollar = strstr (text, "$ ");

      if (dollar != NULL && strspn (text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
                              (gsize) (dollar - text))
        command = dollar + 2;
      else if (text[0] == '\'' && strstr (text, "/sandstep' ") != NULL)
        command = text;
    }
  else if (text[0] != '#')
    command = text;
  if (command == NULL)
    return;
  g_string_append (c->pending, command);
  if (g_str_has_suffix (c->pending->str, "\\"))
    {
      g_string_truncate (c->pending, c->pending->len - 1);
      return;
    }
  /* A console block shows a session, refusals included; a sh block is for copying. */
  c->checked += check_command_line (where, c->pending->str, strcmp (fence, "sh") == 0);
  g_string_truncate (c->pending, 0);
}

static void
test_command_lines (void)
{
  g_autoptr(GPtrArray) pages = doc_pages ();
  Commands c = { g_string_new (NULL), 0 };

  g_test_summary ("Every `sandstep ...` line of the sh and console blocks in README.md, docs/ and the examples' "
                  "READMEs names an operator and options of the operator table, with values it accepts");
  for (guint i = 0; i < pages->len; i++)
    {
      g_autofree char *text = read_page (pages->pdata[i]);

      each_line (pages->pdata[i], text, command_line, &c);
      g_assert_cmpuint (c.pending->len, ==, 0);
    }
  g_test_message ("%u command lines checked", c.checked);
  g_assert_cmpuint (c.checked, >=, 50);
  g_string_free (c.pending, TRUE);
}

/* Each $(sandbox-NAME HANDLE OPTIONS,TEXT) in @text: an operator of the table (or run-id, holder), its options
 * the table's, each value accepted. */
static guint
check_make_calls (const char *page, const char *text)
{
  guint checked = 0;

  for (const char *call = strstr (text, "$(sandbox-"); call != NULL; call = strstr (call + 1, "$(sandbox-"))
    {
      const char *name_start = call + strlen ("$(sandbox-");
      g_autofree char *name = g_strndup (name_start, strcspn (name_start, " ,)\n"));
      g_autofree char *head = NULL;
      g_autofree char *where = NULL;
      g_auto(GStrv) words = NULL;
      const SandstepOperator *op;
      const char *args = name_start + strlen (name);
      gsize len = 0;
      int depth = 0;
      guint line = 1;
      gboolean handle_first;

      for (const char *c = text; c < call; c++)
        line += *c == '\n';
      where = g_strdup_printf ("%s:%u", page, line);
      /* A placeholder of the syntax itself: $(sandbox-NAME ...), $(sandbox-OPERATOR ...). */
      if (name[0] != '\0' && g_ascii_isupper (name[0]))
        continue;
      checked++;
      if (strcmp (name, "run-id") == 0 || strcmp (name, "holder") == 0)
        continue;
      op = sandstep_operator_lookup (name);
      if (op == NULL)
        g_test_message ("%s: no operator '%s' in a make call", where, name);
      g_assert_nonnull (op);
      /* The words before the first comma, or the call's end, outside nested $(...). */
      for (; args[len] != '\0' && args[len] != '\n'; len++)
        {
          if (args[len] == '(')
            depth++;
          else if (args[len] == ')' && depth-- == 0)
            break;
          else if (args[len] == ',' && depth == 0)
            break;
        }
      head = g_strndup (args, len);
      words = g_strsplit_set (g_strstrip (head), " \t", -1);
      handle_first = (op->flags & SANDSTEP_OP_HANDLE) != 0;
      for (char **w = words; *w != NULL; w++)
        {
          const char *eq = strchr (*w, '=');
          g_autofree char *option = NULL;

          if (**w == '\0' || strcmp (*w, "...") == 0 || (*w)[0] == '[')
            continue;
          if (w == words && handle_first && eq == NULL)
            continue;  /* the handle: @FILE, $(VAR), or one literally */
          option = eq != NULL ? g_strndup (*w, eq - *w) : g_strdup (*w);
          check_option (where, op, option, eq != NULL ? eq + 1 : NULL, TRUE);
          if (eq == NULL)
            g_assert_cmpint (sandstep_option_lookup (op, option)->kind, ==, SANDSTEP_OPTION_FLAG);
        }
    }
  return checked;
}

static void
test_make_calls (void)
{
  g_autoptr(GPtrArray) pages = doc_pages ();
  guint checked = 0;

  g_test_summary ("Every $(sandbox-NAME ...) call in README.md, docs/ and the examples' READMEs names a function "
                  "of the plugin and options of the operator table, with values it accepts");
  for (guint i = 0; i < pages->len; i++)
    {
      g_autofree char *text = read_page (pages->pdata[i]);

      checked += check_make_calls (pages->pdata[i], text);
    }
  g_test_message ("%u make calls checked", checked);
  g_assert_cmpuint (checked, >=, 30);
}

/* GitHub's anchor of a heading: lower case, letters, digits, '-' and '_' kept, spaces to '-', the rest dropped. */
static char *
heading_anchor (const char *heading)
{
  GString *anchor = g_string_new (NULL);

  for (const char *c = heading; *c != '\0'; c++)
    if (g_ascii_isalnum (*c) || *c == '-' || *c == '_')
      g_string_append_c (anchor, g_ascii_tolower (*c));
    else if (*c == ' ')
      g_string_append_c (anchor, '-');
    else if ((guchar) *c >= 0x80)
      g_string_append_c (anchor, *c);
  return g_string_free (anchor, FALSE);
}

static void
collect_anchor (const char *page, guint number, const char *fence, const char *line, gpointer data)
{
  GHashTable *anchors = data;

  if (fence == NULL && line[0] == '#')
    {
      const char *title = line + strspn (line, "#");

      g_hash_table_add (anchors, heading_anchor (title + strspn (title, " ")));
    }
}

static gboolean
page_has_anchor (const char *page, const char *anchor)
{
  g_autoptr(GHashTable) anchors = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *text = read_page (page);

  each_line (page, text, collect_anchor, anchors);
  return g_hash_table_contains (anchors, anchor);
}

typedef struct {
  guint checked;
} Links;

static void
link_line (const char *page, guint number, const char *fence, const char *line, gpointer data)
{
  Links *links = data;
  g_autofree char *dir = g_path_get_dirname (page);
  g_autoptr(GString) prose = g_string_new (NULL);
  gboolean in_code = FALSE;

  if (fence != NULL)
    return;
  /* Inline code is not a link. */
  for (const char *c = line; *c != '\0'; c++)
    if (*c == '`')
      in_code = !in_code;
    else if (!in_code)
      g_string_append_c (prose, *c);
  for (const char *l = strstr (prose->str, "]("); l != NULL; l = strstr (l + 2, "]("))
    {
      const char *target = l + 2;
      g_autofree char *link = g_strndup (target, strcspn (target, ") "));
      g_autofree char *file = NULL;
      g_autofree char *path = NULL;
      char *hash;

      if (g_str_has_prefix (link, "http://") || g_str_has_prefix (link, "https://") ||
          g_str_has_prefix (link, "mailto:"))
        continue;
      hash = strchr (link, '#');
      if (hash != NULL)
        *hash++ = '\0';
      file = link[0] == '\0' ? g_strdup (page) : g_build_filename (dir, link, NULL);
      path = g_test_build_filename (G_TEST_DIST, "..", file, NULL);
      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        g_test_message ("%s:%u: the link '%s' reaches no file", page, number, link);
      g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
      if (hash != NULL && g_str_has_suffix (file, ".md"))
        {
          g_autofree char *canonical = g_canonicalize_filename (path, NULL);
          g_autofree char *root = g_test_build_filename (G_TEST_DIST, "..", NULL);
          g_autofree char *root_canonical = g_canonicalize_filename (root, NULL);

          if (!page_has_anchor (canonical + strlen (root_canonical) + 1, hash))
            g_test_message ("%s:%u: '%s' has no heading '#%s'", page, number, file, hash);
          g_assert_true (page_has_anchor (canonical + strlen (root_canonical) + 1, hash));
        }
      links->checked++;
    }
}

static void
test_links (void)
{
  g_autoptr(GPtrArray) pages = doc_pages ();
  Links links = { 0 };

  g_test_summary ("Every relative link in README.md, NEWS.md, SECURITY.md, docs/ and the examples' READMEs "
                  "reaches a file that exists, and a heading of it where it names one");
  for (guint i = 0; i < pages->len; i++)
    {
      g_autofree char *text = read_page (pages->pdata[i]);

      each_line (pages->pdata[i], text, link_line, &links);
    }
  g_test_message ("%u links checked", links.checked);
  g_assert_cmpuint (links.checked, >=, 50);
}

static void
test_readme_length (void)
{
  g_autofree char *readme = read_page ("README.md");
  guint lines = 0;

  g_test_summary ("README.md is a page for users, at most 300 lines; the rest is in docs/");
  for (const char *c = readme; *c != '\0'; c++)
    lines += *c == '\n';
  g_test_message ("README.md: %u lines", lines);
  g_assert_cmpuint (lines, <=, README_MAX_LINES);
}

typedef struct {
  GPtrArray *argv;   /* the command of the console block being read, NULL when none is run */
  GString *shown;    /* the output the page shows for it */
  guint run;
} Shown;

/* What `sandstep ARGS` prints, against what the page shows. */
static void
compare_shown (const char *where, Shown *s)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status = -1;

  if (s->argv == NULL)
    return;
  g_ptr_array_add (s->argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (char **) s->argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  if (strcmp (s->shown->str, out) != 0)
    g_test_message ("%s: what the page shows is not what '%s' prints", where, (char *) s->argv->pdata[1]);
  g_assert_cmpstr (s->shown->str, ==, out);
  s->run++;
  g_clear_pointer (&s->argv, g_ptr_array_unref);
  g_string_truncate (s->shown, 0);
}

static void
shown_line (const char *page, guint number, const char *fence, const char *line, gpointer data)
{
  Shown *s = data;
  g_autofree char *where = g_strdup_printf ("%s:%u", page, number);

  if (fence == NULL || strcmp (fence, "console") != 0 || g_str_has_prefix (line, "$ "))
    compare_shown (where, s);
  if (fence == NULL || strcmp (fence, "console") != 0)
    return;
  if (g_str_has_prefix (line, "$ sandstep "))
    {
      g_auto(GStrv) argv = NULL;

      /* Only what needs no sandbox and prints the same everywhere: the help of the helper and its operators. */
      g_assert_true (g_shell_parse_argv (line + 2, NULL, &argv, NULL));
      if (g_strv_length (argv) <= 3 && (g_strv_contains ((const char *const *) argv, "--help") ||
                                        strcmp (argv[1], "help") == 0))
        {
          s->argv = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (s->argv, g_strdup (g_getenv ("SANDSTEP")));
          for (char **a = argv + 1; *a != NULL; a++)
            g_ptr_array_add (s->argv, g_strdup (*a));
        }
    }
  else if (s->argv != NULL)
    g_string_append_printf (s->shown, "%s\n", line);
}

static void
test_help_shown (void)
{
  g_autoptr(GPtrArray) pages = doc_pages ();
  Shown s = { NULL, g_string_new (NULL), 0 };

  g_test_summary ("Where a page shows `sandstep --help` or `sandstep help OPERATOR` with its output, the output "
                  "is what this build prints, line for line");
  g_assert_nonnull (g_getenv ("SANDSTEP"));
  for (guint i = 0; i < pages->len; i++)
    {
      g_autofree char *text = read_page (pages->pdata[i]);

      each_line (pages->pdata[i], text, shown_line, &s);
      compare_shown (pages->pdata[i], &s);
    }
  g_assert_cmpuint (s.run, >=, 1);
  g_string_free (s.shown, TRUE);
}

/* docs/security.md says what each attack test shows: every case of the security battery and the network
 * modes, and every case of test-supervisor and test-recovery, has its row there. */
static void
test_security_cases (void)
{
  const struct { const char *source; const char *pattern; } suites[] = {
    { "security/test-security.c", "\\{\\s*\"([A-I][0-9]+-[a-z0-9-]+)\"," },
    { "security/test-network.c", "\\{ \"([a-z0-9-]+)\", test_[a-z0-9_]+, (?:TRUE|FALSE)," },
    { "test-supervisor.c", "ADD \\(\"(/supervisor/[a-z0-9/-]+)\"" },
    { "test-recovery.c", "ADD \\(\"(/recovery/[a-z0-9/-]+)\"" },
  };
  g_autofree char *security = read_page ("docs/security.md");

  g_test_summary ("Every attack case (tests/security) and every case of test-supervisor and test-recovery has its "
                  "row in docs/security.md, saying what it shows");
  for (gsize i = 0; i < G_N_ELEMENTS (suites); i++)
    {
      g_autofree char *path = g_test_build_filename (G_TEST_DIST, suites[i].source, NULL);
      g_autofree char *source = NULL;
      g_autoptr(GRegex) regex = g_regex_new (suites[i].pattern, G_REGEX_DEFAULT, G_REGEX_MATCH_DEFAULT, NULL);
      g_autoptr(GMatchInfo) match = NULL;
      g_autoptr(GError) error = NULL;
      guint cases = 0;

      g_assert_nonnull (regex);
      g_assert_true (g_file_get_contents (path, &source, NULL, &error));
      g_assert_no_error (error);
      for (g_regex_match (regex, source, G_REGEX_MATCH_DEFAULT, &match); g_match_info_matches (match);
           g_match_info_next (match, NULL))
        {
          g_autofree char *name = g_match_info_fetch (match, 1);
          g_autofree char *row = g_strdup_printf ("| `%s`", name);

          if (strstr (security, row) == NULL)
            g_test_message ("docs/security.md has no row for %s's case '%s'", suites[i].source, name);
          g_assert_nonnull (strstr (security, row));
          cases++;
        }
      g_test_message ("%s: %u cases", suites[i].source, cases);
      g_assert_cmpuint (cases, >, 0);
    }
}

/* The names @pattern (one group) matches in @text, as a set. */
static GHashTable *
names_in (const char *text, const char *pattern)
{
  g_autoptr(GRegex) regex = g_regex_new (pattern, G_REGEX_MULTILINE, G_REGEX_MATCH_DEFAULT, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  GHashTable *names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  g_assert_nonnull (regex);
  for (g_regex_match (regex, text, G_REGEX_MATCH_DEFAULT, &match); g_match_info_matches (match);
       g_match_info_next (match, NULL))
    g_hash_table_add (names, g_match_info_fetch (match, 1));
  return names;
}

/* Adds to @names the test hooks each C file under @dir (the source tree's) reads. */
static void
hooks_read_under (const char *dir, GHashTable *names)
{
  g_autoptr(GDir) entries = g_dir_open (dir, 0, NULL);
  const char *name;

  g_assert_nonnull (entries);
  while ((name = g_dir_read_name (entries)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *source = NULL;
      GHashTable *found;
      GHashTableIter iter;
      gpointer hook;

      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        {
          hooks_read_under (path, names);
          continue;
        }
      if (!g_str_has_suffix (name, ".c") || !g_file_get_contents (path, &source, NULL, NULL))
        continue;
      /* sandstep_test_hook ("NAME"), or the static front's own test_hook ("NAME"). */
      found = names_in (source, "test_hook \\(\"(SANDSTEP_TEST_[A-Z0-9_]+)\"\\)");
      g_hash_table_iter_init (&iter, found);
      while (g_hash_table_iter_next (&iter, &hook, NULL))
        g_hash_table_add (names, g_strdup (hook));
      g_hash_table_unref (found);
    }
}

/* Every name of @a is in @b; else the test fails naming it, and @what says where it is missing. */
static void
assert_names_within (GHashTable *a, GHashTable *b, const char *what)
{
  GHashTableIter iter;
  gpointer name;

  g_hash_table_iter_init (&iter, a);
  while (g_hash_table_iter_next (&iter, &name, NULL))
    {
      if (!g_hash_table_contains (b, name))
        g_test_message ("%s: %s", what, (const char *) name);
      g_assert_true (g_hash_table_contains (b, name));
    }
}

/* The test hooks have one list, hooks/sandstep-test-hooks.h, and docs/hacking.md's table shows it: every hook the
 * programs read is in that list, and the table has a row for each hook of the list and no other. */
static void
test_test_hooks (void)
{
  static const char *const source_dirs[] = { "hooks", "daemon", "operators", "programs", "plugin" };
  g_autofree char *header = read_page ("hooks/sandstep-test-hooks.h");
  g_autofree char *hacking = read_page ("docs/hacking.md");
  g_autoptr(GHashTable) listed = NULL;
  g_autoptr(GHashTable) documented = NULL;
  g_autoptr(GHashTable) read = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  g_test_summary ("Every SANDSTEP_TEST_* hook the programs read is in hooks/sandstep-test-hooks.h's list, and "
                  "docs/hacking.md's table of test hooks has a row for each hook of that list and no other");
  listed = names_in (header, "^ \\*   (SANDSTEP_TEST_[A-Z0-9_]+)=");
  documented = names_in (hacking, "^\\| `(SANDSTEP_TEST_[A-Z0-9_]+)=");
  for (gsize i = 0; i < G_N_ELEMENTS (source_dirs); i++)
    {
      g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "..", source_dirs[i], NULL);
      hooks_read_under (dir, read);
    }
  g_test_message ("%u hooks read, %u listed, %u documented", g_hash_table_size (read), g_hash_table_size (listed),
                  g_hash_table_size (documented));
  g_assert_cmpuint (g_hash_table_size (read), >, 0);
  assert_names_within (read, listed, "read by the programs but not in hooks/sandstep-test-hooks.h's list");
  assert_names_within (listed, documented, "in hooks/sandstep-test-hooks.h's list but not in docs/hacking.md");
  assert_names_within (documented, listed, "in docs/hacking.md but not in hooks/sandstep-test-hooks.h's list");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/docs/reference-current", test_reference_current);
  g_test_add_func ("/docs/man-examples", test_man_examples);
  g_test_add_func ("/docs/readme-length", test_readme_length);
  g_test_add_func ("/docs/command-lines", test_command_lines);
  g_test_add_func ("/docs/make-calls", test_make_calls);
  g_test_add_func ("/docs/links", test_links);
  g_test_add_func ("/docs/help-shown", test_help_shown);
  g_test_add_func ("/docs/security-cases", test_security_cases);
  g_test_add_func ("/docs/test-hooks", test_test_hooks);
  return g_test_run ();
}
