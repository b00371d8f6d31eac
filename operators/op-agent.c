/* op-agent.c: an LLM agent loop over the four sandbox tools.
 *
 *   sandstep agent --handle=H [--model=M] [--max-turns=N] [--time-budget=SECONDS]
 *                  [--system=FILE] [--transcript=FILE] [--export=PATH=URL ...]
 *                  [TOOL OPTIONS] -- PROMPT
 *
 * The tool options (sandstep-tool-options.h) set the tools' budgets,
 * bounds and name prefix.  --export (repeatable): when the model has given
 * its final answer, the files are copied out as `sandstep export` copies
 * them, all or none, while the claim is still held; a run that fails in any
 * other way exports nothing.  run_command's description names the files.
 *
 * Claims the sandbox once, for the whole run, then runs the turn loop of
 * hooks/llm/sandstep-agent.c against any OpenAI-compatible chat-completions
 * endpoint (OPENAI_BASE_URL, OPENAI_API_KEY; the model from --model or
 * OPENAI_MODEL), with the sandbox's four tools: each reply's tool calls are
 * answered in order, and the loop ends when a reply has no tool calls.  This
 * file reads the options, answers the calls with the toolbox, and says what
 * happened.
 *
 * Output: the final answer on stdout; one progress line per turn on stderr
 * ("sandstep agent: turn 3: run_command, read_file (4.2s)"); with
 * --transcript, one JSON object per line (see write_event()), never the API
 * key.  PROMPT "-" reads the prompt from stdin.
 *
 * Exit statuses: 0 with a final answer (and its exports done); 1 the chat endpoint failed (refused
 * the request, kept failing, or answered something else); 2 --max-turns
 * reached without a final answer; 124 --time-budget ran out; the helper's
 * usual statuses for usage and sandbox errors (64, 66, 68, ...).
 */
#include "sandstep-operator.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-export.h"
#include "sandstep-agent.h"
#include "sandstep-llm.h"
#include "sandstep-output.h"
#include "sandstep-tool-options.h"
#include "sandstep-tools.h"

#define DEFAULT_MAX_TURNS 50
#define AGENT_EXIT_ENDPOINT 1
#define AGENT_EXIT_MAX_TURNS 2

/* The number of tools, their names (which carry the prefix when one is set), and run_python's note. */
static const char default_system_prompt[] =
  "You are an agent working in an isolated Linux sandbox through %s tools: %s.%s Your working directory is "
  "/workspace; the files you write there stay for later steps. "
  "Look before you change things, check your work by running it, and keep tool output short (filter it with "
  "grep, head or tail). When the task is done, answer with a short summary of what you did and found, without "
  "calling a tool.";

static void
print_staged (const char *path, const char *dest, gint64 bytes, gpointer data)
{
  g_autofree char *size = sandstep_format_size ((guint64) bytes);
  g_autofree char *shown_path = sandstep_escape (path, -1, 0, SANDSTEP_ESCAPE_VALUE);
  g_autofree char *shown_dest = sandstep_escape (dest, -1, 0, SANDSTEP_ESCAPE_VALUE);

  g_printerr ("sandstep agent: staged %s for %s (%s)\n", shown_path, shown_dest, size);
}

/* The sandbox paths of "PATH=URL" @pairs, NULL-terminated. */
static char **
export_paths (GPtrArray *pairs)
{
  GPtrArray *paths = g_ptr_array_new ();

  for (guint i = 0; pairs != NULL && i < pairs->len; i++)
    {
      const char *pair = pairs->pdata[i];
      const char *eq = strchr (pair, '=');
      g_ptr_array_add (paths, g_strndup (pair, eq != NULL ? (gsize) (eq - pair) : strlen (pair)));
    }
  g_ptr_array_add (paths, NULL);
  return (char **) g_ptr_array_free (paths, FALSE);
}

typedef struct {
  FILE *transcript;
  gint64 start_us;          /* monotonic */
  SandstepAgentRun run;     /* its turn is the transcript's */
  SandstepToolbox *toolbox;
} Agent;

/* One transcript line: @event plus "ts" (UTC, ISO 8601 with milliseconds),
 * "elapsed_ms" (since the start) and "turn" (0 before the first request).  Types: start, request
 * (the messages appended since the previous request, so that the requests'
 * messages concatenated are the whole conversation; the first also has the
 * model and the tools), retry, response (the whole reply), tool_result,
 * final, end.  Takes @event. */
static void
write_event (Agent *agent, const char *type, JsonObject *event)
{
  g_autoptr(JsonObject) line = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *ts = g_date_time_format (now, "%Y-%m-%dT%H:%M:%S");
  g_autofree char *stamp = g_strdup_printf ("%s.%03dZ", ts, g_date_time_get_microsecond (now) / 1000);
  g_autofree char *text = NULL;
  GList *members;

  if (agent->transcript == NULL)
    {
      json_object_unref (event);
      return;
    }
  json_object_set_string_member (line, "ts", stamp);
  json_object_set_int_member (line, "elapsed_ms", (g_get_monotonic_time () - agent->start_us) / 1000);
  json_object_set_string_member (line, "type", type);
  json_object_set_int_member (line, "turn", agent->run.turn);
  members = json_object_get_members (event);
  for (GList *l = members; l != NULL; l = l->next)
    json_object_set_member (line, l->data, json_node_copy (json_object_get_member (event, l->data)));
  g_list_free (members);
  json_object_unref (event);

  json_node_set_object (node, line);
  text = json_to_string (node, FALSE);
  fputs (text, agent->transcript);
  fputc ('\n', agent->transcript);
  fflush (agent->transcript);
}

static void
on_retry (guint attempt, guint status, const char *reason, double delay_s, gpointer user_data)
{
  Agent *agent = user_data;
  JsonObject *event = json_object_new ();

  g_autofree char *shown = sandstep_escape (reason, -1, 200, SANDSTEP_ESCAPE_LINE);

  g_printerr ("sandstep agent: turn %u: the chat endpoint failed (%s); retrying in %.1fs\n", agent->run.turn,
              shown, delay_s);
  json_object_set_int_member (event, "attempt", attempt);
  json_object_set_int_member (event, "status", status);
  json_object_set_string_member (event, "reason", reason);
  json_object_set_int_member (event, "delay_ms", (gint64) (delay_s * 1000));
  write_event (agent, "retry", event);
}

static void
end_event (Agent *agent, const char *reason, const char *message)
{
  JsonObject *event = json_object_new ();

  json_object_set_string_member (event, "reason", reason);
  if (message != NULL)
    json_object_set_string_member (event, "message", message);
  write_event (agent, "end", event);
}

/* The loop's hooks: the toolbox answers, the transcript records, stderr says how each turn went. */
static char *
call_tool (const char *name, JsonObject *arguments, gboolean *out_is_error, GError **error, gpointer user_data)
{
  Agent *agent = user_data;

  return sandstep_toolbox_call (agent->toolbox, name, arguments, out_is_error, error);
}

static void
record (const char *type, JsonObject *event, gpointer user_data)
{
  write_event (user_data, type, event);
}

static void
turn_done (guint turn, const char *tool_names, double seconds, gpointer user_data)
{
  /* The names are the model's: a tool it made up could carry escape sequences. */
  g_autofree char *shown = sandstep_escape (tool_names, -1, 200, SANDSTEP_ESCAPE_LINE);

  g_printerr ("sandstep agent: turn %u: %s (%.1fs)\n", turn, shown, seconds);
}

static char *
read_prompt (SandstepInvocation *invocation, GError **error)
{
  if (invocation->operands->len == 1 && strcmp (invocation->operands->pdata[0], "-") == 0)
    {
      g_autoptr(GIOChannel) channel = g_io_channel_unix_new (STDIN_FILENO);
      char *text = NULL;
      gsize len = 0;

      if (g_io_channel_read_to_end (channel, &text, &len, error) != G_IO_STATUS_NORMAL)
        return NULL;
      g_strstrip (text);
      return text;
    }
  g_ptr_array_add (invocation->operands, NULL);
  {
    char *text = g_strjoinv (" ", (char **) invocation->operands->pdata);
    g_ptr_array_remove_index (invocation->operands, invocation->operands->len - 1);
    g_strstrip (text);
    return text;
  }
}

static int
stop_for_time (Agent *agent, double budget_s, const char *during)
{
  g_autofree char *message = g_strdup_printf ("the time budget of %gs ran out in turn %u, %s, before the model gave "
                                              "a final answer; raise --time-budget or ask for less",
                                              budget_s, agent->run.turn, during);

  g_printerr ("sandstep agent: %s\n", message);
  end_event (agent, "time_budget", message);
  return SANDSTEP_EXIT_TIMEOUT;
}

gboolean
sandstep_op_agent (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autofree char *prompt = NULL;
  g_autofree char *system_prompt = NULL;
  g_autoptr(SandstepLlm) llm = NULL;
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(SandstepToolbox) toolbox = NULL;
  g_autoptr(JsonArray) definitions = NULL;
  const char *model = sandstep_invocation_get (invocation, "model");
  const char *turns_text = sandstep_invocation_get (invocation, "max-turns");
  const char *budget_text = sandstep_invocation_get (invocation, "time-budget");
  const char *system_path = sandstep_invocation_get (invocation, "system");
  const char *transcript_path = sandstep_invocation_get (invocation, "transcript");
  guint64 max_turns = DEFAULT_MAX_TURNS;
  double budget_s = 0;
  gint64 deadline_us = 0;
  Agent agent = { 0 };
  SandstepAgentHooks hooks = { call_tool, record, turn_done, &agent };
  SandstepLlmOptions options;
  SandstepToolLimits limits;
  SandstepExportOptions export_options = { 0 };
  GPtrArray *exports = sandstep_invocation_get_all (invocation, "export");
  g_auto(GStrv) exported_paths = NULL;
  JsonObject *event;
  gboolean ok = FALSE;
  g_autoptr(GError) local_error = NULL;

  agent.start_us = g_get_monotonic_time ();
  if (model == NULL || model[0] == '\0')
    model = g_getenv ("OPENAI_MODEL");
  if (model == NULL || model[0] == '\0')
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no model given; pass --model=NAME (model=NAME in make) or set OPENAI_MODEL");
  if (invocation->operands->len == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no prompt given; write: sandstep agent --handle=H -- PROMPT (or -- - to read it from "
                           "stdin)");
  prompt = read_prompt (invocation, error);
  if (prompt == NULL)
    return FALSE;
  if (prompt[0] == '\0')
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING, "the prompt is empty");
  if (!g_utf8_validate (prompt, -1, NULL))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "the prompt is not valid UTF-8 text");
  if (turns_text != NULL && !sandstep_parse_count (turns_text, G_MAXUINT32, &max_turns))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "max-turns must be a whole number of 1 or more, got '%s'", turns_text);
  if (budget_text != NULL && !sandstep_parse_seconds ("time-budget", budget_text, FALSE, &budget_s, error))
    return FALSE;
  if (system_path != NULL)
    {
      g_autoptr(GError) local = NULL;
      if (!g_file_get_contents (system_path, &system_prompt, NULL, &local))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "cannot read the system prompt file '%s' (--system): %s", system_path, local->message);
      if (!g_utf8_validate (system_prompt, -1, NULL))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "the system prompt file '%s' (--system) is not valid UTF-8 text", system_path);
    }
  if (!sandstep_tool_options_parse (invocation, &limits, error))
    return FALSE;
  /* Bad destinations are refused before the sandbox is claimed, or a model asked. */
  if (exports != NULL && exports->len > 0)
    {
      if (!sandstep_export_check (exports, &export_options, error))
        return FALSE;
      exported_paths = export_paths (exports);
      limits.exports = (const char *const *) exported_paths;
    }

  sandstep_llm_options_init (&options);
  llm = sandstep_llm_new (&options, &local_error);
  if (llm == NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s", local_error->message);
  sandstep_llm_set_retry_func (llm, on_retry, &agent);

  if (transcript_path != NULL)
    {
      agent.transcript = fopen (transcript_path, "we");
      if (agent.transcript == NULL)
        return sandstep_throw_errno (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, errno,
                                     "cannot write the transcript '%s' (--transcript)", transcript_path);
    }

  /* Claimed once, for the whole run. */
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    goto out;
  if (budget_s > 0)
    deadline_us = agent.start_us + (gint64) (budget_s * G_USEC_PER_SEC);
  toolbox = sandstep_toolbox_new (attachment, &limits);
  sandstep_toolbox_set_deadline (toolbox, deadline_us);
  if (g_strcmp0 (sandstep_invocation_get (invocation, "python"), "yes") == 0 &&
      !sandstep_offer_python (toolbox, attachment, sandstep_invocation_get (invocation, "python-budget"), "agent",
                              error))
    goto out;
  if (system_prompt == NULL)
    {
      g_autofree char *names = sandstep_toolbox_tool_list (toolbox);
      gboolean python = g_strcmp0 (sandstep_invocation_get (invocation, "python"), "yes") == 0;
      g_autofree char *python_note = python ? g_strdup_printf (" %s runs Python in one interpreter that keeps its "
                                                                "variables, imports and open files for this whole run.",
                                                                sandstep_toolbox_tool_name (toolbox, "run_python"))
                                            : g_strdup ("");

      system_prompt = g_strdup_printf (default_system_prompt, python ? "five" : "four", names, python_note);
    }
  agent.toolbox = toolbox;
  definitions = sandstep_toolbox_definitions (toolbox);

  event = json_object_new ();
  json_object_set_string_member (event, "handle", attachment->handle);
  json_object_set_string_member (event, "url", sandstep_llm_get_url (llm));
  json_object_set_string_member (event, "model", model);
  json_object_set_int_member (event, "max_turns", max_turns);
  if (budget_s > 0)
    json_object_set_double_member (event, "time_budget", budget_s);
  write_event (&agent, "start", event);

  agent.run.model = model;
  agent.run.system_prompt = system_prompt;
  agent.run.prompt = prompt;
  agent.run.tools = definitions;
  agent.run.max_turns = max_turns;
  agent.run.deadline_us = deadline_us;
  sandstep_agent_run (llm, &agent.run, &hooks);

  switch (agent.run.end)
    {
    case SANDSTEP_AGENT_ANSWERED:
      g_printerr ("sandstep agent: turn %u: final answer (%.1fs)\n", agent.run.turn, agent.run.last_turn_s);
      if (agent.run.answer == NULL || agent.run.answer[0] == '\0')
        {
          g_autofree char *reason = sandstep_escape (agent.run.finish_reason != NULL ? agent.run.finish_reason : "none",
                                                     -1, 64, SANDSTEP_ESCAPE_VALUE);
          g_printerr ("sandstep agent: the model ended without an answer (finish_reason '%s')\n", reason);
        }
      else
        {
          fputs (agent.run.answer, stdout);
          if (!g_str_has_suffix (agent.run.answer, "\n"))
            fputc ('\n', stdout);
          fflush (stdout);
        }
      event = json_object_new ();
      json_object_set_string_member (event, "content", agent.run.answer != NULL ? agent.run.answer : "");
      write_event (&agent, "final", event);
      /* Only a run that answered exports, and all of its files or none. */
      if (exports != NULL && exports->len > 0)
        {
          GError *export_error = NULL;

          if (!sandstep_export_files (attachment, exports, &export_options, print_staged, NULL, &export_error))
            {
              end_event (&agent, "export", export_error->message);
              g_propagate_error (error, export_error);
              break;
            }
          g_printerr ("sandstep agent: published %u file%s\n", exports->len, exports->len == 1 ? "" : "s");
        }
      end_event (&agent, "answer", NULL);
      *out_exit = 0;
      ok = TRUE;
      break;
    case SANDSTEP_AGENT_OUT_OF_TIME:
      *out_exit = stop_for_time (&agent, budget_s, agent.run.during);
      ok = TRUE;
      break;
    case SANDSTEP_AGENT_ENDPOINT_FAILED:
      g_printerr ("sandstep agent: turn %u: %s\n", agent.run.turn, agent.run.error->message);
      end_event (&agent, "endpoint", agent.run.error->message);
      *out_exit = AGENT_EXIT_ENDPOINT;
      ok = TRUE;
      break;
    case SANDSTEP_AGENT_TOOLS_FAILED:
      end_event (&agent, "sandbox", agent.run.error->message);
      g_propagate_error (error, g_steal_pointer (&agent.run.error));
      break;
    case SANDSTEP_AGENT_OUT_OF_TURNS:
      {
        g_autofree char *message =
          g_strdup_printf ("stopped after %u turn%s (max-turns=%u) without a final answer; raise max-turns, or ask "
                           "for less", (guint) max_turns, max_turns == 1 ? "" : "s", (guint) max_turns);
        g_printerr ("sandstep agent: %s\n", message);
        end_event (&agent, "max_turns", message);
      }
      *out_exit = AGENT_EXIT_MAX_TURNS;
      ok = TRUE;
      break;
    }

out:
  sandstep_agent_run_clear (&agent.run);
  if (agent.transcript != NULL)
    fclose (agent.transcript);
  return ok;
}
