/* sandstep-identity.c: run id, dag name and holder path.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "sandstep-identity.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandstep-render.h"

#define RUN_ID_MAX 128

gboolean
sandstep_run_id_check (const char *run, const char *origin, GError **error)
{
  gsize len = strlen (run);

  if (len == 0 || len > RUN_ID_MAX || run[0] == '.' || run[0] == '-')
    goto bad;
  for (const char *p = run; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("._:@+-", *p) == NULL)
      goto bad;
  return TRUE;

bad:
  g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
               "sandstep: the run id '%s' from %s is not valid: it must be 1 to %d letters, digits or ._:@+- "
               "and not start with '.' or '-'", run, origin, RUN_ID_MAX);
  return FALSE;
}

char *
sandstep_run_id_new (void)
{
  guint8 bytes[3];
  char stamp[32];
  time_t now = time (NULL);
  struct tm tm;

  if (getrandom (bytes, sizeof bytes, GRND_NONBLOCK) != (ssize_t) sizeof bytes)
    {
      guint32 r = g_random_int ();
      bytes[0] = r & 0xff;
      bytes[1] = (r >> 8) & 0xff;
      bytes[2] = (r >> 16) & 0xff;
    }
  gmtime_r (&now, &tm);
  strftime (stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  return g_strdup_printf ("%s-%02x%02x%02x", stamp, bytes[0], bytes[1], bytes[2]);
}

/* Reads @path: TRUE with *out_run NULL when it does not exist. */
static gboolean
read_run_file (const char *path, char **out_run, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *origin = NULL;

  *out_run = NULL;
  if (!g_file_get_contents (path, &text, NULL, &local_error))
    {
      if (g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return TRUE;
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: cannot read the run id: %s", local_error->message);
      return FALSE;
    }
  g_strstrip (text);
  origin = g_strdup_printf ("'%s' (remove the file to start a new run)", path);
  if (!sandstep_run_id_check (text, origin, error))
    return FALSE;
  *out_run = g_steal_pointer (&text);
  return TRUE;
}

/* Stores @run as @path unless a file is there already; *out_stored says which. */
static gboolean
store_run_file (const char *dir, const char *path, const char *run, gboolean *out_stored, GError **error)
{
  g_autofree char *tmp = g_build_filename (dir, "run.XXXXXX", NULL);
  g_autofree char *line = g_strconcat (run, "\n", NULL);
  gsize len = strlen (line);
  int fd, errsv;

  *out_stored = FALSE;
  if (mkdir (dir, 0755) != 0 && errno != EEXIST)
    {
      errsv = errno;
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: cannot create '%s' to store the run id: %s", dir, g_strerror (errsv));
      return FALSE;
    }
  fd = g_mkstemp_full (tmp, O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      errsv = errno;
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: cannot create a file in '%s' to store the run id: %s", dir, g_strerror (errsv));
      return FALSE;
    }
  if (write (fd, line, len) != (ssize_t) len || fsync (fd) != 0)
    {
      errsv = errno;
      close (fd);
      unlink (tmp);
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: cannot write the run id to '%s': %s", tmp, g_strerror (errsv));
      return FALSE;
    }
  close (fd);
  /* link() publishes the whole file or nothing, and never replaces one another make stored. */
  if (link (tmp, path) == 0)
    *out_stored = TRUE;
  else if (errno != EEXIST)
    {
      errsv = errno;
      unlink (tmp);
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: cannot store the run id as '%s': %s", path, g_strerror (errsv));
      return FALSE;
    }
  unlink (tmp);
  return TRUE;
}

char *
sandstep_run_id_load_or_create (const char *top, gboolean dry, GError **error)
{
  g_autofree char *dir = g_build_filename (top, SANDSTEP_RUN_DIR, NULL);
  g_autofree char *path = g_build_filename (top, SANDSTEP_RUN_FILE, NULL);
  g_autofree char *run = NULL;
  g_autofree char *fresh = NULL;
  gboolean stored = FALSE;

  if (!read_run_file (path, &run, error))
    return NULL;
  if (run != NULL)
    return g_steal_pointer (&run);

  fresh = sandstep_run_id_new ();
  if (dry)
    return g_strconcat (SANDSTEP_DRY_RUN_PREFIX, fresh, NULL);
  if (!store_run_file (dir, path, fresh, &stored, error))
    return NULL;
  if (stored)
    return g_steal_pointer (&fresh);
  /* Another make stored its run first: join it. */
  if (!read_run_file (path, &run, error))
    return NULL;
  if (run == NULL)
    {
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                   "sandstep: the run id file '%s' vanished while it was being created", path);
      return NULL;
    }
  return g_steal_pointer (&run);
}

void
sandstep_run_id_finish (const char *top, const char *run)
{
  g_autofree char *path = g_build_filename (top, SANDSTEP_RUN_FILE, NULL);
  g_autofree char *stored = NULL;

  /* Another make may have started a new run since: that one is not ours to end. */
  if (!read_run_file (path, &stored, NULL) || g_strcmp0 (stored, run) != 0)
    return;
  if (unlink (path) != 0)
    g_debug ("Could not end the run '%s' at '%s': %s", run, path, g_strerror (errno));
}

char *
sandstep_dag_name (const char *dag, const char *top, GError **error)
{
  g_autofree char *name = NULL;

  if (dag != NULL && dag[0] != '\0')
    name = g_strstrip (g_strdup (dag));
  else
    name = g_path_get_basename (top);
  if (name[0] == '\0' || strcmp (name, "/") == 0 || strcmp (name, ".") == 0)
    {
      g_free (name);
      name = g_strdup ("root");
    }
  for (const char *p = name; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f || *p == '/')
      {
        g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_IDENTITY,
                     "sandstep: the DAG name '%s' %s contains '/' or a control character; set SANDSTEP_DAG "
                     "to a plain name",
                     name, dag != NULL && dag[0] != '\0' ? "(SANDSTEP_DAG)" : "(the top directory's name)");
        return NULL;
      }
  return g_steal_pointer (&name);
}

/* Appends the components of @path to @parts, resolving "." and ".." lexically. */
static void
push_components (GPtrArray *parts, const char *path)
{
  g_auto(GStrv) split = g_strsplit (path, "/", -1);

  for (char **c = split; *c != NULL; c++)
    {
      if ((*c)[0] == '\0' || strcmp (*c, ".") == 0)
        continue;
      if (strcmp (*c, "..") == 0)
        {
          if (parts->len > 0 && strcmp (parts->pdata[parts->len - 1], "..") != 0)
            g_ptr_array_remove_index (parts, parts->len - 1);
          else
            g_ptr_array_add (parts, g_strdup (".."));
          continue;
        }
      g_ptr_array_add (parts, g_strdup (*c));
    }
}

static char *
join_components (GPtrArray *parts, gboolean absolute)
{
  GString *out = g_string_new (absolute ? "/" : "");

  for (guint i = 0; i < parts->len; i++)
    {
      if (i > 0)
        g_string_append_c (out, '/');
      g_string_append (out, parts->pdata[i]);
    }
  if (out->len == 0)
    g_string_append_c (out, '.');
  return g_string_free (out, FALSE);
}

char *
sandstep_holder_path (const char *top, const char *curdir, const char *target)
{
  g_autoptr(GPtrArray) top_parts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  gboolean under_top = TRUE;

  push_components (top_parts, top);
  if (target == NULL || target[0] != '/')
    push_components (parts, curdir);
  if (target != NULL)
    push_components (parts, target);

  if (parts->len < top_parts->len)
    under_top = FALSE;
  for (guint i = 0; under_top && i < top_parts->len; i++)
    if (strcmp (parts->pdata[i], top_parts->pdata[i]) != 0)
      under_top = FALSE;
  if (!under_top)
    return join_components (parts, TRUE);
  g_ptr_array_remove_range (parts, 0, top_parts->len);
  return join_components (parts, FALSE);
}
