/* sandstep-tool-schema.c: a tool's definition as MCP and the chat API read it; see sandstep-tool-schema.h. */
#include "sandstep-tool-schema.h"

#include <stdarg.h>

void
sandstep_tool_definition_begin (JsonBuilder *b, const char *name, const char *title, const char *description)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, name);
  json_builder_set_member_name (b, "title");
  json_builder_add_string_value (b, title);
  json_builder_set_member_name (b, "description");
  json_builder_add_string_value (b, description);
  json_builder_set_member_name (b, "inputSchema");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "object");
  json_builder_set_member_name (b, "additionalProperties");
  json_builder_add_boolean_value (b, FALSE);
}

/* Ends inputSchema with its required list, adds annotations (pairs of name
 * and boolean, NULL-terminated), and ends the tool. */
void
sandstep_tool_definition_end (JsonBuilder *b, const char *const *required, ...)
{
  va_list args;
  const char *hint;

  json_builder_set_member_name (b, "required");
  json_builder_begin_array (b);
  for (; *required != NULL; required++)
    json_builder_add_string_value (b, *required);
  json_builder_end_array (b);
  json_builder_end_object (b);  /* inputSchema */

  json_builder_set_member_name (b, "annotations");
  json_builder_begin_object (b);
  va_start (args, required);
  while ((hint = va_arg (args, const char *)) != NULL)
    {
      json_builder_set_member_name (b, hint);
      json_builder_add_boolean_value (b, va_arg (args, gboolean));
    }
  va_end (args);
  json_builder_end_object (b);
  json_builder_end_object (b);
}

