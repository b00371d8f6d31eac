/* sandstep-data-files.c: read_file and list_directory under /data, from inside the jail. */
#include "sandstep-data-files.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-units.h"

/* The recipes' own exit statuses, as in Airflow's (66 missing, 67 directory,
 * 68 not regular), and 65 unreadable. */
enum {
  DATA_UNREADABLE = 65,
  DATA_MISSING = 66,
  DATA_IS_DIRECTORY = 67,
  DATA_NOT_REGULAR = 68,
};

/* The most a listing's output may hold: a directory that lists longer is refused. */
#define LISTING_MAX (16 * 1024 * 1024)

gboolean
sandstep_data_path (const SandstepSpec *spec, const char *path, char **out_absolute)
{
  g_autofree char *joined = NULL;
  g_auto(GStrv) split = NULL;
  g_autoptr(GPtrArray) parts = g_ptr_array_new ();

  *out_absolute = NULL;
  if (spec == NULL || spec->mounts == NULL || spec->mounts->len == 0 || path == NULL)
    return FALSE;
  joined = path[0] == '/' ? g_strdup (path) : g_strconcat ("/workspace/", path, NULL);
  split = g_strsplit (joined, "/", -1);
  for (char **p = split; *p != NULL; p++)
    {
      if (**p == '\0' || strcmp (*p, ".") == 0)
        continue;
      if (strcmp (*p, "..") == 0)
        {
          if (parts->len > 0)
            g_ptr_array_remove_index (parts, parts->len - 1);
          continue;
        }
      g_ptr_array_add (parts, *p);
    }
  if (parts->len == 0 || strcmp (parts->pdata[0], "data") != 0)
    return FALSE;
  g_ptr_array_add (parts, NULL);
  {
    g_autofree char *rest = g_strjoinv ("/", (char **) parts->pdata);
    *out_absolute = g_strconcat ("/", rest, NULL);
  }
  return TRUE;
}

typedef struct {
  GByteArray *out;
  GString *err;
  gsize out_max;          /* bytes of stdout kept; one more marks "over" */
  gboolean out_over;
} Collected;

static void
collect (int stream, const char *data, gsize len, gpointer user_data)
{
  Collected *c = user_data;

  if (stream == 2)
    {
      /* Only the size line and a message are expected here. */
      if (c->err->len < 4096)
        g_string_append_len (c->err, data, MIN (len, 4096 - c->err->len));
      return;
    }
  if (c->out->len + len > c->out_max)
    {
      c->out_over = TRUE;
      len = c->out_max - c->out->len;
    }
  g_byte_array_append (c->out, (const guint8 *) data, len);
}

/* Runs @script with $1 = @absolute; collects up to @out_max bytes of stdout. */
static gboolean
run_recipe (SandstepDataRunner run, gpointer run_data, const char *script, const char *absolute, gsize out_max,
            Collected *c, SandstepRunResult *result, GError **error)
{
  g_autofree char *quoted = g_shell_quote (absolute);
  g_autofree char *command = g_strdup_printf ("set -- %s; %s", quoted, script);
  SandstepRunRequest request = {
    .command = command, .timeout_s = SANDSTEP_DATA_TIMEOUT_S,
    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .on_output = collect, .user_data = c,
  };

  c->out = g_byte_array_new ();
  c->err = g_string_new (NULL);
  c->out_max = out_max;
  c->out_over = FALSE;
  return run (run_data, &request, result, error);
}

static void
collected_clear (Collected *c)
{
  if (c->out != NULL)
    g_byte_array_unref (c->out);
  if (c->err != NULL)
    g_string_free (c->err, TRUE);
}

/* The refusal for a recipe's exit status, or FALSE with nothing set when it is none of them. */
static gboolean
throw_status (GError **error, const SandstepRunResult *result, const char *absolute, const char *verb,
              const Collected *c)
{
  if (result->timed_out)
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO,
                           "%s '%s' took longer than %gs; read a part of it with a command instead", verb,
                           absolute, SANDSTEP_DATA_TIMEOUT_S);
  switch (result->exit_status)
    {
    case DATA_MISSING:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                             "'%s' does not exist in the sandbox", absolute);
    case DATA_UNREADABLE:
      return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, "'%s' is not readable",
                             absolute);
    default:
      {
        g_autofree char *said = g_strstrip (g_strdup (c->err->str));
        return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, "Could not %s '%s'%s%s",
                               strcmp (verb, "Reading") == 0 ? "read" : "list", absolute,
                               said[0] != '\0' ? ": " : "", said);
      }
    }
}

GBytes *
sandstep_data_read_file (SandstepDataRunner run, gpointer run_data, const char *absolute, gsize max_bytes,
                         GError **error)
{
  /* The size goes to stderr before the bytes, so an oversized file is named with it;
   * head stops one byte past the limit, so a device or a growing file cannot flood us. */
  g_autofree char *script = g_strdup_printf (
    "[ -e \"$1\" ] || exit %d; [ -d \"$1\" ] && exit %d; [ -f \"$1\" ] || exit %d; [ -r \"$1\" ] || exit %d; "
    "stat -Lc %%s -- \"$1\" >&2 && head -c %" G_GSIZE_FORMAT " -- \"$1\"",
    DATA_MISSING, DATA_IS_DIRECTORY, DATA_NOT_REGULAR, DATA_UNREADABLE, max_bytes + 1);
  Collected c = { 0 };
  SandstepRunResult result = { 0 };
  GBytes *bytes = NULL;

  if (!run_recipe (run, run_data, script, absolute, max_bytes + 1, &c, &result, error))
    goto out;
  if (!result.timed_out && result.exit_status == DATA_IS_DIRECTORY)
    sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY,
                    "'%s' is a directory; give a file, or list the directory", absolute);
  else if (!result.timed_out && result.exit_status == DATA_NOT_REGULAR)
    sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR,
                    "'%s' is not a regular file; copy what you need into a file with a command first", absolute);
  else if (result.timed_out || result.exit_status != 0)
    throw_status (error, &result, absolute, "Reading", &c);
  else if (c.out->len > max_bytes || c.out_over)
    {
      guint64 size = g_ascii_strtoull (c.err->str, NULL, 10);
      g_autofree char *size_text = NULL;
      g_autofree char *max_text = sandstep_format_size (max_bytes);

      size = MAX (size, (guint64) c.out->len);
      size_text = sandstep_format_size (size);
      sandstep_throw_too_large (error, size, max_bytes, "'%s' is %s, over the %s read limit", absolute, size_text,
                                max_text);
    }
  else
    bytes = g_byte_array_free_to_bytes (g_steal_pointer (&c.out));
out:
  collected_clear (&c);
  return bytes;
}

GPtrArray *
sandstep_data_list_directory (SandstepDataRunner run, gpointer run_data, const char *absolute, GError **error)
{
  g_autofree char *script = g_strdup_printf (
    "[ -e \"$1\" ] || exit %d; [ -d \"$1\" ] || exit %d; [ -r \"$1\" ] && [ -x \"$1\" ] || exit %d; "
    "find \"$1/\" -mindepth 1 -maxdepth 1 -printf '%%y %%f\\0'",
    DATA_MISSING, DATA_NOT_REGULAR, DATA_UNREADABLE);
  Collected c = { 0 };
  SandstepRunResult result = { 0 };
  GPtrArray *entries = NULL;

  if (!run_recipe (run, run_data, script, absolute, LISTING_MAX, &c, &result, error))
    goto out;
  if (!result.timed_out && result.exit_status == DATA_NOT_REGULAR)
    sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR,
                    "'%s' is not a directory; read it as a file", absolute);
  else if (result.timed_out || result.exit_status != 0)
    throw_status (error, &result, absolute, "Listing", &c);
  else if (c.out_over)
    sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE,
                    "'%s' holds too many entries to list; list a part of it with a command instead", absolute);
  else
    {
      const char *p = (const char *) c.out->data;
      const char *end = p + c.out->len;

      entries = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_dir_entry_free);
      while (p < end)
        {
          const char *nul = memchr (p, '\0', end - p);
          SandstepDirEntry *entry;

          if (nul == NULL || nul - p < 3 || p[1] != ' ')
            break;
          entry = g_new0 (SandstepDirEntry, 1);
          entry->is_dir = p[0] == 'd';
          entry->name = g_strndup (p + 2, nul - p - 2);
          g_ptr_array_add (entries, entry);
          p = nul + 1;
        }
    }
out:
  collected_clear (&c);
  return entries;
}
