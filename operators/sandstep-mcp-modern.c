/* sandstep-mcp-modern.c: the MCP revision of 2026-07-28 beside the legacy era.
 *
 * A request of the 2026-07-28 era names its version in
 * params._meta["io.modelcontextprotocol/protocolVersion"]; there is no
 * initialize and no session.  Its methods: server/discover, tools/list and
 * tools/call (ping is gone).  Every result carries resultType "complete" and
 * the server's identity in _meta; the lists carry cache hints.  A request
 * without that _meta is of the legacy era (2024-11-05 ... 2025-11-25), so one
 * server, on one endpoint, speaks both, choosing by what each request sends.
 */
#include "sandstep-mcp-private.h"

#include <string.h>

const char *const sandstep_mcp_modern_versions[1] = { SANDSTEP_MCP_MODERN_VERSION };

gboolean
sandstep_mcp_request_is_modern (JsonObject *params)
{
  JsonNode *meta = params != NULL ? json_object_get_member (params, "_meta") : NULL;

  return meta != NULL && JSON_NODE_HOLDS_OBJECT (meta) &&
         json_object_has_member (json_node_get_object (meta), SANDSTEP_MCP_META_VERSION);
}

const char *
sandstep_mcp_request_version (JsonObject *params)
{
  JsonNode *meta = params != NULL ? json_object_get_member (params, "_meta") : NULL;

  if (meta == NULL || !JSON_NODE_HOLDS_OBJECT (meta))
    return NULL;
  return sandstep_mcp_member_string (json_node_get_object (meta), SANDSTEP_MCP_META_VERSION);
}

static gboolean
modern_version_is_supported (const char *version)
{
  for (gsize i = 0; i < G_N_ELEMENTS (sandstep_mcp_modern_versions); i++)
    if (g_strcmp0 (version, sandstep_mcp_modern_versions[i]) == 0)
      return TRUE;
  return FALSE;
}

/* Every version this server speaks, newest first. */
static JsonArray *
all_versions (void)
{
  JsonArray *array = json_array_new ();

  for (gsize i = 0; i < G_N_ELEMENTS (sandstep_mcp_modern_versions); i++)
    json_array_add_string_element (array, sandstep_mcp_modern_versions[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (sandstep_mcp_protocol_versions); i++)
    json_array_add_string_element (array, sandstep_mcp_protocol_versions[i]);
  return array;
}

char *
sandstep_mcp_modern_refusal (JsonNode *id, JsonObject *params)
{
  JsonObject *meta = json_object_get_object_member (params, "_meta");
  JsonNode *capabilities = json_object_get_member (meta, SANDSTEP_MCP_META_CAPABILITIES);
  const char *version = sandstep_mcp_member_string (meta, SANDSTEP_MCP_META_VERSION);

  if (!modern_version_is_supported (version))
    {
      g_autoptr(JsonNode) data = json_node_new (JSON_NODE_OBJECT);
      JsonObject *object = json_object_new ();
      g_autofree char *requested = NULL;
      g_autofree char *message = NULL;

      if (version != NULL)
        requested = g_strdup (version);
      else
        {
          g_autoptr(JsonGenerator) generator = json_generator_new ();
          json_generator_set_root (generator, json_object_get_member (meta, SANDSTEP_MCP_META_VERSION));
          requested = json_generator_to_data (generator, NULL);
        }
      json_object_set_array_member (object, "supported", all_versions ());
      json_object_set_string_member (object, "requested", requested);
      json_node_take_object (data, object);
      message = g_strdup_printf ("Unsupported protocol version '%s' in _meta[\"%s\"]: this server speaks %s per "
                                 "request, or %s and older through initialize",
                                 requested, SANDSTEP_MCP_META_VERSION, SANDSTEP_MCP_MODERN_VERSION,
                                 SANDSTEP_MCP_PROTOCOL_VERSION);
      return sandstep_mcp_response_error_data (id, SANDSTEP_MCP_ERROR_UNSUPPORTED_VERSION, message, data);
    }
  if (capabilities == NULL || !JSON_NODE_HOLDS_OBJECT (capabilities))
    {
      g_autofree char *message = g_strdup_printf ("A %s request needs _meta[\"%s\"], an object of the client's "
                                                  "capabilities ({} for none)", version,
                                                  SANDSTEP_MCP_META_CAPABILITIES);
      return sandstep_mcp_response_error (id, SANDSTEP_MCP_ERROR_INVALID_PARAMS, message);
    }
  return NULL;
}

JsonObject *
sandstep_mcp_server_info (void)
{
  JsonObject *info = json_object_new ();

  json_object_set_string_member (info, "name", "sandstep");
  json_object_set_string_member (info, "title", "sandstep sandbox tools");
  json_object_set_string_member (info, "version", SANDSTEP_VERSION);
  return info;
}

char *
sandstep_mcp_instructions (SandstepMcpServer *server)
{
  return g_strdup_printf ("These tools work in the sandbox '%s': an isolated Linux machine whose files persist "
                          "between calls (%s starts a fresh shell each time, in /workspace). Nothing you do there "
                          "reaches this host.",
                          server->handle, sandstep_toolbox_tool_name (server->toolbox, "run_command"));
}

JsonNode *
sandstep_mcp_method_discover (SandstepMcpServer *server, JsonObject *params, GError **error)
{
  JsonNode *result = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();
  JsonObject *capabilities = json_object_new ();
  JsonObject *tools = json_object_new ();
  JsonArray *versions = json_array_new ();
  g_autofree char *instructions = sandstep_mcp_instructions (server);

  for (gsize i = 0; i < G_N_ELEMENTS (sandstep_mcp_modern_versions); i++)
    json_array_add_string_element (versions, sandstep_mcp_modern_versions[i]);
  json_object_set_array_member (object, "supportedVersions", versions);
  json_object_set_boolean_member (tools, "listChanged", FALSE);
  json_object_set_object_member (capabilities, "tools", tools);
  json_object_set_object_member (object, "capabilities", capabilities);
  json_object_set_string_member (object, "instructions", instructions);
  /* The spec's example also shows it here, beside _meta's. */
  json_object_set_object_member (object, "serverInfo", sandstep_mcp_server_info ());
  json_node_take_object (result, object);
  return result;
}

void
sandstep_mcp_modern_finish (JsonNode *result, const char *method)
{
  JsonObject *object = json_node_get_object (result);
  JsonObject *meta;

  json_object_set_string_member (object, "resultType", "complete");
  if (strcmp (method, "server/discover") == 0 || strcmp (method, "tools/list") == 0)
    {
      /* What this server says holds for its own life only: the tools' texts
       * name this sandbox and its lifetime, so no cache should keep them. */
      json_object_set_int_member (object, "ttlMs", 0);
      json_object_set_string_member (object, "cacheScope", "private");
    }
  if (!json_object_has_member (object, "_meta"))
    json_object_set_object_member (object, "_meta", json_object_new ());
  meta = json_object_get_object_member (object, "_meta");
  json_object_set_object_member (meta, SANDSTEP_MCP_META_SERVER_INFO, sandstep_mcp_server_info ());
}
