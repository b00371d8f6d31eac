/* sandstep-spank-record.c: the job records of the SPANK front-end.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-spank-record.h"

static void
replace_string (char **slot, const char *value)
{
  g_free (*slot);
  *slot = g_strdup (value);
}

static char *
job_record_dir (const char *rundir, uint32_t job_id)
{
  return g_strdup_printf ("%s/job-%u", rundir, job_id);
}

#define RECORD_PREFIX "sandbox-"

gboolean
sandstep_spank_record_write (const char *rundir, uint32_t job_id, const char *handle, const char *owner,
                             const char *keep, const char *const *env, GError **error)
{
  g_autofree char *dir = job_record_dir (rundir, job_id);
  g_autofree char *digest = g_compute_checksum_for_string (G_CHECKSUM_SHA256, handle, -1);
  g_autofree char *name = g_strconcat (RECORD_PREFIX, digest, NULL);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr(GString) text = g_string_new (NULL);

  if (g_mkdir_with_parents (rundir, 0755) < 0 || g_mkdir_with_parents (dir, 0700) < 0)
    {
      int saved = errno;
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED,
                   "could not make the job record directory '%s': %s; check rundir= in plugstack.conf", dir,
                   g_strerror (saved));
      return FALSE;
    }
  g_string_append_printf (text, "handle=%s\nowner=%s\nkeep=%s\n", handle, owner, keep != NULL ? keep : "");
  for (const char *const *pair = env; *pair != NULL; pair++)
    if (strchr (*pair, '\n') == NULL)
      g_string_append_printf (text, "env %s\n", *pair);
  return g_file_set_contents_full (path, text->str, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error);
}

/* Ends one recorded sandbox: destroyed, or released with the job's keep.
 * The helper runs as the job's user, with the environment recorded. */
static gboolean
end_sandbox (const SandstepSpankUser *user, const char *helper, const char *record_path, GError **error)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *handle = NULL;
  g_autofree char *owner = NULL;
  g_autofree char *keep = NULL;
  g_autofree char *handle_arg = NULL;
  g_autofree char *owner_arg = NULL;
  g_autofree char *keep_arg = NULL;
  g_autoptr(GString) err = g_string_new (NULL);
  int status;

  if (!g_file_get_contents (record_path, &text, NULL, error))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      if (g_str_has_prefix (*l, "handle="))
        replace_string (&handle, *l + strlen ("handle="));
      else if (g_str_has_prefix (*l, "owner="))
        replace_string (&owner, *l + strlen ("owner="));
      else if (g_str_has_prefix (*l, "keep="))
        replace_string (&keep, *l + strlen ("keep="));
      else if (g_str_has_prefix (*l, "env "))
        g_ptr_array_add (env, g_strdup (*l + strlen ("env ")));
    }
  if (handle == NULL || owner == NULL)
    {
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED,
                   "the record '%s' names no handle or owner; remove it, and the sandbox with 'sandstep destroy'",
                   record_path);
      return FALSE;
    }
  g_ptr_array_add (env, g_strdup ("PATH=/usr/sbin:/usr/bin:/sbin:/bin"));
  g_ptr_array_add (env, NULL);
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  owner_arg = g_strconcat ("--owner=", owner, NULL);
  if (keep != NULL && keep[0] != '\0')
    {
      keep_arg = g_strconcat ("--keep=", keep, NULL);
      const char *argv[] = { helper, "release", handle_arg, owner_arg, keep_arg, NULL };
      if (!sandstep_spank_run_as (user, argv, (const char *const *) env->pdata, NULL, err, &status, error))
        return FALSE;
    }
  else
    {
      const char *argv[] = { helper, "destroy", handle_arg, owner_arg, NULL };
      if (!sandstep_spank_run_as (user, argv, (const char *const *) env->pdata, NULL, err, &status, error))
        return FALSE;
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      g_autofree char *how = sandstep_spank_describe_status (status);
      g_autofree char *said = sandstep_spank_last_line (err);
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_HELPER, "ending sandbox '%s': '%s %s' %s: %s",
                   handle, helper, keep_arg != NULL ? "release" : "destroy", how, said);
      return FALSE;
    }
  return TRUE;
}

GPtrArray *
sandstep_spank_records_end (const char *rundir, uint32_t job_id, const SandstepSpankUser *user, const char *helper)
{
  g_autofree char *dir = job_record_dir (rundir, job_id);
  g_autoptr(GDir) listing = g_dir_open (dir, 0, NULL);
  const char *name;
  GPtrArray *failures = g_ptr_array_new_with_free_func (g_free);

  if (listing == NULL)
    return failures;
  while ((name = g_dir_read_name (listing)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autoptr(GError) error = NULL;

      if (!g_str_has_prefix (name, RECORD_PREFIX))
        continue;
      if (!end_sandbox (user, helper, path, &error))
        {
          g_ptr_array_add (failures, g_strdup (error->message));
          continue;
        }
      unlink (path);
    }
  if (failures->len == 0)
    rmdir (dir);
  return failures;
}

