/* sandstep-tools.c: the four agent tools over one attached sandbox.
 *
 * The text rules live in sandstep-output.h (pure); this file checks the
 * arguments, calls the backend, and sorts its errors: SANDSTEP_PATH_ERROR is
 * the model's to fix ("The read_file tool failed: ..."), anything else means
 * the sandbox is unusable (gone, expired, jail setup failed, state broken)
 * and ends the run.  Every text that leaves here, errors included, has the
 * sandbox's secrets masked.
 */
#include "sandstep-tools.h"
#include "sandstep-tool-args.h"
#include "sandstep-tool-schema.h"

#include <math.h>
#include <string.h>

#include "sandstep-ending.h"
#include "sandstep-error.h"
#include "sandstep-units.h"
#include "sandstep-output.h"
#include "sandstep-tool-structured.h"
#include "sandstep-tool-python.h"
#include "sandstep-data-files.h"

/* The tools, in the order of their definitions. */
enum {
  TOOL_RUN_COMMAND,
  TOOL_READ_FILE,
  TOOL_WRITE_FILE,
  TOOL_LIST_DIRECTORY,
  N_TOOLS,
};

static const char *const base_names[N_TOOLS] = { "run_command", "read_file", "write_file", "list_directory" };

struct _SandstepToolbox {
  SandstepAttachment *attachment;
  SandstepToolLimits limits;  /* prefix and exports: the copies below */
  char *prefix;
  char **exports;
  char *names[N_TOOLS];
  SandstepMasker *masker;
  char *run_description;
  SandstepNetwork network;
  gint64 deadline_us;       /* monotonic; 0: none */
  JsonNode *structured;     /* the call's structuredContent, set by a tool that has one */
  SandstepPythonSession *python;  /* run_python's session; NULL: not offered */
  char *python_name;              /* "run_python", or PREFIX_run_python */
  SandstepToolNotice notice;
  gpointer notice_data;
};

typedef char *(*ToolFunc) (SandstepToolbox *toolbox, JsonObject *args, gboolean *out_is_error, GError **error);

void
sandstep_tool_limits_init (SandstepToolLimits *limits)
{
  memset (limits, 0, sizeof *limits);
  limits->max_output_lines = 2000;
  limits->max_output_bytes = 50 * 1024;
  limits->max_read_bytes = SANDSTEP_DEFAULT_READ_MAX;
  limits->default_timeout_s = 60;
  limits->max_timeout_s = 300;
}

gboolean
sandstep_tool_prefix_is_valid (const char *prefix)
{
  /* ASCII only, as OpenAI's function names (^[a-zA-Z0-9_-]{1,64}$) and code that calls tools by name need. */
  return prefix != NULL && prefix[0] != '\0' && strlen (prefix) <= SANDSTEP_TOOL_PREFIX_MAX &&
         (g_ascii_isalpha (prefix[0]) || prefix[0] == '_') &&
         strspn (prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == strlen (prefix);
}

gboolean
sandstep_tool_limits_check (const SandstepToolLimits *limits, GError **error)
{
  const char *prefix = limits->prefix;

  if (limits->max_output_lines == 0 || limits->max_output_bytes == 0 || limits->max_read_bytes == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "max-output-lines, max-output-bytes and max-read-bytes must be 1 or more");
  if (!isfinite (limits->default_timeout_s) || limits->default_timeout_s <= 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "command-timeout must be a positive finite number of seconds, got %g",
                           limits->default_timeout_s);
  if (!isfinite (limits->max_timeout_s) || limits->max_timeout_s <= 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "max-command-timeout must be a positive finite number of seconds, got %g",
                           limits->max_timeout_s);
  if (limits->default_timeout_s > limits->max_timeout_s)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "command-timeout (%g) must not exceed max-command-timeout (%g); lower command-timeout "
                           "or raise max-command-timeout", limits->default_timeout_s, limits->max_timeout_s);
  if (prefix != NULL && prefix[0] != '\0' && !sandstep_tool_prefix_is_valid (prefix))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "option 'prefix' must be an identifier (a letter or '_', then letters, digits and '_', at "
                           "most %d in all), got '%s'; write for example prefix=box", SANDSTEP_TOOL_PREFIX_MAX, prefix);
  return TRUE;
}

/* @list's strings, NULL-terminated, in @out (which does not own them). */
static const char *const *
string_list (GPtrArray *list, GPtrArray *out)
{
  for (guint i = 0; list != NULL && i < list->len; i++)
    g_ptr_array_add (out, list->pdata[i]);
  g_ptr_array_add (out, NULL);
  return (const char *const *) out->pdata;
}

SandstepToolbox *
sandstep_toolbox_new (SandstepAttachment *attachment, const SandstepToolLimits *limits)
{
  SandstepToolbox *toolbox = g_new0 (SandstepToolbox, 1);
  const SandstepSpec *spec = attachment != NULL ? sandstep_attachment_spec (attachment) : NULL;
  g_autoptr(GPtrArray) mounts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) hosts = g_ptr_array_new ();
  g_autoptr(GPtrArray) cidrs = g_ptr_array_new ();
  g_autofree char *network_note = NULL;
  g_autofree char *image_note = NULL;

  toolbox->attachment = attachment;
  if (limits != NULL)
    toolbox->limits = *limits;
  else
    sandstep_tool_limits_init (&toolbox->limits);
  toolbox->prefix = g_strdup (toolbox->limits.prefix != NULL && toolbox->limits.prefix[0] != '\0'
                                ? toolbox->limits.prefix : NULL);
  toolbox->exports = toolbox->limits.exports != NULL && toolbox->limits.exports[0] != NULL
                       ? g_strdupv ((char **) toolbox->limits.exports) : NULL;
  toolbox->limits.prefix = toolbox->prefix;
  toolbox->limits.exports = (const char *const *) toolbox->exports;
  for (int i = 0; i < N_TOOLS; i++)
    toolbox->names[i] = toolbox->prefix != NULL ? g_strconcat (toolbox->prefix, "_", base_names[i], NULL)
                                                : g_strdup (base_names[i]);
  toolbox->masker = sandstep_masker_new_from_table (spec != NULL ? spec->secrets : NULL);
  toolbox->network = spec != NULL ? spec->network : SANDSTEP_NETWORK_NONE;
  for (guint i = 0; spec != NULL && spec->mounts != NULL && i < spec->mounts->len; i++)
    g_ptr_array_add (mounts, g_strconcat ("/data/", ((SandstepMount *) spec->mounts->pdata[i])->name, NULL));
  g_ptr_array_add (mounts, NULL);
  network_note = sandstep_network_note (toolbox->network, spec != NULL ? string_list (spec->allow_hosts, hosts) : NULL,
                                        spec != NULL ? string_list (spec->allow_cidrs, cidrs) : NULL);
  if (spec != NULL)
    image_note = sandstep_image_note (spec->image, spec->image_digest, spec->root_readonly);
  /* Built once, at attach: the lifetime note must not count down between
   * turns (the description stays byte-identical, so prompt caches hold). */
  toolbox->run_description =
    sandstep_run_command_description (toolbox->limits.default_timeout_s, toolbox->limits.max_timeout_s,
                                      network_note,
                                      attachment != NULL ? sandstep_attachment_remaining_lifetime (attachment) : -1,
                                      image_note, (const char *const *) mounts->pdata);
  if (toolbox->exports != NULL)
    {
      g_autofree char *list = g_strjoinv (", ", toolbox->exports);
      char *with_note = g_strdup_printf ("%s When this run ends well, these files are copied out of the sandbox, so "
                                         "write your results to them before you finish: %s.",
                                         toolbox->run_description, list);
      g_free (toolbox->run_description);
      toolbox->run_description = with_note;
    }
  return toolbox;
}

void
sandstep_toolbox_free (SandstepToolbox *toolbox)
{
  if (toolbox == NULL)
    return;
  /* First: its interpreter runs in the sandbox the attachment holds. */
  sandstep_python_session_free (toolbox->python);
  g_free (toolbox->python_name);
  sandstep_masker_free (toolbox->masker);
  g_clear_pointer (&toolbox->structured, json_node_unref);
  g_free (toolbox->run_description);
  g_free (toolbox->prefix);
  g_strfreev (toolbox->exports);
  for (int i = 0; i < N_TOOLS; i++)
    g_free (toolbox->names[i]);
  g_free (toolbox);
}

void
sandstep_toolbox_set_deadline (SandstepToolbox *toolbox, gint64 deadline_us)
{
  toolbox->deadline_us = deadline_us;
}

const char *
sandstep_toolbox_tool_name (SandstepToolbox *toolbox, const char *base)
{
  for (int i = 0; i < N_TOOLS; i++)
    if (strcmp (base_names[i], base) == 0)
      return toolbox->names[i];
  if (toolbox->python_name != NULL && strcmp (base, "run_python") == 0)
    return toolbox->python_name;
  g_return_val_if_reached (base);
}

char *
sandstep_toolbox_tool_list (SandstepToolbox *toolbox)
{
  if (toolbox->python_name != NULL)
    return g_strdup_printf ("%s, %s, %s, %s and %s", toolbox->names[0], toolbox->names[1], toolbox->names[2],
                            toolbox->names[3], toolbox->python_name);
  return g_strdup_printf ("%s, %s, %s and %s", toolbox->names[0], toolbox->names[1], toolbox->names[2],
                          toolbox->names[3]);
}

char *
sandstep_toolbox_mask (SandstepToolbox *toolbox, const char *text)
{
  return sandstep_masker_mask (toolbox->masker, text, -1, NULL);
}

/* ---- definitions ---- */

static void
add_property (JsonBuilder *b, const char *name, const char *type, gint64 minimum, gboolean exclusive,
              const char *description)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, type);
  if (minimum >= 0)
    {
      json_builder_set_member_name (b, exclusive ? "exclusiveMinimum" : "minimum");
      json_builder_add_int_value (b, minimum);
    }
  json_builder_set_member_name (b, "description");
  json_builder_add_string_value (b, description);
  json_builder_end_object (b);
}

JsonArray *
sandstep_toolbox_definitions (SandstepToolbox *toolbox)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  const SandstepToolLimits *l = &toolbox->limits;
  g_autofree char *default_s = sandstep_format_seconds (l->default_timeout_s);
  g_autofree char *max_s = sandstep_format_seconds (l->max_timeout_s);
  g_autofree char *timeout_help = NULL;
  g_autofree char *output_size = sandstep_format_size (l->max_output_bytes);
  g_autofree char *read_size = sandstep_format_size (l->max_read_bytes);
  g_autofree char *read_description = NULL;
  g_autofree char *limit_help = NULL;
  g_autofree char *list_description = NULL;
  g_autofree char *reach = NULL;
  const char *run = toolbox->names[TOOL_RUN_COMMAND];
  const SandstepSpec *spec = toolbox->attachment != NULL ? sandstep_attachment_spec (toolbox->attachment) : NULL;
  gboolean has_data = spec != NULL && spec->mounts != NULL && spec->mounts->len > 0;

  timeout_help = g_strdup_printf ("Seconds before the command is killed, with everything it started (default %s, "
                                  "at most %s).", default_s, max_s);
  reach = has_data ? g_strdup_printf ("the file tools reach /workspace and /tmp, and read the data under /data (use "
                                      "%s for anything else)", run)
                   : g_strdup_printf ("the file tools reach only /workspace and /tmp (use %s for anything else)", run);
  read_description = g_strdup_printf (
    "Read a text file from the sandbox. Relative paths start in /workspace; %s. Returns at most %" G_GSIZE_FORMAT
    " lines or %s from offset; when lines are left, the result ends with the offset to continue from. Files over "
    "%s are refused: read the part you need with %s (head, tail, sed -n, grep).",
    reach, l->max_output_lines, output_size, read_size, run);
  limit_help = g_strdup_printf ("Most lines to return (default: as many as fit %" G_GSIZE_FORMAT " lines and %s).",
                                l->max_output_lines, output_size);
  list_description = g_strdup_printf (
    "List the entries of a directory in the sandbox, sorted by name, one per line; directories end with '/'. "
    "Relative paths start in /workspace%s. A listing longer than %" G_GSIZE_FORMAT " lines or %s keeps its first "
    "and last entries and says how to list the rest.",
    has_data ? "; the data under /data can be listed too" : "", l->max_output_lines, output_size);

  json_builder_begin_array (b);

  sandstep_tool_definition_begin (b, toolbox->names[TOOL_RUN_COMMAND], "Run a shell command", toolbox->run_description);
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  add_property (b, "command", "string", -1, FALSE, "Shell command line, e.g. \"make test 2>&1 | tail -50\".");
  add_property (b, "timeout_seconds", "number", 0, TRUE, timeout_help);
  json_builder_end_object (b);
  sandstep_tool_definition_end (b, (const char *const[]) { "command", NULL }, "destructiveHint", TRUE, "openWorldHint",
            toolbox->network != SANDSTEP_NETWORK_NONE, NULL);

  sandstep_tool_definition_begin (b, toolbox->names[TOOL_READ_FILE], "Read a file", read_description);
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  add_property (b, "path", "string", -1, FALSE, "File path, absolute or relative to /workspace.");
  add_property (b, "offset", "integer", 1, FALSE, "First line to read, 1-based (default 1).");
  add_property (b, "limit", "integer", 1, FALSE, limit_help);
  json_builder_end_object (b);
  sandstep_tool_definition_end (b, (const char *const[]) { "path", NULL }, "readOnlyHint", TRUE, NULL);

  sandstep_tool_definition_begin (b, toolbox->names[TOOL_WRITE_FILE], "Write a file",
              "Create or overwrite a text file in the sandbox with the given content, creating parent directories "
              "as needed. Relative paths start in /workspace; only /workspace and /tmp can be written. Returns "
              "the number of bytes written.");
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  add_property (b, "path", "string", -1, FALSE, "File path, absolute or relative to /workspace.");
  add_property (b, "content", "string", -1, FALSE, "The complete new content of the file.");
  json_builder_end_object (b);
  sandstep_tool_definition_end (b, (const char *const[]) { "path", "content", NULL }, "destructiveHint", TRUE, "idempotentHint", TRUE,
            NULL);

  sandstep_tool_definition_begin (b, toolbox->names[TOOL_LIST_DIRECTORY], "List a directory", list_description);
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  add_property (b, "path", "string", -1, FALSE, "Directory to list (default: /workspace).");
  json_builder_end_object (b);
  sandstep_tool_definition_end (b, (const char *const[]) { NULL }, "readOnlyHint", TRUE, NULL);

  json_builder_end_array (b);
  root = json_builder_get_root (b);
  /* run_command's result is also data (MCP structuredContent). */
  json_object_set_member (json_array_get_object_element (json_node_get_array (root), 0), "outputSchema",
                          sandstep_command_output_schema ());
  if (toolbox->python != NULL)
    json_array_add_element (json_node_get_array (root),
                            sandstep_tool_python_definition (toolbox->python_name,
                                                             sandstep_python_session_limits (toolbox->python),
                                                             toolbox->names[TOOL_RUN_COMMAND]));
  return json_array_ref (json_node_get_array (root));
}

static gboolean
is_recoverable (const GError *error)
{
  return error->domain == SANDSTEP_PATH_ERROR;
}

static char *
tool_failed (SandstepToolbox *toolbox, const char *tool, const char *path, GError *local, gboolean *out_is_error,
             GError **error)
{
  sandstep_masker_mask_error (toolbox->masker, local);
  if (!is_recoverable (local))
    {
      g_propagate_error (error, local);
      return NULL;
    }
  *out_is_error = TRUE;
  if (g_error_matches (local, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE) && path != NULL &&
      strcmp (tool, "read_file") == 0)
    {
      guint64 size = 0;
      g_autofree char *size_text = NULL;

      if (sandstep_error_get_size (local, &size, NULL) && size > 0)
        size_text = sandstep_format_size (size);
      g_error_free (local);
      return sandstep_read_limit_message (path, size_text, toolbox->limits.max_read_bytes);
    }
  {
    g_autofree char *words = sandstep_tool_words (local->message, (const char *const *) toolbox->names);
    char *text = g_strdup_printf ("The %s tool failed: %s", sandstep_toolbox_tool_name (toolbox, tool), words);
    g_error_free (local);
    return text;
  }
}

/* ---- the tools ---- */

typedef struct {
  SandstepCapture *out;
  SandstepCapture *err;
  SandstepNotices *notices;
} Captures;

static void
on_notice (const char *message, gpointer user_data)
{
  Captures *captures = user_data;

  sandstep_notices_add (captures->notices, message);
}

static void
on_output (int stream, const char *data, gsize len, gpointer user_data)
{
  Captures *captures = user_data;

  sandstep_capture_append (stream == 2 ? captures->err : captures->out, data, len);
}

/* The seconds a command may still take: the sandbox's lifetime, within the agent's deadline when it has one. */
static double
remaining_s (SandstepToolbox *toolbox)
{
  double remaining = sandstep_attachment_remaining_lifetime (toolbox->attachment);

  if (toolbox->deadline_us > 0)
    remaining = MIN (remaining, MAX (toolbox->deadline_us - g_get_monotonic_time (), 0) / (double) G_USEC_PER_SEC);
  return remaining;
}

/* What a command run through run_python's interpreter ended with, as a run of its own reports it. */
static void
python_call_result (const SandstepPythonCall *call, double budget, SandstepRunResult *result)
{
  result->exit_status = call->died ? call->exit_status : call->command_exit;
  result->timed_out = call->command_timed_out || call->timed_out;
  result->applied_timeout_s = budget;
  result->memory_limit_hit = call->memory_limit_hit;
  result->pids_limit_hit = call->pids_limit_hit;
}

/* run_command while run_python's interpreter lives: through it, so that it lives on. */
static gboolean
run_command_in_python (SandstepToolbox *toolbox, const char *command, double budget, Captures *captures,
                       SandstepRunResult *result, char **message)
{
  SandstepPythonCall call = { .out = captures->out, .err = captures->err };

  /* What the egress proxy refused comes as a notice of the interpreter's command. */
  sandstep_python_session_run_command (toolbox->python, command, budget, &call, on_notice, captures);
  if (call.failure != NULL)
    {
      if (toolbox->notice != NULL)
        {
          g_autofree char *line = g_strdup_printf ("%s: %s: %s", toolbox->names[TOOL_RUN_COMMAND], call.failure,
                                                   call.failure_detail);
          g_autofree char *masked = sandstep_masker_mask (toolbox->masker, line, -1, NULL);
          toolbox->notice (masked, toolbox->notice_data);
        }
      *message = g_strdup_printf ("%s failed on sandstep's side: %s (%s's interpreter, which runs commands while it "
                                  "lives, is gone). Run the command again.", toolbox->names[TOOL_RUN_COMMAND],
                                  call.failure, toolbox->python_name);
      sandstep_python_call_clear (&call);
      return FALSE;
    }
  python_call_result (&call, budget, result);
  sandstep_python_call_clear (&call);
  return TRUE;
}

/* A data recipe's command, run as run_command is: through run_python's interpreter while it lives (the
 * sandbox runs one command at a time, and the interpreter is that one), else on its own. */
static gboolean
run_data_recipe (gpointer data, const SandstepRunRequest *request, SandstepRunResult *result, GError **error)
{
  SandstepToolbox *toolbox = data;
  SandstepPythonCall call = { .on_output = request->on_output, .output_data = request->user_data };
  double budget;

  if (toolbox->python == NULL || !sandstep_python_session_alive (toolbox->python))
    return sandstep_attachment_run_command (toolbox->attachment, request, result, error);
  /* Never past the sandbox's end, as sandstep_attachment_run_command() cuts it. */
  memset (result, 0, sizeof *result);
  budget = sandstep_run_budget (request->timeout_s, sandstep_attachment_remaining_lifetime (toolbox->attachment),
                                result);
  sandstep_python_session_run_command (toolbox->python, request->command, budget, &call, NULL, NULL);
  if (call.failure != NULL)
    {
      /* Not the sandbox's end: the interpreter went, and the next call starts without it. */
      sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, "the sandbox could not run the read (%s); call the tool again",
                      call.failure);
      sandstep_python_call_clear (&call);
      return FALSE;
    }
  python_call_result (&call, budget, result);
  sandstep_python_call_clear (&call);
  return TRUE;
}

static char *
tool_run_command (SandstepToolbox *toolbox, JsonObject *args, gboolean *out_is_error, GError **error)
{
  const SandstepToolArgs call = { "run_command", sandstep_toolbox_tool_name (toolbox, "run_command"), args };
  const SandstepToolLimits *l = &toolbox->limits;
  const char *command;
  char *message = NULL;
  gboolean given;
  double requested = 0, remaining, budget;
  g_autoptr(SandstepCapture) out = NULL;
  g_autoptr(SandstepCapture) err = NULL;
  g_autofree char *out_text = NULL;
  g_autofree char *err_text = NULL;
  g_autofree char *text = NULL;
  g_autofree char *ending = NULL;
  g_autoptr(SandstepNotices) notices = sandstep_notices_new ();
  Captures captures;
  SandstepRunRequest request = { 0 };
  SandstepRunResult result = { 0 };
  GError *local = NULL;

  if (!sandstep_tool_arg_string (&call, "command", TRUE, &command, &message) ||
      !sandstep_tool_arg_number (&call, "timeout_seconds", "a number of seconds", FALSE, &given, &requested,
                   &message))
    goto refused;

  remaining = remaining_s (toolbox);
  if (!sandstep_command_budget (given, requested, l->default_timeout_s, l->max_timeout_s, remaining, &budget,
                                &message))
    goto refused;

  out = sandstep_capture_new (toolbox->masker, l->max_output_lines, l->max_output_bytes);
  err = sandstep_capture_new (toolbox->masker, l->max_output_lines, l->max_output_bytes);
  captures = (Captures) { out, err, notices };
  request.command = command;
  request.timeout_s = budget;
  request.stdin_fd = -1;
  request.stdout_fd = -1;
  request.stderr_fd = -1;
  request.on_output = on_output;
  request.on_notice = on_notice;
  request.user_data = &captures;
  g_debug ("run_command: budget %.3fs", budget);
  if (toolbox->python != NULL && sandstep_python_session_alive (toolbox->python))
    {
      /* The sandbox runs one command at a time, and run_python's interpreter is it. */
      if (!run_command_in_python (toolbox, command, budget, &captures, &result, &message))
        goto refused;
    }
  else if (!sandstep_attachment_run_command (toolbox->attachment, &request, &result, &local))
    return tool_failed (toolbox, "run_command", NULL, local, out_is_error, error);

  out_text = sandstep_capture_render (out);
  err_text = sandstep_capture_render (err);
  g_clear_pointer (&toolbox->structured, json_node_unref);
  toolbox->structured = sandstep_command_structured (out_text, sandstep_capture_was_cut (out), err_text,
                                                     sandstep_capture_was_cut (err), &result,
                                                     result.applied_timeout_s > 0 ? result.applied_timeout_s : budget);
  text = sandstep_render_command_result (sandstep_capture_total_bytes (out) > 0 ? out_text : NULL,
                                         sandstep_capture_total_bytes (err) > 0 ? err_text : NULL,
                                         result.exit_status, result.timed_out,
                                         result.applied_timeout_s > 0 ? result.applied_timeout_s : budget);
  /* Why it ended, what the network refused, and a hint: after the exit code. */
  ending = sandstep_command_ending (sandstep_attachment_spec (toolbox->attachment), &result, notices, out_text,
                                    err_text);
  return g_strconcat (text, ending, NULL);

refused:
  *out_is_error = TRUE;
  return message;
}

static char *
tool_read_file (SandstepToolbox *toolbox, JsonObject *args, gboolean *out_is_error, GError **error)
{
  const SandstepToolArgs call = { "read_file", sandstep_toolbox_tool_name (toolbox, "read_file"), args };
  const SandstepToolLimits *l = &toolbox->limits;
  const char *path;
  char *message = NULL;
  gboolean offset_given, limit_given;
  double offset = 1, limit = 0;
  g_autoptr(GBytes) bytes = NULL;
  g_autofree char *masked = NULL;
  g_autofree char *data_path = NULL;
  gsize masked_len;
  GError *local = NULL;

  if (!sandstep_tool_arg_string (&call, "path", TRUE, &path, &message) ||
      !sandstep_tool_arg_number (&call, "offset", "a whole number", TRUE, &offset_given, &offset, &message) ||
      !sandstep_tool_arg_number (&call, "limit", "a whole number", TRUE, &limit_given, &limit, &message))
    {
      *out_is_error = TRUE;
      return message;
    }

  if (sandstep_data_path (sandstep_attachment_spec (toolbox->attachment), path, &data_path))
    bytes = sandstep_data_read_file (run_data_recipe, toolbox, data_path, l->max_read_bytes, &local);
  else
    bytes = sandstep_attachment_read_file (toolbox->attachment, path, l->max_read_bytes, &local);
  if (bytes == NULL)
    return tool_failed (toolbox, "read_file", path, local, out_is_error, error);
  masked = sandstep_masker_mask (toolbox->masker, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes),
                                 &masked_len);
  if (sandstep_looks_binary (masked, masked_len))
    {
      g_autofree char *quoted = sandstep_quote (path);
      g_autofree char *shell_path = g_shell_quote (path);
      g_autofree char *size = sandstep_format_size (g_bytes_get_size (bytes));

      *out_is_error = TRUE;
      return g_strdup_printf ("%s looks like a binary file (%s, with NUL bytes), so it is not shown. Inspect it with "
                              "run_command instead (e.g. file %s, xxd %s | head, or strings %s | head).",
                              quoted, size, shell_path, shell_path, shell_path);
    }
  return sandstep_render_file_window (masked, masked_len, offset_given ? (gint64) CLAMP (offset, -1, G_MAXINT64 / 2) : 1,
                                      limit_given ? (gint64) CLAMP (limit, -1, G_MAXINT64 / 2) : 0,
                                      l->max_output_lines, l->max_output_bytes);
}

static char *
tool_write_file (SandstepToolbox *toolbox, JsonObject *args, gboolean *out_is_error, GError **error)
{
  const SandstepToolArgs call = { "write_file", sandstep_toolbox_tool_name (toolbox, "write_file"), args };
  const char *path, *content;
  char *message = NULL;
  g_autofree char *quoted = NULL;
  GError *local = NULL;
  gsize len;

  if (!sandstep_tool_arg_string (&call, "path", TRUE, &path, &message) ||
      !sandstep_tool_arg_string (&call, "content", TRUE, &content, &message))
    {
      *out_is_error = TRUE;
      return message;
    }
  len = strlen (content);
  if (!sandstep_attachment_write_file (toolbox->attachment, path, content, len, &local))
    return tool_failed (toolbox, "write_file", path, local, out_is_error, error);
  quoted = sandstep_quote (path);
  return g_strdup_printf ("Wrote %" G_GSIZE_FORMAT " bytes to %s.", len, quoted);
}

static int
compare_entries (gconstpointer a, gconstpointer b)
{
  const SandstepDirEntry *x = *(SandstepDirEntry *const *) a;
  const SandstepDirEntry *y = *(SandstepDirEntry *const *) b;
  int by_name = strcmp (x->name, y->name);

  return by_name != 0 ? by_name : (int) x->is_dir - (int) y->is_dir;
}

static char *
tool_list_directory (SandstepToolbox *toolbox, JsonObject *args, gboolean *out_is_error, GError **error)
{
  const SandstepToolArgs call = { "list_directory", sandstep_toolbox_tool_name (toolbox, "list_directory"), args };
  const char *path;
  char *message = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *data_path = NULL;
  GError *local = NULL;

  if (!sandstep_tool_arg_string (&call, "path", FALSE, &path, &message))
    {
      *out_is_error = TRUE;
      return message;
    }
  if (path == NULL || path[0] == '\0')
    path = ".";
  if (sandstep_data_path (sandstep_attachment_spec (toolbox->attachment), path, &data_path))
    entries = sandstep_data_list_directory (run_data_recipe, toolbox, data_path, &local);
  else
    entries = sandstep_attachment_list_directory (toolbox->attachment, path, &local);
  if (entries == NULL)
    return tool_failed (toolbox, "list_directory", path, local, out_is_error, error);
  /* By name before the "/" suffix, so the suffix never reorders names. */
  g_ptr_array_sort (entries, compare_entries);
  for (guint i = 0; i < entries->len; i++)
    {
      const SandstepDirEntry *entry = entries->pdata[i];
      char *name = g_strconcat (entry->name, entry->is_dir ? "/" : "", NULL);

      /* One entry a line: control characters show as '?', as ls -q does. */
      for (char *p = name; *p != '\0'; p++)
        if ((guchar) *p < 0x20 || *p == 0x7f)
          *p = '?';
      g_ptr_array_add (names, name);
    }
  return sandstep_render_listing_for ((const char *const *) names->pdata, names->len, path,
                                      toolbox->names[TOOL_RUN_COMMAND], toolbox->limits.max_output_lines,
                                      toolbox->limits.max_output_bytes);
}

static const struct {
  const char *name;
  ToolFunc func;
} tools[] = {
  /* In the order of base_names. */
  { "run_command", tool_run_command },
  { "read_file", tool_read_file },
  { "write_file", tool_write_file },
  { "list_directory", tool_list_directory },
};

/* The strings of @node with the sandbox's secrets masked, as the text is. */
static void
mask_node (SandstepToolbox *toolbox, JsonNode *node)
{
  if (JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObjectIter iter;
      JsonNode *member;

      json_object_iter_init (&iter, json_node_get_object (node));
      while (json_object_iter_next (&iter, NULL, &member))
        mask_node (toolbox, member);
    }
  else if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      g_autofree char *masked = sandstep_masker_mask (toolbox->masker, json_node_get_string (node), -1, NULL);
      json_node_set_string (node, masked);
    }
}

void
sandstep_toolbox_enable_python (SandstepToolbox *toolbox, const SandstepPythonLimits *limits)
{
  g_return_if_fail (toolbox->python == NULL);
  toolbox->python = sandstep_python_session_new (toolbox->attachment, limits);
  toolbox->python_name = toolbox->prefix != NULL ? g_strconcat (toolbox->prefix, "_run_python", NULL)
                                                 : g_strdup ("run_python");
}

void
sandstep_toolbox_set_notice (SandstepToolbox *toolbox, SandstepToolNotice notice, gpointer user_data)
{
  toolbox->notice = notice;
  toolbox->notice_data = user_data;
}

static char *
tool_run_python (SandstepToolbox *toolbox, JsonObject *args, gboolean *out_is_error, GError **error)
{
  double remaining = remaining_s (toolbox);

  g_clear_pointer (&toolbox->structured, json_node_unref);
  return sandstep_tool_run_python (toolbox->python, toolbox->python_name, toolbox->names[TOOL_RUN_COMMAND],
                                   toolbox->masker, toolbox->limits.max_output_lines,
                                   toolbox->limits.max_output_bytes, remaining, args, out_is_error,
                                   &toolbox->structured, toolbox->notice, toolbox->notice_data);
}

char *
sandstep_toolbox_call (SandstepToolbox *toolbox, const char *name, JsonObject *arguments, gboolean *out_is_error,
                       GError **error)
{
  return sandstep_toolbox_call_structured (toolbox, name, arguments, out_is_error, NULL, error);
}

char *
sandstep_toolbox_call_structured (SandstepToolbox *toolbox, const char *name, JsonObject *arguments,
                                  gboolean *out_is_error, JsonNode **out_structured, GError **error)
{
  g_autofree char *text = NULL;
  gboolean is_error = FALSE;

  g_return_val_if_fail (toolbox != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  if (out_structured != NULL)
    *out_structured = NULL;
  g_clear_pointer (&toolbox->structured, json_node_unref);

  G_STATIC_ASSERT (G_N_ELEMENTS (tools) == N_TOOLS);
  for (gsize i = 0; i < G_N_ELEMENTS (tools) + 1; i++)
    if (i < G_N_ELEMENTS (tools) ? g_strcmp0 (toolbox->names[i], name) == 0
                                 : toolbox->python_name != NULL && g_strcmp0 (name, toolbox->python_name) == 0)
      {
        GError *local = NULL;

        text = (i < G_N_ELEMENTS (tools) ? tools[i].func : tool_run_python) (toolbox, arguments, &is_error, &local);
        if (text == NULL)
          {
            /* Terminal: the sandbox cannot be used any more. */
            sandstep_masker_mask_error (toolbox->masker, local);
            g_propagate_error (error, local);
            return NULL;
          }
        if (out_is_error != NULL)
          *out_is_error = is_error;
        if (toolbox->structured != NULL && !is_error && out_structured != NULL)
          {
            mask_node (toolbox, toolbox->structured);
            *out_structured = g_steal_pointer (&toolbox->structured);
          }
        g_clear_pointer (&toolbox->structured, json_node_unref);
        /* Masked again on the way out, whatever the tool did. */
        return sandstep_masker_mask (toolbox->masker, text, -1, NULL);
      }

  if (out_is_error != NULL)
    *out_is_error = TRUE;
  {
    g_autofree char *quoted = sandstep_quote (name != NULL ? name : "");
    g_autofree char *masked = sandstep_masker_mask (toolbox->masker, quoted, -1, NULL);
    g_autofree char *list = sandstep_toolbox_tool_list (toolbox);
    return g_strdup_printf ("Unknown tool: %s. The tools are %s.", masked, list);
  }
}
