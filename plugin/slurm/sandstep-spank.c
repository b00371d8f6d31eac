/* sandstep-spank.c: the Slurm SPANK front-end, sandstep-spank.so.
 *
 *   plugstack.conf:  optional /usr/lib/x86_64-linux-gnu/sandstep/sandstep-spank.so
 *   srun --sandbox=@box.sbx make check          every task runs inside that sandbox
 *   srun --sandbox-provision=network=none ...   a sandbox for this job, in SANDSTEP_HANDLE, where
 *                                               every task runs (--sandbox=none: on the host)
 *
 * Thin, like the make plugin: every sandbox operation is the `sandstep`
 * helper, so waits, refusals and their messages are the helper's own, word
 * for word.  Where each part runs (spank(7)):
 *
 * - srun, sbatch, salloc (local and allocator contexts, as the user):
 *   options are registered and checked, so a bad value fails the command
 *   before anything is queued, with one line naming the option.
 * - slurmstepd, init_post_opt (remote, root): the job's identity from the
 *   environment srun propagated (SANDSTEP_RUN, SANDSTEP_DAG), and for
 *   --sandbox-provision the job's sandbox, provisioned as the job's user
 *   under the holder OWNER/JOBID (get-or-create: every step of the job gets
 *   the same one), recorded under RUNDIR/job-JOBID for the epilog.
 * - the task, task_init (as the user, just before Slurm would exec it): with
 *   --sandbox the task is exec'd as `sandstep run --handle=H -- TASK`, so it
 *   runs in the live sandbox under a claim that the helper holds for the
 *   task's whole life and that dies with it (scancel, a killed step).
 * - exit (slurmstepd, root): a job's sandbox ends with the job: after its
 *   batch step, or after the one step of a job srun made for itself;
 *   job_epilog (root, when the job ends however it ends) sweeps whatever
 *   the records under RUNDIR/job-JOBID still name.
 *
 * plugstack.conf arguments: sandstep=PATH (the helper; default the one
 * installed beside this plugin), rundir=DIR (job records; default
 * /run/sandstep-spank).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "sandstep-exit.h"
#include "sandstep-identity.h"
#include "sandstep-operator.h"
#include "sandstep-programs-libc.h"
#include "sandstep-render.h"
#include "sandstep-spank-exec.h"
#include "sandstep-spank-record.h"

SPANK_PLUGIN (sandstep, 1);

#define DEFAULT_RUNDIR "/run/sandstep-spank"
/* What the remote side reads when srun made the job for this one step. */
#define OWN_JOB_VARIABLE "SANDSTEP_SPANK_OWN_JOB"
/* "@FILE<TAB>HANDLE": what srun read from --sandbox=@FILE, for the node. */
#define RESOLVED_VARIABLE "SANDSTEP_SPANK_SANDBOX"
/* The value of --sandbox that names the job's own provisioned sandbox. */
#define JOB_SANDBOX "job"
/* The value of --sandbox that runs the tasks on the host, even where the job provisions a sandbox. */
#define NO_SANDBOX "none"

enum { OPTION_SANDBOX = 1 << 0, OPTION_PROVISION = 1 << 1, OPTION_KEEP = 1 << 2 };

typedef struct {
  /* plugstack.conf */
  char *helper;
  char *rundir;
  /* options as given (NULL: not given; "" for --sandbox-provision alone) */
  char *sandbox;
  char *provision;
  char *keep;
  guint from_env;      /* OPTION_* bits: the value is its environment default */
  /* slurmstepd */
  uint32_t job_id;
  uint32_t step_id;
  SandstepSpankUser user;
  gid_t *groups;
  char *owner;
  char *holder;
  char *handle;        /* the job's provisioned sandbox */
  gboolean own_job;    /* this step is the whole job (srun without an allocation) */
  char *failure;       /* why this step cannot run: every task prints it and fails */
} SpankState;

static SpankState state;

static int option_sandbox (int val, const char *optarg, int remote);
static int option_provision (int val, const char *optarg, int remote);
static int option_keep (int val, const char *optarg, int remote);

static struct spank_option options[] = {
  { "sandbox", "HANDLE|@FILE",
    "[sandstep] run every task of the step inside this sandbox (a handle, @FILE: a file holding one, "
    "'job': this job's --sandbox-provision sandbox, the default with it; 'none': on the host), in /workspace; "
    "default $SANDSTEP_SANDBOX",
    1, 0, option_sandbox },
  { "sandbox-provision", "OPTIONS",
    "[sandstep] provision a sandbox for this job (OPTIONS: provision's, comma-separated, e.g. "
    "network=none,lifetime=2h); every task runs in it unless --sandbox says otherwise (--sandbox=none: "
    "on the host); its handle is in SANDSTEP_HANDLE for every step; destroyed when the job ends; default "
    "$SANDSTEP_SANDBOX_PROVISION",
    2, 0, option_provision },
  { "sandbox-keep", "DURATION",
    "[sandstep] keep the job's provisioned sandbox this long after the job ends (e.g. 30m); "
    "default $SANDSTEP_SANDBOX_KEEP",
    1, 0, option_keep },
  SPANK_OPTIONS_TABLE_END
};

static void
set_string (char **slot, const char *value)
{
  g_free (*slot);
  *slot = g_strdup (value);
}

static int
option_sandbox (int val, const char *optarg, int remote)
{
  set_string (&state.sandbox, optarg != NULL ? optarg : "");
  return 0;
}

static int
option_provision (int val, const char *optarg, int remote)
{
  /* The steps of an sbatch job get sbatch's options through the environment,
   * where Slurm writes an absent optional value as "(null)". */
  if (optarg != NULL && strcmp (optarg, "(null)") == 0)
    optarg = NULL;
  set_string (&state.provision, optarg != NULL ? optarg : "");
  return 0;
}

static int
option_keep (int val, const char *optarg, int remote)
{
  set_string (&state.keep, optarg != NULL ? optarg : "");
  return 0;
}

/* ---- where things are ---- */

/* The helper that belongs with this plugin (hooks/sandstep-programs-libc.h). */
static char *
find_default_helper (void)
{
  Dl_info info;
  g_autofree char *dir = NULL;

  if (dladdr ((void *) find_default_helper, &info) == 0 || info.dli_fname == NULL)
    return g_strdup (SANDSTEP_BINDIR "/sandstep");
  dir = g_path_get_dirname (info.dli_fname);
  return sandstep_program_path (dir, "sandstep");
}

static void
parse_plugin_args (int ac, char **av)
{
  if (state.helper != NULL)
    return;  /* already read: slurm_spank_init runs first where it runs at all */
  for (int i = 0; i < ac; i++)
    {
      if (g_str_has_prefix (av[i], "sandstep="))
        set_string (&state.helper, av[i] + strlen ("sandstep="));
      else if (g_str_has_prefix (av[i], "rundir="))
        set_string (&state.rundir, av[i] + strlen ("rundir="));
      else  /* logged and left out: a typo in plugstack.conf must not stop every job */
        slurm_error ("sandstep: unknown argument '%s' in plugstack.conf, ignored; it takes sandstep=PATH and "
                     "rundir=DIR", av[i]);
    }
  if (state.helper == NULL)
    state.helper = find_default_helper ();
  if (state.rundir == NULL)
    state.rundir = g_strdup (DEFAULT_RUNDIR);
}

int
slurm_spank_init (spank_t sp, int ac, char **av)
{
  spank_context_t context = spank_context ();

  parse_plugin_args (ac, av);
  if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR)
    return 0;
  for (struct spank_option *option = options; option->name != NULL; option++)
    if (spank_option_register (sp, option) != ESPANK_SUCCESS)
      {
        slurm_error ("sandstep: could not register --%s", option->name);
        return -1;
      }
  return 0;
}

/* ---- checking values (srun, sbatch, salloc) ---- */

/* The provision options as the make plugin's words: "a=1,b" -> "a=1 b". */
static char *
provision_words (const char *options_text)
{
  g_auto(GStrv) parts = g_strsplit (options_text, ",", -1);
  g_autoptr(GPtrArray) words = g_ptr_array_new ();

  for (char **p = parts; *p != NULL; p++)
    if (**p != '\0')
      g_ptr_array_add (words, *p);
  g_ptr_array_add (words, NULL);
  return g_strjoinv (" ", (char **) words->pdata);
}

/* "--sandbox-keep='5m'", or "SANDSTEP_SANDBOX_KEEP='5m' (the default of
 * --sandbox-keep)" when the value came from the environment. */
static char *
shown_option (guint option, const char *value)
{
  const char *name = option == OPTION_SANDBOX ? "sandbox" : option == OPTION_PROVISION ? "sandbox-provision"
                                                                                       : "sandbox-keep";
  const char *env = option == OPTION_SANDBOX ? "SANDSTEP_SANDBOX" : option == OPTION_PROVISION
                                                                     ? "SANDSTEP_SANDBOX_PROVISION"
                                                                     : "SANDSTEP_SANDBOX_KEEP";

  if (state.from_env & option)
    return g_strdup_printf ("%s='%s' (the default of --%s)", env, value, name);
  return g_strdup_printf ("--%s='%s'", name, value);
}

/* "--OPTION=VALUE: why", the why as @cause says it less its @prefix (what srun's line already names). */
static void
refuse_value (GError **error, guint option, const char *value, const GError *cause, const char *prefix)
{
  g_autofree char *shown = shown_option (option, value);
  const char *why = cause->message;

  if (prefix != NULL && g_str_has_prefix (why, prefix))
    why += strlen (prefix);
  g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_BAD_VALUE, "%s: %s", shown, why);
}

/* `sandstep provision ...` as a /bin/sh command line, its options checked
 * against the operator table as the make plugin checks them. */
static char *
render_provision (const char *options_text, const char *owner, const char *holder, GError **error)
{
  const SandstepOperator *op = sandstep_operator_lookup ("provision");
  g_autofree char *words = provision_words (options_text);
  SandstepRenderContext context = { .helper = state.helper, .owner = owner, .holder = holder, .step = NULL };
  g_autoptr(GError) local_error = NULL;
  char *line = sandstep_render (op, words, NULL, &context, &local_error);

  if (line != NULL)
    return line;
  /* The make plugin's messages start with its function's name. */
  refuse_value (error, OPTION_PROVISION, options_text, local_error, "sandbox-provision: ");
  return NULL;
}

static gboolean
check_keep (const char *value, GError **error)
{
  const SandstepOption *option = sandstep_option_lookup (sandstep_operator_lookup ("release"), "keep");
  g_autoptr(GError) local_error = NULL;

  if (sandstep_option_check (option, value, &local_error))
    return TRUE;
  refuse_value (error, OPTION_KEEP, value, local_error, "option 'keep': ");
  return FALSE;
}

static gboolean
check_sandbox (const char *value, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *handle = NULL;

  if (strcmp (value, JOB_SANDBOX) == 0)
    {
      if (state.provision != NULL)
        return TRUE;
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_BAD_VALUE,
                   "--sandbox=job names this job's own sandbox, but the job provisions none; add "
                   "--sandbox-provision, or give a handle or @FILE");
      return FALSE;
    }
  /* @FILE is read here, where srun runs (when the step runs, as make's
   * @FILE is read), so that a bad one fails at once, and so that the nodes
   * need no view of the file: the handle travels in srun's environment,
   * which becomes the job's, for the value it was read for. */
  handle = sandstep_resolve_handle (value, &local_error);
  if (handle != NULL)
    {
      if (value[0] == '@')
        {
          g_autofree char *pair = g_strconcat (value, "\t", handle, NULL);
          g_setenv (RESOLVED_VARIABLE, pair, TRUE);
        }
      return TRUE;
    }
  refuse_value (error, OPTION_SANDBOX, value, local_error, NULL);
  return FALSE;
}

/* Options not given on the command line take their environment defaults;
 * @getenv_fn reads srun's own environment or the job's. */
typedef char *(*EnvReader) (spank_t sp, const char *name);

static char *
process_env (spank_t sp, const char *name)
{
  const char *value = g_getenv (name);
  return value != NULL && value[0] != '\0' ? g_strdup (value) : NULL;
}

static char *
job_env (spank_t sp, const char *name)
{
  char buf[8192];

  if (spank_getenv (sp, name, buf, sizeof buf) != ESPANK_SUCCESS || buf[0] == '\0')
    return NULL;
  return g_strdup (buf);
}

static void
apply_env_defaults (spank_t sp, EnvReader read_env)
{
  if (state.sandbox == NULL && (state.sandbox = read_env (sp, "SANDSTEP_SANDBOX")) != NULL)
    state.from_env |= OPTION_SANDBOX;
  if (state.provision == NULL && (state.provision = read_env (sp, "SANDSTEP_SANDBOX_PROVISION")) != NULL)
    state.from_env |= OPTION_PROVISION;
  if (state.keep == NULL && (state.keep = read_env (sp, "SANDSTEP_SANDBOX_KEEP")) != NULL)
    state.from_env |= OPTION_KEEP;
  /* A job that provisions a sandbox runs its tasks there unless the user
   * says otherwise in so many words (issue 34): --sandbox=none is the host. */
  if (state.sandbox != NULL && strcmp (state.sandbox, NO_SANDBOX) == 0)
    g_clear_pointer (&state.sandbox, g_free);
  else if (state.sandbox == NULL && state.provision != NULL)
    state.sandbox = g_strdup (JOB_SANDBOX);
}

/* The owner of the job's sandboxes, by the helper's rule (sandstep_owner_derive()):
 * SANDSTEP_OWNER, else DAG/RUN when the run travelled with the job (make
 * exports SANDSTEP_RUN and SANDSTEP_TOP to its recipes), else slurm/JOBID. */
static char *
derive_owner (spank_t sp, EnvReader read_env, uint32_t job_id, GError **error)
{
  g_autofree char *owner = read_env (sp, "SANDSTEP_OWNER");
  g_autofree char *run = read_env (sp, "SANDSTEP_RUN");
  g_autofree char *dag = read_env (sp, "SANDSTEP_DAG");
  g_autofree char *top = read_env (sp, "SANDSTEP_TOP");
  g_autofree char *fallback = g_strdup_printf ("slurm/%u", job_id);
  g_autoptr(GError) local_error = NULL;
  char *derived = sandstep_owner_derive (owner, run, dag, top, fallback, &local_error);

  if (derived == NULL)
    g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_BAD_VALUE, "%s", local_error->message);
  return derived;
}

static int
fail_one_line (GError *error)
{
  g_autofree char *line = g_strdup (error->message);

  /* One line, whatever the helper or a file said. */
  g_strdelimit (line, "\n\r", ' ');
  slurm_error ("sandstep: %s", line);
  return -1;
}

/* srun, sbatch or salloc ends here, before anything is queued, with one
 * line naming the option.  Returning an error would not do: Slurm ignores
 * the failures of an `optional` plugin's init_post_opt (the job would run
 * without its sandbox), and an option callback's failure adds a second line
 * of Slurm's own.  Status 255, as for Slurm's own bad options. */
static void G_GNUC_NORETURN
refuse_command (GError *error)
{
  fail_one_line (error);
  exit (255);
}

static int
check_options (spank_t sp)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *owner = NULL;
  g_autofree char *line = NULL;

  /* Only what this command sets reaches the job (a parent step's would otherwise). */
  g_unsetenv (RESOLVED_VARIABLE);
  g_unsetenv (OWN_JOB_VARIABLE);
  apply_env_defaults (sp, process_env);
  if (state.sandbox == NULL && state.provision == NULL && state.keep == NULL)
    return 0;
  if (state.keep != NULL && state.provision == NULL)
    {
      g_autofree char *shown = shown_option (OPTION_KEEP, state.keep);
      g_set_error (&error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_BAD_VALUE,
                   "%s keeps the job's provisioned sandbox, but the job provisions none; add "
                   "--sandbox-provision, or leave --sandbox-keep out", shown);
      refuse_command (error);
    }
  if ((owner = derive_owner (sp, process_env, 0, &error)) == NULL ||
      (state.provision != NULL && (line = render_provision (state.provision, owner, owner, &error)) == NULL) ||
      (state.keep != NULL && !check_keep (state.keep, &error)) ||
      (state.sandbox != NULL && !check_sandbox (state.sandbox, &error)))
    refuse_command (error);

  /* srun without an allocation makes a job for this one step, which then
   * ends with it: its sandbox can go in the step's exit. */
  if (spank_context () == S_CTX_LOCAL && state.provision != NULL && g_getenv ("SLURM_JOB_ID") == NULL)
    g_setenv (OWN_JOB_VARIABLE, "1", TRUE);  /* srun's environment becomes the job's */
  return 0;
}

/* ---- slurmstepd ---- */

static gboolean
step_is_special (uint32_t step_id)
{
  return step_id == SLURM_BATCH_SCRIPT || step_id == SLURM_EXTERN_CONT || step_id == SLURM_INTERACTIVE_STEP;
}

static char *
step_name (uint32_t step_id)
{
  switch (step_id)
    {
    case SLURM_BATCH_SCRIPT:
      return g_strdup ("batch");
    case SLURM_EXTERN_CONT:
      return g_strdup ("extern");
    case SLURM_INTERACTIVE_STEP:
      return g_strdup ("interactive");
    default:
      return g_strdup_printf ("%u", step_id);
    }
}

static gboolean
load_job (spank_t sp, GError **error)
{
  gid_t *groups = NULL;
  int n_groups = 0;
  g_autofree char *step = NULL;
  g_autofree char *own = NULL;
  g_autofree char *resolved = NULL;
  const char *tab;

  if (spank_get_item (sp, S_JOB_ID, &state.job_id) != ESPANK_SUCCESS ||
      spank_get_item (sp, S_JOB_STEPID, &state.step_id) != ESPANK_SUCCESS ||
      spank_get_item (sp, S_JOB_UID, &state.user.uid) != ESPANK_SUCCESS ||
      spank_get_item (sp, S_JOB_GID, &state.user.gid) != ESPANK_SUCCESS)
    {
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED,
                   "could not read the job's id, step, uid and gid from Slurm");
      return FALSE;
    }
  if (spank_get_item (sp, S_JOB_SUPPLEMENTARY_GIDS, &groups, &n_groups) == ESPANK_SUCCESS && n_groups > 0)
    {
      state.groups = g_memdup2 (groups, sizeof (gid_t) * n_groups);
      state.user.groups = state.groups;
      state.user.n_groups = n_groups;
    }
  if ((state.owner = derive_owner (sp, job_env, state.job_id, error)) == NULL)
    return FALSE;
  step = step_name (state.step_id);
  state.holder = g_strdup_printf ("%s/%u.%s", state.owner, state.job_id, step);
  own = job_env (sp, OWN_JOB_VARIABLE);
  state.own_job = own != NULL && strcmp (own, "1") == 0;
  spank_unsetenv (sp, OWN_JOB_VARIABLE);
  resolved = job_env (sp, RESOLVED_VARIABLE);
  spank_unsetenv (sp, RESOLVED_VARIABLE);
  /* The handle srun read for this very value; else the task's `sandstep run`
   * reads @FILE in the task's directory. */
  if (resolved != NULL && state.sandbox != NULL && state.sandbox[0] == '@' &&
      (tab = strchr (resolved, '\t')) != NULL && strncmp (resolved, state.sandbox, tab - resolved) == 0 &&
      state.sandbox[tab - resolved] == '\0')
    set_string (&state.sandbox, tab + 1);
  return TRUE;
}

static char **
job_environ (spank_t sp)
{
  char **env = NULL;

  if (spank_get_item (sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == NULL)
    return NULL;
  return env;
}

/* Runs @argv as the job's user; @what names it in messages. */
static gboolean
run_helper (spank_t sp, const char *what, const char *const *argv, GString *out, GError **error)
{
  g_autoptr(GString) err = g_string_new (NULL);
  char **env = job_environ (sp);
  int status;

  if (env == NULL)
    {
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_FAILED,
                   "could not read the job's environment from Slurm");
      return FALSE;
    }
  if (!sandstep_spank_run_as (&state.user, argv, (const char *const *) env, out, err, &status, error))
    return FALSE;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      g_autofree char *how = sandstep_spank_describe_status (status);
      g_autofree char *said = sandstep_spank_last_line (err);
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_HELPER, "'%s' %s: %s", what, how, said);
      return FALSE;
    }
  return TRUE;
}

/* What the helper needs, besides the owner, to find a sandbox again at the
 * end of the job: where local ones live, and the server of a remote one. */
static const char *const record_env[] = {
  "SANDSTEP_STATE_DIR", "XDG_STATE_HOME", "HOME", "SANDSTEP_BACKEND", "SANDSTEP_TOKEN_FILE", "SANDSTEP_TOKEN",
  "SANDSTEP_CA_FILE", "SANDSTEP_ALLOW_HTTP", NULL
};

static gboolean
write_record (spank_t sp, GError **error)
{
  g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func (g_free);

  for (const char *const *name = record_env; *name != NULL; name++)
    {
      g_autofree char *value = job_env (sp, *name);
      if (value != NULL)
        g_ptr_array_add (env, g_strdup_printf ("%s=%s", *name, value));
    }
  g_ptr_array_add (env, NULL);
  return sandstep_spank_record_write (state.rundir, state.job_id, state.handle, state.owner, state.keep,
                                      (const char *const *) env->pdata, error);
}

static gboolean
provision_job (spank_t sp, GError **error)
{
  g_autofree char *job_holder = g_strdup_printf ("%s/%u", state.owner, state.job_id);
  g_autofree char *line = render_provision (state.provision, state.owner, job_holder, error);
  g_autoptr(GString) out = g_string_new (NULL);
  const char *argv[] = { "/bin/sh", "-c", NULL, NULL };

  if (line == NULL)
    return FALSE;
  argv[2] = line;
  if (!run_helper (sp, "sandstep provision", argv, out, error))
    {
      g_prefix_error (error, "--sandbox-provision: ");
      return FALSE;
    }
  g_strstrip (out->str);
  if (!sandstep_handle_is_valid (out->str))
    {
      g_set_error (error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_HELPER,
                   "--sandbox-provision: the helper printed '%s', which is not a handle", out->str);
      return FALSE;
    }
  state.handle = g_strdup (out->str);
  return write_record (sp, error);
}

/* A step that cannot have its sandbox is failed by its tasks (task_init),
 * whether the plugin is `optional` (Slurm would ignore an error returned
 * here) or `required` (an error would fail the launch with Slurm's words,
 * not ours). */
static int
fail_step (GError *error)
{
  state.failure = g_strdup (error->message);
  g_strdelimit (state.failure, "\n\r", ' ');
  slurm_error ("sandstep: %s", state.failure);
  return 0;
}

static int
remote_post_opt (spank_t sp)
{
  g_autoptr(GError) error = NULL;

  apply_env_defaults (sp, job_env);
  if (state.sandbox == NULL && state.provision == NULL)
    return 0;
  if (!load_job (sp, &error))
    return fail_step (error);
  if (state.step_id == SLURM_EXTERN_CONT)
    return 0;
  if (state.sandbox != NULL && strcmp (state.sandbox, JOB_SANDBOX) == 0 && state.provision == NULL)
    {
      g_set_error (&error, SANDSTEP_SPANK_ERROR, SANDSTEP_SPANK_ERROR_BAD_VALUE,
                   "--sandbox=job names this job's own sandbox, but the job provisions none; add "
                   "--sandbox-provision, or give a handle or @FILE");
      return fail_step (error);
    }
  if (state.provision != NULL)
    {
      if (!provision_job (sp, &error))
        return fail_step (error);
      spank_setenv (sp, "SANDSTEP_HANDLE", state.handle, 1);
    }
  /* Operators a task runs on the host act as this step. */
  spank_setenv (sp, "SANDSTEP_OWNER", state.owner, 1);
  spank_setenv (sp, "SANDSTEP_HOLDER", state.holder, 1);
  return 0;
}

int
slurm_spank_init_post_opt (spank_t sp, int ac, char **av)
{
  switch (spank_context ())
    {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      return check_options (sp);
    case S_CTX_REMOTE:
      return remote_post_opt (sp);
    case S_CTX_ERROR:
    case S_CTX_SLURMD:
    case S_CTX_JOB_SCRIPT:
      break;
    }
  return 0;
}

/* Ends the task with @message on its stderr, which is the step's: srun
 * shows the line, then the status.  A task that was to run inside never
 * runs on the host instead. */
static void G_GNUC_NORETURN
fail_task (const char *message)
{
  g_autofree char *line = g_strdup_printf ("sandstep: %s\n", message);

  (void) !write (STDERR_FILENO, line, strlen (line));
  _exit (SANDSTEP_EXIT_INTERNAL);
}

/* Just before Slurm execs the task, as the user: exec it through the helper
 * instead, so it runs in the sandbox.  The batch script stays on the host,
 * where it can run srun (whose steps then run inside). */
int
slurm_spank_task_init (spank_t sp, int ac, char **av)
{
  int argc = 0;
  char **argv = NULL;
  char **env;
  const char *handle;
  g_autoptr(GString) command = g_string_new (NULL);
  g_autofree char *handle_arg = NULL;
  g_autofree char *owner_arg = NULL;
  g_autofree char *holder_arg = NULL;
  g_autofree char *message = NULL;

  if (!spank_remote (sp))
    return 0;
  if (state.failure != NULL)
    fail_task (state.failure);
  if (state.sandbox == NULL || step_is_special (state.step_id))
    return 0;
  handle = strcmp (state.sandbox, JOB_SANDBOX) == 0 ? state.handle : state.sandbox;
  if (handle == NULL || state.owner == NULL || state.holder == NULL)
    fail_task ("the step's sandbox and identity are unknown on this node (init_post_opt did not run)");
  if (spank_get_item (sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 ||
      (env = job_environ (sp)) == NULL)
    fail_task ("could not read the task's command and environment from Slurm");
  for (int i = 0; i < argc; i++)
    {
      if (i > 0)
        g_string_append_c (command, ' ');
      sandstep_render_quote (command, argv[i]);
    }
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  owner_arg = g_strconcat ("--owner=", state.owner, NULL);
  holder_arg = g_strconcat ("--holder=", state.holder, NULL);
  {
    const char *exec_argv[] = { state.helper, "run", handle_arg, owner_arg, holder_arg, "--", command->str, NULL };
    execve (state.helper, (char *const *) exec_argv, env);
  }
  message = g_strdup_printf ("could not run the helper '%s': %s; check sandstep= in plugstack.conf", state.helper,
                             g_strerror (errno));
  fail_task (message);
}

/* ---- the end of a job ---- */

/* Ends what the records of @job_id name, logging what could not be ended. */
static void
end_job_sandboxes (const SandstepSpankUser *user, uint32_t job_id, const char *where)
{
  g_autoptr(GPtrArray) failures = sandstep_spank_records_end (state.rundir, job_id, user, state.helper);

  for (guint i = 0; i < failures->len; i++)
    slurm_error ("sandstep: %s of job %u: %s", where, job_id, (const char *) failures->pdata[i]);
}

int
slurm_spank_exit (spank_t sp, int ac, char **av)
{
  if (spank_context () != S_CTX_REMOTE || state.handle == NULL)
    return 0;
  /* The job ends with this step: its batch script, or the one step srun made the job for. */
  if (state.step_id == SLURM_BATCH_SCRIPT || state.own_job)
    end_job_sandboxes (&state.user, state.job_id, "the end of the step");
  return 0;
}

/* However the job ended (scancel, a node failure of slurmstepd), its
 * records are swept here.  Never fails: a failing epilog would drain the node. */
int
slurm_spank_job_epilog (spank_t sp, int ac, char **av)
{
  SandstepSpankUser user = { 0 };
  uint32_t job_id;

  /* The epilog's process calls no slurm_spank_init. */
  parse_plugin_args (ac, av);
  if (spank_get_item (sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item (sp, S_JOB_UID, &user.uid) != ESPANK_SUCCESS ||
      spank_get_item (sp, S_JOB_GID, &user.gid) != ESPANK_SUCCESS)
    {
      slurm_error ("sandstep: epilog: could not read the job's id, uid and gid from Slurm");
      return 0;
    }
  slurm_debug ("sandstep: epilog of job %u: sweeping %s/job-%u", job_id, state.rundir, job_id);
  end_job_sandboxes (&user, job_id, "epilog");
  return 0;
}
