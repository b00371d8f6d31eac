/* sandstep-operator.h: the operators, their options, and one invocation of one.
 *
 * The operator table (sandstep-operators.c) is the single truth for what the
 * `sandstep` helper accepts: the helper parses its command line against it,
 * the make plugin validates `key=value` options against the same rows with the
 * same value checkers, and `sandstep --help` is printed from it.
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"
#include "sandstep-units.h"

G_BEGIN_DECLS

typedef enum {
  SANDSTEP_OPTION_STRING,     /* any non-empty text */
  SANDSTEP_OPTION_DURATION,   /* seconds, or a number with s, m, h or d; > 0 */
  SANDSTEP_OPTION_KEEP,       /* a duration, or 0 */
  SANDSTEP_OPTION_SECONDS,    /* a positive finite number of seconds */
  SANDSTEP_OPTION_WAIT,       /* a finite number of seconds >= 0 */
  SANDSTEP_OPTION_COUNT,      /* a whole number >= 1 */
  SANDSTEP_OPTION_SIZE,       /* bytes, or a number with K, M or G (binary); > 0 */
  SANDSTEP_OPTION_CHOICE,     /* one of the words in .choices, separated by '|' */
  SANDSTEP_OPTION_FLAG,       /* no value on the command line; a bare word in make */
  SANDSTEP_OPTION_IDENTIFIER, /* a letter or '_', then letters, digits and '_' (sandstep_tool_prefix_is_valid()) */
} SandstepOptionKind;

typedef struct {
  const char *name;           /* --NAME=VALUE on the command line, NAME=VALUE in make */
  SandstepOptionKind kind;
  gboolean repeatable;
  const char *choices;        /* SANDSTEP_OPTION_CHOICE only */
  const char *help;
  const char *metavar;        /* what the value is, in usage: FILE in --to=FILE (NULL: from the kind) */
} SandstepOption;

typedef enum {
  SANDSTEP_OP_HANDLE = 1 << 0,   /* works on one sandbox: --handle is required */
  SANDSTEP_OP_CLAIMS = 1 << 1,   /* holds the sandbox while it works: --wait applies */
  SANDSTEP_OP_SERVES = 1 << 2,   /* a server its client starts: a sandbox it cannot reach is reported to that
                                  * client (invocation->unreachable), not by exiting before it is asked */
  SANDSTEP_OP_ANYONES = 1 << 3,  /* works on sandboxes or images whoever owns them (--owner only narrows it): no
                                  * owner is derived from the run, so a script may call it with only SANDSTEP_RUN
                                  * set, as after make */
} SandstepOperatorFlags;

/* What the free text of a make call ($(sandbox-NAME HANDLE OPTIONS,TEXT)) becomes. */
typedef enum {
  SANDSTEP_TEXT_NONE,         /* the operator takes no text */
  SANDSTEP_TEXT_COMMAND,      /* one word after "--": a shell command or a prompt */
  SANDSTEP_TEXT_WORDS,        /* split at whitespace into operands: paths, PATH=URL pairs */
} SandstepTextKind;

typedef struct _SandstepInvocation SandstepInvocation;
typedef struct _SandstepOperator SandstepOperator;

struct _SandstepOperator {
  const char *name;
  SandstepOperatorFlags flags;
  const SandstepOption *options;  /* ends with a row whose name is NULL */
  SandstepTextKind text;
  const char *operands;           /* usage of the positional arguments, e.g. "-- COMMAND" */
  const char *summary;
  /* Does the work; *out_exit is the helper's exit status when it returns TRUE. */
  gboolean (*run) (SandstepInvocation *invocation, int *out_exit, GError **error);
  /* May be NULL.  TRUE: this invocation needs what only sandstep-net links
   * (an export to s3://), and the lean helper execs it, as for a NULL run. */
  gboolean (*needs_net) (SandstepInvocation *invocation);
};

struct _SandstepInvocation {
  const SandstepOperator *op;
  GHashTable *values;         /* option name -> GPtrArray of char * (raw text, in order) */
  GPtrArray *operands;        /* char * */
  SandstepIdentity who;       /* owner and holder, defaults applied */
  char *handle;               /* resolved from --handle (a literal or @FILE) */
  SandstepBackend *backend;
  GError *unreachable;        /* SANDSTEP_OP_SERVES: why no backend could be opened (backend is NULL) */
};

/* The table, sorted by name. */
const SandstepOperator *sandstep_operators (gsize *n_operators);
const SandstepOperator *sandstep_operator_lookup (const char *name);
/* The options every operator takes (owner, holder), and those of handle and claiming operators. */
const SandstepOption *sandstep_option_lookup (const SandstepOperator *op, const char *name);

/* Checks @value against @option's kind; the message names the option, the
 * value in quotes and the accepted values. */
gboolean sandstep_option_check (const SandstepOption *option, const char *value, GError **error);

/* Parses argv (after the operator's name) into an invocation. */
SandstepInvocation *sandstep_invocation_parse (const SandstepOperator *op, int argc, char **argv, GError **error);
void sandstep_invocation_free (SandstepInvocation *invocation);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepInvocation, sandstep_invocation_free)

/* The last value given for @name, or NULL. */
const char *sandstep_invocation_get (SandstepInvocation *invocation, const char *name);
GPtrArray *sandstep_invocation_get_all (SandstepInvocation *invocation, const char *name);
gboolean sandstep_invocation_has (SandstepInvocation *invocation, const char *name);

/* Reads and checks a handle given as text or as @FILE. */
char *sandstep_resolve_handle (const char *given, GError **error);

/* Attaches to the invocation's sandbox, printing one line while it waits. */
SandstepAttachment *sandstep_invocation_attach (SandstepInvocation *invocation, GError **error);
/* The invocation's sandbox runs @request as one step (sandstep_backend_run_step()), waiting as attach does. */
gboolean sandstep_invocation_run_step (SandstepInvocation *invocation, const SandstepRunRequest *request,
                                       SandstepRanFunc on_ran, gpointer ran_data, GError **error);

/* What `sandstep run` says after its command: a line for each limit it hit
 * and for a timeout, appended to @out.  Returns the exit status: the
 * command's, or SANDSTEP_EXIT_TIMEOUT.  @timeout_text: --timeout as given. */
int sandstep_run_report (const SandstepSpec *spec, const char *timeout_text, const SandstepRunResult *result,
                         GString *out);

/* USER@HOST followed by @suffix: who runs sandstep when nothing says otherwise. */
char *sandstep_identity_fallback (const char *suffix);

/* The owner of a step, by the one rule of every front-end (sandstep_step_owner()
 * in hooks/sandstep-owner-libc.h): @owner (SANDSTEP_OWNER), else DAG/RUN of @run,
 * @dag and @top, else a copy of @fallback.  NULL with @error set when the
 * environment says a run but not a valid one. */
char *sandstep_owner_derive (const char *owner, const char *run, const char *dag, const char *top,
                             const char *fallback, GError **error);


/* Usage text of @op (or of the whole helper for NULL). */
char *sandstep_operator_usage (const SandstepOperator *op);

/* What @option's value is, as usage and man pages write it: "FILE",
 * "DURATION", "none|open|allow"; NULL for a flag. */
const char *sandstep_option_metavar (const SandstepOption *option);

/* The options @op takes besides its own, in the order usage shows them:
 * the handle, its own, the claim's, the identity's.  @n_groups gets 4. */
const SandstepOption *const *sandstep_operator_option_groups (const SandstepOperator *op, gsize *n_groups);

/* The operators' run functions, one file each. */
/* Offers run_python on @toolbox (sandstep-python-offer.c): checks that the
 * sandbox has python3, reads --python-budget (@budget, NULL: the default),
 * and prints the details of failures on sandstep's side as "sandstep
 * @program: ..." on stderr. */
typedef struct _SandstepToolbox SandstepToolbox;
gboolean sandstep_offer_python (SandstepToolbox *toolbox, SandstepAttachment *attachment, const char *budget,
                                const char *program, GError **error);

gboolean sandstep_op_agent (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_call (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_describe (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_checkpoint (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_destroy (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_fork (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_export (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_export_needs_net (SandstepInvocation *invocation);
gboolean sandstep_op_gc (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_get (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_list (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_ls (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_mcp (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_provision (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_put (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_rollback (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_release (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_run (SandstepInvocation *invocation, int *out_exit, GError **error);
gboolean sandstep_op_tools (SandstepInvocation *invocation, int *out_exit, GError **error);

G_END_DECLS
