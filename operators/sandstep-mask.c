/* sandstep-mask.c: secret values masked with "***", in one pass or as a stream comes. */
#include "sandstep-output-private.h"

#include <string.h>

static int
compare_longest_first (gconstpointer a, gconstpointer b)
{
  gsize la = strlen (*(const char *const *) a), lb = strlen (*(const char *const *) b);

  if (la != lb)
    return la > lb ? -1 : 1;
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

SandstepMasker *
sandstep_masker_new (const char *const *secrets)
{
  SandstepMasker *masker = g_new0 (SandstepMasker, 1);

  masker->secrets = g_ptr_array_new_with_free_func (g_free);
  masker->only_first = -1;
  for (; secrets != NULL && *secrets != NULL; secrets++)
    {
      gboolean seen = FALSE;

      if ((*secrets)[0] == '\0')
        continue;
      for (guint i = 0; i < masker->secrets->len && !seen; i++)
        seen = strcmp (masker->secrets->pdata[i], *secrets) == 0;
      if (!seen)
        g_ptr_array_add (masker->secrets, g_strdup (*secrets));
    }
  g_ptr_array_sort (masker->secrets, compare_longest_first);
  for (guint i = 0; i < masker->secrets->len; i++)
    {
      const guchar first = *(const guchar *) masker->secrets->pdata[i];

      masker->max_len = MAX (masker->max_len, strlen (masker->secrets->pdata[i]));
      masker->first[first] = TRUE;
      masker->only_first = (i == 0 || masker->only_first == first) ? first : -2;
    }
  if (masker->only_first == -2)
    masker->only_first = -1;
  return masker;
}

SandstepMasker *
sandstep_masker_new_from_table (GHashTable *secrets)
{
  g_autoptr(GPtrArray) values = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  if (secrets != NULL)
    {
      g_hash_table_iter_init (&iter, secrets);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        if (value != NULL)
          g_ptr_array_add (values, value);
    }
  g_ptr_array_add (values, NULL);
  return sandstep_masker_new ((const char *const *) values->pdata);
}

void
sandstep_masker_free (SandstepMasker *masker)
{
  if (masker == NULL)
    return;
  g_ptr_array_unref (masker->secrets);
  g_free (masker);
}

gboolean
sandstep_masker_is_empty (const SandstepMasker *masker)
{
  return masker == NULL || masker->secrets->len == 0;
}

gsize
sandstep_mask_scan (const SandstepMasker *masker, const char *data, gsize len, gboolean final, EmitFunc emit, gpointer sink)
{
  gsize limit, i = 0, run = 0;

  if (sandstep_masker_is_empty (masker))
    {
      emit (sink, data, len);
      return len;
    }
  limit = final ? len : (len >= masker->max_len - 1 ? len - (masker->max_len - 1) : 0);
  while (i < limit)
    {
      gsize matched = 0;

      if (masker->only_first >= 0)
        {
          const char *next = memchr (data + i, masker->only_first, limit - i);
          if (next == NULL)
            {
              i = limit;
              break;
            }
          i = next - data;
        }
      else if (!masker->first[(guchar) data[i]])
        {
          i++;
          continue;
        }
      for (guint s = 0; s < masker->secrets->len; s++)
        {
          const char *secret = masker->secrets->pdata[s];
          gsize slen = strlen (secret);

          if (i + slen <= len && memcmp (data + i, secret, slen) == 0)
            {
              matched = slen;
              break;
            }
        }
      if (matched == 0)
        {
          i++;
          continue;
        }
      if (i > run)
        emit (sink, data + run, i - run);
      emit (sink, SANDSTEP_MASK, strlen (SANDSTEP_MASK));
      i += matched;
      run = i;
    }
  if (i > run)
    emit (sink, data + run, i - run);
  return i;
}

static void
emit_to_gstring (gpointer sink, const char *data, gsize len)
{
  g_string_append_len (sink, data, len);
}

char *
sandstep_masker_mask (const SandstepMasker *masker, const char *data, gssize len, gsize *out_len)
{
  GString *out;

  if (len < 0)
    len = strlen (data);
  out = g_string_sized_new (len + 1);
  sandstep_mask_scan (masker, data, len, TRUE, emit_to_gstring, out);
  if (out_len != NULL)
    *out_len = out->len;
  return g_string_free (out, FALSE);
}

void
sandstep_masker_mask_error (const SandstepMasker *masker, GError *error)
{
  char *masked;

  if (error == NULL || sandstep_masker_is_empty (masker))
    return;
  masked = sandstep_masker_mask (masker, error->message, -1, NULL);
  g_free (error->message);
  error->message = masked;
}
