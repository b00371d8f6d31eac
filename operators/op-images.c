/* op-images.c: `sandstep images` (what the layer store holds) and `sandstep gc --images`. */
#include "sandstep-image-operators.h"

#include "sandstep-error.h"
#include "sandstep-image-store.h"
#include "sandstep-units.h"

static char *
format_time (gint64 seconds)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_local (seconds);

  return t != NULL ? g_date_time_format (t, "%Y-%m-%d %H:%M:%S") : g_strdup ("-");
}

gboolean
sandstep_op_images (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autofree char *dir = sandstep_image_store_default_dir ();
  g_autoptr(SandstepImageStore) store = NULL;
  g_autoptr(GPtrArray) records = NULL;
  gboolean json = sandstep_invocation_has (invocation, "json");
  g_autoptr(JsonBuilder) b = json_builder_new ();

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; images takes only options",
                           (char *) invocation->operands->pdata[0]);
  store = sandstep_image_store_open (dir, FALSE, error);
  if (store == NULL)
    return FALSE;
  records = sandstep_image_store_list (store, error);
  if (records == NULL)
    return FALSE;
  if (!json)
    g_print ("%-50s  %-19s  %9s  %-19s  %s\n", "REFERENCE", "DIGEST", "SIZE", "LAST USED", "SANDBOXES");
  json_builder_begin_array (b);
  for (guint i = 0; i < records->len; i++)
    {
      SandstepImageRecord *r = records->pdata[i];
      g_autofree char *size = sandstep_format_size (r->size);
      g_autofree char *used = format_time (r->last_used);
      g_autoptr(GPtrArray) users = sandstep_image_store_users (store, r->digest);

      for (guint n = 0; n < r->references->len; n++)
        {
          g_autofree char *shown = sandstep_escape (r->references->pdata[n], -1, 0, SANDSTEP_ESCAPE_LINE);
          if (!json)
            {
              g_autofree char *short_digest = g_strndup (r->digest, 7 + 12);
              g_print ("%-50s  %-19s  %9s  %-19s  %u\n", shown, short_digest, size, used, users->len);
              continue;
            }
          json_builder_begin_object (b);
          json_builder_set_member_name (b, "reference");
          json_builder_add_string_value (b, r->references->pdata[n]);
          json_builder_set_member_name (b, "digest");
          json_builder_add_string_value (b, r->digest);
          json_builder_set_member_name (b, "size_bytes");
          json_builder_add_int_value (b, r->size);
          json_builder_set_member_name (b, "last_used");
          json_builder_add_int_value (b, r->last_used);
          json_builder_set_member_name (b, "layers");
          json_builder_begin_array (b);
          for (guint l = 0; l < r->layers->len; l++)
            json_builder_add_string_value (b, r->layers->pdata[l]);
          json_builder_end_array (b);
          json_builder_set_member_name (b, "sandboxes");
          json_builder_begin_array (b);
          for (guint u = 0; u < users->len; u++)
            json_builder_add_string_value (b, users->pdata[u]);
          json_builder_end_array (b);
          json_builder_end_object (b);
        }
    }
  json_builder_end_array (b);
  if (json)
    {
      g_autoptr(JsonNode) root = json_builder_get_root (b);
      g_autofree char *text = json_to_string (root, TRUE);
      g_print ("%s\n", text);
    }
  *out_exit = 0;
  return TRUE;
}

gboolean
sandstep_op_gc_images (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autofree char *dir = NULL;
  g_autoptr(SandstepImageStore) store = NULL;
  g_autofree char *freed = NULL;
  guint images = 0;
  guint64 bytes = 0;

  if (!sandstep_invocation_has (invocation, "images"))
    return sandstep_op_gc (invocation, out_exit, error);
  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; gc takes only options", (char *) invocation->operands->pdata[0]);
  dir = sandstep_image_store_default_dir ();
  /* Exclusive: waits for pulls in progress, so nothing half-pulled is swept from under one. */
  store = sandstep_image_store_open (dir, TRUE, error);
  if (store == NULL || !sandstep_image_store_gc (store, &images, &bytes, error))
    return FALSE;
  freed = sandstep_format_size (bytes);
  g_printerr ("sandstep gc: removed %u image%s no sandbox uses, %s freed\n", images, images == 1 ? "" : "s", freed);
  *out_exit = 0;
  return TRUE;
}
