/* sandstep-tool-schema.h: a tool's definition as MCP and the chat API read it.
 *
 * Every tool is an object {name, title, description, inputSchema {type
 * object, no additional properties, properties, required}, annotations}:
 * begin writes up to the properties, the caller adds them, end closes it.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

void sandstep_tool_definition_begin (JsonBuilder *b, const char *name, const char *title, const char *description);

/* Ends inputSchema with its @required list (NULL-terminated), adds the
 * annotations (pairs of a name and a gboolean, NULL-terminated), and ends the tool. */
void sandstep_tool_definition_end (JsonBuilder *b, const char *const *required, ...) G_GNUC_NULL_TERMINATED;

G_END_DECLS
