/* sandstep-export.c: stage every file, then commit them all. */
#include "sandstep-export.h"

#include <string.h>

#include "sandstep-destination.h"
#include "sandstep-error.h"

static void
context_clear (SandstepExportContext *context)
{
  if (context->s3_client != NULL && context->s3_client_free != NULL)
    context->s3_client_free (context->s3_client);
  context->s3_client = NULL;
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (SandstepExportContext, context_clear)

static void
context_init (SandstepExportContext *context, const SandstepExportOptions *options)
{
  memset (context, 0, sizeof *context);
  context->max_bytes = options != NULL && options->max_bytes > 0 ? options->max_bytes : SANDSTEP_DEFAULT_EXPORT_MAX;
  context->no_clobber = options != NULL && options->no_clobber;
  context->read_timeout_s = options != NULL && options->read_timeout_s > 0 ? options->read_timeout_s
                                                                            : SANDSTEP_DEFAULT_EXPORT_READ_TIMEOUT_S;
}

/* "PATH=URL" into its two halves; the URL may hold '=' (a query). */
static gboolean
split_pair (const char *pair, char **out_path, const char **out_url, GError **error)
{
  const char *eq = pair != NULL ? strchr (pair, '=') : NULL;

  if (eq == NULL || eq == pair || eq[1] == '\0')
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "'%s' is not PATH=URL; write for example report.md=file:///tmp/report.md",
                           pair ? pair : "");
  *out_path = g_strndup (pair, eq - pair);
  *out_url = eq + 1;
  return TRUE;
}

static GPtrArray *
parse_pairs (GPtrArray *pairs, SandstepExportContext *context, GError **error)
{
  g_autoptr(GPtrArray) dests = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_destination_free);

  for (guint i = 0; pairs != NULL && i < pairs->len; i++)
    {
      g_autofree char *path = NULL;
      const char *url = NULL;
      SandstepDestination *dest;

      if (!split_pair (pairs->pdata[i], &path, &url, error))
        return NULL;
      dest = sandstep_destination_new (url, path, context, error);
      if (dest == NULL)
        return NULL;
      g_ptr_array_add (dests, dest);
    }
  if (dests->len == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "nothing to export; give PATH=URL pairs, e.g. report.md=file:///tmp/report.md"), NULL;
  return g_steal_pointer (&dests);
}

gboolean
sandstep_export_needs_net (GPtrArray *pairs)
{
  for (guint i = 0; pairs != NULL && i < pairs->len; i++)
    {
      const char *eq = strchr (pairs->pdata[i], '=');
      if (eq != NULL && sandstep_destination_needs_net (eq + 1))
        return TRUE;
    }
  return FALSE;
}

gboolean
sandstep_export_check (GPtrArray *pairs, const SandstepExportOptions *options, GError **error)
{
  g_auto(SandstepExportContext) context = { 0 };
  g_autoptr(GPtrArray) dests = NULL;

  context_init (&context, options);
  dests = parse_pairs (pairs, &context, error);
  return dests != NULL;
}

/* A message without its closing full stop, to embed in another sentence. */
static char *
without_stop (const char *message)
{
  char *copy = g_strdup (message);
  gsize len = strlen (copy);

  while (len > 0 && copy[len - 1] == '.')
    copy[--len] = '\0';
  return copy;
}

static void
abort_all (GPtrArray *dests, const gboolean *done, GString *left)
{
  for (guint i = 0; i < dests->len; i++)
    if (done == NULL || !done[i])
      {
        SandstepDestination *dest = dests->pdata[i];
        dest->klass->abort (dest, left);
      }
}

static int
compare_rank (gconstpointer a, gconstpointer b, gpointer data)
{
  GPtrArray *dests = data;
  const SandstepDestination *da = dests->pdata[*(const guint *) a];
  const SandstepDestination *db = dests->pdata[*(const guint *) b];

  if (da->rank != db->rank)
    return da->rank - db->rank;
  return (int) *(const guint *) a - (int) *(const guint *) b;
}

gboolean
sandstep_export_files (SandstepAttachment *attachment, GPtrArray *pairs, const SandstepExportOptions *options,
                       void (*progress) (const char *path, const char *dest, gint64 bytes, gpointer data),
                       gpointer progress_data, GError **error)
{
  g_auto(SandstepExportContext) context = { 0 };
  g_autoptr(GPtrArray) dests = NULL;
  g_autoptr(GString) published = g_string_new (NULL);
  g_autofree guint *order = NULL;
  g_autofree gboolean *committed = NULL;

  context_init (&context, options);
  dests = parse_pairs (pairs, &context, error);
  if (dests == NULL)
    return FALSE;

  for (guint i = 0; i < dests->len; i++)
    {
      SandstepDestination *dest = dests->pdata[i];
      g_autoptr(GError) local_error = NULL;
      gint64 bytes = 0;

      if (!dest->klass->stage (dest, attachment, &bytes, &local_error))
        {
          g_autoptr(GString) left = g_string_new (NULL);
          g_autofree char *message = without_stop (local_error->message);

          abort_all (dests, NULL, left);
          g_set_error (error, local_error->domain, local_error->code,
                       "Could not export '%s' from sandbox %s to %s: %s. No destination was changed.%s%s",
                       dest->path, attachment->handle, dest->shown, message,
                       left->len ? " Left behind, to delete by hand: " : "", left->str);
          return FALSE;
        }
      if (progress != NULL)
        progress (dest->path, dest->shown, bytes, progress_data);
    }

  /* All staged: commit, those most likely to fail first. */
  order = g_new (guint, dests->len);
  committed = g_new0 (gboolean, dests->len);
  for (guint i = 0; i < dests->len; i++)
    order[i] = i;
  g_qsort_with_data (order, dests->len, sizeof *order, compare_rank, dests);
  for (guint k = 0; k < dests->len; k++)
    {
      SandstepDestination *dest = dests->pdata[order[k]];
      g_autoptr(GError) local_error = NULL;

      if (!dest->klass->commit (dest, &local_error))
        {
          g_autoptr(GString) left = g_string_new (NULL);
          g_autofree char *message = without_stop (local_error->message);

          abort_all (dests, committed, left);
          g_set_error (error, local_error->domain, local_error->code, "%s.%s%s%s%s%s", message,
                       published->len ? " Already in place: " : "", published->str,
                       published->len ? "; nothing else was changed." : " No destination was changed.",
                       left->len ? " Left behind, to delete by hand: " : "", left->str);
          return FALSE;
        }
      committed[order[k]] = TRUE;
      g_string_append_printf (published, "%s%s", published->len ? ", " : "", dest->shown);
    }
  return TRUE;
}
