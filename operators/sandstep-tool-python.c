/* sandstep-tool-python.c: the run_python tool over a session (sandstep-python.h): its definition, its
 * arguments, and what the model reads.
 *
 * The result: "[stdout]", "[stderr]", "[value]" (the final expression, as a
 * REPL shows it) and "[error]" (the traceback), each masked and bounded as
 * run_command's streams are, then one line of notes: the timeout, or how the
 * interpreter died.  A call that starts a new interpreter after one died
 * begins with haiku.rag's words: "The interpreter restarted. Variables from
 * earlier calls are gone."  A failure on sandstep's side reaches the model by
 * its kind only; its details go to the notice function (the step's stderr).
 */
#include "sandstep-tool-python.h"

#include <math.h>
#include <string.h>

#include "sandstep-run-report.h"
#include "sandstep-tool-schema.h"
#include "sandstep-units.h"

#define RESTARTED_NOTE "[The interpreter restarted. Variables from earlier calls are gone.]"

static const char python_output_schema[] =
  "{"
  "\"type\": \"object\","
  "\"properties\": {"
  "  \"stdout\": {\"type\": \"string\", \"description\": \"Standard output of the code and of what it started, as "
  "the text shows it (bounded, secrets masked).\"},"
  "  \"stderr\": {\"type\": \"string\", \"description\": \"Standard error, likewise.\"},"
  "  \"value\": {\"type\": [\"string\", \"null\"], \"description\": \"repr() of the final expression, as a REPL "
  "shows it; null when there is none or it is None.\"},"
  "  \"error\": {\"type\": [\"string\", \"null\"], \"description\": \"The exception with its traceback, or null.\"},"
  "  \"timedOut\": {\"type\": \"boolean\", \"description\": \"The call ran past its timeout; the interpreter was "
  "stopped.\"},"
  "  \"timeoutSeconds\": {\"type\": \"number\", \"description\": \"The timeout that applied, in seconds.\"},"
  "  \"interpreterDied\": {\"type\": \"boolean\", \"description\": \"The interpreter ended during the call (a crash, "
  "os._exit, the memory limit).\"},"
  "  \"restarted\": {\"type\": \"boolean\", \"description\": \"A new interpreter ran this call: variables from "
  "earlier calls are gone.\"},"
  "  \"outputTruncated\": {\"type\": \"boolean\", \"description\": \"Part of a stream, the value or the error was "
  "left out.\"}"
  "},"
  "\"required\": [\"stdout\", \"stderr\", \"value\", \"error\", \"timedOut\", \"timeoutSeconds\", \"interpreterDied\", "
  "\"restarted\", \"outputTruncated\"],"
  "\"additionalProperties\": false"
  "}";

JsonNode *
sandstep_tool_python_definition (const char *name, const SandstepPythonLimits *limits, const char *run_name)
{
  g_autofree char *default_s = sandstep_format_seconds (limits->default_timeout_s);
  g_autofree char *max_s = sandstep_format_seconds (limits->max_timeout_s);
  g_autofree char *budget_s = sandstep_format_seconds (limits->budget_s);
  g_autofree char *description = NULL;
  g_autofree char *timeout_help = NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(GError) error = NULL;
  JsonNode *schema, *root;

  description = g_strdup_printf (
    "Run Python code in one interpreter inside the sandbox that stays alive for this whole session, as a notebook "
    "does: variables, imports and open files persist from one call to the next. Returns what the code printed "
    "(stdout and stderr, its child processes' too), the value of a final expression as a REPL shows it, and the "
    "error with its traceback. The code runs in /workspace with the same files, network and /data mounts as "
    "%s; stdin is empty. Each call is stopped after timeout_seconds (default %ss, at most %ss), and all "
    "calls of this session together may take at most %ss; use %s for long jobs. If the interpreter dies "
    "(a timeout, the memory limit, a crash, os._exit), the next call starts a new one, and variables from earlier "
    "calls are gone. Long output is cut in the middle, as %s's is.",
    run_name, default_s, max_s, budget_s, run_name, run_name);
  timeout_help = g_strdup_printf ("Seconds before the call is stopped, killing the interpreter (default %ss, at most "
                                  "%ss).", default_s, max_s);

  sandstep_tool_definition_begin (b, name, "Run Python in a persistent interpreter", description);
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "code");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "string");
  json_builder_set_member_name (b, "description");
  json_builder_add_string_value (b, "Python source, one or more statements; a final expression's value is shown, "
                                    "e.g. \"import json\\ndata = json.load(open('/data/in/x.json'))\\nlen(data)\".");
  json_builder_end_object (b);
  json_builder_set_member_name (b, "timeout_seconds");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "number");
  json_builder_set_member_name (b, "exclusiveMinimum");
  json_builder_add_int_value (b, 0);
  json_builder_set_member_name (b, "description");
  json_builder_add_string_value (b, timeout_help);
  json_builder_end_object (b);
  json_builder_end_object (b);
  sandstep_tool_definition_end (b, (const char *const[]) { "code", NULL }, "destructiveHint", TRUE, NULL);

  schema = json_from_string (python_output_schema, &error);
  g_assert_no_error (error);
  root = json_builder_get_root (b);
  json_object_set_member (json_node_get_object (root), "outputSchema", schema);
  return root;
}

/* ---- arguments ---- */

#define EXAMPLE "{\"code\": \"x = 6 * 7\\nx\"}"

static gboolean
get_arguments (const char *tool, JsonObject *args, const char **out_code, gboolean *out_given, double *out_timeout,
               char **message)
{
  JsonNode *code = args != NULL ? json_object_get_member (args, "code") : NULL;
  JsonNode *timeout = args != NULL ? json_object_get_member (args, "timeout_seconds") : NULL;

  *out_given = FALSE;
  if (code == NULL)
    {
      *message = g_strdup_printf ("%s needs the argument \"code\" (a string of Python). Call it again with it, "
                                  "e.g. " EXAMPLE ".", tool);
      return FALSE;
    }
  if (!JSON_NODE_HOLDS_VALUE (code) || json_node_get_value_type (code) != G_TYPE_STRING)
    {
      *message = g_strdup_printf ("The argument \"code\" of %s must be a string of Python. Call it again, e.g. "
                                  EXAMPLE ".", tool);
      return FALSE;
    }
  *out_code = json_node_get_string (code);
  if (!g_utf8_validate (*out_code, -1, NULL))
    {
      *message = g_strdup ("code is not valid UTF-8 text.");
      return FALSE;
    }
  if (timeout == NULL || JSON_NODE_HOLDS_NULL (timeout))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (timeout) && json_node_get_value_type (timeout) == G_TYPE_INT64)
    *out_timeout = json_node_get_int (timeout);
  else if (JSON_NODE_HOLDS_VALUE (timeout) && json_node_get_value_type (timeout) == G_TYPE_DOUBLE)
    *out_timeout = json_node_get_double (timeout);
  else
    {
      *message = g_strdup_printf ("The argument \"timeout_seconds\" of %s must be a number of seconds. Call it "
                                  "again, e.g. {\"code\": \"...\", \"timeout_seconds\": 30}.", tool);
      return FALSE;
    }
  *out_given = TRUE;
  return TRUE;
}

/* ---- the result ---- */

/* @text masked and bounded as a command's stream is, through a capture of its own. */
static char *
bounded (const SandstepMasker *masker, const char *text, gsize max_lines, gsize max_bytes, gboolean *cut)
{
  g_autoptr(SandstepCapture) capture = sandstep_capture_new (masker, max_lines, max_bytes);
  char *out;

  sandstep_capture_append (capture, text, strlen (text));
  out = sandstep_capture_render (capture);
  if (sandstep_capture_was_cut (capture))
    *cut = TRUE;
  return out;
}

static void
append_section (GString *text, const char *label, const char *body)
{
  if (body == NULL)
    return;
  if (text->len > 0)
    g_string_append_c (text, '\n');
  g_string_append_printf (text, "[%s]\n%s", label, body);
}

static char *
death_note (const SandstepPythonCall *call)
{
  const char *signal = sandstep_run_report_signal (call->exit_status);

  if (call->memory_limit_hit)
    return g_strdup ("the sandbox's memory limit was reached");
  if (call->pids_limit_hit)
    return g_strdup ("the sandbox's process limit was reached");
  if (signal != NULL)
    return g_strdup_printf ("killed by %s", signal);
  return g_strdup_printf ("exit code %d", call->exit_status);
}

char *
sandstep_tool_run_python (SandstepPythonSession *session, const char *name, const char *run_name,
                          const SandstepMasker *masker, gsize max_lines, gsize max_bytes, double remaining_s,
                          JsonObject *args, gboolean *out_is_error, JsonNode **out_structured,
                          SandstepToolNotice notice, gpointer notice_data)
{
  const SandstepPythonLimits *limits = sandstep_python_session_limits (session);
  const char *code = NULL;
  char *message = NULL;
  gboolean given;
  double requested = 0, timeout, left = sandstep_python_session_budget_left (session);
  SandstepPythonCall call = { 0 };
  g_autoptr(SandstepCapture) out = NULL;
  g_autoptr(SandstepCapture) err = NULL;
  g_autofree char *out_text = NULL;
  g_autofree char *err_text = NULL;
  g_autofree char *value = NULL;
  g_autofree char *error = NULL;
  gboolean cut = FALSE;
  GString *text;

  if (!get_arguments (name, args, &code, &given, &requested, &message) ||
      !sandstep_command_budget (given, requested, limits->default_timeout_s, limits->max_timeout_s, remaining_s,
                                &timeout, &message))
    {
      *out_is_error = TRUE;
      return message;
    }
  if (left < 0.001)
    {
      g_autofree char *budget = sandstep_format_seconds (limits->budget_s);

      *out_is_error = TRUE;
      return g_strdup_printf ("%s's budget for this session (%ss, the sum of its calls' times) is spent, so it runs "
                              "no more code; use %s (e.g. python3 script.py) instead.", name, budget, run_name);
    }
  timeout = MIN (timeout, left);

  out = sandstep_capture_new (masker, max_lines, max_bytes);
  err = sandstep_capture_new (masker, max_lines, max_bytes);
  call.out = out;
  call.err = err;
  sandstep_python_session_run (session, code, NULL, timeout, &call);

  if (call.failure != NULL)
    {
      /* Its kind for the model; the details (host paths, errno) for the step's log only. */
      if (notice != NULL)
        {
          g_autofree char *line = g_strdup_printf ("%s: %s: %s", name, call.failure, call.failure_detail);
          g_autofree char *masked = sandstep_masker_mask (masker, line, -1, NULL);
          notice (masked, notice_data);
        }
      *out_is_error = TRUE;
      message = g_strdup_printf ("%s failed on sandstep's side: %s. The interpreter is gone; the next call starts a "
                                 "new one (variables from earlier calls are gone), or use %s.", name, call.failure,
                                 run_name);
      sandstep_python_call_clear (&call);
      return message;
    }

  out_text = sandstep_capture_render (out);
  err_text = sandstep_capture_render (err);
  cut = sandstep_capture_was_cut (out) || sandstep_capture_was_cut (err);
  if (call.value != NULL)
    value = bounded (masker, call.value, max_lines, max_bytes, &cut);
  if (call.error != NULL)
    error = bounded (masker, call.error, max_lines, max_bytes, &cut);

  text = g_string_new (NULL);
  if (call.restarted)
    g_string_append (text, RESTARTED_NOTE);
  append_section (text, "stdout", sandstep_capture_total_bytes (out) > 0 ? out_text : NULL);
  append_section (text, "stderr", sandstep_capture_total_bytes (err) > 0 ? err_text : NULL);
  append_section (text, "value", value);
  append_section (text, "error", error);
  if (text->len == 0 || (call.restarted && text->len == strlen (RESTARTED_NOTE)))
    g_string_append_printf (text, "%s(no output)", text->len > 0 ? "\n" : "");
  if (call.timed_out)
    {
      g_autofree char *seconds = sandstep_format_seconds (timeout);
      g_string_append_printf (text, "\n[timed out after %ss: the interpreter was stopped with everything it "
                                    "started; the next call starts a new one]", seconds);
    }
  else if (call.died)
    {
      g_autofree char *how = death_note (&call);
      g_string_append_printf (text, "\n[the interpreter died (%s); the next call starts a new one]", how);
    }

  if (out_structured != NULL)
    {
      JsonObject *object = json_object_new ();

      *out_structured = json_node_new (JSON_NODE_OBJECT);
      json_object_set_string_member (object, "stdout", out_text);
      json_object_set_string_member (object, "stderr", err_text);
      if (value != NULL)
        json_object_set_string_member (object, "value", value);
      else
        json_object_set_null_member (object, "value");
      if (error != NULL)
        json_object_set_string_member (object, "error", error);
      else
        json_object_set_null_member (object, "error");
      json_object_set_boolean_member (object, "timedOut", call.timed_out);
      json_object_set_double_member (object, "timeoutSeconds", timeout);
      json_object_set_boolean_member (object, "interpreterDied", call.died);
      json_object_set_boolean_member (object, "restarted", call.restarted);
      json_object_set_boolean_member (object, "outputTruncated", cut);
      json_node_take_object (*out_structured, object);
    }
  sandstep_python_call_clear (&call);
  return g_string_free (text, FALSE);
}
