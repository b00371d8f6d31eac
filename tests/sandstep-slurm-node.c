/* sandstep-slurm-node.c: the single-node Slurm of tests/test-slurm.c, and
 * running commands against it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-slurm-node.h"
#include "sandstep-test-utils.h"

/* A command's guard against a hung Slurm, in seconds on a plain host: stretched by the time scale, as the
 * node scripts stretch their own waits (starting two nodes under an emulated CPU takes minutes). */
#define COMMAND_TIMEOUT_S 120

SlurmNode node;

void
run_free (Run *run)
{
  g_free (run->out);
  g_free (run->err);
  g_free (run);
}

/* The suite's environment plus NAME, VALUE pairs (a NULL value unsets). */
char **
env_with (const char *first, ...)
{
  char **envp = g_strdupv (node.envp);
  va_list ap;

  va_start (ap, first);
  for (const char *name = first; name != NULL; name = va_arg (ap, const char *))
    {
      const char *value = va_arg (ap, const char *);
      envp = value != NULL ? g_environ_setenv (envp, name, value, TRUE) : g_environ_unsetenv (envp, name);
    }
  va_end (ap);
  return envp;
}

int
slurm_polls (double seconds)
{
  return (int) (seconds * 10 * sandstep_test_time_scale ());
}

char *
slurm_command_limit (void)
{
  return g_strdup_printf ("%d", (int) (COMMAND_TIMEOUT_S * sandstep_test_time_scale ()));
}

/* Runs @argv (under timeout(1)) in @cwd with @envp (NULL: the suite's). */
Run *
run_in (const char *cwd, char **envp, const char *const *argv)
{
  g_autoptr(GPtrArray) full = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *limit = slurm_command_limit ();
  Run *run = g_new0 (Run, 1);
  int wait_status = 0;

  g_ptr_array_add (full, "timeout");
  g_ptr_array_add (full, "-k5");
  g_ptr_array_add (full, limit);
  for (const char *const *a = argv; *a != NULL; a++)
    g_ptr_array_add (full, (gpointer) *a);
  g_ptr_array_add (full, NULL);
  if (!g_spawn_sync (cwd != NULL ? cwd : node.dir, (char **) full->pdata, envp != NULL ? envp : node.envp,
                     G_SPAWN_SEARCH_PATH, NULL, NULL, &run->out, &run->err, &wait_status, &error))
    g_error ("could not run %s: %s", argv[0], error->message);
  run->status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128 + WTERMSIG (wait_status);
  {
    /* One TAP comment line. */
    g_autofree char *shown = g_strdup_printf ("ran %s: status %d; stdout: %s; stderr: %s", argv[0], run->status,
                                              run->out, run->err);
    g_strdelimit (shown, "\n", ' ');
    g_test_message ("%s", shown);
  }
  return run;
}

void
assert_status (const Run *r, int expected)
{
  if (r->status != expected)
    g_error ("status %d, expected %d\nstdout: %s\nstderr: %s", r->status, expected, r->out, r->err);
}

/* The value of "KEY" : VALUE in JSON that json-glib printed; NULL if absent. */
char *
json_field (const char *json, const char *key)
{
  g_autofree char *pattern = g_strdup_printf ("\"%s\" : (\"[^\"]*\"|[^,\\n]*)", key);
  g_autoptr(GRegex) regex = g_regex_new (pattern, 0, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  g_autofree char *value = NULL;

  if (!g_regex_match (regex, json, 0, &match))
    return NULL;
  value = g_match_info_fetch (match, 1);
  if (value[0] == '"')
    return g_strndup (value + 1, strlen (value) - 2);
  return g_strstrip (g_steal_pointer (&value));
}

char *
describe (const char *handle, const char *owner, const char *key)
{
  g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
  g_autofree char *owner_arg = g_strconcat ("--owner=", owner, NULL);
  g_autoptr(Run) r = run (node.helper, "describe", handle_arg, owner_arg);

  assert_status (r, 0);
  return json_field (r->out, key);
}

gboolean
sandbox_exists (const char *handle)
{
  g_autoptr(Run) r = run (node.helper, "list", "--json");

  assert_status (r, 0);
  return strstr (r->out, handle) != NULL;
}

/* Waits until Slurm has forgotten the running job @job_id: its epilog has run. */
void
wait_job_gone (const char *job_id)
{
  for (int i = 0; i < 300; i++)
    {
      g_autoptr(Run) r = run ("squeue", "-h", "-j", job_id, "-o", "%T");
      if (r->status != 0 || g_strstrip (r->out)[0] == '\0')
        return;
      g_usleep (100 * 1000);
    }
  g_error ("job %s still in squeue after 30s", job_id);
}

/* TRUE if a process here has @needle in its command line. */
gboolean
process_with (const char *needle)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;

  g_assert_nonnull (proc);
  while ((name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = NULL;
      g_autofree char *cmdline = NULL;
      gsize len;

      if (!g_ascii_isdigit (name[0]) || atoi (name) == getpid ())
        continue;
      path = g_strdup_printf ("/proc/%s/cmdline", name);
      if (!g_file_get_contents (path, &cmdline, &len, NULL))
        continue;
      for (gsize i = 0; i + 1 < len; i++)
        if (cmdline[i] == '\0')
          cmdline[i] = ' ';
      if (strstr (cmdline, needle) != NULL)
        return TRUE;
    }
  return FALSE;
}

char *
record_dir (const char *job_id)
{
  return g_strdup_printf ("%s/job-%s", node.rundir, job_id);
}

char *
node_state (void)
{
  g_autoptr(Run) r = run ("sinfo", "-h", "-N", "-o", "%t");
  return g_strdup (g_strstrip (r->out));
}

/* Why this suite cannot run here; NULL when it can. */
char *
wait_node_idle (void)
{
  char *state = NULL;

  for (int i = 0; i < 100; i++)
    {
      g_free (state);
      state = node_state ();
      if (strcmp (state, "idle") == 0)
        break;
      g_usleep (100 * 1000);
    }
  return state;
}

char *
missing_prerequisite (void)
{
  const char *programs[] = { "slurmctld", "slurmd", "srun", "sbatch", "munged", NULL };

  if (node.spank == NULL || node.spank[0] == '\0')
    return g_strdup ("the SPANK plugin sandstep-spank.so was not built: meson found no slurm/spank.h; install "
                     "libslurm-dev (scripts/deps.sh: sandstep_ensure_slurm) and run meson setup --reconfigure");
  for (const char **p = programs; *p != NULL; p++)
    {
      g_autofree char *path = g_find_program_in_path (*p);
      if (path == NULL)
        return g_strdup_printf ("'%s' is not installed: install Debian's slurmctld, slurmd, slurm-client and "
                                "munge (scripts/deps.sh: sandstep_ensure_slurm)", *p);
    }
  return NULL;
}

gboolean
start_node (char **out_reason)
{
  g_autofree char *sandbox_dir = NULL;
  g_autoptr(GError) error = NULL;
  int guardian_in;
  g_autoptr(Run) r = NULL;
  g_autofree char *slurm_conf = NULL;
  const char *guardian_argv[] = { "/bin/sh", "-c", "read _; exec \"$0\" stop \"$1\"", node.node_script,
                                  node.node_dir, NULL };

  r = run_in ("/", NULL, (const char *const[]) { node.node_script, "start", node.node_dir, node.spank, node.helper, NULL });
  /* Whatever started is stopped when this process ends, however it ends:
   * the guardian reads EOF on its stdin then. */
  if (!g_spawn_async_with_pipes ("/", (char **) guardian_argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                 &node.guardian, &guardian_in, NULL, NULL, &error))
    g_error ("could not start the guardian: %s", error->message);
  node.guardian_fd = guardian_in;
  if (r->status != 0)
    {
      /* Its last line says what failed; the lines before it (the daemons' states and logs) are in the
       * comment run_in() wrote, and a reason must stay one TAP line. */
      const char *last = strrchr (g_strstrip (r->err), '\n');
      *out_reason = g_strdup_printf ("could not start Slurm: %s", last != NULL ? last + 1 : r->err);
      return FALSE;
    }
  slurm_conf = g_strdup (g_strstrip (r->out));
  node.envp = g_environ_setenv (node.envp, "SLURM_CONF", slurm_conf, TRUE);
  return TRUE;
}

void
stop_node (void)
{
  int status;

  /* Cancel what is left, then the guardian stops the daemons by pid. */
  {
    g_autoptr(Run) r = run ("scancel", "--full", "--user=root");
  }
  close (node.guardian_fd);
  waitpid (node.guardian, &status, 0);
}


void
fail_with_reason (gconstpointer reason)
{
  g_test_fail_printf ("%s", (const char *) reason);
}

void
skip_with_reason (gconstpointer reason)
{
  g_test_skip (reason);
}
