/* sandstep-main.c: the `sandstep` helper that every operator runs as.
 *
 * It decides what to print: library code returns GErrors, and this maps
 * each to one line on stderr and the exit status documented in docs/reference.md.
 */
#include <errno.h>
#include <locale.h>
#include <unistd.h>
#include <signal.h>
#include <string.h>

#include "sandstep-backend-open.h"
#include "sandstep-error.h"
#include "sandstep-local.h"
#include "sandstep-operator.h"

/* What to do next in make's terms, when a recipe's handle file names a
 * sandbox that is gone or is another run's: make must make that file again.
 * Only under make (MAKELEVEL is in every recipe's environment) and for a
 * handle read from a file; NULL otherwise. */
static char *
make_hint (SandstepInvocation *invocation, const GError *error)
{
  const char *given = invocation != NULL ? sandstep_invocation_get (invocation, "handle") : NULL;

  if (given == NULL || given[0] != '@' || g_getenv ("MAKELEVEL") == NULL || error->domain != SANDSTEP_SANDBOX_ERROR)
    return NULL;
  switch (error->code)
    {
    case SANDSTEP_SANDBOX_ERROR_NOT_FOUND:
    case SANDSTEP_SANDBOX_ERROR_EXPIRED:
      return g_strdup_printf ("In make: remove '%s' (or run make clean) and run make again; the target that "
                              "writes it provisions a new sandbox", given + 1);
    case SANDSTEP_SANDBOX_ERROR_NOT_OWNER:
      return g_strdup_printf ("In make: '%s' holds a sandbox of another run (SANDSTEP_RUN, or a removed "
                              ".sandstep/run, started a new one); remove it (or run make clean) and run make "
                              "again, or run make with the run that made it", given + 1);
    default:
      return NULL;
    }
}

static int
fail (const char *op_name, SandstepInvocation *invocation, GError *error)
{
  g_autofree char *hint = make_hint (invocation, error);
  /* One line, whatever a value quoted in it holds. */
  g_autofree char *shown = sandstep_escape (error->message, -1, 0, SANDSTEP_ESCAPE_LINE);
  g_autofree char *shown_hint = hint != NULL ? sandstep_escape (hint, -1, 0, SANDSTEP_ESCAPE_LINE) : NULL;

  g_printerr ("sandstep %s: %s%s%s\n", op_name, shown, hint != NULL ? ". " : "", hint != NULL ? shown_hint : "");
  return sandstep_error_exit_status (error);
}

/* The operators that speak HTTP live in sandstep-net, beside this program
 * in a build tree, else in libexecdir; see sandstep-operators.c. */
static int
exec_net (const char *op_name, char **argv)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  g_autofree char *beside = dir != NULL ? g_build_filename (dir, "sandstep-net", NULL) : NULL;
  const char *candidates[] = { beside, SANDSTEP_LIBEXECDIR "/sandstep-net" };

  /* sandstep-net lacking what it is run for would exec itself for ever. */
  if (self != NULL && g_str_has_suffix (self, "/sandstep-net"))
    {
      g_printerr ("sandstep %s: '%s' lacks what this %s needs; reinstall sandstep\n", op_name, self, op_name);
      return SANDSTEP_EXIT_INTERNAL;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (candidates); i++)
    if (candidates[i] != NULL && g_file_test (candidates[i], G_FILE_TEST_IS_EXECUTABLE))
      {
        execv (candidates[i], argv);
        g_printerr ("sandstep %s: could not run '%s': %s\n", op_name, candidates[i], g_strerror (errno));
        return SANDSTEP_EXIT_INTERNAL;
      }
  g_printerr ("sandstep %s: this operator needs sandstep-net, found neither beside '%s' nor in '%s'; "
              "reinstall sandstep\n", op_name, self ? self : "sandstep", SANDSTEP_LIBEXECDIR);
  return SANDSTEP_EXIT_INTERNAL;
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepInvocation) invocation = NULL;
  const SandstepOperator *op;
  int exit_status = SANDSTEP_EXIT_INTERNAL;

  setlocale (LC_ALL, "");
  /* A closed reader (| head) ends us quietly, as it would any filter. */
  signal (SIGPIPE, SIG_DFL);

  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      g_autofree char *usage = sandstep_operator_usage (NULL);
      g_print ("%s", usage);
      return argc < 2 ? SANDSTEP_EXIT_USAGE : 0;
    }
  /* `sandstep help [OPERATOR]`: the same text as --help. */
  if (strcmp (argv[1], "help") == 0)
    {
      g_autofree char *usage = NULL;
      if (argc > 3 || (argc == 3 && sandstep_operator_lookup (argv[2]) == NULL))
        {
          g_printerr ("sandstep help: %s%s%s; see 'sandstep help' for the operators\n",
                      argc > 3 ? "give at most one operator" : "unknown operator '", argc > 3 ? "" : argv[2],
                      argc > 3 ? "" : "'");
          return SANDSTEP_EXIT_USAGE;
        }
      usage = sandstep_operator_usage (argc == 3 ? sandstep_operator_lookup (argv[2]) : NULL);
      g_print ("%s", usage);
      return 0;
    }
  if (strcmp (argv[1], "--version") == 0)
    {
      g_print ("sandstep %s\n", SANDSTEP_VERSION);
      return 0;
    }
  /* Not operators: what a sandbox's supervisor starts (hooks/local/sandstep-local.h). */
  if (strcmp (argv[1], "--egress") == 0 && argc == 3)
    return sandstep_local_egress_main (argv[2]);
  if (strcmp (argv[1], "--reclaim") == 0 && argc == 3)
    return sandstep_local_reclaim_main (argv[2]);
  op = sandstep_operator_lookup (argv[1]);
  if (op == NULL)
    {
      g_autofree char *name = sandstep_escape (argv[1], -1, 64, SANDSTEP_ESCAPE_VALUE);

      g_printerr ("sandstep: unknown operator '%s'; see 'sandstep --help' for the list\n", name);
      return SANDSTEP_EXIT_USAGE;
    }
  for (int i = 2; i < argc && strcmp (argv[i], "--") != 0; i++)
    if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0)
      {
        g_autofree char *usage = sandstep_operator_usage (op);
        g_print ("%s", usage);
        return 0;
      }

  invocation = sandstep_invocation_parse (op, argc - 2, argv + 2, &error);
  if (invocation == NULL)
    return fail (op->name, NULL, error);
  if (op->run == NULL || (op->needs_net != NULL && op->needs_net (invocation)))
    return exec_net (op->name, argv);
  /* --state-dir is SANDSTEP_STATE_DIR, for clients that start us with a minimal environment (MCP's). */
  if (sandstep_invocation_get (invocation, "state-dir") != NULL)
    g_setenv ("SANDSTEP_STATE_DIR", sandstep_invocation_get (invocation, "state-dir"), TRUE);
  /* Remote when --backend (or $SANDSTEP_BACKEND) is a sandstepd URL or the handle names a server. */
  invocation->backend = sandstep_backend_open (sandstep_invocation_get (invocation, "backend"), invocation->handle,
                                               &error);
  if (invocation->backend == NULL && (op->flags & SANDSTEP_OP_SERVES) != 0)
    invocation->unreachable = g_steal_pointer (&error);
  else if (invocation->backend == NULL)
    return fail (op->name, invocation, error);
  if (!op->run (invocation, &exit_status, &error))
    return fail (op->name, invocation, error);
  return exit_status;
}
