/* sandstep-mcp-message.c: JSON-RPC messages and the protocol versions, which both eras of the MCP server
 * (sandstep-mcp.c, sandstep-mcp-modern.c) write and read alike. */
#include "sandstep-mcp-private.h"

#include <string.h>

const char *const sandstep_mcp_protocol_versions[4] = {
  SANDSTEP_MCP_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05",
};

/* Every message we send is UTF-8, whatever the text it quotes held: json-glib reads an octal escape ("\202")
 * and a lone surrogate ("\ud800") into bytes that are not UTF-8, and echoes them in its parse errors and in the
 * strings it parsed (a method's name). */
char *
sandstep_mcp_to_json (JsonNode *node)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_root (generator, node);
  text = json_generator_to_data (generator, NULL);
  return g_utf8_validate (text, -1, NULL) ? g_steal_pointer (&text) : g_utf8_make_valid (text, -1);
}

char *
sandstep_mcp_response_error (JsonNode *id, int code, const char *message)
{
  return sandstep_mcp_response_error_data (id, code, message, NULL);
}

char *
sandstep_mcp_response_error_data (JsonNode *id, int code, const char *message, JsonNode *data)
{
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();
  JsonObject *error = json_object_new ();

  json_object_set_string_member (object, "jsonrpc", "2.0");
  if (id != NULL)
    json_object_set_member (object, "id", json_node_copy (id));
  else
    json_object_set_null_member (object, "id");
  json_object_set_int_member (error, "code", code);
  json_object_set_string_member (error, "message", message);
  if (data != NULL)
    json_object_set_member (error, "data", json_node_copy (data));
  json_object_set_object_member (object, "error", error);
  json_node_take_object (root, object);
  return sandstep_mcp_to_json (root);
}

gboolean
sandstep_mcp_version_is_supported (const char *version)
{
  for (gsize i = 0; i < G_N_ELEMENTS (sandstep_mcp_protocol_versions); i++)
    if (g_strcmp0 (version, sandstep_mcp_protocol_versions[i]) == 0)
      return TRUE;
  return FALSE;
}

const char *
sandstep_mcp_member_string (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}
