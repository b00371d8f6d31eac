/* op-list.c: every sandbox here (or on a sandstepd), one line each. */
#include "sandstep-operator.h"

#include <stdio.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

/* "45s", "12m", "3h05m", "2d04h": two units at most, the larger first. */
static char *
format_age (gint64 seconds)
{
  seconds = MAX (seconds, 0);
  if (seconds < 60)
    return g_strdup_printf ("%" G_GINT64_FORMAT "s", seconds);
  if (seconds < 3600)
    return g_strdup_printf ("%" G_GINT64_FORMAT "m", seconds / 60);
  if (seconds < 86400)
    return g_strdup_printf ("%" G_GINT64_FORMAT "h%02" G_GINT64_FORMAT "m", seconds / 3600, seconds % 3600 / 60);
  return g_strdup_printf ("%" G_GINT64_FORMAT "d%02" G_GINT64_FORMAT "h", seconds / 86400, seconds % 86400 / 3600);
}

static void
print_table (GPtrArray *entries, gint64 now)
{
  g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  guint widths[8] = { 0 };
  static const char *const header[] = { "HANDLE", "OWNER", "HOLDER", "STATE", "AGE", "LEFT", "SIZE", "IMAGE", NULL };
  guint broken = 0;

  g_ptr_array_add (rows, g_strdupv ((char **) header));
  for (guint i = 0; i < entries->len; i++)
    {
      const SandstepListEntry *e = entries->pdata[i];
      gboolean is_broken = e->condition == SANDSTEP_CONDITION_BROKEN;
      char **row = g_new0 (char *, 9);

      broken += is_broken;
      /* Names are the callers' (and a daemon's): shown escaped, so none can move the cursor or fake a row. */
      row[0] = sandstep_escape (e->handle, -1, 0, SANDSTEP_ESCAPE_LINE);
      row[1] = sandstep_escape (e->owner != NULL ? e->owner : "-", -1, 0, SANDSTEP_ESCAPE_LINE);
      /* Who holds it now, else who provisioned it. */
      row[2] = sandstep_escape (e->held_by != NULL ? e->held_by : e->provisioned_by != NULL ? e->provisioned_by : "-",
                                -1, 0, SANDSTEP_ESCAPE_LINE);
      row[3] = g_strdup (sandstep_condition_to_string (e->condition));
      row[4] = is_broken ? g_strdup ("-") : format_age (now - e->created);
      row[5] = is_broken ? g_strdup ("-") : format_age (e->expires - now);
      row[6] = sandstep_format_size (e->size);
      /* The digest, as `sandstep images` shortens it; --json has the reference too. */
      row[7] = e->image_digest != NULL ? sandstep_escape (e->image_digest, MIN (strlen (e->image_digest), 19), 0,
                                                          SANDSTEP_ESCAPE_LINE)
                                       : g_strdup ("-");
      g_ptr_array_add (rows, row);
    }
  for (guint i = 0; i < rows->len; i++)
    for (guint c = 0; c < 8; c++)
      widths[c] = MAX (widths[c], g_utf8_strlen (((char **) rows->pdata[i])[c], -1));
  for (guint i = 0; i < rows->len; i++)
    {
      char **row = rows->pdata[i];
      g_autoptr(GString) line = g_string_new (NULL);

      for (guint c = 0; c < 8; c++)
        {
          g_string_append (line, row[c]);
          if (c < 7)
            for (guint pad = g_utf8_strlen (row[c], -1); pad < widths[c] + 2; pad++)
              g_string_append_c (line, ' ');
        }
      g_print ("%s\n", line->str);
    }
  if (broken > 0)
    g_printerr ("sandstep list: %u sandbox%s cannot be read; 'sandstep destroy --handle=HANDLE' removes one, "
                "'sandstep gc --broken' all of them (see 'sandstep list --json' for why)\n", broken, broken == 1 ? "" : "es");
}

gboolean
sandstep_op_list (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  const char *run = sandstep_invocation_get (invocation, "run");
  /* --owner filters here; without it, every owner's. */
  const char *owner = sandstep_invocation_has (invocation, "owner") ? invocation->who.owner : NULL;
  g_autoptr(GPtrArray) entries = NULL;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; list takes only options",
                           (char *) invocation->operands->pdata[0]);
  entries = sandstep_backend_list (invocation->backend, run, owner, error);
  if (entries == NULL)
    return FALSE;
  if (sandstep_invocation_has (invocation, "json"))
    {
      g_autoptr(JsonNode) root = json_node_new (JSON_NODE_ARRAY);
      JsonArray *array = json_array_new ();
      g_autofree char *text = NULL;

      for (guint i = 0; i < entries->len; i++)
        json_array_add_element (array, sandstep_wire_list_entry_to_json (entries->pdata[i], now));
      json_node_take_array (root, array);
      text = json_to_string (root, TRUE);
      g_print ("%s\n", text);
    }
  else
    print_table (entries, now);
  *out_exit = 0;
  return TRUE;
}
