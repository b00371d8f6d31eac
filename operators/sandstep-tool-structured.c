/* sandstep-tool-structured.c: run_command's result as data, for MCP's outputSchema and structuredContent.
 *
 * The text the model reads stays what sandstep-texts.c renders; this is the
 * same result for a client that wants fields (MCP 2025-06-18 and later): the
 * streams exactly as the text shows them (bounded and masked), the exit code,
 * whether it timed out, whether a stream was cut, and why it ended.
 */
#include "sandstep-tool-structured.h"

#include <string.h>

#include "sandstep-run-report.h"

/* JSON Schema 2020-12 (MCP's default since 2025-11-25), and plain enough for
 * the SDKs' validators (ajv) of the older revisions. */
static const char command_output_schema[] =
  "{"
  "\"type\": \"object\","
  "\"properties\": {"
  "  \"exitCode\": {\"type\": [\"integer\", \"null\"], \"description\": \"The command's exit code (128+N when signal "
  "N ended it, as the shell reports it); null when it timed out.\"},"
  "  \"timedOut\": {\"type\": \"boolean\", \"description\": \"It ran past its timeout and was killed with everything "
  "it started.\"},"
  "  \"timeoutSeconds\": {\"type\": \"number\", \"description\": \"The timeout that applied, in seconds.\"},"
  "  \"ended\": {\"type\": \"string\", \"enum\": [\"exit\", \"signal\", \"timeout\", \"memory_limit\", \"pids_limit\"],"
  "    \"description\": \"Why it ended: it exited, a signal killed it, its timeout, or the sandbox's memory or "
  "process limit.\"},"
  "  \"signal\": {\"type\": [\"string\", \"null\"], \"description\": \"The signal that ended it (e.g. SIGSEGV), or "
  "null.\"},"
  "  \"stdout\": {\"type\": \"string\", \"description\": \"Standard output, as the text result shows it (bounded, "
  "secrets masked).\"},"
  "  \"stderr\": {\"type\": \"string\", \"description\": \"Standard error, likewise.\"},"
  "  \"outputTruncated\": {\"type\": \"boolean\", \"description\": \"Part of stdout or stderr was left out (the text "
  "says how much).\"}"
  "},"
  "\"required\": [\"exitCode\", \"timedOut\", \"timeoutSeconds\", \"ended\", \"signal\", \"stdout\", \"stderr\", "
  "\"outputTruncated\"],"
  "\"additionalProperties\": false"
  "}";

JsonNode *
sandstep_command_output_schema (void)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = json_from_string (command_output_schema, &error);

  /* A constant of ours: a parse failure is a bug, caught by every test that lists the tools. */
  g_assert_no_error (error);
  return node;
}

JsonNode *
sandstep_command_structured (const char *out, gboolean out_cut, const char *err, gboolean err_cut,
                             const SandstepRunResult *result, double timeout_s)
{
  JsonObject *object = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  int code = result->exit_status;
  /* The shell's convention, which the text's exit code follows too. */
  const char *signal = result->timed_out ? NULL : sandstep_run_report_signal (code);
  const char *ended = "exit";

  if (result->timed_out)
    ended = "timeout";
  else if (result->memory_limit_hit)
    ended = "memory_limit";
  else if (result->pids_limit_hit)
    ended = "pids_limit";
  else if (signal != NULL)
    ended = "signal";

  if (result->timed_out)
    json_object_set_null_member (object, "exitCode");
  else
    json_object_set_int_member (object, "exitCode", code);
  json_object_set_boolean_member (object, "timedOut", result->timed_out);
  json_object_set_double_member (object, "timeoutSeconds", timeout_s);
  json_object_set_string_member (object, "ended", ended);
  if (signal != NULL)
    json_object_set_string_member (object, "signal", signal);
  else
    json_object_set_null_member (object, "signal");
  json_object_set_string_member (object, "stdout", out != NULL ? out : "");
  json_object_set_string_member (object, "stderr", err != NULL ? err : "");
  json_object_set_boolean_member (object, "outputTruncated", out_cut || err_cut);
  json_node_take_object (node, object);
  return node;
}
