/* sandstep-agent.c: an agent's turn loop (see the header). */
#include "sandstep-agent.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-json.h"

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

static int
parse_u_escape (const char *p)
{
  int value = 0;

  if (p[0] != '\\' || p[1] != 'u')
    return -1;
  for (int i = 2; i < 6; i++)
    {
      int digit = g_ascii_xdigit_value (p[i]);
      if (digit < 0)
        return -1;
      value = value * 16 + digit;
    }
  return value;
}

gboolean
sandstep_json_has_lone_surrogate_escape (const char *json)
{
  for (const char *p = json; *p != '\0'; p++)
    {
      int unit;

      if (*p != '\\')
        continue;
      if (p[1] == '\0')
        break;
      unit = parse_u_escape (p);
      if (unit < 0)
        {
          p++;  /* some other escape: skip its letter, "\\\\" included */
          continue;
        }
      if (unit >= 0xDC00 && unit <= 0xDFFF)
        return TRUE;
      if (unit >= 0xD800 && unit <= 0xDBFF)
        {
          int low = parse_u_escape (p + 6);
          if (low < 0xDC00 || low > 0xDFFF)
            return TRUE;
          p += 11;
          continue;
        }
      p += 5;
    }
  return FALSE;
}

/* The arguments of a tool call as an object, or NULL with *out_message for
 * the model: they come as a JSON string (some servers send an object). */
static JsonObject *
parse_arguments (const char *tool, JsonNode *arguments, char **out_raw, char **out_message)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *shown = NULL;
  g_autoptr(JsonNode) root = NULL;
  const char *text;

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
  /* The model's text: depth and size are checked before json-glib recurses into it. */
  root = sandstep_json_parse (text, strlen (text), G_MAXSIZE, &error);
  if (root == NULL)
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
  if (!JSON_NODE_HOLDS_OBJECT (root))
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

static JsonObject *
make_message (const char *role, const char *content)
{
  JsonObject *message = json_object_new ();

  json_object_set_string_member (message, "role", role);
  json_object_set_string_member (message, "content", content);
  return message;
}

void
sandstep_agent_run_clear (SandstepAgentRun *run)
{
  g_clear_pointer (&run->answer, g_free);
  g_clear_pointer (&run->finish_reason, g_free);
  g_clear_error (&run->error);
}

static double
seconds_since (gint64 start_us)
{
  return (g_get_monotonic_time () - start_us) / 1e6;
}

static void
emit (const SandstepAgentHooks *hooks, const char *type, JsonObject *event)
{
  if (hooks->event != NULL)
    hooks->event (type, event, hooks->user_data);
  else
    json_object_unref (event);
}

static void
out_of_time (SandstepAgentRun *run, const char *during)
{
  run->end = SANDSTEP_AGENT_OUT_OF_TIME;
  run->during = during;
}

/* The offered tools' names, "a, b, c or d": they carry the prefix, if any. */
static char *
tool_names (JsonArray *tools)
{
  GString *out = g_string_new (NULL);
  guint n = json_array_get_length (tools);

  for (guint i = 0; i < n; i++)
    g_string_append_printf (out, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                            json_object_get_string_member (json_array_get_object_element (tools, i), "name"));
  return g_string_free (out, FALSE);
}

/* Answers every call of one reply, in order, one tool message per call id.
 * FALSE when the run ends here (out of time, or the tools failed). */
static gboolean
answer_calls (SandstepAgentRun *run, const SandstepAgentHooks *hooks, GHashTable *known, JsonArray *calls,
              JsonArray *messages, GString *names)
{
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
      JsonObject *event, *reply;

      if (deadline_passed (run->deadline_us))
        {
          out_of_time (run, "between tool calls");
          return FALSE;
        }
      g_string_append_printf (names, "%s%s", names->len > 0 ? ", " : "", name != NULL ? name : "?");
      if (name == NULL)
        {
          is_error = TRUE;
          g_autofree char *offered = tool_names (run->tools);
          result = g_strdup_printf ("This tool call has no function name. Call one of %s.", offered);
        }
      else if (!g_hash_table_contains (known, name))
        {
          JsonNode *given = json_object_get_member (function, "arguments");

          if (given != NULL && JSON_NODE_HOLDS_VALUE (given) && json_node_get_value_type (given) == G_TYPE_STRING)
            raw = g_strdup (json_node_get_string (given));
          result = hooks->call_tool (name, NULL, &is_error, &tool_error, hooks->user_data);
        }
      else
        {
          arguments = parse_arguments (name, json_object_get_member (function, "arguments"), &raw, &result);
          if (arguments == NULL)
            is_error = TRUE;
          else
            result = hooks->call_tool (name, arguments, &is_error, &tool_error, hooks->user_data);
        }
      if (result == NULL)
        {
          /* Terminal: the tools cannot be used any more. */
          g_prefix_error (&tool_error, "turn %u, %s: ", run->turn, name);
          run->end = SANDSTEP_AGENT_TOOLS_FAILED;
          run->error = g_steal_pointer (&tool_error);
          return FALSE;
        }

      event = json_object_new ();
      json_object_set_string_member (event, "tool_call_id", id != NULL ? id : "");
      json_object_set_string_member (event, "name", name != NULL ? name : "");
      if (raw != NULL)
        json_object_set_string_member (event, "arguments", raw);
      json_object_set_boolean_member (event, "is_error", is_error);
      json_object_set_int_member (event, "duration_ms", (g_get_monotonic_time () - call_start) / 1000);
      json_object_set_string_member (event, "content", result);
      emit (hooks, "tool_result", event);

      reply = json_object_new ();
      json_object_set_string_member (reply, "role", "tool");
      json_object_set_string_member (reply, "tool_call_id", id != NULL ? id : "");
      json_object_set_string_member (reply, "content", result);
      json_array_add_object_element (messages, reply);
    }
  return TRUE;
}

void
sandstep_agent_run (SandstepLlm *llm, SandstepAgentRun *run, const SandstepAgentHooks *hooks)
{
  g_autoptr(JsonObject) request = json_object_new ();
  g_autoptr(GHashTable) known = g_hash_table_new (g_str_hash, g_str_equal);
  JsonArray *messages, *tools;
  guint sent = 0;

  for (guint i = 0; i < json_array_get_length (run->tools); i++)
    g_hash_table_add (known, (gpointer) json_object_get_string_member (json_array_get_object_element (run->tools, i),
                                                                         "name"));
  json_object_set_string_member (request, "model", run->model);
  messages = json_array_new ();
  json_array_add_object_element (messages, make_message ("system", run->system_prompt));
  json_array_add_object_element (messages, make_message ("user", run->prompt));
  json_object_set_array_member (request, "messages", messages);
  tools = sandstep_llm_tools_from_definitions (run->tools);
  json_object_set_array_member (request, "tools", tools);

  for (run->turn = 1; run->turn <= run->max_turns; run->turn++)
    {
      g_autoptr(JsonObject) response = NULL;
      g_autoptr(GError) local = NULL;
      g_autoptr(GString) names = g_string_new (NULL);
      gint64 turn_start = g_get_monotonic_time ();
      JsonArray *new_messages;
      JsonObject *message, *event;
      JsonNode *calls_node;
      JsonArray *calls = NULL;
      guint attempts = 0;

      if (deadline_passed (run->deadline_us))
        {
          out_of_time (run, "before asking the model");
          return;
        }

      event = json_object_new ();
      if (run->turn == 1)
        {
          json_object_set_string_member (event, "url", sandstep_llm_get_url (llm));
          json_object_set_string_member (event, "model", run->model);
          json_object_set_array_member (event, "tools", json_array_ref (tools));
        }
      json_object_set_int_member (event, "message_count", json_array_get_length (messages));
      new_messages = json_array_new ();
      for (guint i = sent; i < json_array_get_length (messages); i++)
        json_array_add_element (new_messages, json_node_copy (json_array_get_element (messages, i)));
      json_object_set_array_member (event, "messages", new_messages);
      emit (hooks, "request", event);
      sent = json_array_get_length (messages);

      response = sandstep_llm_chat (llm, request, run->deadline_us, &attempts, &local);
      if (response == NULL)
        {
          if (g_error_matches (local, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_DEADLINE))
            out_of_time (run, "while waiting for the model");
          else
            {
              run->end = SANDSTEP_AGENT_ENDPOINT_FAILED;
              run->error = g_steal_pointer (&local);
            }
          return;
        }
      event = json_object_new ();
      json_object_set_int_member (event, "attempts", attempts);
      json_object_set_int_member (event, "duration_ms", (g_get_monotonic_time () - turn_start) / 1000);
      json_object_set_object_member (event, "body", json_object_ref (response));
      emit (hooks, "response", event);

      message = json_object_get_object_member (
        json_array_get_object_element (json_object_get_array_member (response, "choices"), 0), "message");
      /* The assistant message goes back verbatim, tool calls and all. */
      json_array_add_object_element (messages, json_object_ref (message));
      calls_node = json_object_get_member (message, "tool_calls");
      if (calls_node != NULL && JSON_NODE_HOLDS_ARRAY (calls_node))
        calls = json_node_get_array (calls_node);

      if (calls == NULL || json_array_get_length (calls) == 0)
        {
          const char *reason = string_member (
            json_array_get_object_element (json_object_get_array_member (response, "choices"), 0), "finish_reason");

          run->end = SANDSTEP_AGENT_ANSWERED;
          run->answer = content_text (message);
          run->finish_reason = g_strdup (reason);
          run->last_turn_s = seconds_since (turn_start);
          return;
        }
      if (!answer_calls (run, hooks, known, calls, messages, names))
        return;
      if (hooks->turn_done != NULL)
        hooks->turn_done (run->turn, names->str, seconds_since (turn_start), hooks->user_data);
    }
  run->turn = run->max_turns;
  run->end = SANDSTEP_AGENT_OUT_OF_TURNS;
}
