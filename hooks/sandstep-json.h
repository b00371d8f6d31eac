/* sandstep-json.h: JSON that crosses a trust boundary, checked before it is parsed.
 *
 * json-glib recurses once per level of nesting and has no limit: a document
 * of 200 KB of '[' overflows the stack of whoever parses it.  So every JSON
 * text that comes from outside the process (MCP messages, sandstepd's bodies
 * and answers, its worker channel, chat replies, records and claims on disk)
 * is checked for size and depth first, by one scan that parses nothing, and
 * refused with an error that says which limit it broke.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Arrays and objects nest at most this deep; sandstep's own documents need 8. */
#define SANDSTEP_JSON_MAX_DEPTH 64

/* TRUE if @data (@len bytes) is at most @max_bytes long and nests at most
 * SANDSTEP_JSON_MAX_DEPTH deep; else JSON_PARSER_ERROR_INVALID_DATA saying
 * which limit, and where. */
gboolean sandstep_json_check (const char *data, gsize len, gsize max_bytes, GError **error);

/* sandstep_json_check(), then the document (a new reference), or NULL with
 * json-glib's error or the check's. */
JsonNode *sandstep_json_parse (const char *data, gsize len, gsize max_bytes, GError **error);

/* The document in the file @path: a regular file (opened without blocking,
 * without following a final link) of at most @max_bytes, checked, then
 * parsed.  A file that cannot be opened is a G_FILE_ERROR from its errno. */
JsonNode *sandstep_json_load_file (const char *path, gsize max_bytes, GError **error);

G_END_DECLS
