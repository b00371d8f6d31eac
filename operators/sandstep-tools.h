/* sandstep-tools.h: the agent tools over one attached sandbox.
 *
 * run_command, read_file, write_file and list_directory (and, when offered,
 * run_python: sandstep-python.h), with the model-facing
 * behaviour of Apache Airflow's sandbox toolset: output bounded per stream
 * (we keep the head and the tail, with a count of what was left out; the
 * contract keeps the tail), in bounded memory, secrets masked before any cut, file windows
 * with a next-offset hint, timeouts checked and clamped, and the notes in
 * run_command's description.  The text rules and the decisions on the
 * contract's quirks are in sandstep-output.h.
 * Both our agent loop (op-agent.c, hooks/llm/sandstep-agent.c) and the MCP
 * server (op-tools.c, sandstep-mcp.c) serve
 * exactly these tools through this one interface.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-backend.h"
#include "sandstep-python.h"
#include "sandstep-tool-python.h"

G_BEGIN_DECLS

typedef struct {
  gsize max_output_lines;     /* per stream; default 2000 */
  gsize max_output_bytes;     /* per stream; default 50 KiB */
  gsize max_read_bytes;       /* read_file; default 5 MiB */
  double default_timeout_s;   /* run_command without timeout_seconds; default 60 */
  double max_timeout_s;       /* default 300 */
  /* Not limits, but set with them: */
  const char *prefix;         /* NULL or "": the tools' own names; else PREFIX_run_command, ... (copied) */
  const char *const *exports; /* NULL-terminated sandbox paths copied out when the run ends well, named in
                               * run_command's description; NULL: none (copied) */
} SandstepToolLimits;

void sandstep_tool_limits_init (SandstepToolLimits *limits);

/* The longest prefix: "PREFIX_list_directory" stays within OpenAI's 64 characters. */
#define SANDSTEP_TOOL_PREFIX_MAX 48

/* TRUE when @prefix is an identifier: an ASCII letter or '_', then letters,
 * digits and '_', at most SANDSTEP_TOOL_PREFIX_MAX in all. */
gboolean sandstep_tool_prefix_is_valid (const char *prefix);
/* Limits must be >= 1, timeouts positive and finite, default <= max, the
 * prefix an identifier (SANDSTEP_OPTION_IDENTIFIER); the messages name the
 * options of the command line (command-timeout, max-command-timeout, ...). */
gboolean sandstep_tool_limits_check (const SandstepToolLimits *limits, GError **error);

typedef struct _SandstepToolbox SandstepToolbox;

/* @attachment stays owned by the caller and must outlive the toolbox.
 * Secret values to mask come from the sandbox's spec.  NULL: a sandbox that
 * could not be reached, whose toolbox only describes the tools (no call may
 * be made on it). */
SandstepToolbox *sandstep_toolbox_new (SandstepAttachment *attachment, const SandstepToolLimits *limits);
void sandstep_toolbox_free (SandstepToolbox *toolbox);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepToolbox, sandstep_toolbox_free)

/* The tool definitions as MCP `tools/list` entries (name, title, description,
 * inputSchema, outputSchema where the tool has one, annotations); for OpenAI put inputSchema under
 * function.parameters. */
JsonArray *sandstep_toolbox_definitions (SandstepToolbox *toolbox);

/* Calls tool @name with @arguments (a JSON object; NULL counts as {}).
 * Returns the text for the model.  A recoverable failure (bad argument,
 * missing file, unknown tool) returns its message with *out_is_error set;
 * a terminal one (the sandbox is gone, the backend failed) returns NULL and
 * sets @error, and should end the run. */
char *sandstep_toolbox_call (SandstepToolbox *toolbox, const char *name, JsonObject *arguments,
                             gboolean *out_is_error, GError **error);

/* As sandstep_toolbox_call(); *@out_structured (may be NULL) also gets the
 * result as data matching the tool's outputSchema (MCP structuredContent),
 * masked as the text is; NULL for a tool without one and for an isError
 * result.  One call at a time per toolbox. */
char *sandstep_toolbox_call_structured (SandstepToolbox *toolbox, const char *name, JsonObject *arguments,
                                        gboolean *out_is_error, JsonNode **out_structured, GError **error);

/* Offers a fifth tool, run_python: one Python interpreter kept alive in the
 * sandbox until the toolbox is freed (sandstep-python.h).  Check first that
 * the sandbox has python3 (sandstep_python_available()). */
void sandstep_toolbox_enable_python (SandstepToolbox *toolbox, const SandstepPythonLimits *limits);

/* Where details the model must not read go (run_python's failures on
 * sandstep's side): the executable prints them on stderr. */
void sandstep_toolbox_set_notice (SandstepToolbox *toolbox, SandstepToolNotice notice, gpointer user_data);

/* Ends every later command's budget by @deadline_us (g_get_monotonic_time()
 * clock; 0: no deadline), as it is already ended by the sandbox's lifetime:
 * an agent's time budget. */
void sandstep_toolbox_set_deadline (SandstepToolbox *toolbox, gint64 deadline_us);

/* The name the model calls the tool @base ("run_command", ...) by: the
 * prefixed one when a prefix is set.  Owned by @toolbox. */
const char *sandstep_toolbox_tool_name (SandstepToolbox *toolbox, const char *base);

/* The tools' names, "A, B, C and D", for texts that list them. */
char *sandstep_toolbox_tool_list (SandstepToolbox *toolbox);

/* @text with the sandbox's secrets masked ("***"), for texts the caller shows
 * or logs itself (error messages, transcripts). */
char *sandstep_toolbox_mask (SandstepToolbox *toolbox, const char *text);

G_END_DECLS
