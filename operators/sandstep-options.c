/* sandstep-options.c: the options every operator of a kind takes (sandstep-operators.c has each one's own), and
 * looking one up, which the command line, the make plugin and the Slurm plugin all do. */
#include "sandstep-operator.h"
#include "sandstep-options-private.h"

#include <string.h>

const SandstepOption sandstep_no_options[] = {
  { NULL }
};

/* Taken by every operator. */
const SandstepOption sandstep_identity_options[] = {
  { "owner",     SANDSTEP_OPTION_STRING,    FALSE, NULL,         "the run that owns sandboxes (default $SANDSTEP_OWNER, else $SANDSTEP_DAG/$SANDSTEP_RUN when the run is set, else USER@HOST; gc, list, images and pull act on every owner's, and list --owner shows only OWNER's)", "OWNER" },
  { "holder",    SANDSTEP_OPTION_STRING,    FALSE, NULL,         "who is using the sandbox (default $SANDSTEP_HOLDER, else USER@HOST/cli)", "HOLDER" },
  { "backend",   SANDSTEP_OPTION_STRING,    FALSE, NULL,         "local, or a sandstepd URL http(s)://HOST:PORT (default $SANDSTEP_BACKEND, else local; a handle naming a server picks it); token from $SANDSTEP_TOKEN or $SANDSTEP_TOKEN_FILE", "URL" },
  { NULL }
};

const SandstepOption sandstep_handle_options[] = {
  { "handle",    SANDSTEP_OPTION_STRING,    FALSE, NULL,         "the sandbox: a handle, or @FILE holding one (default $SANDSTEP_HANDLE)", "HANDLE" },
  { NULL }
};

const SandstepOption sandstep_claim_options[] = {
  { "wait",      SANDSTEP_OPTION_WAIT,      FALSE, NULL,         "seconds to wait while another holder uses the sandbox (default 600, and 0 for mcp: its client hears of the holder at once; 0: refuse at once)" },
  { "step",      SANDSTEP_OPTION_STRING,    FALSE, NULL,         "set by the make plugin: this line's number in a recipe of the make PID; the sandbox stays held from the recipe's first sandbox line to its last ($SANDSTEP_STEP_ENDS names the last ones)", "PID:LINE" },
  { NULL }
};

static const SandstepOption *
find_in (const SandstepOption *options, const char *name)
{
  for (; options->name != NULL; options++)
    if (strcmp (options->name, name) == 0)
      return options;
  return NULL;
}

const SandstepOption *
sandstep_option_lookup (const SandstepOperator *op, const char *name)
{
  const SandstepOption *option = find_in (op->options, name);

  if (option == NULL)
    option = find_in (sandstep_identity_options, name);
  if (option == NULL && (op->flags & SANDSTEP_OP_HANDLE))
    option = find_in (sandstep_handle_options, name);
  if (option == NULL && (op->flags & SANDSTEP_OP_CLAIMS))
    option = find_in (sandstep_claim_options, name);
  return option;
}

const char *
sandstep_option_metavar (const SandstepOption *option)
{
  if (option->metavar != NULL)
    return option->metavar;
  switch (option->kind)
    {
    case SANDSTEP_OPTION_FLAG:
      return NULL;
    case SANDSTEP_OPTION_CHOICE:
      return option->choices;
    case SANDSTEP_OPTION_DURATION:
    case SANDSTEP_OPTION_KEEP:
      return "DURATION";
    case SANDSTEP_OPTION_SECONDS:
    case SANDSTEP_OPTION_WAIT:
      return "SECONDS";
    case SANDSTEP_OPTION_SIZE:
      return "SIZE";
    case SANDSTEP_OPTION_COUNT:
      return "N";
    case SANDSTEP_OPTION_STRING:
      return "TEXT";
    case SANDSTEP_OPTION_IDENTIFIER:
      return "NAME";
    }
  return "VALUE";
}
