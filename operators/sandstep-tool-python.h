/* sandstep-tool-python.h: the run_python tool (definition, arguments, what the model reads). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-output.h"
#include "sandstep-python.h"

G_BEGIN_DECLS

/* Receives one line of details the model must not read (a failure on sandstep's side). */
typedef void (*SandstepToolNotice) (const char *line, gpointer user_data);

/* run_python's tools/list entry, named @name (the prefix applied), with its
 * limits in the description and an outputSchema; @run_name is run_command's
 * name, which its texts mention. */
JsonNode *sandstep_tool_python_definition (const char *name, const SandstepPythonLimits *limits, const char *run_name);

/* One run_python call: the text for the model (masked with @masker, each
 * part bounded to @max_lines / @max_bytes); *@out_is_error for a refusal or a
 * failure on sandstep's side, whose details go to @notice.
 * @remaining_s: the sandbox's lifetime or the agent's deadline left.
 * *@out_structured (may be NULL): the result as data, when not an error. */
char *sandstep_tool_run_python (SandstepPythonSession *session, const char *name, const char *run_name,
                                const SandstepMasker *masker, gsize max_lines, gsize max_bytes, double remaining_s,
                                JsonObject *args, gboolean *out_is_error, JsonNode **out_structured,
                                SandstepToolNotice notice, gpointer notice_data);

G_END_DECLS
