/* sandstep-plugin.c: the GNU make loadable object sandstep.so.
 *
 *   load $(SANDSTEP_PLUGIN)
 *   box.sbx:  ; $(sandbox-provision network=none lifetime=30m) > $@
 *   test.log: box.sbx ; $(sandbox-run @box.sbx timeout=120,cd src && make check) > $@
 *
 * Thin on purpose, because make expands a recipe whole in its own process
 * (also under -n), where anything slow stalls every job: a function
 * validates its arguments against the operator table, derives the identity,
 * and expands to a shell command line that runs the `sandstep` helper, which
 * does the work in the recipe's own process.  Nothing here sleeps, spawns,
 * starts a thread or a main-loop source, or defines a GType.  The only file
 * the plugin ever writes is TOP/.sandstep/run, once, when a run starts (never
 * under -n or -q), and removes it when the top make of that run exits 0.
 *
 * One function per row of the operator table, "sandbox-" + its name, so new
 * operators need no change here; plus $(sandbox-run-id ) and $(sandbox-holder ).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gnumake.h>

#include "sandstep-identity.h"
#include "sandstep-operator.h"
#include "sandstep-programs-libc.h"
#include "sandstep-render.h"

#define SANDSTEP_EXPORT __attribute__ ((visibility ("default")))
#define FUNCTION_PREFIX "sandbox-"
/* The environment variable of hooks/supervisor/sandstep-step.h. */
#define SANDSTEP_STEP_ENDS_VARIABLE "SANDSTEP_STEP_ENDS"

SANDSTEP_EXPORT int plugin_is_GPL_compatible;

#ifdef GMK_ABI_VERSION
SANDSTEP_EXPORT int sandstep_gmk_setup (unsigned int abi, const gmk_floc *floc);
#else
SANDSTEP_EXPORT int sandstep_gmk_setup (const gmk_floc *floc);
#endif

/* Set once by the setup function; make never unloads us (-z nodelete). */
static struct {
  gboolean registered;
  char *run;             /* the run id */
  char *top;             /* the top directory of the tree (SANDSTEP_TOP) */
  char *default_helper;  /* the helper beside the plugin, or "sandstep" */
  /* The sandbox lines of the recipe being expanded (see number_line ()). */
  guint lines;           /* sandbox lines numbered so far by this make */
  char *step_target;     /* CURDIR and $@ of the recipe they belong to */
  GHashTable *step_last; /* the sandbox (its handle file, or handle) -> its last line there */
} plugin;

/* ---- the make boundary ---------------------------------------------------- */

/* gmk_expand() as a GLib string, whitespace around it removed. */
static char *
expand (const char *text)
{
  char *expanded = gmk_expand (text);
  char *copy = g_strstrip (g_strdup (expanded != NULL ? expanded : ""));

  gmk_free (expanded);
  return copy;
}

/* Hands @text to make, which frees it. */
static char *
to_make (const char *text)
{
  gsize len = strlen (text);
  char *copy = gmk_alloc (len + 1);

  memcpy (copy, text, len + 1);
  return copy;
}

/* Stops make with @message, at the caller's makefile line when @floc is NULL.
 * The message is defined verbatim and printed through $(value ...), so a
 * "$(...)" inside it (a user's value) is shown, never expanded. */
static void
fail (const char *message, const gmk_floc *floc)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree char *buffer = NULL;

  /* One line: a newline could end the define early, a trailing backslash join "endef". */
  for (const char *p = message; *p != '\0'; p++)
    g_string_append_c (text, ((guchar) *p < 0x20 || *p == 0x7f) ? ' ' : *p);
  if (text->len > 0 && text->str[text->len - 1] == '\\')
    g_string_append_c (text, '.');

  buffer = g_strdup_printf ("override define __sandstep_error\n%s\nendef\n"
                            "$(error $(value __sandstep_error))\n",
                            text->str);
  gmk_eval (buffer, floc);
}

/* Under -n and -q make expands recipes without running them: nothing may change. */
static gboolean
is_dry_run (void)
{
  g_autofree char *n = expand ("$(findstring n,$(firstword -$(MAKEFLAGS)))");
  g_autofree char *q = expand ("$(findstring q,$(firstword -$(MAKEFLAGS)))");

  return n[0] != '\0' || q[0] != '\0';
}

/* ---- identity ------------------------------------------------------------- */

static gboolean
is_program (const char *path)
{
  return g_file_test (path, G_FILE_TEST_IS_REGULAR) && g_file_test (path, G_FILE_TEST_IS_EXECUTABLE);
}

/* The helper that belongs with the loaded object, by absolute path (hooks/sandstep-programs-libc.h), else
 * whichever `sandstep` the recipe's PATH finds. */
static char *
find_default_helper (void)
{
  Dl_info info;
  g_autofree char *dir = NULL;
  g_autofree char *absdir = NULL;
  char *path;

  if (dladdr ((void *) find_default_helper, &info) == 0 || info.dli_fname == NULL)
    return g_strdup ("sandstep");
  dir = g_path_get_dirname (info.dli_fname);
  /* Links resolved: a build tree or prefix reached through a link is still that tree or prefix. */
  absdir = realpath (dir, NULL);
  if (absdir == NULL)
    absdir = g_canonicalize_filename (dir, NULL);
  path = sandstep_program_path (absdir, "sandstep");
  if (path != NULL && is_program (path))
    return path;
  free (path);
  return g_strdup ("sandstep");
}

/* Escapes @value for the body of `define NAME :=`. */
static char *
escape_for_define (const char *value)
{
  GString *out = g_string_new (NULL);

  for (const char *p = value; *p != '\0'; p++)
    {
      if (*p == '$')
        g_string_append_c (out, '$');
      g_string_append_c (out, *p);
    }
  return g_string_free (out, FALSE);
}

/* Makes the run and the top known to recipes, helpers and sub-makes (make's
 * exported variables), and to make itself should it re-exec (the process's
 * environment: make builds children's environments from its variables only). */
static void
publish_identity (void)
{
  g_autofree char *top = escape_for_define (plugin.top);
  g_autofree char *buffer = NULL;

  buffer = g_strdup_printf ("override define SANDSTEP_RUN :=\n%s\nendef\nexport SANDSTEP_RUN\n"
                            "override define SANDSTEP_TOP :=\n%s\nendef\nexport SANDSTEP_TOP\n",
                            plugin.run, top);
  gmk_eval (buffer, NULL);
  g_setenv ("SANDSTEP_RUN", plugin.run, TRUE);
  g_setenv ("SANDSTEP_TOP", plugin.top, TRUE);
}

/* Set in make's own environment when its run came from the tree's file, so
 * that make re-executing itself (remade makefiles: the same pid) knows its
 * SANDSTEP_RUN is still the file's, not one the user gave. */
#define RUN_FROM_FILE_ENV "SANDSTEP_RUN_FROM_FILE"

/* on_exit(3): make's exit status reaches a loaded object only this way (4.3
 * has no unload hook, and that would not get the status).  The top make's
 * success ends the run stored in the tree; a failure keeps it, so the next
 * make retries in the same run. */
static void
end_run_on_success (int status, void *data)
{
  pid_t *setup_pid = data;

  /* A child make forked that exits (a failed exec) is not make. */
  if (status == 0 && getpid () == *setup_pid)
    sandstep_run_id_finish (plugin.top, plugin.run);
}

static gboolean
init_identity (GError **error)
{
  g_autofree char *level = expand ("$(MAKELEVEL)");
  g_autofree char *curdir = expand ("$(CURDIR)");
  /* $(value): an inherited environment variable is recursive in make; the path may hold a '$'. */
  g_autofree char *inherited_top = expand ("$(value SANDSTEP_TOP)");
  g_autofree char *given_run = expand ("$(SANDSTEP_RUN)");
  g_autofree char *top = NULL;
  g_autofree char *run = NULL;
  g_autofree char *own_pid = g_strdup_printf ("%d", (int) getpid ());
  gboolean top_make = (level[0] == '\0' || strcmp (level, "0") == 0) || inherited_top[0] == '\0';
  gboolean from_file = FALSE;

  /* The top make's directory is the top; a sub-make inherits it (and the run). */
  if (top_make)
    top = g_steal_pointer (&curdir);
  else
    top = g_steal_pointer (&inherited_top);
  if (top[0] != '/' || strchr (top, '\n') != NULL || g_str_has_suffix (top, "\\"))
    {
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: the top directory '%s' must be an absolute path without a newline or a trailing "
                   "backslash",
                   top);
      return FALSE;
    }

  if (given_run[0] != '\0')
    {
      if (!sandstep_run_id_check (given_run, "SANDSTEP_RUN", error))
        return FALSE;
      run = g_steal_pointer (&given_run);
      from_file = g_strcmp0 (g_getenv (RUN_FROM_FILE_ENV), own_pid) == 0;
    }
  else
    {
      gboolean dry = is_dry_run ();
      run = sandstep_run_id_load_or_create (top, dry, error);
      if (run == NULL)
        return FALSE;
      from_file = !dry;
    }

  plugin.top = g_steal_pointer (&top);
  plugin.run = g_steal_pointer (&run);
  publish_identity ();
  if (from_file && top_make)
    {
      static pid_t setup_pid;
      setup_pid = getpid ();
      g_setenv (RUN_FROM_FILE_ENV, own_pid, TRUE);
      on_exit (end_run_on_success, &setup_pid);
    }
  return TRUE;
}

/* The helper's rule (sandstep_owner_derive()), as every front-end has it:
 * SANDSTEP_OWNER, else DAG/RUN of the run and top this make published. */
static char *
current_owner (GError **error)
{
  g_autofree char *given_owner = expand ("$(SANDSTEP_OWNER)");
  g_autofree char *given_dag = expand ("$(SANDSTEP_DAG)");
  g_autoptr(GError) local_error = NULL;
  char *owner = sandstep_owner_derive (given_owner, plugin.run, given_dag, plugin.top, NULL, &local_error);

  if (owner == NULL && local_error != NULL)
    g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY, "sandstep: %s", local_error->message);
  return owner;
}

/* OWNER/PATH, PATH being the current target ($@, empty at parse time) in the
 * current directory, relative to the top. */
static char *
current_holder (const char *owner)
{
  g_autofree char *target = expand ("$@");
  g_autofree char *curdir = expand ("$(CURDIR)");
  g_autofree char *path = sandstep_holder_path (plugin.top, curdir, target);

  return g_strconcat (owner, path[0] == '/' ? "" : "/", path, NULL);
}

static char *
current_helper (void)
{
  g_autofree char *given = expand ("$(SANDSTEP)");

  return given[0] != '\0' ? g_steal_pointer (&given) : g_strdup (plugin.default_helper);
}

/* ---- a recipe's hold on its sandboxes ----------------------------------- */

/* A target name make reads back as one target in `TARGET: VAR := ...`. */
static gboolean
is_plain_target (const char *target)
{
  return target[0] != '\0' && strpbrk (target, " \t\n:;=#%\\|$()*?[]") == NULL;
}

/* Which sandbox a call's first word names, as one key for every spelling of
 * a handle file: @box.sbx and @./box.sbx are the same sandbox. */
static char *
sandbox_key (const char *args, const char *curdir)
{
  g_autofree char *copy = g_strstrip (g_strdup (args != NULL ? args : ""));
  char *end = copy + strcspn (copy, " \t\n\r\v\f");

  *end = '\0';
  if (copy[0] == '@')
    return g_canonicalize_filename (copy + 1, curdir);
  return g_steal_pointer (&copy);
}

/* Numbers a sandbox line of the recipe being expanded and returns "PID:LINE"
 * for its --step; NULL outside a recipe.  make expands a recipe whole before
 * running its first line and builds the recipe's environment only then, so
 * the target-specific SANDSTEP_STEP_ENDS that each call redefines reaches
 * every line with the final list: each sandbox's last line in this recipe.
 * A line that is not its sandbox's last keeps the sandbox held for the
 * recipe after it ends (hooks/supervisor/sandstep-step.h). */
static char *
number_line (const char *args)
{
  g_autofree char *target = expand ("$@");
  g_autofree char *curdir = NULL;
  g_autofree char *where = NULL;
  g_autofree char *key = NULL;
  g_autoptr(GString) ends = NULL;
  g_autoptr(GString) eval = NULL;
  g_autoptr(GList) lines = NULL;
  char *token;

  if (!is_plain_target (target))
    return NULL;
  curdir = expand ("$(CURDIR)");
  where = g_strconcat (curdir, "\n", target, NULL);
  if (g_strcmp0 (where, plugin.step_target) != 0)
    {
      g_free (plugin.step_target);
      plugin.step_target = g_steal_pointer (&where);
      g_hash_table_remove_all (plugin.step_last);
    }
  key = sandbox_key (args, curdir);
  plugin.lines++;
  token = g_strdup_printf ("%d:%u", (int) getpid (), plugin.lines);
  g_hash_table_insert (plugin.step_last, g_steal_pointer (&key), g_strdup (token));

  ends = g_string_new (NULL);
  lines = g_hash_table_get_values (plugin.step_last);
  for (GList *l = lines; l != NULL; l = l->next)
    g_string_append_printf (ends, "%s%s", ends->len > 0 ? " " : "", (const char *) l->data);
  eval = g_string_new (NULL);
  g_string_append_printf (eval, "%s: override private export " SANDSTEP_STEP_ENDS_VARIABLE " := %s\n", target,
                          ends->str);
  gmk_eval (eval->str, NULL);
  return token;
}

/* ---- the functions -------------------------------------------------------- */

/* $(sandbox-OP [HANDLE] [OPTIONS][,TEXT]) for every row of the operator table. */
static char *
call_operator (const char *name, unsigned int argc, char **argv)
{
  const SandstepOperator *op = sandstep_operator_lookup (name + strlen (FUNCTION_PREFIX));
  g_autoptr(GError) error = NULL;
  g_autofree char *owner = NULL;
  g_autofree char *holder = NULL;
  g_autofree char *helper = NULL;
  g_autofree char *command = NULL;
  g_autofree char *step = NULL;
  SandstepRenderContext context;

  if (op == NULL)
    {
      g_autofree char *message = g_strdup_printf ("%s: no such operator in this sandstep", name);
      fail (message, NULL);
      return NULL;
    }
  owner = current_owner (&error);
  if (owner == NULL)
    {
      fail (error->message, NULL);
      return NULL;
    }
  holder = current_holder (owner);
  helper = current_helper ();
  if ((op->flags & SANDSTEP_OP_CLAIMS) && (op->flags & SANDSTEP_OP_HANDLE))
    step = number_line (argc > 0 ? argv[0] : "");
  context = (SandstepRenderContext) { .helper = helper, .owner = owner, .holder = holder, .step = step };
  command = sandstep_render (op, argc > 0 ? argv[0] : "", argc > 1 ? argv[1] : NULL, &context, &error);
  if (command == NULL)
    {
      fail (error->message, NULL);
      return NULL;
    }
  return to_make (command);
}

static gboolean
check_no_arguments (const char *name, unsigned int argc, char **argv)
{
  g_autofree char *given = argc > 0 ? g_strstrip (g_strdup (argv[0])) : g_strdup ("");
  g_autofree char *message = NULL;

  if (argc <= 1 && given[0] == '\0')
    return TRUE;
  message = g_strdup_printf ("%s takes no arguments (got '%s%s%s'); write $(%s ) with the space", name,
                             argc > 0 ? argv[0] : "", argc > 1 ? "," : "", argc > 1 ? argv[1] : "", name);
  fail (message, NULL);
  return FALSE;
}

/* $(sandbox-run-id ) */
static char *
call_run_id (const char *name, unsigned int argc, char **argv)
{
  if (!check_no_arguments (name, argc, argv))
    return NULL;
  return to_make (plugin.run);
}

/* $(sandbox-holder ) */
static char *
call_holder (const char *name, unsigned int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *owner = NULL;
  g_autofree char *holder = NULL;

  if (!check_no_arguments (name, argc, argv))
    return NULL;
  owner = current_owner (&error);
  if (owner == NULL)
    {
      fail (error->message, NULL);
      return NULL;
    }
  holder = current_holder (owner);
  return to_make (holder);
}

/* make reads $(NAME) with no space after the name as a variable reference, not
 * a call, and an undefined variable expands to nothing (a recipe would write
 * an empty handle).  A variable may share a function's name, so each
 * function gets a variable of its name whose expansion stops make, naming
 * the fix.  It is never exported (a '-' in its name), and one the makefile
 * defines itself wins. */
static void
define_no_space_trap (const char *function, gboolean takes_arguments)
{
  g_autofree char *buffer = NULL;

  buffer = g_strdup_printf ("ifeq ($(origin %s),undefined)\n"
                            "define %s\n"
                            "$(error %s: '$$(%s)', with no space after the name, is a make variable reference, "
                            "not a call, and expands to nothing; write '$$(%s )'%s)\n"
                            "endef\n"
                            "endif\n",
                            function, function, function, function, function,
                            takes_arguments ? " or give it its arguments after a space" : " with the space");
  gmk_eval (buffer, NULL);
}

static void
register_functions (void)
{
  gsize n_operators = 0;
  const SandstepOperator *operators = sandstep_operators (&n_operators);

  /* make keeps the name pointers: they live as long as the process. */
  for (gsize i = 0; i < n_operators; i++)
    {
      char *function = g_strconcat (FUNCTION_PREFIX, operators[i].name, NULL);
      gmk_add_function (function, call_operator, 0, 2, GMK_FUNC_DEFAULT);
      define_no_space_trap (function, TRUE);
    }
  gmk_add_function (FUNCTION_PREFIX "run-id", call_run_id, 0, 1, GMK_FUNC_DEFAULT);
  gmk_add_function (FUNCTION_PREFIX "holder", call_holder, 0, 1, GMK_FUNC_DEFAULT);
  define_no_space_trap (FUNCTION_PREFIX "run-id", FALSE);
  define_no_space_trap (FUNCTION_PREFIX "holder", FALSE);
}

static int
setup (const gmk_floc *floc)
{
  g_autoptr(GError) error = NULL;

  if (plugin.registered)
    return -1;
  plugin.registered = TRUE;
  plugin.default_helper = find_default_helper ();
  plugin.step_last = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (!init_identity (&error))
    {
      fail (error->message, floc);
      return 0;
    }
  register_functions ();
  /* -1: loaded, and not a target make should try to remake. */
  return -1;
}

#ifdef GMK_ABI_VERSION
int
sandstep_gmk_setup (unsigned int abi, const gmk_floc *floc)
{
  return setup (floc);
}
#else
int
sandstep_gmk_setup (const gmk_floc *floc)
{
  return setup (floc);
}
#endif
