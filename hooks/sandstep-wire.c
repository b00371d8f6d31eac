/* sandstep-wire.c: error objects and tokens as sandstepd and its clients see them. */
#include "sandstep-wire.h"

#include <string.h>

#include "sandstep-error.h"

guint
sandstep_wire_error_status (const GError *error)
{
  return sandstep_error_kind (error)->http_status;
}

const char *
sandstep_wire_error_code (const GError *error)
{
  return sandstep_error_kind (error)->wire_code;
}

JsonNode *
sandstep_wire_error_to_json (const GError *error, const char *holder)
{
  const SandstepErrorKind *kind = sandstep_error_kind (error);
  const char *domain = sandstep_error_domain_name (error->domain);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  guint64 size = 0, limit = 0;

  if (holder == NULL)
    holder = sandstep_error_get_holder (error);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, kind->wire_code);
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, error->message);
  json_builder_set_member_name (builder, "hint");
  json_builder_add_string_value (builder, kind->hint);
  json_builder_set_member_name (builder, "domain");
  json_builder_add_string_value (builder, domain != NULL ? domain : g_quark_to_string (error->domain));
  json_builder_set_member_name (builder, "error_code");
  json_builder_add_int_value (builder, error->code);
  if (holder != NULL)
    {
      json_builder_set_member_name (builder, "holder");
      json_builder_add_string_value (builder, holder);
    }
  if (sandstep_error_get_size (error, &size, &limit))
    {
      json_builder_set_member_name (builder, "size");
      json_builder_add_int_value (builder, (gint64) MIN (size, (guint64) G_MAXINT64));
      json_builder_set_member_name (builder, "limit");
      json_builder_add_int_value (builder, (gint64) MIN (limit, (guint64) G_MAXINT64));
    }
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

GError *
sandstep_wire_error_from_json (JsonNode *node, guint http_status, char **out_holder)
{
  JsonObject *object = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  const char *message = NULL;
  const char *holder = NULL;
  GError *error;

  if (out_holder != NULL)
    *out_holder = NULL;
  if (object != NULL)
    message = json_object_get_string_member_with_default (object, "message", NULL);
  if (message == NULL)
    return g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                        "The sandbox server answered HTTP %u without saying why; see its log", http_status);
  error = sandstep_error_new_from_name (json_object_get_string_member_with_default (object, "domain", NULL),
                                        json_object_get_int_member_with_default (object, "error_code", 0), message);
  holder = json_object_get_string_member_with_default (object, "holder", NULL);
  if (holder != NULL && error->domain == SANDSTEP_SANDBOX_ERROR)
    sandstep_error_set_holder (error, holder);
  if (out_holder != NULL)
    *out_holder = g_strdup (holder);
  if (error->domain == SANDSTEP_PATH_ERROR && json_object_has_member (object, "limit"))
    sandstep_error_set_size (error, (guint64) MAX (json_object_get_int_member_with_default (object, "size", 0), 0),
                             (guint64) MAX (json_object_get_int_member_with_default (object, "limit", 0), 0));
  return error;
}

JsonObject *
sandstep_wire_parse_object (const char *data, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;

  if (len > G_MAXSSIZE || !json_parser_load_from_data (parser, data, (gssize) len, &local_error))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "the body is not JSON: %s",
                      local_error != NULL ? local_error->message : "too long");
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "the body is JSON but not an object; send {\"member\": value, ...}");
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

void
sandstep_wire_token_digest (const char *token, guint8 out[32])
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  gsize len = 32;

  g_checksum_update (sum, (const guchar *) "sandstep-token:", -1);
  g_checksum_update (sum, (const guchar *) token, strlen (token));
  g_checksum_get_digest (sum, out, &len);
}

gboolean
sandstep_wire_digest_equal (const guint8 a[32], const guint8 b[32])
{
  volatile guint8 diff = 0;

  for (int i = 0; i < 32; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

char *
sandstep_wire_read_token_file (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len = 0;
  char *newline;

  if (!g_file_get_contents (path, &text, &len, &local_error))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "Cannot read the token file '%s': %s", path, local_error->message);
      return NULL;
    }
  newline = strchr (text, '\n');
  if (newline != NULL)
    *newline = '\0';
  g_strstrip (text);
  if (text[0] == '\0' || len > 65536)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "The token file '%s' holds no token; write one line of random text into it "
                      "(e.g. head -c 32 /dev/urandom | base64 > FILE)", path);
      return NULL;
    }
  return g_steal_pointer (&text);
}
