/* sandstep-jail.c: a live sandbox's jail, as the supervisor loads, builds and runs it.
 *
 * The namespaces are made by sandstep-jail-start.c, here or in the front
 * that started this supervisor (adopted then); the supervisor moves the
 * child into the sandbox's cgroup meanwhile, tells it so, and waits until
 * it has exec'd init, naming the step that failed if it did not.
 */
#include "sandstep-jail.h"
#include "sandstep-jail-private.h"
#include "sandstep-jail-start.h"
#include "sandstep-userns.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-addresses.h"
#include "sandstep-jail-init.h"
#include "sandstep-programs-libc.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static void
jail_op_clear (JailOp *op)
{
  g_free (op->path);
  g_free (op->source);
  g_clear_pointer (&op->data, g_bytes_unref);
  g_free (op->what);
}

static void
jail_tree_clear (JailTree *tree)
{
  g_free (tree->host_path);
}

SandstepJail *
sandstep_jail_alloc (void)
{
  SandstepJail *jail = g_new0 (SandstepJail, 1);

  jail->ops = g_array_new (FALSE, TRUE, sizeof (JailOp));
  g_array_set_clear_func (jail->ops, (GDestroyNotify) jail_op_clear);
  jail->trees = g_array_new (FALSE, TRUE, sizeof (JailTree));
  g_array_set_clear_func (jail->trees, (GDestroyNotify) jail_tree_clear);
  jail->sources = g_ptr_array_new_with_free_func (g_free);
  jail->init_fd = -1;
  return jail;
}

void
sandstep_jail_free (SandstepJail *jail)
{
  if (jail == NULL)
    return;
  g_array_unref (jail->ops);
  g_array_unref (jail->trees);
  g_ptr_array_unref (jail->sources);
  g_strfreev (jail->env_base);
  g_strfreev (jail->env_own);
  g_free (jail->init_path);
  if (jail->init_fd >= 0)
    close (jail->init_fd);
  g_free (jail);
}

/* ---- loading a plan ---- */

static gboolean
bad_plan (GError **error, const char *what)
{
  return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                         "The sandbox's plan is damaged (%s); reinstall sandstep if this persists", what);
}

static char **
dup_bytestring_array (GVariant *value)
{
  return value != NULL ? g_variant_dup_bytestring_array (value, NULL) : g_new0 (char *, 1);
}

/* sandstep-init lives beside the supervisor, in a build tree as once installed (sandstep-programs-libc.h). */
static int
open_init (SandstepJail *jail, GError **error)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  char path[4096];
  int found;

  for (int i = 0; (found = sandstep_program_candidate (i, dir, "sandstep-init", path, sizeof path)) >= 0; i++)
    {
      int fd = found ? open (path, O_PATH | O_CLOEXEC) : -1;
      if (fd >= 0)
        {
          jail->init_path = g_strdup (path);
          return fd;
        }
    }
  sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                  "Cannot find sandstep-init beside '%s' or in '%s'; reinstall sandstep", self ? self : "sandstep",
                  sandstep_program_installed_dir ("sandstep-init"));
  return -1;
}

SandstepJail *
sandstep_jail_from_variant (const SandstepJailImage *image, GVariant *plan, GError **error)
{
  g_autoptr(SandstepJail) jail = sandstep_jail_alloc ();
  g_autoptr(GVariant) env_base = NULL, env_own = NULL, sources = NULL;

  if (!g_variant_is_of_type (plan, G_VARIANT_TYPE_VARDICT) ||
      (env_base = g_variant_lookup_value (plan, "env-base", G_VARIANT_TYPE_BYTESTRING_ARRAY)) == NULL ||
      (env_own = g_variant_lookup_value (plan, "env-own", G_VARIANT_TYPE_BYTESTRING_ARRAY)) == NULL ||
      (sources = g_variant_lookup_value (plan, "sources", G_VARIANT_TYPE_BYTESTRING_ARRAY)) == NULL)
    {
      bad_plan (error, "a member is missing or of the wrong type");
      return NULL;
    }
  jail->image = image;
  jail->outer_uid = image->outer_uid;
  jail->outer_gid = image->outer_gid;
  jail->idmap = (image->flags & SANDSTEP_JAIL_IMAGE_IDMAP) != 0;
  jail->open_net = (image->flags & SANDSTEP_JAIL_IMAGE_OPEN_NET) != 0;
  jail->egress = (image->flags & SANDSTEP_JAIL_IMAGE_EGRESS) != 0;
  jail->env_base = dup_bytestring_array (env_base);
  jail->env_own = dup_bytestring_array (env_own);
  {
    g_auto(GStrv) paths = g_variant_dup_bytestring_array (sources, NULL);
    for (char **p = paths; *p; p++)
      g_ptr_array_add (jail->sources, g_steal_pointer (p));
  }
  jail->init_fd = open_init (jail, error);
  if (jail->init_fd < 0)
    return NULL;
  return g_steal_pointer (&jail);
}

gboolean
sandstep_jail_open_network (SandstepJail *jail)
{
  return jail->open_net;
}

gboolean
sandstep_jail_egress (SandstepJail *jail)
{
  return jail->egress;
}

gboolean
sandstep_jail_layered (SandstepJail *jail)
{
  return jail->image != NULL && jail->image->cwd_slot > 0;
}

void
sandstep_jail_outer_ids (SandstepJail *jail, guint32 *out_uid, guint32 *out_gid)
{
  *out_uid = jail->outer_uid;
  *out_gid = jail->outer_gid;
}

/* ---- what a command gets ---- */

/* Sets @entry ("NAME=VALUE") in @env: in the place of one of the same name, else at the end. */
static void
put_entry (GPtrArray *env, const char *entry)
{
  size_t name_len = strcspn (entry, "=");

  if (entry[name_len] != '=')
    return;
  for (guint i = 0; i < env->len; i++)
    {
      const char *old = env->pdata[i];
      if (strncmp (old, entry, name_len) == 0 && old[name_len] == '=')
        {
          env->pdata[i] = (gpointer) entry;
          return;
        }
    }
  g_ptr_array_add (env, (gpointer) entry);
}

GPtrArray *
sandstep_jail_environment (SandstepJail *jail, char **caller_env)
{
  static const char *const passthrough[] = { SANDSTEP_PASSTHROUGH_ENV };
  /* Borrowed, not copied: a command's environment is sent at once, and a copy per variable churned the
   * supervisor's heap for its first few hundred commands. */
  GPtrArray *env = g_ptr_array_new ();

  for (char **e = jail->env_base; e != NULL && *e != NULL; e++)
    put_entry (env, *e);
  for (gsize i = 0; i < G_N_ELEMENTS (passthrough); i++)
    {
      size_t len = strlen (passthrough[i]);
      for (char **e = caller_env; e != NULL && *e != NULL; e++)
        if (strncmp (*e, passthrough[i], len) == 0 && (*e)[len] == '=')
          {
            put_entry (env, *e);
            break;
          }
    }
  for (char **e = jail->env_own; e != NULL && *e != NULL; e++)
    put_entry (env, *e);
  return env;
}

/* The words of @command when it is a simple command that /bin/sh would run
 * exactly as execvp() does: plain words, no quoting, expansion, redirection,
 * assignment or operator, and not a shell builtin.  Running those directly
 * saves the shell's exec and fork (bash does the same for `bash -c`).
 * NULL when the shell is needed. */
static char **
simple_command_words (const char *command)
{
  static const char *const builtins[] = {
    ".", ":", "[", "alias", "bg", "break", "cd", "chdir", "command", "continue", "echo", "eval", "exec", "exit",
    "export", "false", "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read",
    "readonly", "return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit", "umask",
    "unalias", "unset", "wait", "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until",
    "do", "done", "in", "function", "select", "time", "!", "{", "}",
  };
  g_auto(GStrv) words = NULL;

  for (const char *p = command; *p; p++)
    if (!g_ascii_isalnum (*p) && strchr (" /._-+,:@%=", *p) == NULL)
      return NULL;
  words = g_strsplit_set (command, " ", -1);
  {
    /* Drop the empty words of repeated spaces. */
    char **out = words;
    for (char **in = words; *in; in++)
      if (**in != '\0')
        *out++ = *in;
      else
        g_free (*in);
    *out = NULL;
  }
  if (words[0] == NULL || strchr (words[0], '=') != NULL || g_strv_contains (builtins, words[0]))
    return NULL;
  return g_steal_pointer (&words);
}

GPtrArray *
sandstep_jail_command_argv (const char *command)
{
  g_auto(GStrv) words = simple_command_words (command);
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  if (words != NULL)
    {
      g_ptr_array_add (argv, g_strdup ("--try"));
      for (char **w = words; *w; w++)
        g_ptr_array_add (argv, g_strdup (*w));
      g_ptr_array_add (argv, g_strdup ("--"));
    }
  g_ptr_array_add (argv, g_strdup ("/bin/sh"));
  g_ptr_array_add (argv, g_strdup ("-c"));
  g_ptr_array_add (argv, g_strdup (command));
  return argv;
}

/* ---- host paths that were replaced ---- */

typedef struct {
  dev_t dev;
  ino_t ino;
} SourceId;

GArray *
sandstep_jail_sources (SandstepJail *jail)
{
  GArray *ids = g_array_sized_new (FALSE, FALSE, sizeof (SourceId), jail->sources->len);

  for (guint i = 0; i < jail->sources->len; i++)
    {
      struct stat st;
      SourceId id = { (dev_t) -1, (ino_t) -1 };
      if (stat (jail->sources->pdata[i], &st) == 0)
        id = (SourceId) { st.st_dev, st.st_ino };
      g_array_append_val (ids, id);
    }
  return ids;
}

gboolean
sandstep_jail_sources_equal (GArray *a, GArray *b)
{
  if (a == NULL || b == NULL || a->len != b->len)
    return FALSE;
  for (guint i = 0; i < a->len; i++)
    {
      SourceId *x = &g_array_index (a, SourceId, i), *y = &g_array_index (b, SourceId, i);
      if (x->ino == (ino_t) -1 || x->dev != y->dev || x->ino != y->ino)
        return FALSE;
    }
  return TRUE;
}


/* ---- the supervisor's side ---- */

static char *
describe_step (SandstepJail *jail, int step)
{
  if (step >= 0 && (guint32) step < jail->image->n_ops)
    return g_strdup (sandstep_jail_image_at (jail->image, sandstep_jail_image_op (jail->image, step)->what));
  switch (step)
    {
    case SANDSTEP_JAIL_STEP_PARENT_GONE: return g_strdup ("tie the sandbox to its supervisor's life");
    case SANDSTEP_JAIL_STEP_NETNS:       return g_strdup ("make the sandbox's network namespace");
    case SANDSTEP_JAIL_STEP_SETUID:      return g_strdup ("become the sandbox's uid 0");
    case SANDSTEP_JAIL_STEP_CGROUP_NS:   return g_strdup ("make the sandbox's cgroup namespace");
    case SANDSTEP_JAIL_STEP_CGROUP_MOVE: return g_strdup ("move into the sandbox's cgroup");
    case SANDSTEP_JAIL_STEP_PRIVATE:     return g_strdup ("make the mount namespace private");
    case SANDSTEP_JAIL_STEP_PIVOT:       return g_strdup ("pivot into the sandbox's root");
    case SANDSTEP_JAIL_STEP_ROOT_RDONLY: return g_strdup ("make the sandbox's root read-only");
    case SANDSTEP_JAIL_STEP_LOOPBACK:    return g_strdup ("bring up the loopback interface");
    case SANDSTEP_JAIL_STEP_HOSTNAME:    return g_strdup ("set the sandbox's hostname");
    case SANDSTEP_JAIL_STEP_SETSID:      return g_strdup ("start a new session");
    case SANDSTEP_JAIL_STEP_RLIMIT:      return g_strdup ("set resource limits");
    case SANDSTEP_JAIL_STEP_STDIO:       return g_strdup ("set up init's standard streams");
    case SANDSTEP_JAIL_STEP_CHDIR:       return g_strdup ("enter /workspace");
    case SANDSTEP_JAIL_STEP_SECUREBITS:  return g_strdup ("lock the securebits");
    case SANDSTEP_JAIL_STEP_CAPS:        return g_strdup ("drop every capability");
    case SANDSTEP_JAIL_STEP_NNP:         return g_strdup ("set no_new_privs");
    case SANDSTEP_JAIL_STEP_SECCOMP:     return g_strdup ("install the seccomp filter");
    case SANDSTEP_JAIL_STEP_INIT_FD:     return g_strdup ("execute the sandbox's init (sandstep-init)");
    case SANDSTEP_JAIL_STEP_HOST_ROUTES: return g_strdup ("keep the host's own addresses out of the sandbox's reach");
    default:                             return g_strdup_printf ("step %d", step);
    }
}

/* A start that failed before its child could report, in the words the old builder used. */
static gboolean
start_failed (SandstepJail *jail, const SandstepJailStartFailure *failure, GError **error)
{
  static const char *const maps[] = { [SANDSTEP_JAIL_START_SETGROUPS] = "setgroups",
                                      [SANDSTEP_JAIL_START_UID_MAP] = "uid_map",
                                      [SANDSTEP_JAIL_START_GID_MAP] = "gid_map" };
  int errsv = failure->errsv;
  g_autofree char *why = NULL;

  switch (failure->stage)
    {
    case SANDSTEP_JAIL_START_SOCKETS:
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not create the sockets that start a sandbox");
    case SANDSTEP_JAIL_START_HOST_ADDRESSES:
      if (errsv == E2BIG)
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                               "This host has more than %d addresses of one family, and --network=open keeps "
                               "each out of the sandbox's reach; use --network=allow with an allowlist",
                               SANDSTEP_HOST_ADDRESSES_MAX);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not read the host's addresses, which --network=open keeps out of the "
                                   "sandbox's reach");
    case SANDSTEP_JAIL_START_TAKE_UID:
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not take the sandbox's uid %u to create its namespaces", jail->outer_uid);
    case SANDSTEP_JAIL_START_CLONE:
      why = sandstep_userns_diagnose ("/proc", SANDSTEP_USERNS_CREATE, errsv);
      if (why != NULL)
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                               "Cannot create the sandbox's namespaces (%s): %s", g_strerror (errsv), why);
      if (errsv == EPERM || errsv == EINVAL || errsv == ENOSPC || errsv == EUSERS || errsv == ENOSYS)
        return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errsv,
                                     "Cannot create the sandbox's namespaces (user, mount, pid, ipc, uts, net); "
                                     "enable unprivileged user namespaces (sysctl user.max_user_namespaces), or run "
                                     "sandstep as root");
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Cannot start the sandbox's first process");
    case SANDSTEP_JAIL_START_SETGROUPS:
    case SANDSTEP_JAIL_START_UID_MAP:
    case SANDSTEP_JAIL_START_GID_MAP:
      why = sandstep_userns_diagnose ("/proc", SANDSTEP_USERNS_USE, errsv);
      if (why != NULL)
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                               "Could not write the sandbox's %s (%s): %s", maps[failure->stage], g_strerror (errsv),
                               why);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not write the sandbox's %s", maps[failure->stage]);
    case SANDSTEP_JAIL_START_USERNS:
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not open the sandbox's user namespace");
    case SANDSTEP_JAIL_START_TREE:
      {
        const SandstepJailImageTree *tree = sandstep_jail_image_tree (jail->image, failure->index);
        const char *host_path = sandstep_jail_image_at (jail->image, tree->host_path);
        if (tree->idmap)
          return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR,
                                       errsv == EINVAL || errsv == EPERM ? SANDSTEP_JAIL_ERROR_UNSUPPORTED
                                                                         : SANDSTEP_JAIL_ERROR_SETUP,
                                       errsv, "Could not show the sandbox's tree '%s' through an idmapped mount",
                                       host_path);
        return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                     "The data mount '%s' cannot be used; provision again with a path that exists",
                                     host_path);
      }
    case SANDSTEP_JAIL_START_GO:
      break;
    }
  return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                               "Could not tell the sandbox's first process to go on");
}

void
sandstep_jail_end (SandstepJailProcess *process)
{
  if (process->control >= 0)
    close (process->control);
  process->control = -1;
  if (process->pidfd < 0)
    return;
  syscall (SYS_pidfd_send_signal, process->pidfd, SIGKILL, NULL, 0);
  while (waitid (P_PIDFD, process->pidfd, &(siginfo_t) { 0 }, WEXITED) < 0 && errno == EINTR)
    ;
  close (process->pidfd);
  process->pidfd = -1;
}

/* EOF on the report pipe: init was exec'd (or the child died without a word). */
static gboolean
await_exec (SandstepJail *jail, SandstepJailStart *start, GError **error)
{
  SandstepJailFailure failure;
  struct pollfd pfd = { .fd = start->pidfd, .events = POLLIN };
  ssize_t n;

  do
    n = read (start->report, &failure, sizeof failure);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t) sizeof failure)
    {
      g_autofree char *what = describe_step (jail, failure.step);
      g_autofree char *why = sandstep_userns_diagnose ("/proc", SANDSTEP_USERNS_USE, failure.errsv);

      if (why != NULL)
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                               "The jail could not %s (%s): %s", what, g_strerror (failure.errsv), why);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, failure.errsv,
                                   "The jail could not %s", what);
    }
  if (poll (&pfd, 1, 0) > 0)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "The sandbox's init ended as soon as it started");
  return TRUE;
}

/* From the child's start on: its cgroup, the word that it is in it, and its exec of init. */
static gboolean
finish (SandstepJail *jail, SandstepJailStart *start, gboolean started, SandstepJailAttachFunc attach,
        SandstepJailCheckFunc check, gpointer user_data, SandstepJailProcess *out, GError **error)
{
  gboolean ok = started;
  int fds[SANDSTEP_JAIL_MAX_CGROUP_FDS];
  guint n_fds = 0;

  /* The child builds its root meanwhile.  One born inside is not moved. */
  if (ok && attach != NULL && !start->born_in_cgroup)
    ok = attach (start->pid, fds, &n_fds, user_data, error);
  if (ok)
    {
      /* Told it is in its cgroup, or to move itself in; one that failed meanwhile, or died, says so on the report
       * pipe instead. */
      int sent = sandstep_jail_start_in_cgroup (start, fds, n_fds), errsv = errno;
      for (guint i = 0; i < n_fds; i++)
        close (fds[i]);
      if (sent < 0 && errsv != EPIPE)
        ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not tell the sandbox's first process to go on");
      else
        ok = (check == NULL || check (user_data, error)) && await_exec (jail, start, error);
    }
  if (ok)
    {
      *out = (SandstepJailProcess) { .pid = start->pid, .pidfd = start->pidfd, .control = start->control };
      start->pidfd = start->control = -1;
    }
  else if (start->pidfd >= 0 &&
           !(error != NULL && g_error_matches (*error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN)))
    {
      /* Killed from outside while it started (not a step that failed): say so, so the caller may start
       * another; the command never began. */
      siginfo_t info = { 0 };
      if (waitid (P_PIDFD, start->pidfd, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0 &&
          (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED))
        {
          g_clear_error (error);
          sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_KILLED,
                          "The sandbox's first process was killed (%s) while it started", g_strsignal (info.si_status));
        }
    }
  sandstep_jail_start_abandon (start);
  return ok;
}

gboolean
sandstep_jail_build (SandstepJail *jail, int egress_fd, int cgroup_fd, SandstepJailAttachFunc attach,
                     gpointer user_data, SandstepJailProcess *out, GError **error)
{
  SandstepJailStart start;
  SandstepJailStartFailure failure;
  gboolean started;

  *out = (SandstepJailProcess) { .pid = -1, .pidfd = -1, .control = -1 };
  started = sandstep_jail_start (jail->image, jail->init_fd, egress_fd, cgroup_fd, NULL, &start, &failure) == 0;
  if (!started)
    start_failed (jail, &failure, error);
  return finish (jail, &start, started, attach, NULL, user_data, out, error);
}

gboolean
sandstep_jail_adopt (SandstepJail *jail, SandstepJailStart *start, SandstepJailAttachFunc attach,
                     SandstepJailCheckFunc check, gpointer user_data, SandstepJailProcess *out, GError **error)
{
  *out = (SandstepJailProcess) { .pid = -1, .pidfd = -1, .control = -1 };
  return finish (jail, start, TRUE, attach, check, user_data, out, error);
}
