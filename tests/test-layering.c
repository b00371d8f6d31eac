/* test-layering.c: the files of the product, and sandstepd's in detail, call one another one way (issue #31,
 * docs/architecture.md).
 *
 * Read from the sources: the functions each .c file of daemon/ defines (GNU style puts a definition's name
 * at the start of its line) and the other files' functions it names (a call, or a function pointer).  No file
 * may reach itself through those names, and E2B's files keep their order: a file names only files below it.
 */
#include <glib.h>
#include <string.h>

/* Files of one part, top first; files of one rank may not name each other. */
typedef struct {
  const char *file;
  int rank;
} Ranked;

/* E2B's files (docs/architecture.md's daemon row). */
static const Ranked e2b_order[] = {
  { "sandstepd-e2b.c", 0 },          { "sandstepd-envd.c", 1 },         { "sandstepd-envd-commands.c", 2 },
  { "sandstepd-envd-jail.c", 2 },    { "sandstepd-envd-job.c", 3 },     { "sandstepd-envd-connect.c", 4 },
  { "sandstepd-e2b-answer.c", 5 },    { "sandstepd-e2b-tokens.c", 5 },   { "sandstepd-envd-body.c", 5 },
};

/* The supervisor's (docs/architecture.md's hooks/supervisor row): its loop, one command, the live sandbox, its
 * network helpers. */
static const Ranked supervisor_order[] = {
  { "sandstep-supervisor.c", 0 }, { "sandstep-supervisor-command.c", 1 }, { "sandstep-supervisor-sandbox.c", 2 },
  { "sandstep-supervisor-network.c", 3 },
};

typedef struct {
  GPtrArray *names;       /* the .c files of daemon/, sorted */
  GHashTable *definer;    /* function -> the file that defines it (borrowed name) */
  GHashTable *edges;      /* file -> GHashTable: file it names -> one function it names there */
} Calls;

/* @src with its comments, string and character literals blanked (a name in them is no call). */
static char *
code_only (const char *src)
{
  char *out = g_strdup (src);

  for (char *p = out; *p != '\0'; p++)
    {
      if (p[0] == '/' && p[1] == '*')
        {
          char *end = strstr (p + 2, "*/");
          char *stop = end != NULL ? end + 2 : p + strlen (p);
          for (; p < stop; p++)
            if (*p != '\n')
              *p = ' ';
          p--;
        }
      else if (p[0] == '/' && p[1] == '/')
        for (; *p != '\0' && *p != '\n'; p++)
          *p = ' ';
      else if (*p == '"' || *p == '\'')
        {
          char quote = *p;
          for (p++; *p != '\0' && *p != quote; p++)
            if (*p == '\\' && p[1] != '\0')
              *p++ = ' ', *p = ' ';
            else if (*p != '\n')
              *p = ' ';
          if (*p == '\0')
            p--;
        }
    }
  return out;
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
calls_free (Calls *c)
{
  g_ptr_array_unref (c->names);
  g_hash_table_unref (c->definer);
  g_hash_table_unref (c->edges);
  g_free (c);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Calls, calls_free)

/* The files of @folders (source folders, NULL-terminated), named "FOLDER/FILE.c" unless @bare, and the calls
 * between them. */
static Calls *
read_calls_in (const char *const *folders, gboolean bare)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) code = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr(GHashTable) paths = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr(GHashTable) twice = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GRegex) definition = g_regex_new ("^(sandstepd?_\\w+) \\(", G_REGEX_MULTILINE, 0, NULL);
  g_autoptr(GRegex) word = g_regex_new ("\\bsandstepd?_\\w+\\b", 0, 0, NULL);
  Calls *c = g_new0 (Calls, 1);

  c->names = g_ptr_array_new_with_free_func (g_free);
  c->definer = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  c->edges = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) g_hash_table_unref);
  for (gsize f = 0; folders[f] != NULL; f++)
    {
      g_autofree char *dir_path = g_test_build_filename (G_TEST_DIST, "..", folders[f], NULL);
      g_autoptr(GDir) dir = g_dir_open (dir_path, 0, &error);
      const char *name;

      g_assert_no_error (error);
      while ((name = g_dir_read_name (dir)) != NULL)
        if (g_str_has_suffix (name, ".c"))
          {
            char *key = bare ? g_strdup (name) : g_build_filename (folders[f], name, NULL);
            g_ptr_array_add (c->names, key);
            g_hash_table_insert (paths, key, g_build_filename (dir_path, name, NULL));
          }
    }
  g_ptr_array_sort (c->names, compare_names);
  g_assert_cmpuint (c->names->len, >, 1);

  for (guint i = 0; i < c->names->len; i++)
    {
      const char *file = c->names->pdata[i];
      const char *path = g_hash_table_lookup (paths, file);
      g_autofree char *src = NULL;
      g_autoptr(GMatchInfo) m = NULL;
      char *text;

      g_assert_true (g_file_get_contents (path, &src, NULL, &error));
      g_assert_no_error (error);
      text = code_only (src);
      g_hash_table_insert (code, (gpointer) file, text);
      /* A definition's return type is on the line before, "static" there for a file's own functions. */
      for (g_regex_match (definition, text, 0, &m); g_match_info_matches (m); g_match_info_next (m, NULL))
        {
          g_autofree char *fn = g_match_info_fetch (m, 1);
          gint start = 0;
          const char *line_before;

          g_match_info_fetch_pos (m, 0, &start, NULL);
          line_before = start > 0 ? g_strrstr_len (text, start - 1, "\n") : NULL;
          line_before = line_before != NULL ? line_before + 1 : text;
          if (g_str_has_prefix (line_before, "static "))
            continue;
          /* A name defined twice (a program's own copy, a fuzz target's) says nothing of who calls whom. */
          if (g_hash_table_contains (c->definer, fn))
            g_hash_table_add (twice, g_strdup (fn));
          g_hash_table_insert (c->definer, g_steal_pointer (&fn), (gpointer) file);
        }
    }
  {
    GHashTableIter iter;
    gpointer fn;
    g_hash_table_iter_init (&iter, twice);
    while (g_hash_table_iter_next (&iter, &fn, NULL))
      g_hash_table_remove (c->definer, fn);
  }

  for (guint i = 0; i < c->names->len; i++)
    {
      const char *file = c->names->pdata[i];
      GHashTable *named = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
      g_autoptr(GMatchInfo) m = NULL;

      for (g_regex_match (word, g_hash_table_lookup (code, file), 0, &m); g_match_info_matches (m);
           g_match_info_next (m, NULL))
        {
          g_autofree char *fn = g_match_info_fetch (m, 0);
          const char *other = g_hash_table_lookup (c->definer, fn);

          if (other != NULL && strcmp (other, file) != 0 && !g_hash_table_contains (named, other))
            g_hash_table_insert (named, (gpointer) other, g_steal_pointer (&fn));
        }
      g_hash_table_insert (c->edges, (gpointer) file, named);
    }
  return c;
}

static Calls *
read_calls (void)
{
  static const char *const daemon[] = { "daemon", NULL };

  return read_calls_in (daemon, TRUE);
}

/* Depth first from @file: FALSE, with the circle in @path, when it reaches a file on @path. */
static gboolean
no_circle (Calls *c, const char *file, GHashTable *done, GPtrArray *path)
{
  GHashTable *named = g_hash_table_lookup (c->edges, file);
  g_autoptr(GList) others = g_hash_table_get_keys (named);

  for (guint i = 0; i < path->len; i++)
    if (strcmp (path->pdata[i], file) == 0)
      {
        g_ptr_array_add (path, (gpointer) file);
        return FALSE;
      }
  if (g_hash_table_contains (done, file))
    return TRUE;
  g_ptr_array_add (path, (gpointer) file);
  others = g_list_sort (others, (GCompareFunc) g_strcmp0);
  for (GList *l = others; l != NULL; l = l->next)
    if (!no_circle (c, l->data, done, path))
      return FALSE;
  g_ptr_array_remove_index (path, path->len - 1);
  g_hash_table_add (done, (gpointer) file);
  return TRUE;
}

/* Fails the case, naming the circle, when a file of @c reaches itself. */
static void
assert_no_circle (Calls *c, const char *where)
{
  g_autoptr(GHashTable) done = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < c->names->len; i++)
    {
      g_autoptr(GPtrArray) path = g_ptr_array_new ();

      if (!no_circle (c, c->names->pdata[i], done, path))
        {
          g_autofree char *shown = NULL;

          g_ptr_array_add (path, NULL);
          shown = g_strjoinv (" -> ", (char **) path->pdata);
          g_test_message ("%scalls in a circle: %s; move what the lower file needs below both", where, shown);
          g_test_fail ();
          return;
        }
    }
}

static void
test_no_circle (void)
{
  g_autoptr(Calls) c = read_calls ();

  g_test_summary ("No file of daemon/ calls, itself or through others, a file that calls it back");
  /* The reading finds what it looks for: sandstepd-e2b.c names envd's handler. */
  g_assert_cmpstr (g_hash_table_lookup (c->definer, "sandstepd_handle_envd"), ==, "sandstepd-envd.c");
  g_assert_true (g_hash_table_contains (g_hash_table_lookup (c->edges, "sandstepd-e2b.c"), "sandstepd-envd.c"));

  assert_no_circle (c, "daemon/ ");
}

static int
rank_of (const Ranked *order, gsize n, const char *file)
{
  for (gsize i = 0; i < n; i++)
    if (strcmp (order[i].file, file) == 0)
      return order[i].rank;
  return -1;
}

/* Fails the case when a file of @order (in @folder) names a file of @order that is not below it. */
static void
assert_order (Calls *c, const char *folder, const Ranked *order, gsize n)
{
  for (gsize i = 0; i < n; i++)
    {
      GHashTable *named = g_hash_table_lookup (c->edges, order[i].file);
      GHashTableIter iter;
      gpointer other, fn;

      if (named == NULL)
        {
          g_test_message ("%s/%s is not there; keep docs/architecture.md and this order in step", folder,
                          order[i].file);
          g_test_fail ();
          continue;
        }
      g_hash_table_iter_init (&iter, named);
      while (g_hash_table_iter_next (&iter, &other, &fn))
        {
          int rank = rank_of (order, n, other);

          if (rank >= 0 && rank <= order[i].rank)
            {
              g_test_message ("%s/%s calls %s of %s/%s, which is not below it", folder, order[i].file,
                              (const char *) fn, folder, (const char *) other);
              g_test_fail ();
            }
        }
    }
}

static void
test_e2b_order (void)
{
  g_autoptr(Calls) c = read_calls ();

  g_test_summary ("E2B's files name only files below them: e2b.c, envd.c, envd-commands.c and envd-jail.c, "
                  "envd-job.c, envd-connect.c, e2b-answer.c, e2b-tokens.c and envd-body.c");
  assert_order (c, "daemon", e2b_order, G_N_ELEMENTS (e2b_order));
}

static void
test_supervisor_order (void)
{
  static const char *const supervisor[] = { "hooks/supervisor", NULL };
  g_autoptr(Calls) c = read_calls_in (supervisor, TRUE);

  g_test_summary ("The supervisor's files name only files below them: its loop, one command, the live sandbox, its "
                  "network helpers (issue 31: a real API between the parts of its state)");
  /* The reading finds what it looks for: the loop names the command's begin. */
  g_assert_cmpstr (g_hash_table_lookup (c->definer, "sandstep_supervisor_command_begin"), ==,
                   "sandstep-supervisor-command.c");
  g_assert_true (g_hash_table_contains (g_hash_table_lookup (c->edges, "sandstep-supervisor.c"),
                                        "sandstep-supervisor-command.c"));
  assert_order (c, "hooks/supervisor", supervisor_order, G_N_ELEMENTS (supervisor_order));
}

/* Every folder of the product (not tests/): no file reaches itself through the functions it names. */
static void
test_no_circle_anywhere (void)
{
  static const char *const folders[] = {
    "hooks", "hooks/jail", "hooks/supervisor", "hooks/local", "hooks/image", "hooks/remote", "hooks/llm",
    "hooks/storage", "operators", "programs", "daemon", "plugin", "plugin/slurm", NULL,
  };
  g_autoptr(Calls) c = read_calls_in (folders, FALSE);

  g_test_summary ("No file of the product calls, itself or through others, a file that calls it back (issue 31: "
                  "one way between the parts of each process)");
  /* The reading finds what it looks for: the claims' file names the store's. */
  g_assert_true (g_hash_table_contains (g_hash_table_lookup (c->edges, "hooks/local/sandstep-claim.c"),
                                        "hooks/local/sandstep-store.c"));
  assert_no_circle (c, "");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/layering/daemon/no-circle", test_no_circle);
  g_test_add_func ("/layering/daemon/e2b-order", test_e2b_order);
  g_test_add_func ("/layering/supervisor-order", test_supervisor_order);
  g_test_add_func ("/layering/no-circle-anywhere", test_no_circle_anywhere);
  return g_test_run ();
}
