/* sandstep-wire.c: the requests, replies, lines and errors of sandstepd and its clients (see the header). */
#include "sandstep-wire.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-who.h"
#include "sandstep-json.h"
#include "sandstep-members.h"

guint
sandstep_wire_error_status (const GError *error)
{
  return sandstep_error_kind (error)->http_status;
}

JsonNode *
sandstep_wire_refusal_to_json (const GError *error, const char *code, const char *hint)
{
  const char *domain = sandstep_error_domain_name (error->domain);
  const char *holder = sandstep_error_get_holder (error);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  /* JSON carries UTF-8 only, and a message may quote a name the sandbox chose. */
  g_autofree char *message = sandstep_escape (error->message, -1, 0, SANDSTEP_ESCAPE_LINE);
  guint64 size = 0, limit = 0;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, code);
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, message);
  json_builder_set_member_name (builder, "hint");
  json_builder_add_string_value (builder, hint);
  json_builder_set_member_name (builder, "domain");
  json_builder_add_string_value (builder, domain != NULL ? domain : g_quark_to_string (error->domain));
  json_builder_set_member_name (builder, "error_code");
  json_builder_add_int_value (builder, error->code);
  /* For a client that reads no domain names (the static front). */
  json_builder_set_member_name (builder, "exit_status");
  json_builder_add_int_value (builder, sandstep_error_exit_status (error));
  if (holder != NULL)
    {
      g_autofree char *shown = sandstep_escape (holder, -1, 0, SANDSTEP_ESCAPE_LINE);

      json_builder_set_member_name (builder, "holder");
      json_builder_add_string_value (builder, shown);
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

JsonNode *
sandstep_wire_error_to_json (const GError *error)
{
  const SandstepErrorKind *kind = sandstep_error_kind (error);

  return sandstep_wire_refusal_to_json (error, kind->wire_code, kind->hint);
}

/* ---- a peer's members ---- */

/* A member of an object a peer sent, or @fallback when it is absent or of another type: json-glib's own
 * *_with_default() log a critical when the member is an object or an array (sandstep-members.h). */
static const char *
string_or (JsonObject *object, const char *name, const char *fallback)
{
  const char *value = fallback;

  sandstep_member_string (object, name, &value);
  return value;
}

static gint64
int_or (JsonObject *object, const char *name, gint64 fallback)
{
  gint64 value = fallback;

  sandstep_member_int (object, name, &value);
  return value;
}

static double
number_or (JsonObject *object, const char *name, double fallback)
{
  double value = fallback;

  sandstep_member_number (object, name, &value);
  return value;
}

static gboolean
bool_or (JsonObject *object, const char *name, gboolean fallback)
{
  gboolean value = fallback;

  sandstep_member_bool (object, name, &value);
  return value;
}

GError *
sandstep_wire_error_from_json (JsonNode *node, guint http_status)
{
  JsonObject *object = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  const char *message = NULL;
  const char *holder = NULL;
  GError *error;

  if (object != NULL)
    message = string_or (object, "message", NULL);
  if (message == NULL)
    return g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                        "The sandbox server answered HTTP %u without saying why; see its log", http_status);
  error = sandstep_error_new_from_name (string_or (object, "domain", NULL),
                                        int_or (object, "error_code", 0), message);
  holder = string_or (object, "holder", NULL);
  if (holder != NULL && error->domain == SANDSTEP_SANDBOX_ERROR)
    sandstep_error_set_holder (error, holder);
  if (error->domain == SANDSTEP_PATH_ERROR && json_object_has_member (object, "limit"))
    sandstep_error_set_size (error, (guint64) MAX (int_or (object, "size", 0), 0),
                             (guint64) MAX (int_or (object, "limit", 0), 0));
  return error;
}

/* ---- text ---- */

JsonObject *
sandstep_wire_parse_object (const char *data, gsize len, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonNode) root = sandstep_json_parse (data, len, SANDSTEP_WIRE_MAX_DOCUMENT, &local_error);

  if (root == NULL)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "the body is not usable JSON: %s",
                      local_error->message);
      return NULL;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "the body is JSON but not an object; send {\"member\": value, ...}");
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

char *
sandstep_wire_to_text (JsonObject *object, gsize *out_len)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  char *text;

  json_node_set_object (node, object);
  text = json_to_string (node, FALSE);
  if (out_len != NULL)
    *out_len = strlen (text);
  return text;
}

char *
sandstep_wire_to_line (JsonObject *object, gsize *out_len)
{
  gsize len;
  char *text = sandstep_wire_to_text (object, &len);
  char *line = g_realloc (text, len + 2);

  line[len] = '\n';
  line[len + 1] = '\0';
  if (out_len != NULL)
    *out_len = len + 1;
  return line;
}

/* ---- members ---- */

gboolean
sandstep_wire_get_string (JsonObject *object, const char *name, const char **out, GError **error)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING &&
      json_node_get_string (node)[0] != '\0')
    {
      *out = json_node_get_string (node);
      return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                         "the member '%s' must be a non-empty string", name);
}

gboolean
sandstep_wire_get_number (JsonObject *object, const char *name, double fallback, double *out, GError **error)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = fallback;
      return TRUE;
    }
  if (JSON_NODE_HOLDS_VALUE (node) &&
      (json_node_get_value_type (node) == G_TYPE_DOUBLE || json_node_get_value_type (node) == G_TYPE_INT64))
    {
      *out = json_node_get_double (node);
      if (*out >= 0 && *out < 1e18)
        return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "the member '%s' must be a finite number, 0 or more", name);
}

/* ---- requests ---- */

JsonObject *
sandstep_wire_identity_request (const SandstepIdentity *who)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "owner", who->owner);
  json_object_set_string_member (object, "holder", who->holder);
  return object;
}

gboolean
sandstep_wire_read_identity (JsonObject *object, SandstepIdentity *out, GError **error)
{
  return sandstep_wire_get_string (object, "owner", &out->owner, error) &&
         sandstep_wire_get_string (object, "holder", &out->holder, error) &&
         sandstep_identity_check ("owner", out->owner, error) && sandstep_identity_check ("holder", out->holder, error);
}

JsonObject *
sandstep_wire_attach_request (const char *handle, const SandstepIdentity *who)
{
  JsonObject *object = sandstep_wire_identity_request (who);

  json_object_set_string_member (object, "handle", handle);
  return object;
}

JsonObject *
sandstep_wire_provision_request (const SandstepIdentity *who, const SandstepSpec *spec)
{
  JsonObject *object = sandstep_wire_identity_request (who);

  json_object_set_member (object, "spec", sandstep_spec_to_json (spec, TRUE));
  return object;
}

JsonObject *
sandstep_wire_release_request (const SandstepIdentity *who, gint64 keep_s)
{
  JsonObject *object = sandstep_wire_identity_request (who);

  json_object_set_int_member (object, "keep_s", keep_s);
  return object;
}

JsonObject *
sandstep_wire_gc_request (const char *run, gboolean expired_only, gboolean broken)
{
  JsonObject *object = json_object_new ();

  if (run != NULL)
    json_object_set_string_member (object, "run", run);
  else
    json_object_set_null_member (object, "run");
  json_object_set_boolean_member (object, "expired_only", expired_only);
  json_object_set_boolean_member (object, "broken", broken);
  return object;
}

gboolean
sandstep_wire_read_gc_request (JsonObject *object, const char **out_run, gboolean *out_expired_only,
                               gboolean *out_broken, GError **error)
{
  JsonNode *run = json_object_get_member (object, "run");

  *out_run = NULL;
  if (run != NULL && !JSON_NODE_HOLDS_NULL (run) && !sandstep_wire_get_string (object, "run", out_run, error))
    return FALSE;
  /* Without a run, only what has expired: gc never ends a live sandbox unasked. */
  *out_expired_only = *out_run == NULL;
  *out_broken = FALSE;
  if (json_object_get_member (object, "expired_only") != NULL &&
      !sandstep_member_bool (object, "expired_only", out_expired_only))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "the member 'expired_only' must be true or false");
  /* Live sandboxes go only with a run named, as on the command line: a gc of every run that ends live ones
   * would take every sandbox the token reaches. */
  if (*out_run == NULL && !*out_expired_only)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "gc with 'expired_only' false ends live sandboxes, and needs the 'run' whose sandboxes "
                           "it ends; name a run, or leave 'expired_only' out to reclaim what has expired");
  /* Older clients send no "broken". */
  if (json_object_get_member (object, "broken") != NULL && !sandstep_member_bool (object, "broken", out_broken))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "the member 'broken' must be true or false");
  return TRUE;
}

JsonObject *
sandstep_wire_list_request (const char *run, const char *owner)
{
  JsonObject *object = json_object_new ();

  if (run != NULL)
    json_object_set_string_member (object, "run", run);
  else
    json_object_set_null_member (object, "run");
  if (owner != NULL)
    json_object_set_string_member (object, "owner", owner);
  else
    json_object_set_null_member (object, "owner");
  return object;
}

gboolean
sandstep_wire_read_list_request (JsonObject *object, const char **out_run, const char **out_owner, GError **error)
{
  JsonNode *run = json_object_get_member (object, "run");
  JsonNode *owner = json_object_get_member (object, "owner");

  *out_run = *out_owner = NULL;
  return (run == NULL || JSON_NODE_HOLDS_NULL (run) || sandstep_wire_get_string (object, "run", out_run, error)) &&
         (owner == NULL || JSON_NODE_HOLDS_NULL (owner) ||
          sandstep_wire_get_string (object, "owner", out_owner, error));
}

static void
set_string_or_null (JsonObject *object, const char *name, const char *value)
{
  if (value != NULL)
    json_object_set_string_member (object, name, value);
  else
    json_object_set_null_member (object, name);
}

JsonNode *
sandstep_wire_list_entry_to_json (const SandstepListEntry *entry, gint64 now)
{
  JsonObject *object = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  gboolean broken = entry->condition == SANDSTEP_CONDITION_BROKEN;

  json_object_set_string_member (object, "handle", entry->handle);
  set_string_or_null (object, "owner", entry->owner);
  set_string_or_null (object, "provisioned_by", entry->provisioned_by);
  set_string_or_null (object, "held_by", entry->held_by);
  json_object_set_string_member (object, "state", sandstep_condition_to_string (entry->condition));
  if (broken)
    {
      json_object_set_null_member (object, "created");
      json_object_set_null_member (object, "expires");
      json_object_set_null_member (object, "age_seconds");
      json_object_set_null_member (object, "remaining_seconds");
    }
  else
    {
      json_object_set_int_member (object, "created", entry->created);
      json_object_set_int_member (object, "expires", entry->expires);
      json_object_set_int_member (object, "age_seconds", MAX (now - entry->created, 0));
      json_object_set_int_member (object, "remaining_seconds", MAX (entry->expires - now, 0));
    }
  json_object_set_int_member (object, "size_bytes", (gint64) entry->size);
  set_string_or_null (object, "problem", entry->problem);
  set_string_or_null (object, "image", entry->image);
  set_string_or_null (object, "image_digest", entry->image_digest);
  set_string_or_null (object, "parent", entry->parent);
  json_node_take_object (node, object);
  return node;
}

JsonObject *
sandstep_wire_list_reply (GPtrArray *entries)
{
  JsonObject *object = json_object_new ();
  JsonArray *array = json_array_new ();
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;

  for (guint i = 0; i < entries->len; i++)
    json_array_add_element (array, sandstep_wire_list_entry_to_json (entries->pdata[i], now));
  json_object_set_array_member (object, "sandboxes", array);
  return object;
}

static char *
dup_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  return node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING
           ? g_strdup (json_node_get_string (node))
           : NULL;
}

GPtrArray *
sandstep_wire_read_list_reply (JsonObject *object, const char *server)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_list_entry_free);
  JsonNode *node = json_object_get_member (object, "sandboxes");
  JsonArray *array = node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;

  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (element) ? json_node_get_object (element) : NULL;
      g_autoptr(SandstepListEntry) entry = g_new0 (SandstepListEntry, 1);
      g_autofree char *handle = NULL;
      g_autofree char *state = NULL;

      if (o == NULL || !sandstep_handle_is_local (handle = dup_member (o, "handle")) ||
          !sandstep_condition_from_string (state = dup_member (o, "state"), &entry->condition))
        continue;
      entry->handle = server != NULL ? g_strdup_printf ("%s/%s", server, handle) : g_steal_pointer (&handle);
      entry->owner = dup_member (o, "owner");
      entry->provisioned_by = dup_member (o, "provisioned_by");
      entry->held_by = dup_member (o, "held_by");
      entry->problem = dup_member (o, "problem");
      entry->image = dup_member (o, "image");
      entry->image_digest = dup_member (o, "image_digest");
      entry->parent = dup_member (o, "parent");
      entry->created = int_or (o, "created", 0);
      entry->expires = int_or (o, "expires", 0);
      entry->size = (guint64) MAX (int_or (o, "size_bytes", 0), 0);
      g_ptr_array_add (entries, g_steal_pointer (&entry));
    }
  return entries;
}

JsonObject *
sandstep_wire_release_claim_request (const char *claim)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "claim", claim);
  return object;
}

static JsonObject *
claimed_request (const char *claim)
{
  JsonObject *object = json_object_new ();

  if (claim != NULL)
    json_object_set_string_member (object, "claim", claim);
  return object;
}

JsonObject *
sandstep_wire_run_request (const char *claim, const char *command, double timeout_s)
{
  JsonObject *object = claimed_request (claim);

  json_object_set_string_member (object, "command", command);
  json_object_set_double_member (object, "timeout_s", timeout_s);
  return object;
}

JsonObject *
sandstep_wire_run_step_request (const SandstepIdentity *who, const char *command, double timeout_s)
{
  JsonObject *object = sandstep_wire_run_request (NULL, command, timeout_s);

  json_object_set_string_member (object, "owner", who->owner);
  json_object_set_string_member (object, "holder", who->holder);
  return object;
}

gboolean
sandstep_wire_read_run_request (JsonObject *object, const char **out_command, double *out_timeout_s, GError **error)
{
  /* An empty command is a command: the shell runs nothing. */
  *out_command = string_or (object, "command", NULL);
  if (*out_command == NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING, "no command");
  return sandstep_wire_get_number (object, "timeout_s", 0, out_timeout_s, error);
}

JsonObject *
sandstep_wire_path_request (const char *claim, const char *path, gint64 max_bytes)
{
  JsonObject *object = claimed_request (claim);

  json_object_set_string_member (object, "path", path);
  if (max_bytes >= 0)
    json_object_set_int_member (object, "max_bytes", max_bytes);
  return object;
}

JsonObject *
sandstep_wire_claimed_request (const char *claim)
{
  return claimed_request (claim);
}

JsonObject *
sandstep_wire_fork_request (const char *claim, const char *holder, guint count)
{
  JsonObject *object = claimed_request (claim);

  json_object_set_string_member (object, "holder", holder);
  json_object_set_int_member (object, "count", count);
  return object;
}

gboolean
sandstep_wire_read_fork_request (JsonObject *object, const char **out_holder, guint *out_count, GError **error)
{
  double count = 1;

  if (!sandstep_wire_get_string (object, "holder", out_holder, error) ||
      !sandstep_wire_get_number (object, "count", 1, &count, error))
    return FALSE;
  if (count < 1 || count > G_MAXUINT || count != (guint) count)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "'count' must be a whole number from 1 up, not %g", count);
  *out_count = (guint) count;
  return TRUE;
}

JsonObject *
sandstep_wire_name_request (const char *claim, const char *name)
{
  JsonObject *object = claimed_request (claim);

  json_object_set_string_member (object, "name", name);
  return object;
}

JsonObject *
sandstep_wire_strings (const char *member, GPtrArray *strings)
{
  JsonObject *object = json_object_new ();
  JsonArray *array = json_array_new ();

  for (guint i = 0; i < strings->len; i++)
    json_array_add_string_element (array, strings->pdata[i]);
  json_object_set_array_member (object, member, array);
  return object;
}

GPtrArray *
sandstep_wire_read_strings (JsonObject *object, const char *member)
{
  g_autoptr(GPtrArray) strings = g_ptr_array_new_with_free_func (g_free);
  JsonArray *array;

  if (!sandstep_member_array (object, member, &array) || !sandstep_member_strings (array, strings))
    return NULL;
  return g_steal_pointer (&strings);
}

gboolean
sandstep_wire_read_path_request (JsonObject *object, double default_max_bytes, const char **out_path,
                                 guint64 *out_max_bytes, GError **error)
{
  double max_bytes = 0;

  if (!sandstep_wire_get_string (object, "path", out_path, error) ||
      !sandstep_wire_get_number (object, "max_bytes", default_max_bytes, &max_bytes, error))
    return FALSE;
  *out_max_bytes = (guint64) max_bytes;
  return TRUE;
}

JsonObject *
sandstep_wire_put_request (const char *src, const char *dest)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "src", src);
  json_object_set_string_member (object, "dest", dest);
  return object;
}

/* ---- replies ---- */

JsonObject *
sandstep_wire_provision_reply (const char *handle, gboolean existing)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "handle", handle);
  json_object_set_boolean_member (object, "existing", existing);
  return object;
}

const char *
sandstep_wire_read_provision_reply (JsonObject *object, gboolean *out_existing)
{
  const char *handle = string_or (object, "handle", NULL);

  *out_existing = bool_or (object, "existing", FALSE);
  return sandstep_handle_is_local (handle) ? handle : NULL;
}

JsonObject *
sandstep_wire_release_reply (gboolean destroyed)
{
  JsonObject *object = json_object_new ();

  json_object_set_boolean_member (object, "destroyed", destroyed);
  return object;
}

gboolean
sandstep_wire_read_release_reply (JsonObject *object)
{
  return bool_or (object, "destroyed", FALSE);
}

JsonObject *
sandstep_wire_gc_reply (GPtrArray *destroyed, const GError *error)
{
  JsonObject *object = json_object_new ();
  JsonArray *array = json_array_new ();

  for (guint i = 0; i < destroyed->len; i++)
    json_array_add_string_element (array, destroyed->pdata[i]);
  json_object_set_array_member (object, "destroyed", array);
  if (error != NULL)
    json_object_set_member (object, "error", sandstep_wire_error_to_json (error));
  else
    json_object_set_null_member (object, "error");
  return object;
}

GError *
sandstep_wire_read_gc_reply (JsonObject *object, const char *server, GPtrArray *destroyed)
{
  JsonNode *node = json_object_get_member (object, "destroyed");
  JsonArray *array = node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;

  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      const char *handle = JSON_NODE_HOLDS_VALUE (element) && json_node_get_value_type (element) == G_TYPE_STRING
                             ? json_node_get_string (element) : NULL;

      if (sandstep_handle_is_local (handle))
        g_ptr_array_add (destroyed, server != NULL ? g_strdup_printf ("%s/%s", server, handle) : g_strdup (handle));
    }
  if (json_object_has_member (object, "error") && !json_object_get_null_member (object, "error"))
    return sandstep_wire_error_from_json (json_object_get_member (object, "error"), 500);
  return NULL;
}

JsonObject *
sandstep_wire_claim (const char *claim, double remaining_s, const SandstepSpec *spec)
{
  JsonObject *object = claimed_request (claim);

  json_object_set_double_member (object, "remaining_seconds", remaining_s);
  if (spec != NULL)
    json_object_set_member (object, "spec", sandstep_spec_to_json (spec, TRUE));
  return object;
}

gboolean
sandstep_wire_read_claim (JsonObject *object, const char **out_claim, double *out_remaining_s,
                          SandstepSpec **out_spec)
{
  JsonNode *spec = json_object_get_member (object, "spec");

  *out_claim = string_or (object, "claim", NULL);
  if (*out_claim == NULL)
    return FALSE;
  *out_remaining_s = number_or (object, "remaining_seconds", 0);
  *out_spec = spec != NULL ? sandstep_spec_from_json (spec, NULL) : NULL;
  if (*out_spec == NULL)
    *out_spec = sandstep_spec_new ();
  return TRUE;
}

JsonObject *
sandstep_wire_claim_line (JsonObject *attach_reply, const char *claim)
{
  JsonObject *object = claimed_request (claim);
  JsonNode *spec = json_object_get_member (attach_reply, "spec");

  json_object_set_double_member (object, "remaining_seconds",
                                 number_or (attach_reply, "remaining_seconds", 0));
  if (spec != NULL)
    json_object_set_member (object, "spec", json_node_copy (spec));
  return object;
}

JsonObject *
sandstep_wire_ended_line (const char *why)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "ended", why);
  return object;
}

JsonObject *
sandstep_wire_run_result (const SandstepRunResult *result)
{
  JsonObject *object = json_object_new ();

  json_object_set_int_member (object, "exit", result->exit_status);
  json_object_set_boolean_member (object, "timed_out", result->timed_out);
  json_object_set_double_member (object, "applied_timeout_s", result->applied_timeout_s);
  json_object_set_boolean_member (object, "clamped", result->clamped);
  json_object_set_boolean_member (object, "memory_limit_hit", result->memory_limit_hit);
  json_object_set_boolean_member (object, "pids_limit_hit", result->pids_limit_hit);
  return object;
}

gboolean
sandstep_wire_read_run_result (JsonObject *object, SandstepRunResult *out)
{
  if (!json_object_has_member (object, "exit"))
    return FALSE;
  out->exit_status = (int) int_or (object, "exit", 0);
  out->timed_out = bool_or (object, "timed_out", FALSE);
  out->applied_timeout_s = number_or (object, "applied_timeout_s", 0);
  out->clamped = bool_or (object, "clamped", FALSE);
  out->memory_limit_hit = bool_or (object, "memory_limit_hit", FALSE);
  out->pids_limit_hit = bool_or (object, "pids_limit_hit", FALSE);
  return TRUE;
}

void
sandstep_wire_set_notices (JsonObject *result, GPtrArray *notices)
{
  JsonArray *array;

  if (notices == NULL || notices->len == 0)
    return;
  array = json_array_sized_new (notices->len);
  for (guint i = 0; i < notices->len; i++)
    json_array_add_string_element (array, notices->pdata[i]);
  json_object_set_array_member (result, "notices", array);
}

void
sandstep_wire_read_notices (JsonObject *result, void (*func) (const char *notice, gpointer data), gpointer data)
{
  JsonNode *node = json_object_get_member (result, "notices");
  JsonArray *array;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return;
  array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      if (JSON_NODE_HOLDS_VALUE (element) && json_node_get_value_type (element) == G_TYPE_STRING)
        func (json_node_get_string (element), data);
    }
}

JsonObject *
sandstep_wire_entries (GPtrArray *entries)
{
  JsonObject *object = json_object_new ();
  JsonArray *array = json_array_sized_new (entries->len);

  for (guint i = 0; i < entries->len; i++)
    {
      const SandstepDirEntry *entry = entries->pdata[i];
      JsonObject *o = json_object_new ();

      /* A name is bytes, JSON text UTF-8: a name that is not UTF-8 travels in base64 too. */
      if (g_utf8_validate (entry->name, -1, NULL))
        json_object_set_string_member (o, "name", entry->name);
      else
        {
          g_autofree char *valid = g_utf8_make_valid (entry->name, -1);
          g_autofree char *raw = g_base64_encode ((const guchar *) entry->name, strlen (entry->name));

          json_object_set_string_member (o, "name", valid);
          json_object_set_string_member (o, "name_b64", raw);
        }
      json_object_set_boolean_member (o, "is_dir", entry->is_dir);
      json_array_add_object_element (array, o);
    }
  json_object_set_array_member (object, "entries", array);
  return object;
}

/* sandstep_dir_entry_free() lives with the local backend, which the remote module does not carry. */
static void
dir_entry_free (SandstepDirEntry *entry)
{
  g_free (entry->name);
  g_free (entry);
}

GPtrArray *
sandstep_wire_read_entries (JsonObject *object)
{
  JsonNode *node = json_object_get_member (object, "entries");
  JsonArray *array = node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) dir_entry_free);

  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (element) ? json_node_get_object (element) : NULL;
      const char *raw = o != NULL ? string_or (o, "name_b64", NULL) : NULL;
      SandstepDirEntry *entry;

      if (o == NULL || string_or (o, "name", NULL) == NULL)
        continue;
      entry = g_new0 (SandstepDirEntry, 1);
      if (raw != NULL)
        {
          gsize len = 0;
          guchar *bytes = g_base64_decode (raw, &len);

          entry->name = g_strndup ((const char *) bytes, len);
          g_free (bytes);
        }
      else
        entry->name = g_strdup (json_object_get_string_member (o, "name"));
      entry->is_dir = bool_or (o, "is_dir", FALSE);
      g_ptr_array_add (entries, entry);
    }
  return entries;
}

/* ---- a put's body ---- */

char *
sandstep_wire_put_entry_line (const SandstepWirePutEntry *entry, gsize *out_len)
{
  g_autoptr(JsonObject) object = json_object_new ();

  json_object_set_string_member (object, "path", entry->path);
  json_object_set_string_member (object, "type", entry->type);
  json_object_set_int_member (object, "mode", entry->mode & 07777);
  if (entry->size >= 0)
    json_object_set_int_member (object, "size", entry->size);
  if (entry->target != NULL)
    json_object_set_string_member (object, "target", entry->target);
  return sandstep_wire_to_line (object, out_len);
}

char *
sandstep_wire_put_end_line (gsize *out_len)
{
  g_autoptr(JsonObject) object = json_object_new ();

  json_object_set_boolean_member (object, "end", TRUE);
  return sandstep_wire_to_line (object, out_len);
}

gboolean
sandstep_wire_read_put_entry (JsonObject *object, SandstepWirePutEntry *out)
{
  if (bool_or (object, "end", FALSE))
    return FALSE;
  out->path = string_or (object, "path", NULL);
  out->type = string_or (object, "type", NULL);
  out->mode = int_or (object, "mode", 0644);
  out->size = int_or (object, "size", 0);
  out->target = string_or (object, "target", NULL);
  return TRUE;
}

/* ---- lines ---- */

char *
sandstep_wire_data_line (int stream, const void *data, gsize len, gsize *out_len)
{
  g_autofree char *b64 = g_base64_encode (data, len);
  char *line = stream > 0 ? g_strdup_printf ("{\"stream\":%d,\"data\":\"%s\"}\n", stream, b64)
                          : g_strdup_printf ("{\"data\":\"%s\"}\n", b64);

  if (out_len != NULL)
    *out_len = strlen (line);
  return line;
}

GBytes *
sandstep_wire_read_data_line (JsonObject *object, int *out_stream)
{
  gsize len = 0;
  guchar *data;

  if (!json_object_has_member (object, "data"))
    return NULL;
  if (out_stream != NULL)
    *out_stream = int_or (object, "stream", 1) == 2 ? 2 : 1;
  data = g_base64_decode (string_or (object, "data", ""), &len);
  return g_bytes_new_take (data, len);
}

JsonObject *
sandstep_wire_error_line (const GError *error)
{
  JsonObject *object = json_object_new ();

  json_object_set_member (object, "error", sandstep_wire_error_to_json (error));
  return object;
}

GError *
sandstep_wire_read_error_line (JsonObject *object)
{
  if (!json_object_has_member (object, "error"))
    return NULL;
  return sandstep_wire_error_from_json (json_object_get_member (object, "error"), 500);
}

JsonObject *
sandstep_wire_done_line (void)
{
  JsonObject *object = json_object_new ();

  json_object_set_boolean_member (object, "done", TRUE);
  return object;
}

gboolean
sandstep_wire_is_done_line (JsonObject *object)
{
  return json_object_has_member (object, "done");
}
