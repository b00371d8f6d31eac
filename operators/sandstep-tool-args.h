/* sandstep-tool-args.h: a tool call's arguments, read as the model sent them.
 *
 * A missing or mistyped argument is not an error of ours but a message for
 * the model (*message, newly allocated, and FALSE), naming the tool as the
 * model knows it and an example of a right call.
 */
#pragma once

#include <json-glib/json-glib.h>

#include "sandstep-tools.h"

G_BEGIN_DECLS

/* A string argument; *out NULL when absent (or null, for an optional one). */
gboolean sandstep_tool_arg_string (SandstepToolbox *toolbox, const char *tool, JsonObject *args, const char *name,
                                   gboolean required, const char **out, char **message);

/* A number argument (numeric strings accepted, as lax JSON-schema validators do), a whole one if @whole;
 * *out_given FALSE when absent or null.  @type words it for the model ("a number"). */
gboolean sandstep_tool_arg_number (SandstepToolbox *toolbox, const char *tool, JsonObject *args, const char *name,
                                   const char *type, gboolean whole, gboolean *out_given, double *out,
                                   char **message);

G_END_DECLS
