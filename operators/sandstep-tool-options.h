/* sandstep-tool-options.h: the options of every operator that serves the agent tools.
 *
 * agent, mcp, tools and call (and their make forms) take the same six,
 * the knobs of Airflow's SandboxToolset: the default and the longest
 * command budget, the lines and bytes kept of each output, the largest file
 * read_file reads, and a prefix for the tools' names.  Each value is checked
 * by its kind (sandstep_option_check()): budgets positive and finite, counts
 * and sizes whole and above 0, the prefix an identifier; and the default
 * budget must not exceed the longest, checked here, by the helper and the
 * make plugin alike.
 */
#pragma once

#include <glib.h>

#include "sandstep-operator.h"
#include "sandstep-tools.h"

G_BEGIN_DECLS

/* The rows, for the operator table (sandstep-operators.c). */
#define SANDSTEP_TOOL_OPTION_ROWS                                                                                      \
  { "command-timeout", SANDSTEP_OPTION_SECONDS, FALSE, NULL,                                                           \
    "run_command's budget when the model names none (default 60)" },                                                  \
  { "max-command-timeout", SANDSTEP_OPTION_SECONDS, FALSE, NULL,                                                       \
    "the longest budget a model may ask of run_command (default 300); not below command-timeout" },                  \
  { "max-output-lines", SANDSTEP_OPTION_COUNT, FALSE, NULL,                                                            \
    "lines kept of each output stream, file window and listing (default 2000)" },                                     \
  { "max-output-bytes", SANDSTEP_OPTION_SIZE, FALSE, NULL,                                                             \
    "bytes kept of each output stream, file window and listing (default 50K)" },                                      \
  { "max-read-bytes", SANDSTEP_OPTION_SIZE, FALSE, NULL, "the largest file read_file reads (default 5M)" },            \
  { "prefix", SANDSTEP_OPTION_IDENTIFIER, FALSE, NULL,                                                                 \
    "name the tools PREFIX_run_command, PREFIX_read_file, ... (an identifier: a letter or '_', then letters, "        \
    "digits and '_')", "PREFIX" }

/* The default budget against the longest, each as given (NULL: not given,
 * its default applies); the message names both and what to change. */
gboolean sandstep_tool_timeouts_check (const char *default_text, const char *max_text, GError **error);

/* The tool options of @invocation into @limits (defaults first); the
 * prefix points into @invocation, which must outlive @limits. */
gboolean sandstep_tool_options_parse (SandstepInvocation *invocation, SandstepToolLimits *limits, GError **error);

G_END_DECLS
