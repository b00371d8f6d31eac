/* sandstep-tool-structured.h: run_command's result as data (MCP outputSchema and structuredContent). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

/* run_command's outputSchema: exitCode, timedOut, timeoutSeconds, ended,
 * signal, stdout, stderr, outputTruncated. */
JsonNode *sandstep_command_output_schema (void);

/* The structuredContent of one command that ran: @out and @err as the text
 * shows them (bounded and masked already; NULL: empty), @out_cut / @err_cut
 * whether part of each was left out, @timeout_s the timeout that applied. */
JsonNode *sandstep_command_structured (const char *out, gboolean out_cut, const char *err, gboolean err_cut,
                                       const SandstepRunResult *result, double timeout_s);

G_END_DECLS
