/* sandstep-tool-args.h: a tool call's arguments, read as the model sent them.
 *
 * A missing or mistyped argument is not an error of ours but a message for
 * the model (*message, newly allocated, and FALSE), naming the tool as the
 * model knows it and an example of a right call.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* One call's arguments: the tool by its own name (for the example of a right call), as the model knows it
 * (a prefix may come first), and what the model sent (NULL for none). */
typedef struct {
  const char *tool;
  const char *shown;
  JsonObject *args;
} SandstepToolArgs;

/* A string argument; *out NULL when absent (or null, for an optional one). */
gboolean sandstep_tool_arg_string (const SandstepToolArgs *call, const char *name, gboolean required, const char **out,
                                   char **message);

/* A number argument (numeric strings accepted, as lax JSON-schema validators do), a whole one if @whole;
 * *out_given FALSE when absent or null.  @type words it for the model ("a number"). */
gboolean sandstep_tool_arg_number (const SandstepToolArgs *call, const char *name, const char *type, gboolean whole,
                                   gboolean *out_given, double *out, char **message);

G_END_DECLS
