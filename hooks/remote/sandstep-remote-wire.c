/* sandstep-remote-wire.c: error objects, handles and tokens as sandstepd and its clients see them. */
#include "sandstep-remote-wire.h"

#include <string.h>

#include "sandstep-error.h"

typedef struct {
  GQuark (*domain) (void);
  int code;                /* -1: any code of the domain */
  guint status;
  const char *wire_code;
  const char *hint;
} ErrorKind;

/* First match wins; a domain's catch-all row comes after its specific ones. */
static const ErrorKind kinds[] = {
  /* domain                        code                                   status wire code          hint */
  { sandstep_sandbox_error_quark,  SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,     400, "bad-handle",        "pass the handle that 'sandstep provision' printed" },
  { sandstep_sandbox_error_quark,  SANDSTEP_SANDBOX_ERROR_NOT_FOUND,      404, "not-found",         "the sandbox is gone: provision a new one" },
  { sandstep_sandbox_error_quark,  SANDSTEP_SANDBOX_ERROR_NOT_OWNER,      403, "not-owner",         "use the handle this run provisioned, or pass the owner that provisioned it" },
  { sandstep_sandbox_error_quark,  SANDSTEP_SANDBOX_ERROR_EXPIRED,        410, "expired",           "provision a new sandbox; 'sandstep gc --expired' reclaims this one" },
  { sandstep_sandbox_error_quark,  SANDSTEP_SANDBOX_ERROR_BUSY,           409, "busy",              "wait for the holder (--wait=SECONDS) or provision one sandbox per step" },
  { sandstep_sandbox_error_quark,  -1,                                    500, "state",             "see the sandbox server's log; its state directory may be unreadable" },
  { sandstep_usage_error_quark,    -1,                                    400, "usage",             "fix the request as the message says" },
  { sandstep_jail_error_quark,     SANDSTEP_JAIL_ERROR_UNSUPPORTED,       501, "unsupported",       "the server's kernel lacks what the sandbox needs; see the message" },
  { sandstep_jail_error_quark,     SANDSTEP_JAIL_ERROR_TIMEOUT,           504, "timeout",           "give the command a larger budget" },
  { sandstep_jail_error_quark,     -1,                                    500, "jail",              "see the sandbox server's log" },
  { sandstep_path_error_quark,     SANDSTEP_PATH_ERROR_ESCAPES,           400, "path-escapes",      "give a path under /workspace or /tmp" },
  { sandstep_path_error_quark,     SANDSTEP_PATH_ERROR_NOT_FOUND,         404, "path-not-found",    "list the directory to see what is there" },
  { sandstep_path_error_quark,     SANDSTEP_PATH_ERROR_IS_DIRECTORY,      422, "is-directory",      "name a file, or list the directory" },
  { sandstep_path_error_quark,     SANDSTEP_PATH_ERROR_NOT_REGULAR,       422, "not-regular",       "only regular files can be read or copied" },
  { sandstep_path_error_quark,     SANDSTEP_PATH_ERROR_TOO_LARGE,         413, "too-large",         "read a part of it with head, tail or sed through 'sandstep run', or raise the limit" },
  { sandstep_path_error_quark,     SANDSTEP_PATH_ERROR_CHANGED,           409, "changed",           "try again once the file stops changing" },
  { sandstep_path_error_quark,     -1,                                    500, "path-io",           "see the message" },
  { sandstep_export_error_quark,   SANDSTEP_EXPORT_ERROR_BAD_URL,         400, "bad-url",           "give a file:// URL" },
  { sandstep_export_error_quark,   -1,                                    500, "export",            "see the message" },
};

static const ErrorKind internal_kind = { NULL, -1, 500, "internal", "see the sandbox server's log" };

static const ErrorKind *
find_kind (const GError *error)
{
  for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
    if (error->domain == kinds[i].domain () && (kinds[i].code < 0 || kinds[i].code == error->code))
      return &kinds[i];
  return &internal_kind;
}

guint
sandstep_wire_error_status (const GError *error)
{
  return find_kind (error)->status;
}

const char *
sandstep_wire_error_code (const GError *error)
{
  return find_kind (error)->wire_code;
}

JsonNode *
sandstep_wire_error_to_json (const GError *error, const char *holder)
{
  const ErrorKind *kind = find_kind (error);
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, kind->wire_code);
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, error->message);
  json_builder_set_member_name (builder, "hint");
  json_builder_add_string_value (builder, kind->hint);
  json_builder_set_member_name (builder, "domain");
  json_builder_add_string_value (builder, g_quark_to_string (error->domain));
  json_builder_set_member_name (builder, "error_code");
  json_builder_add_int_value (builder, error->code);
  if (holder != NULL)
    {
      json_builder_set_member_name (builder, "holder");
      json_builder_add_string_value (builder, holder);
    }
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

GError *
sandstep_wire_error_from_json (JsonNode *node, guint http_status, char **out_holder)
{
  JsonObject *object = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  const char *message = NULL;
  const char *domain_name = NULL;
  gint64 code = 0;

  if (out_holder != NULL)
    *out_holder = NULL;
  if (object != NULL)
    {
      message = json_object_get_string_member_with_default (object, "message", NULL);
      domain_name = json_object_get_string_member_with_default (object, "domain", NULL);
      code = json_object_get_int_member_with_default (object, "error_code", 0);
      if (out_holder != NULL)
        *out_holder = g_strdup (json_object_get_string_member_with_default (object, "holder", NULL));
    }
  if (message == NULL)
    return g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                        "The sandbox server answered HTTP %u without saying why; see its log", http_status);
  if (domain_name != NULL)
    for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
      if (strcmp (g_quark_to_string (kinds[i].domain ()), domain_name) == 0)
        return g_error_new_literal (kinds[i].domain (), (int) code, message);
  return g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, message);
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

gboolean
sandstep_wire_handle_is_local (const char *handle)
{
  const char *hex;

  if (handle == NULL || !g_str_has_prefix (handle, "sandstep-"))
    return FALSE;
  hex = handle + strlen ("sandstep-");
  for (int i = 0; i < 16; i++)
    if (!g_ascii_isxdigit (hex[i]) || g_ascii_isupper (hex[i]))
      return FALSE;
  return hex[16] == '\0';
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
