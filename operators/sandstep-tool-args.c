/* sandstep-tool-args.c: a tool call's arguments, read as the model sent them; see sandstep-tool-args.h. */
#include "sandstep-tool-args.h"

#include <math.h>
#include <string.h>

#include "sandstep-output.h"
#include "sandstep-units.h"

static const char *
example_of (const char *tool)
{
  if (strcmp (tool, "run_command") == 0)
    return "{\"command\": \"ls -la\"}";
  if (strcmp (tool, "read_file") == 0)
    return "{\"path\": \"notes.txt\"}";
  if (strcmp (tool, "write_file") == 0)
    return "{\"path\": \"notes.txt\", \"content\": \"hello\\n\"}";
  return "{\"path\": \".\"}";
}

static char *
describe_node (JsonNode *node)
{
  g_autofree char *shown = NULL;

  switch (json_node_get_node_type (node))
    {
    case JSON_NODE_NULL:
      return g_strdup ("null");
    case JSON_NODE_OBJECT:
      return g_strdup ("an object");
    case JSON_NODE_ARRAY:
      return g_strdup ("an array");
    case JSON_NODE_VALUE:
      break;
    }
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_BOOLEAN:
      return g_strdup_printf ("a boolean (%s)", json_node_get_boolean (node) ? "true" : "false");
    case G_TYPE_INT64:
      return g_strdup_printf ("a number (%" G_GINT64_FORMAT ")", json_node_get_int (node));
    case G_TYPE_DOUBLE:
      shown = sandstep_format_number (json_node_get_double (node));
      return g_strdup_printf ("a number (%s)", shown);
    case G_TYPE_STRING:
      return g_strdup ("a string");
    default:
      return g_strdup ("a value of another type");
    }
}

static char *
missing_message (const SandstepToolArgs *call, const char *name, const char *type)
{
  return g_strdup_printf ("%s needs the argument \"%s\" (%s). Call it again with it, e.g. %s.",
                          call->shown, name, type, example_of (call->tool));
}

static char *
mistyped_message (const SandstepToolArgs *call, const char *name, const char *type, JsonNode *node)
{
  g_autofree char *got = describe_node (node);

  return g_strdup_printf ("The argument \"%s\" of %s must be %s, got %s. Call it again, e.g. %s.", name,
                          call->shown, type, got, example_of (call->tool));
}

static gboolean
is_string_node (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING;
}

/* A string argument; *out NULL when absent (or null, for an optional one). */
gboolean
sandstep_tool_arg_string (const SandstepToolArgs *call, const char *name, gboolean required, const char **out,
                          char **message)
{
  JsonNode *node = call->args != NULL ? json_object_get_member (call->args, name) : NULL;
  const char *value;

  *out = NULL;
  if (node == NULL || (!required && JSON_NODE_HOLDS_NULL (node)))
    {
      if (required)
        *message = missing_message (call, name, "a string");
      return !required;
    }
  if (!is_string_node (node))
    {
      *message = mistyped_message (call, name, "a string", node);
      return FALSE;
    }
  value = json_node_get_string (node);
  if (sandstep_has_surrogates (value, -1))
    {
      *message = g_strdup_printf ("%s contains characters that cannot be encoded as UTF-8 (unpaired surrogates).",
                                  name);
      return FALSE;
    }
  if (!g_utf8_validate (value, -1, NULL))
    {
      *message = g_strdup_printf ("%s is not valid UTF-8 text.", name);
      return FALSE;
    }
  *out = value;
  return TRUE;
}

/* A number argument (numeric strings accepted, as lax JSON-schema validators
 * do); *out_given FALSE when absent or null. */
gboolean
sandstep_tool_arg_number (const SandstepToolArgs *call, const char *name, const char *type, gboolean whole,
                          gboolean *out_given, double *out, char **message)
{
  JsonNode *node = call->args != NULL ? json_object_get_member (call->args, name) : NULL;
  double value;

  *out_given = FALSE;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64)
    value = json_node_get_int (node);
  else if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_DOUBLE)
    value = json_node_get_double (node);
  else if (is_string_node (node))
    {
      const char *text = json_node_get_string (node);
      char *end = NULL;

      value = g_ascii_strtod (text, &end);
      while (end != NULL && g_ascii_isspace (*end))
        end++;
      if (text[0] == '\0' || end == NULL || *end != '\0')
        {
          *message = mistyped_message (call, name, type, node);
          return FALSE;
        }
    }
  else
    {
      *message = mistyped_message (call, name, type, node);
      return FALSE;
    }
  if (whole && (!isfinite (value) || value != floor (value)))
    {
      g_autofree char *shown = sandstep_format_number (value);
      *message = g_strdup_printf ("%s must be a whole number, got %s.", name, shown);
      return FALSE;
    }
  *out_given = TRUE;
  *out = value;
  return TRUE;
}
