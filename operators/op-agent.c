/* op-agent.c: an LLM agent loop over the four sandbox tools.
 *
 *   sandstep agent --handle=H [--model=M] [--max-turns=N] [--time-budget=SECONDS]
 *                  [--system=FILE] [--transcript=FILE] -- PROMPT
 *
 * Claims the sandbox once, for the whole run, then talks to any
 * OpenAI-compatible chat-completions endpoint (OPENAI_BASE_URL,
 * OPENAI_API_KEY; the model from --model or OPENAI_MODEL): each reply's tool
 * calls are answered in order, one tool message per call id, and the loop
 * ends when a reply has no tool calls (whatever its finish_reason).  A
 * malformed argument string, an unknown tool or a bad argument is answered to
 * the model as a tool error; a terminal sandbox error ends the run.
 *
 * Output: the final answer on stdout; one progress line per turn on stderr
 * ("sandstep agent: turn 3: run_command, read_file (4.2s)"); with
 * --transcript, one JSON object per line (see write_event()), never the API
 * key.  PROMPT "-" reads the prompt from stdin.
 *
 * Exit statuses: 0 with a final answer; 1 the chat endpoint failed (refused
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
#include "sandstep-llm.h"
#include "sandstep-output.h"
#include "sandstep-tools.h"

#define DEFAULT_MAX_TURNS 50
#define AGENT_EXIT_ENDPOINT 1
#define AGENT_EXIT_MAX_TURNS 2

static const char default_system_prompt[] =
  "You are an agent working in an isolated Linux sandbox through four tools: run_command, read_file, write_file "
  "and list_directory. Your working directory is /workspace; the files you write there stay for later steps. "
  "Look before you change things, check your work by running it, and keep tool output short (filter it with "
  "grep, head or tail). When the task is done, answer with a short summary of what you did and found, without "
  "calling a tool.";

typedef struct {
  FILE *transcript;
  gint64 start_us;          /* monotonic */
  guint turn;
  SandstepLlm *llm;
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
  json_object_set_int_member (line, "turn", agent->turn);
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

  g_printerr ("sandstep agent: turn %u: the chat endpoint failed (%s); retrying in %.1fs\n", agent->turn, reason,
              delay_s);
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

static double
seconds_since (gint64 start_us)
{
  return (g_get_monotonic_time () - start_us) / 1e6;
}

/* The text of a message's content: a string, or an array of text parts. */
static char *
content_text (JsonObject *message)
{
  JsonNode *content = json_object_get_member (message, "content");
  GString *out;

  if (content == NULL || JSON_NODE_HOLDS_NULL (content))
    return NULL;
  if (JSON_NODE_HOLDS_VALUE (content) && json_node_get_value_type (content) == G_TYPE_STRING)
    return g_strdup (json_node_get_string (content));
  if (!JSON_NODE_HOLDS_ARRAY (content))
    return NULL;
  out = g_string_new (NULL);
  for (guint i = 0; i < json_array_get_length (json_node_get_array (content)); i++)
    {
      JsonNode *part = json_array_get_element (json_node_get_array (content), i);
      if (JSON_NODE_HOLDS_OBJECT (part))
        g_string_append (out, json_object_get_string_member_with_default (json_node_get_object (part), "text", ""));
    }
  return g_string_free (out, FALSE);
}

static const char *
string_member (JsonObject *object, const char *name)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/* The arguments of a tool call as an object, or NULL with *out_message for
 * the model: they come as a JSON string (some servers send an object). */
static JsonObject *
parse_arguments (const char *tool, JsonNode *arguments, char **out_raw, char **out_message)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *shown = NULL;
  const char *text;
  JsonNode *root;

  *out_raw = NULL;
  if (arguments == NULL || JSON_NODE_HOLDS_NULL (arguments))
    return json_object_new ();
  if (JSON_NODE_HOLDS_OBJECT (arguments))
    {
      *out_raw = json_to_string (arguments, FALSE);
      return json_object_ref (json_node_get_object (arguments));
    }
  if (!JSON_NODE_HOLDS_VALUE (arguments) || json_node_get_value_type (arguments) != G_TYPE_STRING)
    {
      *out_raw = json_to_string (arguments, FALSE);
      *out_message = g_strdup_printf ("The arguments of this %s call must be a JSON object in a string, got %s. "
                                      "Call %s again with a JSON object.", tool, *out_raw, tool);
      return NULL;
    }
  text = json_node_get_string (arguments);
  *out_raw = g_strdup (text);
  if (text[strspn (text, " \t\r\n")] == '\0')
    return json_object_new ();
  if (!json_parser_load_from_data (parser, text, -1, &error))
    {
      if (sandstep_json_has_lone_surrogate_escape (text))
        {
          *out_message = g_strdup_printf ("The arguments of this %s call contain characters that cannot be encoded "
                                          "as UTF-8 (unpaired surrogates).", tool);
          return NULL;
        }
      shown = g_utf8_substring (text, 0, MIN (g_utf8_strlen (text, -1), 200));
      *out_message = g_strdup_printf ("The arguments of this %s call are not valid JSON (%s): %s%s. Call %s again "
                                      "with its arguments as one JSON object.", tool, error->message, shown,
                                      g_utf8_strlen (text, -1) > 200 ? "..." : "", tool);
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      *out_message = g_strdup_printf ("The arguments of this %s call must be a JSON object, got %s. Call %s again "
                                      "with its arguments as one JSON object.", tool, text, tool);
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

static gboolean
deadline_passed (gint64 deadline_us)
{
  return deadline_us > 0 && g_get_monotonic_time () >= deadline_us;
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

static JsonObject *
make_message (const char *role, const char *content)
{
  JsonObject *message = json_object_new ();

  json_object_set_string_member (message, "role", role);
  json_object_set_string_member (message, "content", content);
  return message;
}

static int
stop_for_time (Agent *agent, double budget_s, const char *during)
{
  g_autofree char *message = g_strdup_printf ("the time budget of %gs ran out in turn %u, %s, before the model gave "
                                              "a final answer; raise --time-budget or ask for less",
                                              budget_s, agent->turn, during);

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
  g_autoptr(JsonObject) request = json_object_new ();
  g_autoptr(GHashTable) known = g_hash_table_new (g_str_hash, g_str_equal);
  const char *model = sandstep_invocation_get (invocation, "model");
  const char *turns_text = sandstep_invocation_get (invocation, "max-turns");
  const char *budget_text = sandstep_invocation_get (invocation, "time-budget");
  const char *system_path = sandstep_invocation_get (invocation, "system");
  const char *transcript_path = sandstep_invocation_get (invocation, "transcript");
  guint64 max_turns = DEFAULT_MAX_TURNS;
  double budget_s = 0;
  gint64 deadline_us = 0;
  JsonArray *messages, *tools;
  guint sent = 0;
  Agent agent = { 0 };
  SandstepLlmOptions options;
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
  else
    system_prompt = g_strdup (default_system_prompt);

  sandstep_llm_options_init (&options);
  llm = sandstep_llm_new (&options, &local_error);
  if (llm == NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s", local_error->message);
  agent.llm = llm;
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
  toolbox = sandstep_toolbox_new (attachment, NULL);
  sandstep_toolbox_set_deadline (toolbox, deadline_us);
  definitions = sandstep_toolbox_definitions (toolbox);
  for (guint i = 0; i < json_array_get_length (definitions); i++)
    g_hash_table_add (known, (gpointer) json_object_get_string_member (json_array_get_object_element (definitions, i),
                                                                         "name"));

  json_object_set_string_member (request, "model", model);
  messages = json_array_new ();
  json_array_add_object_element (messages, make_message ("system", system_prompt));
  json_array_add_object_element (messages, make_message ("user", prompt));
  json_object_set_array_member (request, "messages", messages);
  tools = sandstep_llm_tools_from_definitions (definitions);
  json_object_set_array_member (request, "tools", tools);

  event = json_object_new ();
  json_object_set_string_member (event, "handle", attachment->handle);
  json_object_set_string_member (event, "url", sandstep_llm_get_url (llm));
  json_object_set_string_member (event, "model", model);
  json_object_set_int_member (event, "max_turns", max_turns);
  if (budget_s > 0)
    json_object_set_double_member (event, "time_budget", budget_s);
  write_event (&agent, "start", event);

  for (agent.turn = 1; agent.turn <= max_turns; agent.turn++)
    {
      g_autoptr(JsonObject) response = NULL;
      g_autoptr(GError) local = NULL;
      g_autoptr(GString) names = g_string_new (NULL);
      gint64 turn_start = g_get_monotonic_time ();
      JsonArray *new_messages = json_array_new ();
      JsonObject *message;
      JsonNode *calls_node;
      JsonArray *calls = NULL;
      guint attempts = 0;

      if (deadline_passed (deadline_us))
        {
          json_array_unref (new_messages);
          *out_exit = stop_for_time (&agent, budget_s, "before asking the model");
          ok = TRUE;
          goto out;
        }

      event = json_object_new ();
      if (agent.turn == 1)
        {
          json_object_set_string_member (event, "url", sandstep_llm_get_url (llm));
          json_object_set_string_member (event, "model", model);
          json_object_set_array_member (event, "tools", json_array_ref (tools));
        }
      json_object_set_int_member (event, "message_count", json_array_get_length (messages));
      for (guint i = sent; i < json_array_get_length (messages); i++)
        json_array_add_element (new_messages, json_node_copy (json_array_get_element (messages, i)));
      json_object_set_array_member (event, "messages", new_messages);
      write_event (&agent, "request", event);
      sent = json_array_get_length (messages);

      response = sandstep_llm_chat (llm, request, deadline_us, &attempts, &local);
      if (response == NULL)
        {
          if (g_error_matches (local, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_DEADLINE))
            {
              *out_exit = stop_for_time (&agent, budget_s, "while waiting for the model");
              ok = TRUE;
              goto out;
            }
          g_printerr ("sandstep agent: turn %u: %s\n", agent.turn, local->message);
          end_event (&agent, "endpoint", local->message);
          *out_exit = AGENT_EXIT_ENDPOINT;
          ok = TRUE;
          goto out;
        }
      event = json_object_new ();
      json_object_set_int_member (event, "attempts", attempts);
      json_object_set_int_member (event, "duration_ms", (g_get_monotonic_time () - turn_start) / 1000);
      json_object_set_object_member (event, "body", json_object_ref (response));
      write_event (&agent, "response", event);

      message = json_object_get_object_member (
        json_array_get_object_element (json_object_get_array_member (response, "choices"), 0), "message");
      /* The assistant message goes back verbatim, tool calls and all. */
      json_array_add_object_element (messages, json_object_ref (message));
      calls_node = json_object_get_member (message, "tool_calls");
      if (calls_node != NULL && JSON_NODE_HOLDS_ARRAY (calls_node))
        calls = json_node_get_array (calls_node);

      if (calls == NULL || json_array_get_length (calls) == 0)
        {
          g_autofree char *answer = content_text (message);

          g_printerr ("sandstep agent: turn %u: final answer (%.1fs)\n", agent.turn, seconds_since (turn_start));
          if (answer == NULL || answer[0] == '\0')
            g_printerr ("sandstep agent: the model ended without an answer (finish_reason '%s')\n",
                        string_member (json_array_get_object_element (json_object_get_array_member (response,
                                                                                                     "choices"), 0),
                                       "finish_reason") ?: "none");
          else
            {
              fputs (answer, stdout);
              if (!g_str_has_suffix (answer, "\n"))
                fputc ('\n', stdout);
              fflush (stdout);
            }
          event = json_object_new ();
          json_object_set_string_member (event, "content", answer != NULL ? answer : "");
          write_event (&agent, "final", event);
          end_event (&agent, "answer", NULL);
          *out_exit = 0;
          ok = TRUE;
          goto out;
        }

      /* Every call answered, in order, one tool message per call id. */
      for (guint i = 0; i < json_array_get_length (calls); i++)
        {
          JsonNode *call_node = json_array_get_element (calls, i);
          JsonObject *call = JSON_NODE_HOLDS_OBJECT (call_node) ? json_node_get_object (call_node) : NULL;
          JsonNode *function_node = call != NULL ? json_object_get_member (call, "function") : NULL;
          JsonObject *function = function_node != NULL && JSON_NODE_HOLDS_OBJECT (function_node)
                                   ? json_node_get_object (function_node) : NULL;
          const char *id = string_member (call, "id");
          const char *name = string_member (function, "name");
          g_autofree char *raw = NULL;
          g_autofree char *result = NULL;
          g_autoptr(JsonObject) arguments = NULL;
          g_autoptr(GError) tool_error = NULL;
          gboolean is_error = FALSE;
          gint64 call_start = g_get_monotonic_time ();
          JsonObject *reply;

          if (deadline_passed (deadline_us))
            {
              *out_exit = stop_for_time (&agent, budget_s, "between tool calls");
              ok = TRUE;
              goto out;
            }
          g_string_append_printf (names, "%s%s", names->len > 0 ? ", " : "", name != NULL ? name : "?");
          if (name == NULL)
            {
              is_error = TRUE;
              result = g_strdup ("This tool call has no function name. Call one of run_command, read_file, "
                                 "write_file or list_directory.");
            }
          else if (!g_hash_table_contains (known, name))
            {
              JsonNode *given = json_object_get_member (function, "arguments");

              if (given != NULL && JSON_NODE_HOLDS_VALUE (given) && json_node_get_value_type (given) == G_TYPE_STRING)
                raw = g_strdup (json_node_get_string (given));
              result = sandstep_toolbox_call (toolbox, name, NULL, &is_error, &tool_error);
            }
          else
            {
              arguments = parse_arguments (name, json_object_get_member (function, "arguments"), &raw, &result);
              if (arguments == NULL)
                is_error = TRUE;
              else
                result = sandstep_toolbox_call (toolbox, name, arguments, &is_error, &tool_error);
            }
          if (result == NULL)
            {
              /* Terminal: the sandbox cannot be used any more. */
              g_prefix_error (&tool_error, "turn %u, %s: ", agent.turn, name);
              end_event (&agent, "sandbox", tool_error->message);
              g_propagate_error (error, g_steal_pointer (&tool_error));
              goto out;
            }

          event = json_object_new ();
          json_object_set_string_member (event, "tool_call_id", id != NULL ? id : "");
          json_object_set_string_member (event, "name", name != NULL ? name : "");
          if (raw != NULL)
            json_object_set_string_member (event, "arguments", raw);
          json_object_set_boolean_member (event, "is_error", is_error);
          json_object_set_int_member (event, "duration_ms", (g_get_monotonic_time () - call_start) / 1000);
          json_object_set_string_member (event, "content", result);
          write_event (&agent, "tool_result", event);

          reply = json_object_new ();
          json_object_set_string_member (reply, "role", "tool");
          json_object_set_string_member (reply, "tool_call_id", id != NULL ? id : "");
          json_object_set_string_member (reply, "content", result);
          json_array_add_object_element (messages, reply);
        }
      g_printerr ("sandstep agent: turn %u: %s (%.1fs)\n", agent.turn, names->str, seconds_since (turn_start));
    }

  agent.turn = max_turns;
  {
    g_autofree char *message =
      g_strdup_printf ("stopped after %u turn%s (max-turns=%u) without a final answer; raise max-turns, or ask for "
                       "less", (guint) max_turns, max_turns == 1 ? "" : "s", (guint) max_turns);
    g_printerr ("sandstep agent: %s\n", message);
    end_event (&agent, "max_turns", message);
  }
  *out_exit = AGENT_EXIT_MAX_TURNS;
  ok = TRUE;

out:
  if (agent.transcript != NULL)
    fclose (agent.transcript);
  return ok;
}
