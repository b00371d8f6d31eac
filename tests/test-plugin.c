/* test-plugin.c: the GNU make plugin sandstep.so, driven through /usr/bin/make.
 *
 * Each case copies data makefiles (tests/data/make/) into a fresh temporary
 * directory, the top of its tree, and runs make there with SANDSTEP_STATE_DIR
 * inside it.  The built plugin and helper come from the environment that
 * tests/meson.build sets: SANDSTEP_PLUGIN (sandstep.so) and SANDSTEP (the
 * helper).  Cases under /plugin/helper/ run the real helper; they skip, with
 * the helper's message, when it cannot run a command in a sandbox on this
 * machine, unless SANDSTEP_TESTS_MUST_SANDBOX=1 makes that a failure.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <signal.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "sandstep-identity.h"
#include "sandstep-operator.h"
#include "sandstep-owner-libc.h"
#include "sandstep-render.h"
#include "sandstep-store.h"
#include "sandstep-teardown.h"
#include "sandstep-test-utils.h"

/* ---- fixture: a temporary tree ------------------------------------------- */

typedef struct {
  char *dir;    /* canonical: make's CURDIR, and so SANDSTEP_TOP */
  char *state;  /* SANDSTEP_STATE_DIR */
  char *dag;    /* the default DAG name: the directory's base name */
  const char *run;  /* SANDSTEP_RUN for every make, for cases whose makes share a run; NULL: the tree's own */
} Tree;

typedef struct {
  int status;   /* make's exit status; -1 when it died of a signal */
  char *out;
  char *err;
} MakeResult;

static void
make_result_free (MakeResult *result)
{
  g_free (result->out);
  g_free (result->err);
  g_free (result);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MakeResult, make_result_free)

static int
make_writable (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (flag == FTW_D || flag == FTW_DNR)
    chmod (path, 0700);
  return 0;
}

static int
remove_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return remove (path) == 0 || errno == ENOENT ? 0 : -1;
}

static void
remove_tree (const char *path)
{
  nftw (path, make_writable, 16, FTW_PHYS);
  if (nftw (path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    g_test_message ("could not remove '%s' entirely: %s", path, g_strerror (errno));
}

/* Sandboxes a DAG left (a failed step never releases): destroyed, so that
 * what lives outside the tree goes too (their cgroups, their launchers). */
static void
destroy_left_sandboxes (const char *state)
{
  g_autoptr(SandstepStore) store = NULL;
  g_autoptr(GPtrArray) handles = NULL;

  if (!g_file_test (state, G_FILE_TEST_IS_DIR) || (store = sandstep_store_open (state, NULL)) == NULL)
    return;
  handles = sandstep_store_list (store);
  for (guint i = 0; i < handles->len; i++)
    sandstep_sandbox_destroy (store, handles->pdata[i], -1, NULL);
}

static void
tree_free (Tree *tree)
{
  if (tree == NULL)
    return;
  destroy_left_sandboxes (tree->state);
  remove_tree (tree->dir);
  g_free (tree->dir);
  g_free (tree->state);
  g_free (tree->dag);
  g_free (tree);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Tree, tree_free)

static Tree *
tree_new (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *tmp = g_dir_make_tmp ("sandstep-plugin-XXXXXX", &error);
  char *real = NULL;
  Tree *tree = g_new0 (Tree, 1);

  g_assert_no_error (error);
  real = realpath (tmp, NULL);
  g_assert_nonnull (real);
  tree->dir = g_strdup (real);
  free (real);
  tree->state = g_build_filename (tree->dir, "state", NULL);
  tree->dag = g_path_get_basename (tree->dir);
  return tree;
}

static char *
tree_path (Tree *tree, const char *rel)
{
  return g_build_filename (tree->dir, rel, NULL);
}

static void
write_file (const char *path, const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_path_get_dirname (path);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

/* Copies tests/data/make/@name to @rel in the tree. */
static void
tree_add_makefile (Tree *tree, const char *name, const char *rel)
{
  g_autofree char *source = g_test_build_filename (G_TEST_DIST, "data", "make", name, NULL);
  g_autofree char *text = sandstep_test_read_file (source);
  g_autofree char *dest = tree_path (tree, rel);

  write_file (dest, text);
}

/* The helper stand-in: prints each argument it gets as [ARG], one a line. */
static char *
tree_add_argv_printer (Tree *tree)
{
  char *path = tree_path (tree, "argv.sh");

  write_file (path, "#!/bin/sh\nfor a; do printf '[%s]\\n' \"$a\"; done\n");
  g_assert_cmpint (chmod (path, 0755), ==, 0);
  return path;
}

static const char *
plugin_path (void)
{
  return g_getenv ("SANDSTEP_PLUGIN");
}

static const char *
helper_path (void)
{
  const char *helper = g_getenv ("SANDSTEP");
  return helper != NULL ? helper : "sandstep";
}

static const char *
make_program (void)
{
  const char *make = g_getenv ("SANDSTEP_TEST_MAKE");
  return make != NULL ? make : "/usr/bin/make";
}

static gboolean
require_plugin (void)
{
  if (plugin_path () == NULL || !g_file_test (plugin_path (), G_FILE_TEST_EXISTS))
    {
      g_test_skip ("SANDSTEP_PLUGIN does not name the built sandstep.so");
      return FALSE;
    }
  if (!g_file_test (make_program (), G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip_printf ("no make at '%s'", make_program ());
      return FALSE;
    }
  return TRUE;
}

#define REQUIRE_PLUGIN() \
  G_STMT_START { if (!require_plugin ()) return; } G_STMT_END

/* The environment of make: the caller's, less anything that would leak an
 * outer make or run into ours, plus @env ("NAME=VALUE" sets, "NAME" unsets). */
static char **
make_environment (Tree *tree, const char *const *env)
{
  static const char *const unset[] = {
    "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKELEVEL", "MAKEFILES", "MAKE_TERMOUT", "MAKE_TERMERR",
    "SANDSTEP_RUN", "SANDSTEP_TOP", "SANDSTEP_DAG", "SANDSTEP_OWNER", "SANDSTEP_HOLDER",
  };
  char **envp = g_get_environ ();

  for (gsize i = 0; i < G_N_ELEMENTS (unset); i++)
    envp = g_environ_unsetenv (envp, unset[i]);
  envp = g_environ_setenv (envp, "SANDSTEP_STATE_DIR", tree->state, TRUE);
  envp = g_environ_setenv (envp, "LC_ALL", "C", TRUE);
  /* A make that succeeds ends the tree's run: cases whose later makes use what an earlier one made pin it. */
  if (tree->run != NULL)
    envp = g_environ_setenv (envp, "SANDSTEP_RUN", tree->run, TRUE);
  for (; env != NULL && *env != NULL; env++)
    {
      const char *eq = strchr (*env, '=');
      if (eq == NULL)
        envp = g_environ_unsetenv (envp, *env);
      else
        {
          g_autofree char *name = g_strndup (*env, eq - *env);
          envp = g_environ_setenv (envp, name, eq + 1, TRUE);
        }
    }
  return envp;
}

/* Runs make in @subdir of the tree (NULL: the top) with @args. */
static MakeResult *
tree_make_full (Tree *tree, const char *subdir, const char *const *env, const char *const *args)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) envp = make_environment (tree, env);
  g_autofree char *cwd = subdir != NULL ? tree_path (tree, subdir) : g_strdup (tree->dir);
  g_autofree char *shown = NULL;
  MakeResult *result = g_new0 (MakeResult, 1);
  int wait_status = 0;

  g_ptr_array_add (argv, (char *) make_program ());
  for (; args != NULL && *args != NULL; args++)
    g_ptr_array_add (argv, (char *) *args);
  g_ptr_array_add (argv, NULL);

  shown = g_strjoinv (" ", (char **) argv->pdata);
  g_test_message ("$ (cd %s && %s)", cwd, shown);
  g_spawn_sync (cwd, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &result->out, &result->err,
                &wait_status, &error);
  g_assert_no_error (error);
  result->status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1;
  g_test_message ("exit %d\n--- stdout\n%s--- stderr\n%s---", result->status, result->out, result->err);
  return result;
}

/* tree_make (tree, ENV-ARRAY-OR-NULL, ARG..., NULL) */
static MakeResult *
tree_make (Tree *tree, const char *const *env, ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  va_list ap;
  const char *arg;

  va_start (ap, env);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (args, (char *) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  return tree_make_full (tree, NULL, env, (const char *const *) args->pdata);
}

static gboolean
dir_is_empty_or_absent (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);

  return dir == NULL || g_dir_read_name (dir) == NULL;
}

static char *
stored_run (Tree *tree)
{
  g_autofree char *path = tree_path (tree, SANDSTEP_RUN_FILE);
  char *text = sandstep_test_read_file (path);

  return g_strstrip (text);
}

/* The value after "KEY=" up to the next space or newline in @text. */
static char *
field (const char *text, const char *key)
{
  g_autofree char *needle = g_strconcat (key, "=", NULL);
  const char *start = strstr (text, needle);
  const char *end;

  g_assert_nonnull (start);
  start += strlen (needle);
  end = start + strcspn (start, " \n");
  return g_strndup (start, end - start);
}

static void
assert_field (const char *text, const char *key, const char *expected)
{
  g_autofree char *value = NULL;

  g_assert_nonnull (text);
  value = field (text, key);
  g_assert_cmpstr (value, ==, expected);
}

/* ---- the real helper ------------------------------------------------------ */

static gboolean
run_helper (const char *state, const char *const *args, char **out_stdout, char **out_reason)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) envp = g_environ_setenv (g_get_environ (), "SANDSTEP_STATE_DIR", state, TRUE);
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int wait_status = 0;

  g_ptr_array_add (argv, (char *) helper_path ());
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (char *) *args);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &wait_status,
                     &error))
    {
      *out_reason = g_strdup_printf ("cannot run the helper '%s': %s", helper_path (), error->message);
      return FALSE;
    }
  if (!WIFEXITED (wait_status) || WEXITSTATUS (wait_status) != 0)
    {
      *out_reason = g_strdup_printf ("'%s %s' failed (wait status %d): %s", helper_path (), (char *) argv->pdata[1],
                                     wait_status, g_strstrip (err));
      return FALSE;
    }
  if (out_stdout != NULL)
    *out_stdout = g_strstrip (g_steal_pointer (&out));
  return TRUE;
}

/* NULL when the helper provisions and runs a command here, else why not. */
static const char *
helper_unusable (void)
{
  static gsize once = 0;
  static char *reason = NULL;

  if (g_once_init_enter (&once))
    {
      g_autoptr(Tree) tree = tree_new ();
      g_autofree char *handle = NULL;
      g_autofree char *handle_arg = NULL;
      const char *provision[] = { "provision", "--owner=probe/run", "--holder=probe/run/x", NULL };

      if (run_helper (tree->state, provision, &handle, &reason))
        {
          const char *run[] = { "run", NULL, "--owner=probe/run", "--holder=probe/run/x", "--", "true", NULL };
          const char *destroy[] = { "destroy", NULL, "--owner=probe/run", "--holder=probe/run/x", NULL };

          handle_arg = g_strconcat ("--handle=", handle, NULL);
          run[1] = destroy[1] = handle_arg;
          if (run_helper (tree->state, run, NULL, &reason))
            run_helper (tree->state, destroy, NULL, &reason);
        }
      g_once_init_leave (&once, 1);
    }
  return reason;
}

static gboolean
require_helper (void)
{
  const char *reason;

  if (!require_plugin ())
    return FALSE;
  reason = helper_unusable ();
  if (reason == NULL)
    return TRUE;
  if (g_strcmp0 (g_getenv ("SANDSTEP_TESTS_MUST_SANDBOX"), "1") == 0)
    g_test_fail_printf ("the helper cannot run sandboxes here: %s", reason);
  else
    g_test_skip_printf ("the helper cannot run sandboxes here (set SANDSTEP_TESTS_MUST_SANDBOX=1 to fail): %s",
                        reason);
  return FALSE;
}

#define REQUIRE_HELPER() \
  G_STMT_START { if (!require_helper ()) return; } G_STMT_END

/* ---- unit tests of the pure parts ----------------------------------------- */

static void
test_unit_holder_path (void)
{
  static const struct { const char *top, *curdir, *target, *expected; } cases[] = {
    { "/t", "/t", "box.sbx", "box.sbx" },
    { "/t", "/t", "", "." },
    { "/t", "/t/sub", "box.sbx", "sub/box.sbx" },
    { "/t", "/t/sub", "", "sub" },
    { "/t", "/t", "out/./x/../box.sbx", "out/box.sbx" },
    { "/t", "/t/sub", "../box.sbx", "box.sbx" },
    { "/t", "/t", "/t/a/b", "a/b" },
    { "/t", "/t", "/elsewhere/b", "/elsewhere/b" },
    { "/t", "/u", "b", "/u/b" },
    { "/t/", "/t//sub/", "b", "sub/b" },
    { "/", "/srv", "b", "srv/b" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = sandstep_holder_path (cases[i].top, cases[i].curdir, cases[i].target);
      g_assert_cmpstr (path, ==, cases[i].expected);
    }
}

static void
test_unit_run_id (void)
{
  static const char *const good[] = { "20261129T214000-1a2b3c", "ci-1234", "a", "pipe.7:retry@x+1" };
  static const char *const bad[] = { "", "-x", ".x", "a b", "a/b", "a$b", "a\nb", "a'b" };
  g_autofree char *fresh = sandstep_run_id_new ();
  g_autofree char *long_id = g_strnfill (129, 'a');

  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    g_assert_true (sandstep_run_id_check (good[i], "test", NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_assert_false (sandstep_run_id_check (bad[i], "test", &error));
      g_assert_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY);
    }
  g_assert_false (sandstep_run_id_check (long_id, "test", NULL));
  g_assert_true (sandstep_run_id_check (fresh, "test", NULL));
  /* 20261129T214000-1a2b3c */
  g_assert_cmpuint (strlen (fresh), ==, 22);
  g_assert_cmpint (fresh[8], ==, 'T');
  g_assert_cmpint (fresh[15], ==, '-');
}

static void
test_unit_helper_owner (void)
{
  static const struct { const char *dag, *top; } cases[] = {
    { "nightly", "/home/u/proj" }, { NULL, "/home/u/proj" }, { "", "/home/u/proj/" }, { "  spaced  ", NULL },
    { NULL, "/" }, { NULL, "/srv/./" }, { ".", NULL }, { "a/b", "/x" }, { NULL, "/x/ctl\001" },
  };
  static const char *const runs[] = { "20261129T214000-1a2b3c", "-x", "a b" };
  g_autofree char *long_run = g_strnfill (129, 'a');
  g_autofree char *max_run = g_strnfill (128, 'a');
  char owner[1024];

  g_test_summary ("a step outside make that carries SANDSTEP_RUN (and SANDSTEP_DAG or SANDSTEP_TOP) derives the "
                  "owner make gives its recipes, or refuses what make refuses");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *dag = sandstep_dag_name (cases[i].dag, cases[i].top != NULL ? cases[i].top : "", &error);
      SandstepRunOwner got = sandstep_run_owner (runs[0], cases[i].dag, cases[i].top, owner, sizeof owner);

      if (cases[i].top == NULL && (cases[i].dag == NULL || cases[i].dag[0] == '\0'))
        continue;
      if (dag == NULL)
        g_assert_cmpint (got, ==, SANDSTEP_RUN_OWNER_BAD_DAG);
      else
        {
          g_autofree char *expected = g_strconcat (dag, "/", runs[0], NULL);
          g_assert_cmpint (got, ==, SANDSTEP_RUN_OWNER_OK);
          g_assert_cmpstr (owner, ==, expected);
        }
    }
  for (gsize i = 1; i < G_N_ELEMENTS (runs); i++)
    g_assert_cmpint (sandstep_run_owner (runs[i], "d", NULL, owner, sizeof owner), ==, SANDSTEP_RUN_OWNER_BAD_RUN);
  g_assert_cmpint (sandstep_run_owner (long_run, "d", NULL, owner, sizeof owner), ==, SANDSTEP_RUN_OWNER_BAD_RUN);
  g_assert_cmpint (sandstep_run_owner (max_run, "d", NULL, owner, sizeof owner), ==, SANDSTEP_RUN_OWNER_OK);
  g_assert_cmpint (sandstep_run_owner ("r1", NULL, NULL, owner, sizeof owner), ==, SANDSTEP_RUN_OWNER_NO_DAG);
  g_assert_cmpint (sandstep_run_owner (NULL, "d", "/x", owner, sizeof owner), ==, SANDSTEP_RUN_OWNER_NONE);
}

/* The owner the helper's own parsing derives from the process environment
 * @owner, @run, @dag, @top (NULL: unset); NULL with *out_error on a refusal. */
static char *
helper_owner (const char *owner, const char *run, const char *dag, const char *top, GError **out_error)
{
  const char *names[] = { "SANDSTEP_OWNER", "SANDSTEP_RUN", "SANDSTEP_DAG", "SANDSTEP_TOP" };
  const char *values[] = { owner, run, dag, top };
  g_autoptr(SandstepInvocation) invocation = NULL;
  char *argv[] = { NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      if (values[i] != NULL)
        g_setenv (names[i], values[i], TRUE);
      else
        g_unsetenv (names[i]);
    }
  g_unsetenv ("SANDSTEP_HOLDER");
  /* provision: it owns what it makes (list, gc, images and pull act on everyone's and derive no owner). */
  invocation = sandstep_invocation_parse (sandstep_operator_lookup ("provision"), 0, argv, out_error);
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    g_unsetenv (names[i]);
  return invocation != NULL ? g_strdup (invocation->who.owner) : NULL;
}

/* issue 34 item 6: one identity rule in every front-end.  For each environment
 * of the table, the helper derives the owner the rule says, and a make recipe
 * in that environment gets, from the make plugin, the owner that the helper
 * derives from the environment make gives the recipe.  (SPANK's: test-slurm.) */
static void
test_one_owner_rule (void)
{
  static const char *const owners[] = { NULL, "own-dag/own-run" };
  static const char *const runs[] = { NULL, "r1" };
  static const char *const dags[] = { NULL, "d1" };
  static const char *const tops[] = { NULL, "/srv/t1" };
  g_autofree char *fallback = sandstep_identity_fallback ("");

  g_test_summary ("issue 34: SANDSTEP_OWNER, else SANDSTEP_DAG (else SANDSTEP_TOP's name)/SANDSTEP_RUN, else "
                  "USER@HOST: the helper and the make plugin derive the same owner from the same environment");
  for (gsize o = 0; o < G_N_ELEMENTS (owners); o++)
    for (gsize r = 0; r < G_N_ELEMENTS (runs); r++)
      for (gsize d = 0; d < G_N_ELEMENTS (dags); d++)
        for (gsize t = 0; t < G_N_ELEMENTS (tops); t++)
          {
            g_autoptr(GError) error = NULL;
            g_autofree char *got = helper_owner (owners[o], runs[r], dags[d], tops[t], &error);
            const char *expected = owners[o] != NULL ? owners[o]
                                   : runs[r] == NULL ? fallback
                                   : dags[d] != NULL ? "d1/r1"
                                   : tops[t] != NULL ? "t1/r1"
                                   : NULL;

            g_test_message ("OWNER=%s RUN=%s DAG=%s TOP=%s: %s", owners[o], runs[r], dags[d], tops[t],
                            got != NULL ? got : error->message);
            if (expected == NULL)
              {
                g_assert_null (got);
                g_assert_nonnull (strstr (error->message, "set SANDSTEP_OWNER"));
              }
            else
              {
                g_assert_no_error (error);
                g_assert_cmpstr (got, ==, expected);
              }
          }

  if (!require_plugin ())
    return;
  for (gsize o = 0; o < G_N_ELEMENTS (owners); o++)
    for (gsize d = 0; d < G_N_ELEMENTS (dags); d++)
      {
        static const char mk[] =
          "load $(SANDSTEP_PLUGIN)\n"
          "t: ; @echo '$(sandbox-holder )'; echo \"$$SANDSTEP_RUN\"; echo \"$$SANDSTEP_TOP\"\n";
        g_autoptr(Tree) tree = tree_new ();
        g_autofree char *path = tree_path (tree, "Makefile");
        g_autofree char *owner_env = owners[o] != NULL ? g_strconcat ("SANDSTEP_OWNER=", owners[o], NULL)
                                                       : g_strdup ("SANDSTEP_OWNER");
        g_autofree char *dag_env = dags[d] != NULL ? g_strconcat ("SANDSTEP_DAG=", dags[d], NULL)
                                                   : g_strdup ("SANDSTEP_DAG");
        const char *env[] = { owner_env, dag_env, "SANDSTEP_RUN=r1", NULL };
        g_autoptr(MakeResult) m = NULL;
        g_auto(GStrv) lines = NULL;
        g_autofree char *make_owner = NULL;
        g_autofree char *from_helper = NULL;
        g_autoptr(GError) error = NULL;
        g_autofree char *rule = NULL;

        write_file (path, mk);
        m = tree_make (tree, env, "-s", NULL);
        g_assert_cmpint (m->status, ==, 0);
        lines = g_strsplit (m->out, "\n", -1);
        g_assert_cmpuint (g_strv_length (lines), >=, 3);
        g_assert_true (g_str_has_suffix (lines[0], "/t"));
        make_owner = g_strndup (lines[0], strlen (lines[0]) - strlen ("/t"));
        from_helper = helper_owner (owners[o], lines[1], dags[d], lines[2], &error);
        g_assert_no_error (error);
        g_assert_cmpstr (make_owner, ==, from_helper);
        rule = owners[o] != NULL ? g_strdup (owners[o])
                                 : g_strconcat (dags[d] != NULL ? dags[d] : tree->dag, "/r1", NULL);
        g_assert_cmpstr (make_owner, ==, rule);
      }
}

static void
test_unit_quote (void)
{
  static const struct { const char *word, *quoted; } cases[] = {
    { "", "''" },
    { "plain", "'plain'" },
    { "it's", "'it'\\''s'" },
    { "$(shell x) `y` \"z\" \\", "'$(shell x) `y` \"z\" \\'" },
    { "''", "''\\'''\\'''" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GString) out = g_string_new (NULL);
      sandstep_render_quote (out, cases[i].word);
      g_assert_cmpstr (out->str, ==, cases[i].quoted);
    }
}

/* Every operator of the table is a make function and renders. */
static void
test_unit_every_operator (void)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);
  SandstepRenderContext context = { .helper = "sandstep", .owner = "d/r", .holder = "d/r/t" };

  g_assert_cmpuint (n, >, 0);
  for (gsize i = 0; i < n; i++)
    {
      g_autoptr(GError) error = NULL;
      gboolean handle = (ops[i].flags & SANDSTEP_OP_HANDLE) != 0;
      const char *text = ops[i].text == SANDSTEP_TEXT_NONE ? NULL : "x";
      g_autofree char *command = sandstep_render (&ops[i], handle ? "@h" : "", text, &context, &error);
      g_autofree char *prefix = g_strdup_printf ("'sandstep' %s ", ops[i].name);

      g_assert_no_error (error);
      g_assert_true (g_str_has_prefix (command, prefix));
      g_assert_nonnull (strstr (command, "'--owner=d/r' '--holder=d/r/t'"));
      g_assert_true ((strstr (command, "'--handle=@h'") != NULL) == handle);
    }
}

/* plugin/README.md shows every function the plugin registers. */
static void
test_readme_lists_every_function (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "..", "plugin", "README.md", NULL);
  g_autofree char *text = sandstep_test_read_file (path);
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  for (gsize i = 0; i < n; i++)
    {
      g_autofree char *call = g_strdup_printf ("| `$(sandbox-%s", ops[i].name);
      if (strstr (text, call) == NULL)
        g_error ("plugin/README.md has no row for $(sandbox-%s ...)", ops[i].name);
    }
  g_assert_nonnull (strstr (text, "| `$(sandbox-run-id )`"));
  g_assert_nonnull (strstr (text, "| `$(sandbox-holder )`"));
}

/* ---- the loadable object -------------------------------------------------- */

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

/* Only the setup function and the GPL declaration are exported. */
static void
test_exports (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *nm = g_find_program_in_path ("nm");
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  int wait_status = 0;

  REQUIRE_PLUGIN ();
  if (nm == NULL)
    {
      g_test_skip ("no nm in PATH");
      return;
    }
  {
    const char *argv[] = { nm, "-D", "--defined-only", plugin_path (), NULL };
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &wait_status, &error);
  }
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (wait_status, NULL));
  lines = g_strsplit (out, "\n", -1);
  for (char **line = lines; *line != NULL; line++)
    {
      g_auto(GStrv) columns = g_strsplit_set (g_strstrip (*line), " \t", -1);
      guint n = g_strv_length (columns);
      if (n > 0 && columns[n - 1][0] != '\0')
        g_ptr_array_add (names, g_strdup (columns[n - 1]));
    }
  g_ptr_array_sort (names, compare_strings);
  g_assert_cmpuint (names->len, ==, 2);
  g_assert_cmpstr (names->pdata[0], ==, "plugin_is_GPL_compatible");
  g_assert_cmpstr (names->pdata[1], ==, "sandstep_gmk_setup");
}

/* `load /abs/path/sandstep.so` written out, and `load $(SANDSTEP_PLUGIN)`. */
static void
test_load (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *literal = NULL;
  g_autofree char *makefile = NULL;
  g_autofree char *first = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  makefile = tree_path (tree, "literal.mk");
  literal = g_strdup_printf ("load %s\nall: ; @echo run=$(sandbox-run-id ) loaded=$(filter %%sandstep.so,$(.LOADED))\n",
                             plugin_path ());
  write_file (makefile, literal);
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-f", "literal.mk", NULL);
    g_assert_cmpint (r->status, ==, 0);
    first = field (r->out, "run");
    g_assert_true (sandstep_run_id_check (first, "test", NULL));
  }

  makefile = (g_free (makefile), tree_path (tree, "variable.mk"));
  write_file (makefile, "load $(SANDSTEP_PLUGIN)\nall: ; @echo run=$(sandbox-run-id ); exit 1\n");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-f", "variable.mk", NULL);
    g_autofree char *run = NULL;
    g_autofree char *stored = stored_run (tree);
    g_assert_cmpint (r->status, ==, 2);
    run = field (r->out, "run");
    /* The first make succeeded, so its run ended; this one failed, so its run stays stored. */
    g_assert_cmpstr (run, !=, first);
    g_assert_cmpstr (run, ==, stored);
  }
}

/* ---- rendering ------------------------------------------------------------ */

/* @text with the make pid of every --step=PID:LINE written as "PID". */
static char *
mask_make_pid (const char *text)
{
  g_autoptr(GRegex) pid = g_regex_new ("--step=[0-9]+:", 0, 0, NULL);

  return g_regex_replace_literal (pid, text, -1, 0, "--step=PID:", 0, NULL);
}

/* A recipe's sandbox lines are numbered, and its environment names each
 * sandbox's last line (two spellings of one handle file are one sandbox);
 * a line run outside a recipe, or of a target make cannot name back, is not. */
static void
test_render_steps (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *printer = NULL;
  g_autofree char *env_helper = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "render.mk", "Makefile");
  printer = tree_add_argv_printer (tree);
  env_helper = g_strconcat ("SANDSTEP=", printer, NULL);
  {
    const char *env[] = { env_helper, "SANDSTEP_DAG=dag", "SANDSTEP_RUN=r1", NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "-s", "show-steps", "show-run", NULL);
    g_autofree char *masked = mask_make_pid (r->out);
    g_auto(GStrv) words = NULL;

    g_assert_cmpint (r->status, ==, 0);
    g_assert_nonnull (strstr (masked, "[--holder=dag/r1/show-steps]\n[--step=PID:1]\n[--]\n[one]\n"));
    g_assert_nonnull (strstr (masked, "[--holder=dag/r1/show-steps]\n[--step=PID:2]\n[--]\n[two]\n"));
    g_assert_nonnull (strstr (masked, "[--holder=dag/r1/show-steps]\n[--step=PID:3]\n[--]\n[b.txt]\n[/workspace/]\n"));
    g_assert_nonnull (strstr (masked, "[--holder=dag/r1/show-steps]\n[--step=PID:4]\n[--]\n[three]\n"));
    /* Numbering goes on across recipes; each recipe has its own list. */
    g_assert_nonnull (strstr (masked, "[--holder=dag/r1/show-run]\n[--step=PID:5]\n"));
    {
      const char *line = strstr (r->out, "ends=");
      g_autofree char *value = NULL;
      g_assert_nonnull (line);
      value = g_strndup (line + 5, strcspn (line + 5, "\n"));
      words = g_strsplit (value, " ", -1);
    }
    g_assert_cmpuint (g_strv_length (words), ==, 2);
    for (guint i = 0; i < 2; i++)
      {
        g_autofree char *masked_word = NULL;
        g_autofree char *with_prefix = g_strconcat ("--step=", words[i], NULL);
        masked_word = mask_make_pid (with_prefix);
        g_assert_true (g_strcmp0 (masked_word, "--step=PID:3") == 0 || g_strcmp0 (masked_word, "--step=PID:4") == 0);
      }
    g_assert_cmpstr (words[0], !=, words[1]);
  }
  {
    const char *env[] = { env_helper, "SANDSTEP_DAG=dag", "SANDSTEP_RUN=r1", NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "-s", "show-parse-time", "weird=name", NULL);
    g_assert_cmpint (r->status, ==, 0);
    g_assert_null (strstr (r->out, "--step="));
  }
}

static void
test_render (void)
{
  static const struct { const char *target, *line; } cases[] = {
    { "show-run", "'/opt/x/sandstep' run '--handle=@box.sbx' '--timeout=5' '--owner=dag/r1' "
                  "'--holder=dag/r1/show-run' '--step=PID:1' -- 'echo a,b,c'" },
    { "show-quote", "'/opt/x/sandstep' run '--handle=@box.sbx' '--wait=0' '--owner=dag/r1' "
                    "'--holder=dag/r1/show-quote' '--step=PID:1' -- 'echo '\\''it'\\''\"'\\''\"'\\''s'\\'' \"$HOME\"'" },
    { "show-put", "'/opt/x/sandstep' put '--handle=@box.sbx' '--owner=dag/r1' '--holder=dag/r1/show-put' "
                  "'--step=PID:1' -- 'src/' '/workspace/src/'" },
    { "show-gc", "'/opt/x/sandstep' gc '--run=X' '--expired' '--owner=dag/r1' '--holder=dag/r1/show-gc'" },
    { "show-provision", "'/opt/x/sandstep' provision '--network=open' '--env=A' '--env=B=c' '--lifetime=1h' "
                        "'--owner=dag/r1' '--holder=dag/r1/show-provision'" },
    { "show-describe", "'/opt/x/sandstep' describe '--handle=sandstep-0123456789abcdef' '--owner=dag/r1' "
                       "'--holder=dag/r1/show-describe'" },
    { "show-export", "'/opt/x/sandstep' export '--handle=@box.sbx' '--max-bytes=5M' '--owner=dag/r1' "
                     "'--holder=dag/r1/show-export' '--step=PID:1' -- 'report.md=file:///tmp/out/report.md'" },
    { "show-export-s3", "'/opt/x/sandstep' export '--handle=@box.sbx' '--no-clobber' '--read-timeout=30' "
                        "'--owner=dag/r1' '--holder=dag/r1/show-export-s3' '--step=PID:1' -- 'report.md=s3://bucket/reports/report.md' "
                        "'big.bin=s3://bucket/big.bin'" },
    { "show-agent-options", "'/opt/x/sandstep' agent '--handle=@box.sbx' '--command-timeout=30' "
                            "'--max-command-timeout=120' '--max-output-lines=100' '--max-output-bytes=10K' "
                            "'--max-read-bytes=1M' '--prefix=box' '--export=report.md=file:///tmp/out/report.md' "
                            "'--owner=dag/r1' '--holder=dag/r1/show-agent-options' '--step=PID:1' -- 'Fix it'" },
    { "show-call-options", "'/opt/x/sandstep' call '--handle=@box.sbx' '--prefix=box' '--command-timeout=5' "
                           "'--owner=dag/r1' '--holder=dag/r1/show-call-options' '--step=PID:1' -- 'box_run_command' "
                           "'{\"command\":' '\"ls\"}'" },
    { "show-release", "'/opt/x/sandstep' release '--handle=@box.sbx' '--keep=0' '--owner=dag/r1' "
                      "'--holder=dag/r1/show-release'" },
    { "sub/dir/show-holder", "holder=dag/r1/sub/dir/show-holder" },
  };
  const char *env[] = { "SANDSTEP=/opt/x/sandstep", "SANDSTEP_DAG=dag", "SANDSTEP_RUN=r1", NULL };
  g_autoptr(Tree) tree = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "render.mk", "Makefile");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MakeResult) r = tree_make (tree, env, "-n", "-s", cases[i].target, NULL);
      g_autofree char *expected = NULL;
      g_autofree char *masked = NULL;

      g_assert_cmpint (r->status, ==, 0);
      if (g_str_has_prefix (cases[i].line, "holder="))
        {
          /* An @echo line runs under -n only when it is not silenced; run it for real. */
          g_autoptr(MakeResult) real = tree_make (tree, env, "-s", cases[i].target, NULL);
          g_assert_cmpint (real->status, ==, 0);
          expected = g_strconcat (cases[i].line, "\n", NULL);
          g_assert_cmpstr (real->out, ==, expected);
          continue;
        }
      expected = g_strconcat (cases[i].line, "\n", NULL);
      masked = mask_make_pid (r->out);
      g_assert_cmpstr (masked, ==, expected);
    }

  /* The make variable SANDSTEP overrides the environment's. */
  {
    g_autoptr(MakeResult) r = tree_make (tree, env, "-n", "SANDSTEP=/other/sandstep", "show-gc", NULL);
    g_assert_cmpint (r->status, ==, 0);
    g_assert_true (g_str_has_prefix (r->out, "'/other/sandstep' gc "));
  }
}

/* Commas and quotes in the text reach the helper as one argument, intact. */
static void
test_render_argv (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *printer = NULL;
  g_autofree char *env_helper = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "render.mk", "Makefile");
  printer = tree_add_argv_printer (tree);
  env_helper = g_strconcat ("SANDSTEP=", printer, NULL);
  {
    const char *env[] = { env_helper, "SANDSTEP_DAG=dag", "SANDSTEP_RUN=r1", NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "-s", "show-run", "show-quote", NULL);
    g_autofree char *masked = mask_make_pid (r->out);

    g_assert_cmpint (r->status, ==, 0);
    g_assert_cmpstr (masked, ==,
                     "[run]\n[--handle=@box.sbx]\n[--timeout=5]\n[--owner=dag/r1]\n[--holder=dag/r1/show-run]\n"
                     "[--step=PID:1]\n[--]\n[echo a,b,c]\n"
                     "[run]\n[--handle=@box.sbx]\n[--wait=0]\n[--owner=dag/r1]\n[--holder=dag/r1/show-quote]\n"
                     "[--step=PID:2]\n[--]\n[echo 'it'\"'\"'s' \"$HOME\"]\n");
  }
}

/* Without SANDSTEP, the helper beside the plugin in the build tree is used, also when make loads the plugin
 * through a link to that tree. */
static void
test_helper_beside_plugin (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *plugin_dir = NULL;
  g_autofree char *candidate = NULL;
  g_autofree char *canonical = NULL;
  g_autofree char *prefix = NULL;
  g_autofree char *build_dir = NULL;
  g_autofree char *link = NULL;
  g_autofree char *linked_plugin = NULL;
  g_autofree char *linked_env = NULL;
  g_autofree char *plugin_folder = NULL;

  REQUIRE_PLUGIN ();
  plugin_dir = g_path_get_dirname (plugin_path ());
  candidate = g_build_filename (plugin_dir, "..", "programs", "sandstep", NULL);
  canonical = g_canonicalize_filename (candidate, NULL);
  if (!g_file_test (canonical, G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip_printf ("no helper at '%s' (not a build tree)", canonical);
      return;
    }
  tree = tree_new ();
  tree_add_makefile (tree, "render.mk", "Makefile");
  {
    const char *env[] = { "SANDSTEP", NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "-n", "show-gc", NULL);
    g_assert_cmpint (r->status, ==, 0);
    prefix = g_strdup_printf ("'%s' gc ", canonical);
    g_assert_true (g_str_has_prefix (r->out, prefix));
  }
  build_dir = g_path_get_dirname (plugin_dir);
  link = tree_path (tree, "build-link");
  g_assert_cmpint (symlink (build_dir, link), ==, 0);
  plugin_folder = g_path_get_basename (plugin_dir);
  linked_plugin = g_build_filename (link, plugin_folder, "sandstep.so", NULL);
  linked_env = g_strconcat ("SANDSTEP_PLUGIN=", linked_plugin, NULL);
  {
    const char *env[] = { "SANDSTEP", linked_env, NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "-n", "show-gc", NULL);
    g_assert_cmpint (r->status, ==, 0);
    g_assert_true (g_str_has_prefix (r->out, prefix));
  }
}

/* ---- identity ------------------------------------------------------------- */

/* -n and -q print the helper commands (with a dry run id) and change nothing. */
static void
test_dry_run (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *run_dir = NULL;
  g_autofree char *box = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  run_dir = tree_path (tree, SANDSTEP_RUN_DIR);
  box = tree_path (tree, "box.sbx");

  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-n", "step.log", NULL);
    g_autofree char *provision = g_strdup_printf ("'%s' provision '--lifetime=10m' '--owner=%s/" SANDSTEP_DRY_RUN_PREFIX,
                                                  helper_path (), tree->dag);
    g_autofree char *run = g_strdup_printf ("'%s' run '--handle=@box.sbx' '--owner=%s/" SANDSTEP_DRY_RUN_PREFIX,
                                            helper_path (), tree->dag);
    g_autofree char *masked = mask_make_pid (r->out);
    g_assert_cmpint (r->status, ==, 0);
    g_assert_nonnull (strstr (r->out, provision));
    g_assert_nonnull (strstr (r->out, run));
    g_assert_nonnull (strstr (masked, "/step.log' '--step=PID:1' -- 'test -f /workspace/flag || {"));
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-q", "step.log", NULL);
    g_assert_cmpint (r->status, ==, 1);
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-k", "-n", "-j2", "step.log", "other.log", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
  g_assert_false (g_file_test (run_dir, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (box, G_FILE_TEST_EXISTS));
  g_assert_true (dir_is_empty_or_absent (tree->state));

  /* Once a run is stored (a make failed in it), -n shows it. */
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-s", "fails", NULL);
    g_autoptr(MakeResult) dry = NULL;
    g_autofree char *run = stored_run (tree);
    g_autofree char *owner = g_strdup_printf ("'--owner=%s/%s'", tree->dag, run);
    g_assert_cmpint (r->status, ==, 2);
    dry = tree_make (tree, NULL, "-n", "step.log", NULL);
    g_assert_cmpint (dry->status, ==, 0);
    g_assert_nonnull (strstr (dry->out, owner));
    g_assert_null (strstr (dry->out, SANDSTEP_DRY_RUN_PREFIX));
  }
}

/* The run id: stored at the top by the first make, continued by the next
 * ones while they fail (a retry), ended by a make that exits 0, so the next
 * one starts a new run (issue 34, 3); SANDSTEP_RUN overrides it and leaves
 * the stored run alone; checked. */
static void
test_run_id (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *first = NULL;
  g_autofree char *run_file = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  run_file = tree_path (tree, SANDSTEP_RUN_FILE);
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-s", "fails", NULL);
    g_autofree char *stored = NULL;
    g_autofree char *holder = NULL;
    g_assert_cmpint (r->status, ==, 2);
    first = field (r->out, "run");
    stored = stored_run (tree);
    g_assert_cmpstr (first, ==, stored);
    holder = g_strdup_printf ("%s/%s/fails", tree->dag, first);
    assert_field (r->out, "holder", holder);
  }
  {
    /* A failed make's retry continues its run, and fails again: still the run. */
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-s", "fails", NULL);
    g_autofree char *again = field (r->out, "run");
    g_autofree char *stored = stored_run (tree);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_cmpstr (again, ==, first);
    g_assert_cmpstr (stored, ==, first);
  }
  {
    /* SANDSTEP_RUN wins, and its success leaves the stored run alone. */
    const char *env[] = { "SANDSTEP_RUN=from-env", "SANDSTEP_DAG=named", NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "-s", "id", NULL);
    g_autoptr(MakeResult) cli = tree_make (tree, env, "-s", "SANDSTEP_RUN=from-cli", "id", NULL);
    g_autofree char *stored = stored_run (tree);
    g_assert_cmpint (r->status, ==, 0);
    g_assert_cmpstr (r->out, ==, "run=from-env holder=named/from-env/id\n");
    g_assert_cmpstr (cli->out, ==, "run=from-cli holder=named/from-cli/id\n");
    g_assert_cmpstr (stored, ==, first);
  }
  {
    /* The retry that succeeds is still the run, and ends it. */
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-s", "id", NULL);
    g_autofree char *again = field (r->out, "run");
    g_assert_cmpint (r->status, ==, 0);
    g_assert_cmpstr (again, ==, first);
    g_assert_false (g_file_test (run_file, G_FILE_TEST_EXISTS));
  }
  {
    /* The next make (say, the next night's) starts a new run. */
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-s", "fails", NULL);
    g_autofree char *next = field (r->out, "run");
    g_autofree char *stored = stored_run (tree);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_cmpstr (next, !=, first);
    g_assert_cmpstr (stored, ==, next);
  }
  {
    /* make re-executing itself (it remade an included makefile) is the same make: its success ends the run. */
    g_autofree char *path = tree_path (tree, "reexec.mk");
    g_autoptr(MakeResult) r = NULL;
    write_file (path, "load $(SANDSTEP_PLUGIN)\ninclude gen.mk\ngen.mk: ; @echo 'X := 1' > $@\n"
                      "all: ; @echo run=$(sandbox-run-id ) restarts=$(MAKE_RESTARTS)\n");
    r = tree_make (tree, NULL, "-s", "-f", "reexec.mk", "all", NULL);
    g_assert_cmpint (r->status, ==, 0);
    assert_field (r->out, "restarts", "1");
    g_assert_false (g_file_test (run_file, G_FILE_TEST_EXISTS));
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-s", "SANDSTEP_RUN=bad id/x", "id", NULL);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "Makefile:6: *** sandstep: the run id 'bad id/x' from SANDSTEP_RUN is not valid"));
  }
  {
    g_autofree char *path = tree_path (tree, SANDSTEP_RUN_FILE);
    g_autoptr(MakeResult) r = NULL;
    write_file (path, "$(shell touch PWNED)\n");
    r = tree_make (tree, NULL, "-s", "id", NULL);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "the run id '$(shell touch PWNED)' from '"));
    g_assert_nonnull (strstr (r->err, "(remove the file to start a new run)"));
  }
  {
    g_autofree char *pwned = tree_path (tree, "PWNED");
    g_assert_false (g_file_test (pwned, G_FILE_TEST_EXISTS));
  }
}

/* A recursive make inherits the run and the top; its holders name its directory. */
static void
test_recursive (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *sub_run_dir = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "recursive.mk", "Makefile");
  tree_add_makefile (tree, "recursive-sub.mk", "sub/Makefile");
  sub_run_dir = tree_path (tree, "sub/" SANDSTEP_RUN_DIR);

  for (int dry = 1; dry >= 0; dry--)
    {
      g_autoptr(MakeResult) r = tree_make (tree, NULL, dry ? "-n" : "-s", NULL);
      g_autofree char *top_run = NULL;
      g_autofree char *sub_run = NULL;
      g_autofree char *top_holder = NULL;
      g_autofree char *sub_holder = NULL;
      g_autofree char *sub_line = NULL;

      g_assert_cmpint (r->status, ==, 0);
      /* Under -n the echo lines are printed, not run: take the text after "top " / "sub ". */
      g_assert_nonnull (strstr (r->out, "top run="));
      top_run = field (strstr (r->out, "top run="), "run");
      sub_line = g_strdup (strstr (r->out, "sub run="));
      g_assert_nonnull (sub_line);
      sub_run = field (sub_line, "run");
      g_assert_cmpstr (top_run, ==, sub_run);
      g_assert_true (g_str_has_prefix (top_run, SANDSTEP_DRY_RUN_PREFIX) == dry);
      top_holder = g_strdup_printf ("%s/%s/all", tree->dag, top_run);
      sub_holder = g_strdup_printf ("%s/%s/sub/inner", tree->dag, top_run);
      assert_field (strstr (r->out, "top run="), "holder", top_holder);
      assert_field (sub_line, "holder", sub_holder);
      if (!dry)
        {
          g_autofree char *run_file = tree_path (tree, SANDSTEP_RUN_FILE);
          /* The sub-make's success does not end the run; the top make's does. */
          g_assert_nonnull (strstr (r->out, "after-sub stored="));
          assert_field (strstr (r->out, "after-sub stored="), "stored", top_run);
          g_assert_false (g_file_test (run_file, G_FILE_TEST_EXISTS));
          assert_field (sub_line, "env-run", top_run);
          assert_field (sub_line, "env-top", tree->dir);
          assert_field (strstr (r->out, "top run="), "env-top", tree->dir);
        }
      g_assert_false (g_file_test (sub_run_dir, G_FILE_TEST_EXISTS));
    }
}

/* A top directory with a space, a '$' and a '#' in its name reaches sub-makes intact. */
static void
test_odd_directory (void)
{
  static const char top_mk[] =
    "load $(SANDSTEP_PLUGIN)\n"
    "all:\n"
    "\t@echo 'top holder=$(sandbox-holder )'\n"
    "\t+@$(MAKE) --no-print-directory -C sub\n";
  static const char sub_mk[] =
    "load $(SANDSTEP_PLUGIN)\n"
    "inner: ; @echo 'sub holder=$(sandbox-holder ) top=$(value SANDSTEP_TOP)'\n";
  const char *odd = "odd $x #dir";
  const char *env[] = { "SANDSTEP_RUN=r1", NULL };
  const char *args[] = { "-s", NULL };
  g_autoptr(Tree) tree = NULL;
  g_autofree char *top = NULL;
  g_autofree char *sub = NULL;
  g_autofree char *expected = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  top = g_build_filename (tree->dir, odd, "Makefile", NULL);
  sub = g_build_filename (tree->dir, odd, "sub", "Makefile", NULL);
  write_file (top, top_mk);
  write_file (sub, sub_mk);
  {
    g_autoptr(MakeResult) r = tree_make_full (tree, odd, env, args);
    g_assert_cmpint (r->status, ==, 0);
    expected = g_strdup_printf ("top holder=%s/r1/all\nsub holder=%s/r1/sub/inner top=%s/%s\n", odd, odd,
                                tree->dir, odd);
    g_assert_cmpstr (r->out, ==, expected);
  }
}

/* ---- argument errors ------------------------------------------------------ */

/* The line of "TARGET:" in tests/data/make/newline.mk. */
static guint
newline_mk_line (const char *target)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "make", "newline.mk", NULL);
  g_autofree char *text = sandstep_test_read_file (path);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  g_autofree char *prefix = g_strconcat (target, ":", NULL);

  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], prefix))
      return i + 1;
  g_assert_not_reached ();
}

/* The line of "TARGET:" in tests/data/make/errors.mk. */
static guint
errors_mk_line (const char *target)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "make", "errors.mk", NULL);
  g_autofree char *text = sandstep_test_read_file (path);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  g_autofree char *prefix = g_strconcat (target, ":", NULL);

  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], prefix))
      return i + 1;
  g_assert_not_reached ();
}

static void
test_errors (void)
{
  static const struct { const char *target; const char *expected[4]; } cases[] = {
    { "unknown-option", { "sandbox-run: unknown option 'timout'", "accepted: timeout=SECONDS, wait=SECONDS" } },
    { "bad-choice", { "sandbox-provision: option 'network' does not accept 'maybe'", "none|open" } },
    { "bad-duration", { "sandbox-provision: option 'lifetime'", "'forever'", "30m" } },
    { "bad-seconds", { "sandbox-run: option 'timeout'", "'abc'" } },
    { "bad-size", { "sandbox-get: option 'max-bytes'", "'lots'", "K, M or G" } },
    { "no-value", { "sandbox-run: option 'timeout' needs a value: timeout=SECONDS" } },
    { "flag-value", { "sandbox-gc: option 'expired' takes no value", "'yes'" } },
    { "export-flag-value", { "sandbox-export: option 'no-clobber' takes no value", "'yes'" } },
    { "export-unknown-option", { "sandbox-export: unknown option 'noclobber'", "no-clobber, read-timeout=SECONDS" } },
    { "bad-prefix", { "sandbox-agent: option 'prefix' must be an identifier", "got 'my-box'; write for example "
                                                                               "prefix=box" } },
    { "bad-python", { "sandbox-agent: option 'python' does not accept 'maybe'", "yes|no" } },
    { "crossed-timeouts", { "sandbox-mcp: command-timeout (400) must not exceed max-command-timeout (300, the "
                            "default); lower command-timeout or raise max-command-timeout" } },
    { "crossed-default", { "sandbox-tools: command-timeout (60, the default) must not exceed max-command-timeout "
                           "(30)" } },
    { "zero-lines", { "sandbox-call: option 'max-output-lines' must be a whole number of 1 or more, got '0'" } },
    { "twice", { "sandbox-run: option 'timeout' is given twice" } },
    { "reserved", { "sandbox-run: option 'owner' is set by the plugin" } },
    { "missing-handle", { "sandbox-release: missing handle", "$(sandbox-release @box.sbx)" } },
    { "missing-handle-option", { "sandbox-run: missing handle", "(got the option 'timeout=5')" } },
    { "unwanted-handle", { "sandbox-provision takes no handle (got '@box.sbx')", "network=none|open" } },
    { "unwanted-handle-gc", { "sandbox-gc takes no handle (got '@box.sbx')", "run=RUN, expired" } },
    { "unwanted-text", { "sandbox-release takes no text after the comma, but got 'rm -rf /'" } },
    { "missing-command", { "sandbox-run needs its COMMAND after a comma" } },
    { "no-options", { "sandbox-describe: unknown option 'keep'; it takes no options" } },
    { "run-id-argument", { "sandbox-run-id takes no arguments (got 'x')", "$(sandbox-run-id )" } },
  };
  g_autoptr(Tree) tree = NULL;
  g_autofree char *printer = NULL;
  g_autofree char *env_helper = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "errors.mk", "Makefile");
  /* Were a helper run, it would print; nothing may be printed on stdout. */
  printer = tree_add_argv_printer (tree);
  env_helper = g_strconcat ("SANDSTEP=", printer, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *env[] = { env_helper, NULL };
      /* -k does not soften an argument error: make stops at once. */
      g_autoptr(MakeResult) r = tree_make (tree, env, "-k", cases[i].target, NULL);
      g_autofree char *location = g_strdup_printf ("Makefile:%u: *** ", errors_mk_line (cases[i].target));

      g_assert_cmpint (r->status, ==, 2);
      g_assert_cmpstr (r->out, ==, "");
      g_assert_nonnull (strstr (r->err, location));
      for (gsize j = 0; j < G_N_ELEMENTS (cases[i].expected) && cases[i].expected[j] != NULL; j++)
        if (strstr (r->err, cases[i].expected[j]) == NULL)
          g_error ("%s: '%s' not in: %s", cases[i].target, cases[i].expected[j], r->err);
    }
}

/* $(sandbox-NAME) with no space after the name is a make variable, empty
 * were it undefined (issue 34, 2): for every function, make stops at the
 * line, naming the fix, and the recipe never runs (no empty handle file);
 * a makefile's own variable of that name stays its own. */
static void
test_error_no_space (void)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GString) makefile = g_string_new (NULL);
  g_autoptr(Tree) tree = NULL;
  g_autofree char *printer = NULL;
  g_autofree char *env_helper = NULL;
  g_autofree char *path = NULL;

  REQUIRE_PLUGIN ();
  for (gsize i = 0; i < n; i++)
    g_ptr_array_add (names, g_strconcat ("sandbox-", ops[i].name, NULL));
  g_ptr_array_add (names, g_strdup ("sandbox-run-id"));
  g_ptr_array_add (names, g_strdup ("sandbox-holder"));
  g_string_append_printf (makefile, "load %s\n", plugin_path ());
  for (guint i = 0; i < names->len; i++)
    g_string_append_printf (makefile, "t-%s: ; $(%s) > $@\n", (char *) names->pdata[i], (char *) names->pdata[i]);

  tree = tree_new ();
  path = tree_path (tree, "Makefile");
  write_file (path, makefile->str);
  printer = tree_add_argv_printer (tree);
  env_helper = g_strconcat ("SANDSTEP=", printer, NULL);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = names->pdata[i];
      const char *env[] = { env_helper, NULL };
      g_autofree char *target = g_strconcat ("t-", name, NULL);
      g_autofree char *written = tree_path (tree, target);
      g_autofree char *expected = g_strdup_printf ("Makefile:%u: *** %s: '$(%s)', with no space after the name, "
                                                   "is a make variable reference, not a call, and expands to "
                                                   "nothing; write '$(%s )'",
                                                   i + 2, name, name, name);
      g_autoptr(MakeResult) r = tree_make (tree, env, "-k", target, NULL);

      g_assert_cmpint (r->status, ==, 2);
      g_assert_cmpstr (r->out, ==, "");
      if (strstr (r->err, expected) == NULL)
        g_error ("%s: '%s' not in: %s", name, expected, r->err);
      g_assert_false (g_file_test (written, G_FILE_TEST_EXISTS));
    }
  {
    g_autofree char *own = g_strdup_printf ("sandbox-gc := kept\nload %s\nown: ; @echo '$(sandbox-gc)'\n",
                                            plugin_path ());
    g_autoptr(MakeResult) r = NULL;
    write_file (path, own);
    r = tree_make (tree, NULL, "-s", "own", NULL);
    g_assert_cmpint (r->status, ==, 0);
    g_assert_cmpstr (r->out, ==, "kept\n");
  }
}

/* A "$(...)" in a message is printed, never expanded. */
static void
test_error_literal (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *pwned = NULL;

  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "errors.mk", "Makefile");
  pwned = tree_path (tree, "PWNED");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "literal-text", NULL);
    g_autofree char *expected = g_strdup_printf ("Makefile:%u: *** sandbox-release takes no text after the comma, "
                                                 "but got '$(shell touch PWNED)'",
                                                 errors_mk_line ("literal-text"));
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, expected));
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "literal-option", NULL);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "'$(shell)'"));
  }
  g_assert_false (g_file_test (pwned, G_FILE_TEST_EXISTS));
}

/* A newline inside a rendered word: make would run the rest as a recipe line of its own. */
static void
test_error_newline (void)
{
  static const struct { const char *target; const char *word; } cases[] = {
    { "command", "the command holds a newline (after 'echo inside')" },
    { "file-text", "the command holds a newline (after 'echo inside')" },
    { "agent-prompt", "the prompt holds a newline (after 'do it')" },
    { "helper", "the helper's path ($(SANDSTEP)) holds a newline" },
  };
  g_autoptr(Tree) tree = NULL;
  g_autofree char *printer = NULL;
  g_autofree char *script = NULL;
  g_autofree char *env_helper = NULL;
  g_autofree char *env_odd_helper = NULL;

  g_test_summary ("a newline in a rendered word (the command, text read with $(file <...), the helper's path) "
                  "stops make at the line, naming it, and nothing after it runs on the host, even under -i or "
                  "with a '-' prefix");
  REQUIRE_PLUGIN ();
  tree = tree_new ();
  tree_add_makefile (tree, "newline.mk", "Makefile");
  printer = tree_add_argv_printer (tree);
  script = tree_path (tree, "script.txt");
  {
    g_autofree char *text = g_strdup_printf ("echo inside\ntouch %s/PWNED-file #\n", tree->dir);
    write_file (script, text);
  }
  env_helper = g_strconcat ("SANDSTEP=", printer, NULL);
  env_odd_helper = g_strdup_printf ("SANDSTEP=%s\ntouch %s/PWNED-helper #", printer, tree->dir);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *env[] = { i == 3 ? env_odd_helper : env_helper, NULL };
      g_autoptr(MakeResult) r = tree_make (tree, env, "-i", cases[i].target, NULL);
      g_autofree char *location = g_strdup_printf ("Makefile:%u: *** ", newline_mk_line (cases[i].target));

      g_assert_cmpint (r->status, ==, 2);
      g_assert_cmpstr (r->out, ==, "");
      g_assert_nonnull (strstr (r->err, location));
      if (strstr (r->err, cases[i].word) == NULL)
        g_error ("%s: '%s' not in: %s", cases[i].target, cases[i].word, r->err);
    }
  {
    g_autoptr(GDir) dir = g_dir_open (tree->dir, 0, NULL);
    const char *name;

    while ((name = g_dir_read_name (dir)) != NULL)
      if (g_str_has_prefix (name, "PWNED"))
        g_error ("'%s' was made on the host", name);
  }
  /* Commands of one line still render. */
  {
    const char *env[] = { env_helper, NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, "one-line", NULL);

    g_assert_cmpint (r->status, ==, 0);
    g_assert_nonnull (strstr (r->out, "[echo inside; echo still inside]"));
  }
}

/* In the child: its own process group (as a terminal's foreground job is) with SIGINT as make expects it. */
static void
new_group_default_sigint (gpointer data)
{
  setpgid (0, 0);
  signal (SIGINT, SIG_DFL);
}

/* ^C (SIGINT to make's process group) while a handle file's recipe runs:
 * `.PRECIOUS: box.sbx`, the form the examples use, keeps the handle of the
 * sandbox in GNU make 4.3; `.PRECIOUS: %.sbx` lets make delete it (issue 34,
 * 4), shown here so that the examples' form stays the one that works. */
static void
test_interrupt_precious (void)
{
  const char *const forms[] = { "box.sbx", "%.sbx" };

  REQUIRE_PLUGIN ();
  for (gsize i = 0; i < G_N_ELEMENTS (forms); i++)
    {
      g_autoptr(Tree) tree = tree_new ();
      g_autofree char *printer = tree_add_argv_printer (tree);
      g_autofree char *env_helper = g_strconcat ("SANDSTEP=", printer, NULL);
      g_autofree char *form = g_strconcat ("PRECIOUS=", forms[i], NULL);
      g_autofree char *box = tree_path (tree, "box.sbx");
      g_autofree char *provisioned = tree_path (tree, "provisioned");
      const char *env[] = { env_helper, NULL };
      const char *argv[] = { make_program (), "-s", form, "box.sbx", NULL };
      g_auto(GStrv) envp = make_environment (tree, env);
      g_autoptr(GError) error = NULL;
      GPid pid = 0;
      int status = 0;

      tree_add_makefile (tree, "interrupt.mk", "Makefile");
      g_spawn_async (tree->dir, (char **) argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, new_group_default_sigint, NULL,
                     &pid, &error);
      g_assert_no_error (error);
      for (int tries = 0; tries < 300 && !g_file_test (provisioned, G_FILE_TEST_EXISTS); tries++)
        g_usleep (G_USEC_PER_SEC / 20);
      g_assert_true (g_file_test (provisioned, G_FILE_TEST_EXISTS));
      /* Let the shell get to its sleep, as a user's ^C lands in a running step. */
      g_usleep (G_USEC_PER_SEC / 5);
      g_assert_cmpint (kill (-pid, SIGINT), ==, 0);
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_spawn_close_pid (pid);
      g_test_message ("make: wait status %d", status);
      /* Interrupted: dead of SIGINT, or failed with its step (never done: the step sleeps 30 s). */
      g_assert_false (WIFEXITED (status) && WEXITSTATUS (status) == 0);
      g_test_message (".PRECIOUS: %s: box.sbx %s", forms[i],
                      g_file_test (box, G_FILE_TEST_EXISTS) ? "kept" : "deleted");
      if (i == 0)
        {
          g_autofree char *text = sandstep_test_read_file (box);
          g_assert_nonnull (strstr (text, "[provision]\n"));
        }
      else
        g_assert_false (g_file_test (box, G_FILE_TEST_EXISTS));
    }
  /* And the examples name their handle files. */
  {
    const char *const examples[] = { "quickstart", "fanout", "agent", "best-of-n" };
    for (gsize i = 0; i < G_N_ELEMENTS (examples); i++)
      {
        g_autofree char *path = g_test_build_filename (G_TEST_DIST, "..", "examples", examples[i], "Makefile", NULL);
        g_autofree char *text = sandstep_test_read_file (path);
        g_assert_nonnull (strstr (text, "\n.PRECIOUS: "));
        g_assert_null (strstr (text, ".PRECIOUS: %.sbx"));
      }
  }
}

/* ---- with the real helper ------------------------------------------------- */

/* A failed step re-run continues the same run; a lost handle file is
 * re-provisioned by the same holder and finds the same sandbox. */
static void
test_helper_retry (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *box = NULL;
  g_autofree char *step = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *run = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  box = tree_path (tree, "box.sbx");
  step = tree_path (tree, "step.log");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "step.log", NULL);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "first attempt fails"));
    g_assert_nonnull (strstr (r->err, "Error 3"));
  }
  handle = g_strstrip (sandstep_test_read_file (box));
  g_assert_true (g_str_has_prefix (handle, "sandstep-"));
  g_assert_false (g_file_test (step, G_FILE_TEST_EXISTS));   /* .DELETE_ON_ERROR */
  run = stored_run (tree);

  /* The handle file is lost (say, ^C during provisioning): the same holder gets the same sandbox. */
  g_assert_cmpint (g_unlink (box), ==, 0);
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "step.log", NULL);
    g_autofree char *again = NULL;
    g_autofree char *owner = g_strdup_printf ("'--owner=%s/%s'", tree->dag, run);
    g_autofree char *log = NULL;
    g_assert_cmpint (r->status, ==, 0);
    /* The retry ran in the same run. */
    g_assert_nonnull (strstr (r->out, owner));
    again = g_strstrip (sandstep_test_read_file (box));
    g_assert_cmpstr (again, ==, handle);
    log = sandstep_test_read_file (step);
    g_assert_cmpstr (log, ==, "second attempt ok\n");
  }
  {
    g_autofree char *pin = g_strconcat ("SANDSTEP_RUN=", run, NULL);
    g_autoptr(MakeResult) r = tree_make (tree, NULL, pin, "release", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
}

/* $(sandbox-provision image=REF root=readonly): the option comes from the operator table. */
static void
test_helper_image (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *layout = NULL, *image = NULL, *bundle = NULL, *bin = NULL, *marker = NULL, *sh = NULL;
  g_autofree char *image_var = NULL, *log = NULL;

  REQUIRE_HELPER ();
  g_test_summary ("issue 27: make's $(sandbox-provision image=REF root=readonly) gives the step the image as its "
                  "root, read-only");
  tree = tree_new ();
  tree_add_makefile (tree, "image.mk", "Makefile");
  layout = tree_path (tree, "image");
  image = g_strconcat (layout, ":t", NULL);
  bundle = tree_path (tree, "bundle");
  bin = g_build_filename (bundle, "rootfs", "bin", NULL);
  marker = g_build_filename (bundle, "rootfs", "marker", NULL);
  sh = g_build_filename (bin, "sh", NULL);
  {
    const char *const steps[][7] = {
      { "umoci", "init", "--layout", layout, NULL },
      { "umoci", "new", "--image", image, NULL },
      { "umoci", "unpack", "--rootless", "--image", image, bundle, NULL },
    };
    for (gsize i = 0; i < G_N_ELEMENTS (steps); i++)
      {
        int status = 0;
        g_autoptr(GError) error = NULL;
        g_spawn_sync (NULL, (char **) steps[i], NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                      NULL, NULL, &status, &error);
        g_assert_no_error (error);
        g_assert_true (g_spawn_check_wait_status (status, NULL));
      }
  }
  g_assert_cmpint (g_mkdir_with_parents (bin, 0755), ==, 0);
  {
    g_autofree char *busybox = NULL, *copy = g_build_filename (bin, "busybox", NULL);
    gsize len = 0;
    g_assert_true (g_file_get_contents ("/bin/busybox", &busybox, &len, NULL));
    g_assert_true (g_file_set_contents_full (copy, busybox, len, G_FILE_SET_CONTENTS_NONE, 0755, NULL));
  }
  g_assert_cmpint (symlink ("busybox", sh), ==, 0);
  write_file (marker, "from the image\n");
  {
    const char *repack[] = { "umoci", "repack", "--image", image, bundle, NULL };
    int status = 0;
    g_autoptr(GError) error = NULL;
    g_spawn_sync (NULL, (char **) repack, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                  NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  image_var = g_strconcat ("IMAGE=oci:", image, NULL);
  {
    /* Both makes of one run: a make that succeeds ends its run. */
    const char *env[] = { "SANDSTEP_RUN=image-run", NULL };
    g_autoptr(MakeResult) r = tree_make (tree, env, image_var, "step.log", NULL);
    g_assert_cmpint (r->status, ==, 0);
    log = sandstep_test_read_file (tree_path (tree, "step.log"));
    g_assert_cmpstr (log, ==, "from the image\ntouch: /x: Read-only file system\n");
    g_clear_pointer (&r, make_result_free);
    r = tree_make (tree, env, image_var, "release", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
}

/* A sandbox of one run refuses another run (exit 67). */
static void
test_helper_owner_mismatch (void)
{
  g_autoptr(Tree) tree = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree->run = "pinned";
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "box.sbx", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "SANDSTEP_RUN=another-run", "other.log", NULL);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "is not owned by"));
    g_assert_nonnull (strstr (r->err, "In make: 'box.sbx' holds a sandbox of another run"));
    g_assert_nonnull (strstr (r->err, "remove it (or run make clean) and run make again"));
    g_assert_nonnull (strstr (r->err, "Error 67"));
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "other.log", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
}

/* After a release, a step that still names the handle file says what to do in make's terms (exit 66). */
static void
test_helper_after_release (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *where = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree->run = "pinned";
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "release", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "other.log", NULL);
    g_assert_cmpint (r->status, ==, 2);
    where = g_strdup_printf ("(state directory: '%s')", tree->state);
    g_assert_nonnull (strstr (r->err, where));
    g_assert_nonnull (strstr (r->err, "In make: remove 'box.sbx' (or run make clean) and run make again"));
    g_assert_nonnull (strstr (r->err, "Error 66"));
  }
}

/* make -t leaves an empty handle file; the helper refuses it (exit 65). */
static void
test_helper_touched_handle (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *box = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree->run = "pinned";
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  box = tree_path (tree, "box.sbx");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-t", "box.sbx", NULL);
    g_autofree char *text = NULL;
    g_assert_cmpint (r->status, ==, 0);
    text = sandstep_test_read_file (box);
    g_assert_cmpstr (text, ==, "");
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "other.log", NULL);
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "'box.sbx' is empty"));
    g_assert_nonnull (strstr (r->err, "Error 65"));
  }
}

/* -j4 provisions four sandboxes at once: four handles, all different. */
static void
test_helper_parallel (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autoptr(GHashTable) handles = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  const char *const boxes[] = { "a.sbx", "b.sbx", "c.sbx", "d.sbx" };

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree->run = "pinned";
  tree_add_makefile (tree, "parallel.mk", "Makefile");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-j4", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
  for (gsize i = 0; i < G_N_ELEMENTS (boxes); i++)
    {
      g_autofree char *path = tree_path (tree, boxes[i]);
      char *handle = g_strstrip (sandstep_test_read_file (path));
      g_assert_true (g_str_has_prefix (handle, "sandstep-"));
      g_hash_table_add (handles, handle);
    }
  g_assert_cmpuint (g_hash_table_size (handles), ==, G_N_ELEMENTS (boxes));
}

/* Commas in a command survive into the sandbox. */
static void
test_helper_commas (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *log = NULL;
  g_autofree char *path = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree->run = "pinned";
  tree_add_makefile (tree, "pipeline.mk", "Makefile");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "commas.log", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
  path = tree_path (tree, "commas.log");
  log = sandstep_test_read_file (path);
  g_assert_cmpstr (log, ==, "a,b,,c\n");
}

/* Two targets share a sandbox under -j2; each writes scratch.txt, sleeps on
 * the host, and reads it back.  A step holds the sandbox from its first
 * sandbox line to its last, so neither reads the other's text. */
static void
test_helper_recipe_claim (void)
{
  g_autoptr(Tree) tree = NULL;
  const char *const outs[] = { "x.out", "y.out" };

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree->run = "pinned";
  tree_add_makefile (tree, "claim.mk", "Makefile");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-j2", "all", NULL);
    g_assert_cmpint (r->status, ==, 0);
    /* The one that came second waited, and said for whom. */
    g_assert_nonnull (strstr (r->err, "is held by"));
  }
  for (gsize i = 0; i < G_N_ELEMENTS (outs); i++)
    {
      g_autofree char *path = tree_path (tree, outs[i]);
      g_autofree char *text = sandstep_test_read_file (path);
      g_autofree char *expected = g_strconcat (outs[i], "\n", NULL);
      g_assert_cmpstr (text, ==, expected);
    }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "release", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
}

/* A recipe that fails half-way gives its sandbox up when it fails (issue
 * 34, 1): make -k goes on to other targets, which go straight in and see
 * what the failed recipe left. */
static void
test_helper_recipe_claim_failed (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *other = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree_add_makefile (tree, "claim.mk", "Makefile");
  other = tree_path (tree, "other.out");
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-k", "half.out", "other.out", NULL);
    g_autofree char *text = NULL;
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "half.out] Error 1"));
    g_assert_null (strstr (r->err, "other.out] Error"));
    text = sandstep_test_read_file (other);
    g_assert_cmpstr (text, ==, "half\n");
  }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "release", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
}

/* make -k -j4 over one shared sandbox, one step failing half-way (issue 34,
 * 1): the others wait while it holds the sandbox, go in once it has failed,
 * and succeed; make ends well within their wait= budget instead of after it. */
static void
test_helper_keep_going (void)
{
  const int wait_s = 40;
  const char *const outs[] = { "a.out", "b.out", "c.out" };
  g_autoptr(Tree) tree = NULL;
  g_autofree char *wait_arg = g_strdup_printf ("WAIT=%d", wait_s);
  gint64 began;
  double took;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree_add_makefile (tree, "kfail.mk", "Makefile");
  began = g_get_monotonic_time ();
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "-k", "-j4", wait_arg, "all", NULL);
    took = (g_get_monotonic_time () - began) / (double) G_USEC_PER_SEC;
    g_assert_cmpint (r->status, ==, 2);
    g_assert_nonnull (strstr (r->err, "fail.out] Error 1"));
    g_assert_null (strstr (r->err, "Error 75"));
  }
  g_test_message ("make -k -j4 took %.1f s, wait=%d", took, wait_s);
  g_assert_cmpfloat (took, <, wait_s);
  for (gsize i = 0; i < G_N_ELEMENTS (outs); i++)
    {
      g_autofree char *path = tree_path (tree, outs[i]);
      g_autofree char *text = sandstep_test_read_file (path);
      g_autofree char *expected = g_strconcat (outs[i], "\n", NULL);
      g_assert_cmpstr (text, ==, expected);
    }
  {
    g_autoptr(MakeResult) r = tree_make (tree, NULL, "release", NULL);
    g_assert_cmpint (r->status, ==, 0);
  }
}

/* retry=clean (issue 28): a target run again after it failed starts from the files its failed attempt started
 * from, so the log holds one attempt's line, not two; a target run again after it succeeded (its input changed)
 * starts from what the success left.  Without the option, the failed attempt's line stays. */
static void
test_helper_retry_clean (void)
{
  const struct { const char *retry; const char *after_retry; const char *after_rerun; } cases[] = {
    { "RETRY=clean", "1\n", "2\n" },
    { "RETRY=none", "2\n", "3\n" },
  };

  /* One run throughout: a make that succeeds ends its run, and the next would be another owner. */
  const char *env[] = { "SANDSTEP_DAG=d", "SANDSTEP_RUN=r", NULL };

  REQUIRE_HELPER ();
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(Tree) tree = tree_new ();
      g_autofree char *input = tree_path (tree, "input.txt");
      g_autofree char *out = tree_path (tree, "count.out");

      g_test_message ("%s", cases[i].retry);
      tree_add_makefile (tree, "retry.mk", "Makefile");
      g_assert_true (g_file_set_contents (input, "one\n", -1, NULL));
      {
        g_autoptr(MakeResult) failed = tree_make (tree, env, cases[i].retry, "count.out", NULL);
        g_assert_cmpint (failed->status, ==, 2);
      }
      {
        g_autoptr(MakeResult) retried = tree_make (tree, env, cases[i].retry, "PASS=1", "count.out", NULL);
        g_autofree char *count = NULL;
        g_assert_cmpint (retried->status, ==, 0);
        count = sandstep_test_read_file (out);
        g_assert_cmpstr (count, ==, cases[i].after_retry);
      }
      /* A new run (the last make succeeded) of the target, its input changed: no rollback. */
      g_assert_true (g_file_set_contents (input, "two\n", -1, NULL));
      {
        /* -W: input.txt counts as new, whatever the clock's resolution made of the write. */
        g_autoptr(MakeResult) rerun = tree_make (tree, env, cases[i].retry, "PASS=1", "-W", "input.txt", "count.out",
                                                 NULL);
        g_autofree char *count = NULL;
        g_assert_cmpint (rerun->status, ==, 0);
        count = sandstep_test_read_file (out);
        g_assert_cmpstr (count, ==, cases[i].after_rerun);
      }
      {
        g_autoptr(MakeResult) r = tree_make (tree, env, cases[i].retry, "release", NULL);
        g_assert_cmpint (r->status, ==, 0);
      }
    }
}

/* Two makes of one run build the same target at once, on one sandbox (issue
 * 30, 26): the same holder, but a hold belongs to one make process, so the
 * second waits for the first's recipe and each reads back its own name. */
static void
test_helper_two_makes (void)
{
  const char *env[] = { "SANDSTEP_DAG=d", "SANDSTEP_RUN=r", NULL };
  const char *provision[] = { "provision", "--owner=d/r", "--holder=d/r/box.sbx", NULL };
  const char *script =
    "make -s -C one HANDLE=\"$0\" ME=one PEER=two > one.log 2>&1 & p1=$!; "
    "make -s -C two HANDLE=\"$0\" ME=two PEER=one > two.log 2>&1 & p2=$!; "
    "wait $p1; s1=$?; wait $p2; echo $s1 $?";
  g_autoptr(Tree) tree = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) envp = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *out = NULL;
  int status = 0;

  REQUIRE_HELPER ();
  tree = tree_new ();
  tree_add_makefile (tree, "race.mk", "one/Makefile");
  tree_add_makefile (tree, "race.mk", "two/Makefile");
  g_assert_true (run_helper (tree->state, provision, &handle, &(char *) { NULL }));
  envp = make_environment (tree, env);
  {
    const char *argv[] = { "/bin/sh", "-c", script, handle, NULL };
    g_spawn_sync (tree->dir, (char **) argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error);
    g_assert_no_error (error);
  }
  for (int i = 0; i < 2; i++)
    {
      const char *name = i == 0 ? "one" : "two";
      g_autofree char *log_name = g_strconcat (name, ".log", NULL);
      g_autofree char *log_path = tree_path (tree, log_name);
      g_autofree char *log = sandstep_test_read_file (log_path);
      g_autofree char *out_name = g_build_filename (name, "out.txt", NULL);
      g_autofree char *out_path = tree_path (tree, out_name);
      g_autofree char *text = NULL;
      g_autofree char *expected = g_strconcat (name, "\n", NULL);

      g_test_message ("make in %s:\n%s", name, log);
      text = sandstep_test_read_file (out_path);
      g_assert_cmpstr (text, ==, expected);
    }
  g_assert_cmpstr (out, ==, "0 0\n");
}

/* `sandstep ARGS` (or ARGS, when its first is an absolute path) with SANDSTEP_STEP_ENDS set to @ends (NULL:
 * unset); its exit status, stderr in @out_err. */
static int
helper_status (Tree *tree, const char *ends, const char *const *args, char **out_err)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) envp = make_environment (tree, NULL);
  g_autofree char *out = NULL;
  int wait_status = 0;

  envp = ends != NULL ? g_environ_setenv (envp, "SANDSTEP_STEP_ENDS", ends, TRUE)
                      : g_environ_unsetenv (envp, "SANDSTEP_STEP_ENDS");
  if (args[0][0] != '/')
    g_ptr_array_add (argv, (char *) helper_path ());
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (char *) *args);
  g_ptr_array_add (argv, NULL);
  g_spawn_sync (tree->dir, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, out_err, &wait_status,
                &error);
  g_assert_no_error (error);
  g_test_message ("%s %s: wait status %d: %s", (char *) argv->pdata[1], (char *) argv->pdata[4], wait_status,
                  *out_err);
  return WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1;
}

/* A stand-in for a recipe of the make that is this test: a child of ours
 * whose environment carries SANDSTEP_STEP_ENDS=@ends, as make's child
 * running a recipe's line does. */
static GPid
start_recipe (const char *ends)
{
  const char *sleeper[] = { "/bin/sleep", "60", NULL };
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) envp = g_environ_setenv (g_get_environ (), "SANDSTEP_STEP_ENDS", ends, TRUE);
  GPid pid = 0;

  g_spawn_async (NULL, (char **) sleeper, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error);
  g_assert_no_error (error);
  return pid;
}

static void
stop_recipe (GPid pid)
{
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
}

/* The helper's side of a recipe's hold: a line that is not its recipe's last
 * leaves the sandbox held for its holder while the recipe runs in its make
 * (here: this test, an ancestor of the helper, and a child of it carrying
 * the recipe's SANDSTEP_STEP_ENDS); the last line ends the hold, and so does
 * the recipe's stopping (issue 34, 1); the same holder in another make is
 * another recipe (issue 30, 26); a --step of a process that is not an
 * ancestor, or without SANDSTEP_STEP_ENDS (a line run by hand), leaves none. */
static void
test_helper_step_by_hand (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;
  g_autofree char *line1 = g_strdup_printf ("--step=%d:1", (int) getpid ());
  g_autofree char *line2 = g_strdup_printf ("--step=%d:2", (int) getpid ());
  g_autofree char *ends = g_strdup_printf ("%d:2", (int) getpid ());
  g_autofree char *held = g_strdup_printf ("(make pid %d)", (int) getpid ());
  const char *provision[] = { "provision", "--owner=d/r", "--holder=d/r/box.sbx", NULL };
  GPid stranger = 0;
  GPid recipe = 0;

  REQUIRE_HELPER ();
  tree = tree_new ();
  g_assert_true (run_helper (tree->state, provision, &handle, &(char *) { NULL }));
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  recipe = start_recipe (ends);
  {
    const char *a1[] = { "run", handle_arg, "--owner=d/r", "--holder=d/r/a", line1, "--", "echo a > f", NULL };
    const char *b[] = { "run", handle_arg, "--owner=d/r", "--holder=d/r/b", "--wait=0", "--", "cat f", NULL };
    const char *a2[] = { "run", handle_arg, "--owner=d/r", "--holder=d/r/a", line2, "--", "cat f", NULL };
    /* The same holder's line in another make: a shell, the helper's parent, is that make. */
    const char *other_make[] = { "/bin/sh", "-c",
                                 "SANDSTEP_STEP_ENDS=$$:2 \"$0\" run \"$1\" --owner=d/r --holder=d/r/a --wait=0 "
                                 "--step=$$:1 -- 'echo other > f'; exit $?",
                                 helper_path (), handle_arg, NULL };
    g_autofree char *err = NULL;

    g_assert_cmpint (helper_status (tree, ends, a1, &err), ==, 0);
    /* Twice: the first start of a supervisor, then its fast path. */
    for (int i = 0; i < 2; i++)
      {
        g_clear_pointer (&err, g_free);
        g_assert_cmpint (helper_status (tree, NULL, b, &err), ==, 75);
        g_assert_nonnull (strstr (err, "is held by 'd/r/a'"));
        g_assert_nonnull (strstr (err, held));
      }
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, other_make, &err), ==, 75);
    g_assert_nonnull (strstr (err, "is held by 'd/r/a'"));
    g_assert_nonnull (strstr (err, held));
    /* The same holder in the same make goes straight in; its last line ends the hold. */
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, ends, a2, &err), ==, 0);
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, b, &err), ==, 0);
    /* Without SANDSTEP_STEP_ENDS, a line never leaves a hold. */
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, a1, &err), ==, 0);
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, b, &err), ==, 0);
    /* A recipe that stops half-way (make stopped it at a failing line) holds nothing. */
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, ends, a1, &err), ==, 0);
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, b, &err), ==, 75);
    stop_recipe (recipe);
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, b, &err), ==, 0);
  }
  {
    /* A live process that is not the helper's ancestor holds nothing. */
    const char *sleeper[] = { "/bin/sleep", "30", NULL };
    g_autoptr(GError) error = NULL;
    g_autofree char *other = NULL;
    g_autofree char *err = NULL;
    const char *b[] = { "run", handle_arg, "--owner=d/r", "--holder=d/r/b", "--wait=0", "--", "true", NULL };

    g_spawn_async (NULL, (char **) sleeper, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &stranger, &error);
    g_assert_no_error (error);
    other = g_strdup_printf ("--step=%d:1", (int) stranger);
    {
      const char *a[] = { "run", handle_arg, "--owner=d/r", "--holder=d/r/a", other, "--", "true", NULL };
      g_assert_cmpint (helper_status (tree, "nothing", a, &err), ==, 0);
    }
    g_clear_pointer (&err, g_free);
    g_assert_cmpint (helper_status (tree, NULL, b, &err), ==, 0);
    kill (stranger, SIGKILL);
    waitpid (stranger, NULL, 0);
  }
  {
    const char *bad[] = { "run", handle_arg, "--owner=d/r", "--holder=d/r/a", "--step=box", "--", "true", NULL };
    g_autofree char *err = NULL;
    g_assert_cmpint (helper_status (tree, NULL, bad, &err), ==, 64);
    g_assert_nonnull (strstr (err, "option '--step' takes PID:LINE, got 'box'"));
  }
}

/* ---- the examples, twice in a row ---------------------------------------- */

/* Sandboxes in @state: none once a DAG has released what it made. */
static guint
count_sandboxes (const char *state)
{
  g_autoptr(SandstepStore) store = NULL;
  g_autoptr(GPtrArray) handles = NULL;

  if (!g_file_test (state, G_FILE_TEST_IS_DIR) || (store = sandstep_store_open (state, NULL)) == NULL)
    return 0;
  handles = sandstep_store_list (store);
  for (guint i = 0; i < handles->len; i++)
    g_test_message ("left behind: %s", (char *) handles->pdata[i]);
  return handles->len;
}

/* The scripted chat-completions server of test-agent, started for one run of
 * examples/agent (its script starts over with each server); stopped by pid. */
static GPid
start_scripted_server (const char *script, char **out_url)
{
  g_autofree char *server = g_test_build_filename (G_TEST_BUILT, "test-agent", NULL);
  const char *argv[] = { server, "--serve", script, "--port=0", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOChannel) channel = NULL;
  GPid pid = 0;
  int out = -1;
  gsize end = 0;

  g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL, &out,
                            NULL, &error);
  g_assert_no_error (error);
  channel = g_io_channel_unix_new (out);
  g_io_channel_set_close_on_unref (channel, TRUE);
  g_io_channel_read_line (channel, out_url, NULL, &end, &error);
  g_assert_no_error (error);
  g_assert_nonnull (*out_url);
  (*out_url)[end] = '\0';
  g_assert_true (g_str_has_prefix (*out_url, "http://127.0.0.1:"));
  return pid;
}

static void
stop_scripted_server (GPid pid)
{
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  g_spawn_close_pid (pid);
}

/* Runs examples/@name as its README says, twice in a row in one copy: each
 * run succeeds and leaves no sandbox behind (the second one re-provisions
 * what the first one released, and releases it again). */
static void
test_example_twice (gconstpointer data)
{
  const char *name = data;
  g_autoptr(Tree) tree = NULL;
  g_autofree char *source = g_test_build_filename (G_TEST_DIST, "..", "examples", name, NULL);
  g_autofree char *plugin_arg = g_strconcat ("SANDSTEP_PLUGIN=", plugin_path (), NULL);
  g_autofree char *copy = NULL;
  g_autofree char *script = NULL;

  REQUIRE_HELPER ();
  tree = tree_new ();
  {
    const char *argv[] = { "cp", "-r", source, tree->dir, NULL };
    g_autoptr(GError) error = NULL;
    int status = 0;
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  copy = g_build_filename (name, NULL);
  script = g_build_filename (tree->dir, name, "scripted.json", NULL);
  for (int round = 1; round <= 2; round++)
    {
      g_autofree char *url = NULL;
      g_autofree char *base_arg = NULL;
      GPid server = 0;
      const char *args[] = { "-j4", plugin_arg, NULL };

      g_test_message ("round %d", round);
      if (g_file_test (script, G_FILE_TEST_EXISTS))
        server = start_scripted_server (script, &url);
      base_arg = g_strconcat ("OPENAI_BASE_URL=", url != NULL ? url : "http://127.0.0.1:1/v1", NULL);
      {
        /* XDG_DATA_DIRS unset: GIO finds its schemas where the system keeps them, not in the test's dirs. */
        const char *env[] = { "XDG_DATA_DIRS", base_arg, "OPENAI_MODEL=scripted", "OPENAI_API_KEY=sk-example", NULL };
        g_autoptr(MakeResult) r = tree_make_full (tree, copy, env, args);
        if (server != 0)
          stop_scripted_server (server);
        g_assert_cmpint (r->status, ==, 0);
      }
      g_assert_cmpuint (count_sandboxes (tree->state), ==, 0);
    }
}

/* ---- examples/image: a loopback registry started and stopped by its script -- */

/* What failed in one run of examples/image, or NULL: the caller stops the registry before it asserts. */
static char *
example_image_problem (MakeResult *r, const char *what, int status, const char *needle)
{
  if (r->status != status)
    return g_strdup_printf ("%s: make exited %d, not %d (its output is in the log above)", what, r->status, status);
  if (needle != NULL && strstr (r->out, needle) == NULL && strstr (r->err, needle) == NULL)
    return g_strdup_printf ("%s: make's output lacks '%s'", what, needle);
  return NULL;
}

/* The steps of the example against @registry, in @tree's copy "image": NULL when each did as it should. */
static char *
example_image_steps (Tree *tree, const char *registry)
{
  g_autofree char *plugin_arg = g_strconcat ("SANDSTEP_PLUGIN=", plugin_path (), NULL);
  g_autofree char *registry_arg = g_strconcat ("REGISTRY=", registry, NULL);
  g_autofree char *image_ref = g_strdup_printf ("docker://%s/example/python:3", registry);
  g_autofree char *test_file = tree_path (tree, "image/project/tests/test_wordfreq.py");
  g_autofree char *handle_file = tree_path (tree, "image/box.sbx");
  g_autofree char *tests_text = sandstep_test_read_file (test_file);
  g_autofree char *digest_file = tree_path (tree, "image/image.digest");
  g_autofree char *report_file = tree_path (tree, "image/report.txt");
  g_autofree char *digest = NULL, *report = NULL, *images = NULL, *problem = NULL;
  const char *args[] = { plugin_arg, registry_arg, NULL };
  /* XDG_DATA_DIRS unset: the pull's GIO (its proxy resolver) finds its schemas where the system keeps them. */
  const char *env[] = { "XDG_DATA_DIRS", NULL };

  {
    g_autoptr(MakeResult) r = tree_make_full (tree, "image", env, args);
    if ((problem = example_image_problem (r, "the first make", 0, "Ran 3 tests")) != NULL)
      return g_steal_pointer (&problem);
  }
  /* The first target pulled: image.digest is the digest the store holds for the reference. */
  if (!g_file_get_contents (digest_file, &digest, NULL, NULL))
    return g_strdup ("the first make wrote no image.digest");
  g_strstrip (digest);
  if (!g_str_has_prefix (digest, "sha256:") || strlen (digest) != strlen ("sha256:") + 64)
    return g_strdup_printf ("image.digest holds '%s', not a sha256 digest", digest);
  {
    const char *list[] = { "images", "--json", NULL };
    if (!run_helper (tree->state, list, &images, &problem))
      return g_steal_pointer (&problem);
    if (strstr (images, digest) == NULL || strstr (images, image_ref) == NULL)
      return g_strdup_printf ("'sandstep images' lists no '%s' as '%s': %s", digest, image_ref, images);
  }
  /* The report the tests wrote in the sandbox, exported. */
  if (!g_file_get_contents (report_file, &report, NULL, NULL))
    return g_strdup ("the first make exported no report.txt");
  if (strstr (report, "test_counts_and_order") == NULL || !g_str_has_suffix (report, "\nOK\n"))
    return g_strdup_printf ("report.txt is not the tests' passing report: %s", report);
  if (count_sandboxes (tree->state) != 0)
    return g_strdup ("the first make left a sandbox behind");

  /* A test that fails fails its step with unittest's status and keeps the sandbox; the fix, re-made, passes. */
  write_file (test_file, "import unittest\nclass Broken(unittest.TestCase):\n"
                         "    def test_broken(self):\n        self.assertEqual(1, 2)\n");
  {
    g_autoptr(MakeResult) r = tree_make_full (tree, "image", env, args);
    if ((problem = example_image_problem (r, "the make of a failing test", 2, "FAILED (failures=1)")) != NULL)
      return g_steal_pointer (&problem);
    if (strstr (r->err, "tested.stamp] Error 1") == NULL)
      return g_strdup ("the failing test did not fail its step with unittest's status 1");
  }
  if (!g_file_test (handle_file, G_FILE_TEST_EXISTS) || count_sandboxes (tree->state) != 1)
    return g_strdup ("a failed step did not keep its sandbox and box.sbx");
  {
    /* The kept sandbox's root is the image the first target pulled (its record names the digest), so the
     * tests ran with the image's python3, not the host's. */
    g_autofree char *run_file = tree_path (tree, "image/" SANDSTEP_RUN_FILE);
    g_autofree char *run = NULL, *handle = NULL, *handle_arg = NULL, *owner_arg = NULL, *described = NULL;
    g_autofree char *pinned = g_strdup_printf ("\"digest\" : \"%s\"", digest);
    const char *describe[] = { "describe", NULL, NULL, NULL };

    if (!g_file_get_contents (run_file, &run, NULL, NULL) || !g_file_get_contents (handle_file, &handle, NULL, NULL))
      return g_strdup ("the failed make kept no run id or no handle");
    describe[1] = handle_arg = g_strconcat ("--handle=", g_strstrip (handle), NULL);
    describe[2] = owner_arg = g_strconcat ("--owner=image/", g_strstrip (run), NULL);
    if (!run_helper (tree->state, describe, &described, &problem))
      return g_steal_pointer (&problem);
    if (strstr (described, pinned) == NULL)
      return g_strdup_printf ("the sandbox's record names not the image '%s': %s", digest, described);
  }
  write_file (test_file, tests_text);
  {
    g_autoptr(MakeResult) r = tree_make_full (tree, "image", env, args);
    if ((problem = example_image_problem (r, "the make after the fix", 0, "Ran 3 tests")) != NULL)
      return g_steal_pointer (&problem);
  }
  if (count_sandboxes (tree->state) != 0)
    return g_strdup ("the make after the fix left a sandbox behind");
  return NULL;
}

/* @pid runs (a zombie, which a subreaper has yet to reap, does not). */
static gboolean
pid_alive (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *end;

  if (!g_file_get_contents (path, &stat, NULL, NULL) || (end = strrchr (stat, ')')) == NULL)
    return FALSE;
  return end[1] == ' ' && end[2] != 'Z';
}

/* Runs examples/image as its README says: registry.sh start, make, registry.sh stop. */
static void
test_example_image (void)
{
  g_autoptr(Tree) tree = NULL;
  g_autofree char *source = g_test_build_filename (G_TEST_DIST, "..", "examples", "image", NULL);
  g_autofree char *script = NULL, *registry_dir = NULL, *pid_file = NULL, *pid_text = NULL;
  g_autofree char *out = NULL, *err = NULL, *problem = NULL;
  const char *tools[] = { "docker-registry", "umoci", "skopeo" };
  GPid pid;
  int status = 0;

  REQUIRE_HELPER ();
  g_test_summary ("issue 27: examples/image as its README says: registry.sh starts a loopback docker-registry and "
                  "pushes a Python image built from the host's python3; the DAG pulls it, provisions a sandbox of it, "
                  "runs the project's unittest tests there and exports the report; a failing test fails the step "
                  "with unittest's status; registry.sh stop kills the registry by its pid");
  for (gsize i = 0; i < G_N_ELEMENTS (tools); i++)
    {
      g_autofree char *found = g_find_program_in_path (tools[i]);
      if (found == NULL)
        {
          g_test_skip_printf ("'%s' is not installed; scripts/deps.sh installs it (apt-get install docker-registry "
                              "skopeo umoci busybox-static)", tools[i]);
          return;
        }
    }
  tree = tree_new ();
  {
    const char *argv[] = { "cp", "-r", source, tree->dir, NULL };
    g_autoptr(GError) error = NULL;
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  script = tree_path (tree, "image/registry.sh");
  registry_dir = tree_path (tree, "registry");
  pid_file = g_build_filename (registry_dir, "registry.pid", NULL);
  {
    /* skopeo reads its configuration under HOME and the XDG directories, which GTest's isolation points at
     * /dev/null: a home of its own instead. */
    const char *argv[] = { script, "start", registry_dir, NULL };
    const char *xdg[] = { "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME" };
    g_autofree char *home = tree_path (tree, "home");
    g_auto(GStrv) envp = g_environ_setenv (g_get_environ (), "HOME", home, TRUE);
    g_autoptr(GError) error = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS (xdg); i++)
      envp = g_environ_unsetenv (envp, xdg[i]);
    g_assert_cmpint (g_mkdir_with_parents (home, 0700), ==, 0);
    g_spawn_sync (NULL, (char **) argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error);
    g_assert_no_error (error);
    g_test_message ("registry.sh start: %s%s", out, err);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  g_assert_true (g_str_has_prefix (out, "REGISTRY=127.0.0.1:"));
  pid_text = sandstep_test_read_file (pid_file);
  pid = atoi (pid_text);
  g_assert_cmpint (pid, >, 1);
  g_assert_true (pid_alive (pid));

  problem = example_image_steps (tree, g_strstrip (out) + strlen ("REGISTRY="));
  {
    const char *argv[] = { script, "stop", registry_dir, NULL };
    g_autoptr(GError) error = NULL;
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  g_assert_cmpstr (problem, ==, NULL);
  g_assert_false (pid_alive (pid));
  g_assert_false (g_file_test (registry_dir, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_summary ("The GNU make plugin validates, derives identity, and renders helper commands");

  g_test_add_func ("/plugin/unit/holder-path", test_unit_holder_path);
  g_test_add_func ("/plugin/unit/run-id", test_unit_run_id);
  g_test_add_func ("/plugin/unit/quote", test_unit_quote);
  g_test_add_func ("/plugin/unit/helper-owner", test_unit_helper_owner);
  g_test_add_func ("/plugin/identity/one-owner-rule", test_one_owner_rule);
  g_test_add_func ("/plugin/unit/every-operator", test_unit_every_operator);
  g_test_add_func ("/plugin/unit/readme-lists-every-function", test_readme_lists_every_function);
  g_test_add_func ("/plugin/exports", test_exports);
  g_test_add_func ("/plugin/load", test_load);
  g_test_add_func ("/plugin/render", test_render);
  g_test_add_func ("/plugin/render/argv", test_render_argv);
  g_test_add_func ("/plugin/render/steps", test_render_steps);
  g_test_add_func ("/plugin/render/helper-beside-plugin", test_helper_beside_plugin);
  g_test_add_func ("/plugin/identity/dry-run", test_dry_run);
  g_test_add_func ("/plugin/identity/run-id", test_run_id);
  g_test_add_func ("/plugin/identity/recursive", test_recursive);
  g_test_add_func ("/plugin/identity/odd-directory", test_odd_directory);
  g_test_add_func ("/plugin/errors", test_errors);
  g_test_add_func ("/plugin/errors/literal", test_error_literal);
  g_test_add_func ("/plugin/errors/no-space", test_error_no_space);
  g_test_add_func ("/plugin/errors/newline", test_error_newline);
  g_test_add_func ("/plugin/interrupt/precious", test_interrupt_precious);
  g_test_add_func ("/plugin/helper/retry", test_helper_retry);
  g_test_add_func ("/plugin/helper/owner-mismatch", test_helper_owner_mismatch);
  g_test_add_func ("/plugin/helper/image", test_helper_image);
  g_test_add_func ("/plugin/helper/touched-handle", test_helper_touched_handle);
  g_test_add_func ("/plugin/helper/after-release", test_helper_after_release);
  g_test_add_func ("/plugin/helper/parallel", test_helper_parallel);
  g_test_add_func ("/plugin/helper/commas", test_helper_commas);
  g_test_add_func ("/plugin/helper/recipe-claim", test_helper_recipe_claim);
  g_test_add_func ("/plugin/helper/recipe-claim-failed", test_helper_recipe_claim_failed);
  g_test_add_func ("/plugin/helper/keep-going", test_helper_keep_going);
  g_test_add_func ("/plugin/helper/two-makes", test_helper_two_makes);
  g_test_add_func ("/plugin/helper/step-by-hand", test_helper_step_by_hand);

  g_test_add_func ("/plugin/helper/retry-clean", test_helper_retry_clean);
  g_test_add_data_func ("/plugin/examples/quickstart", "quickstart", test_example_twice);
  g_test_add_data_func ("/plugin/examples/fanout", "fanout", test_example_twice);
  g_test_add_data_func ("/plugin/examples/agent", "agent", test_example_twice);
  g_test_add_data_func ("/plugin/examples/best-of-n", "best-of-n", test_example_twice);
  g_test_add_func ("/plugin/examples/image", test_example_image);

  return g_test_run ();
}
