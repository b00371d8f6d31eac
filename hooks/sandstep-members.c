/* sandstep-members.c: typed members of a JSON object read from outside. */
#include "sandstep-members.h"

static JsonNode *
value_of_type (JsonObject *object, const char *name, GType type)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != type)
    return NULL;
  return node;
}

gboolean
sandstep_member_string (JsonObject *object, const char *name, const char **out)
{
  JsonNode *node = value_of_type (object, name, G_TYPE_STRING);

  if (node == NULL)
    return FALSE;
  *out = json_node_get_string (node);
  return TRUE;
}

gboolean
sandstep_member_int (JsonObject *object, const char *name, gint64 *out)
{
  JsonNode *node = value_of_type (object, name, G_TYPE_INT64);

  if (node == NULL)
    return FALSE;
  *out = json_node_get_int (node);
  return TRUE;
}

gboolean
sandstep_member_number (JsonObject *object, const char *name, double *out)
{
  JsonNode *node = value_of_type (object, name, G_TYPE_INT64);

  if (node == NULL && (node = value_of_type (object, name, G_TYPE_DOUBLE)) == NULL)
    return FALSE;
  *out = json_node_get_double (node);
  return TRUE;
}

gboolean
sandstep_member_bool (JsonObject *object, const char *name, gboolean *out)
{
  JsonNode *node = value_of_type (object, name, G_TYPE_BOOLEAN);

  if (node == NULL)
    return FALSE;
  *out = json_node_get_boolean (node);
  return TRUE;
}

gboolean
sandstep_member_object (JsonObject *object, const char *name, JsonObject **out)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return FALSE;
  *out = json_node_get_object (node);
  return TRUE;
}

gboolean
sandstep_member_array (JsonObject *object, const char *name, JsonArray **out)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return FALSE;
  *out = json_node_get_array (node);
  return TRUE;
}

gboolean
sandstep_member_strings (JsonArray *array, GPtrArray *into)
{
  guint n = json_array_get_length (array);

  for (guint i = 0; i < n; i++)
    {
      JsonNode *node = json_array_get_element (array, i);
      if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
        return FALSE;
    }
  for (guint i = 0; i < n; i++)
    g_ptr_array_add (into, g_strdup (json_array_get_string_element (array, i)));
  return TRUE;
}
