/* sandstep-jail.c: building a live sandbox from its plan.
 *
 * Runs in the supervisor.  One clone3() makes every namespace, owned by
 * the sandbox's own uid; the supervisor writes the child's uid and gid
 * maps, moves it into the sandbox's cgroup and hands it the idmapped
 * mounts of its trees; the child then executes the plan's steps, pivots
 * into the new root and, after setsid, rlimits, dropping every
 * capability, no_new_privs and seccomp (last), execs init as pid 1.
 *
 * Between clone and exec the child makes plain system calls on data the
 * plan already holds.
 */
#include "sandstep-jail.h"
#include "sandstep-jail-child.h"
#include "sandstep-userns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-etc.h"
#include "sandstep-jail-init.h"
#include "sandstep-run-wire.h"
#include "sandstep-seccomp.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
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
  g_clear_pointer (&jail->seccomp, g_bytes_unref);
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

/* sandstep-init lives beside the supervisor, in a build tree as once installed. */
static int
open_init (SandstepJail *jail, GError **error)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  const char *candidates[] = { dir, SANDSTEP_LIBEXECDIR };

  for (gsize i = 0; i < G_N_ELEMENTS (candidates); i++)
    {
      g_autofree char *path = candidates[i] != NULL ? g_build_filename (candidates[i], "sandstep-init", NULL) : NULL;
      int fd = path != NULL ? open (path, O_PATH | O_CLOEXEC) : -1;
      if (fd >= 0)
        {
          jail->init_path = g_steal_pointer (&path);
          return fd;
        }
    }
  sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                  "Cannot find sandstep-init beside '%s' or in '%s'; reinstall sandstep", self ? self : "sandstep",
                  SANDSTEP_LIBEXECDIR);
  return -1;
}

static int
read_last_cap (void)
{
  g_autofree char *text = NULL;

  if (g_file_get_contents ("/proc/sys/kernel/cap_last_cap", &text, NULL, NULL))
    return (int) g_ascii_strtoll (text, NULL, 10);
  return 63;
}

SandstepJail *
sandstep_jail_from_variant (GVariant *plan, GError **error)
{
  g_autoptr(SandstepJail) jail = sandstep_jail_alloc ();
  g_autoptr(GVariant) ops = NULL, trees = NULL, rlimits = NULL, env_base = NULL, env_own = NULL, sources = NULL;
  GVariantIter iter;
  guint32 kind;
  const char *path, *source;
  GVariant *data;
  guint64 flags, soft, hard;
  gint32 slot, resource;
  gboolean idmap, recursive;
  const char *what;

  if (!g_variant_is_of_type (plan, G_VARIANT_TYPE_VARDICT) ||
      (ops = g_variant_lookup_value (plan, "ops", G_VARIANT_TYPE (SANDSTEP_JAIL_OPS_TYPE))) == NULL ||
      (trees = g_variant_lookup_value (plan, "trees", G_VARIANT_TYPE (SANDSTEP_JAIL_TREES_TYPE))) == NULL ||
      (rlimits = g_variant_lookup_value (plan, "rlimits", G_VARIANT_TYPE ("a(itt)"))) == NULL ||
      !g_variant_lookup (plan, "slots", "i", &jail->n_slots) ||
      !g_variant_lookup (plan, "outer-uid", "u", &jail->outer_uid) ||
      !g_variant_lookup (plan, "outer-gid", "u", &jail->outer_gid) ||
      !g_variant_lookup (plan, "idmap", "b", &jail->idmap) ||
      !g_variant_lookup (plan, "open-net", "b", &jail->open_net) ||
      !g_variant_lookup (plan, "egress", "b", &jail->egress))
    {
      bad_plan (error, "a member is missing or of the wrong type");
      return NULL;
    }
  if (jail->n_slots < 0 || jail->n_slots > SANDSTEP_JAIL_MAX_SLOTS)
    {
      bad_plan (error, "too many slots");
      return NULL;
    }
  env_base = g_variant_lookup_value (plan, "env-base", G_VARIANT_TYPE_BYTESTRING_ARRAY);
  env_own = g_variant_lookup_value (plan, "env-own", G_VARIANT_TYPE_BYTESTRING_ARRAY);
  sources = g_variant_lookup_value (plan, "sources", G_VARIANT_TYPE_BYTESTRING_ARRAY);
  jail->env_base = dup_bytestring_array (env_base);
  jail->env_own = dup_bytestring_array (env_own);
  if (sources != NULL)
    {
      g_auto(GStrv) paths = g_variant_dup_bytestring_array (sources, NULL);
      for (char **p = paths; *p; p++)
        g_ptr_array_add (jail->sources, g_strdup (*p));
    }

  g_variant_iter_init (&iter, ops);
  while (g_variant_iter_next (&iter, "(u^&ay^&ay@ayti^&ay)", &kind, &path, &source, &data, &flags, &slot, &what))
    {
      JailOp op = { .kind = kind, .path = g_strdup (path), .source = source[0] ? g_strdup (source) : NULL,
                    .flags = flags, .slot = slot, .what = g_strdup (what) };
      gsize size = g_variant_get_size (data);
      /* A view of the plan, not a copy: the files of /etc are most of it. */
      if (size > 0)
        op.data = g_variant_get_data_as_bytes (data);
      g_variant_unref (data);
      g_array_append_val (jail->ops, op);
      if (kind > JAIL_OP_ATTACH || slot < -1 || slot >= jail->n_slots ||
          ((kind == JAIL_OP_OPEN || kind == JAIL_OP_ATTACH) && slot < 0) ||
          (kind == JAIL_OP_TMPFS && (op.data == NULL || ((const char *) g_bytes_get_data (op.data, NULL))[size - 1])))
        {
          bad_plan (error, "a step is malformed");
          return NULL;
        }
    }
  g_variant_iter_init (&iter, trees);
  while (g_variant_iter_next (&iter, "(^&ayitbb)", &path, &slot, &flags, &idmap, &recursive))
    {
      JailTree tree = { .host_path = g_strdup (path), .slot = slot, .attrs = flags, .idmap = idmap,
                        .recursive = recursive };
      g_array_append_val (jail->trees, tree);
      if (slot < 0 || slot >= jail->n_slots)
        {
          bad_plan (error, "a tree has no slot");
          return NULL;
        }
    }
  g_variant_iter_init (&iter, rlimits);
  while (g_variant_iter_next (&iter, "(itt)", &resource, &soft, &hard))
    {
      if (jail->n_rlimits == G_N_ELEMENTS (jail->rlimits))
        {
          bad_plan (error, "too many limits");
          return NULL;
        }
      jail->rlimits[jail->n_rlimits].resource = resource;
      jail->rlimits[jail->n_rlimits].value.rlim_cur = soft;
      jail->rlimits[jail->n_rlimits].value.rlim_max = hard;
      jail->n_rlimits++;
    }

  jail->last_cap = read_last_cap ();
  jail->init_fd = open_init (jail, error);
  if (jail->init_fd < 0)
    return NULL;
  jail->seccomp = sandstep_seccomp_program (error);
  if (jail->seccomp == NULL)
    return NULL;
  jail->seccomp_prog.len = g_bytes_get_size (jail->seccomp) / sizeof (struct sock_filter);
  jail->seccomp_prog.filter = (struct sock_filter *) g_bytes_get_data (jail->seccomp, NULL);
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
  if (step >= 0 && (guint) step < jail->ops->len)
    return g_strdup (g_array_index (jail->ops, JailOp, step).what);
  switch (step)
    {
    case STEP_PARENT_GONE: return g_strdup ("tie the sandbox to its supervisor's life");
    case STEP_SETUID:      return g_strdup ("become the sandbox's uid 0");
    case STEP_CGROUP_NS:   return g_strdup ("make the sandbox's cgroup namespace");
    case STEP_PRIVATE:     return g_strdup ("make the mount namespace private");
    case STEP_PIVOT:       return g_strdup ("pivot into the sandbox's root");
    case STEP_ROOT_RDONLY: return g_strdup ("make the sandbox's root read-only");
    case STEP_LOOPBACK:    return g_strdup ("bring up the loopback interface");
    case STEP_HOSTNAME:    return g_strdup ("set the sandbox's hostname");
    case STEP_SETSID:      return g_strdup ("start a new session");
    case STEP_RLIMIT:      return g_strdup ("set resource limits");
    case STEP_STDIO:       return g_strdup ("set up init's standard streams");
    case STEP_CHDIR:       return g_strdup ("enter /workspace");
    case STEP_SECUREBITS:  return g_strdup ("lock the securebits");
    case STEP_CAPS:        return g_strdup ("drop every capability");
    case STEP_NNP:         return g_strdup ("set no_new_privs");
    case STEP_SECCOMP:     return g_strdup ("install the seccomp filter");
    case STEP_INIT_FD:     return g_strdup ("execute the sandbox's init (sandstep-init)");
    default:               return g_strdup_printf ("step %d", step);
    }
}

static gboolean
write_proc (int pid, const char *file, const char *text, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", pid, file);

  int errsv;
  g_autofree char *why = NULL;

  if (sandstep_jail_write_file (path, text, strlen (text), O_WRONLY, 0) == 0)
    return TRUE;
  errsv = errno;
  why = sandstep_userns_diagnose ("/proc", SANDSTEP_USERNS_USE, errsv);
  if (why != NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                           "Could not write the sandbox's %s (%s): %s", file, g_strerror (errsv), why);
  return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                               "Could not write the sandbox's %s", file);
}

/* The detached mounts the child attaches: the trees idmapped, so that the
 * sandbox's uid 0 sees the files of their host owner as its own and what it
 * writes keeps that owner; data mounts read-only down their whole subtree. */
static gboolean
make_trees (SandstepJail *jail, int pid, GArray *out_fds, GError **error)
{
  g_autofree char *ns_path = g_strdup_printf ("/proc/%d/ns/user", pid);
  int userns = open (ns_path, O_RDONLY | O_CLOEXEC);

  if (userns < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not open the sandbox's user namespace");
  for (guint i = 0; i < jail->trees->len; i++)
    {
      const JailTree *tree = &g_array_index (jail->trees, JailTree, i);
      struct mount_attr attr = { .attr_set = tree->attrs | (tree->idmap ? MOUNT_ATTR_IDMAP : 0),
                                 .userns_fd = tree->idmap ? (guint64) userns : 0 };
      unsigned recursive = tree->recursive ? AT_RECURSIVE : 0;
      int fd = sys_open_tree (AT_FDCWD, tree->host_path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | recursive);
      if (fd < 0 || sys_mount_setattr (fd, "", AT_EMPTY_PATH | recursive, &attr) < 0)
        {
          int errsv = errno;
          if (fd >= 0)
            close (fd);
          close (userns);
          if (tree->idmap)
            return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR,
                                         errsv == EINVAL || errsv == EPERM ? SANDSTEP_JAIL_ERROR_UNSUPPORTED
                                                                           : SANDSTEP_JAIL_ERROR_SETUP,
                                         errsv, "Could not show the sandbox's tree '%s' through an idmapped mount",
                                         tree->host_path);
          return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                       "The data mount '%s' cannot be used; provision again with a path that exists",
                                       tree->host_path);
        }
      g_array_append_val (out_fds, fd);
    }
  close (userns);
  return TRUE;
}

static gboolean
send_go (int go, GArray *fds)
{
  union { char buf[CMSG_SPACE (SANDSTEP_JAIL_MAX_SLOTS * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  char byte = 'g';
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

  if (fds->len > 0)
    {
      struct cmsghdr *cmsg;
      msg.msg_control = cmsg_buf.buf;
      msg.msg_controllen = CMSG_SPACE (fds->len * sizeof (int));
      cmsg = CMSG_FIRSTHDR (&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (fds->len * sizeof (int));
      memcpy (CMSG_DATA (cmsg), fds->data, fds->len * sizeof (int));
    }
  return sendmsg (go, &msg, MSG_NOSIGNAL) == 1;
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
await_exec (SandstepJail *jail, int report, SandstepJailProcess *process, GError **error)
{
  SandstepJailFailure failure;
  struct pollfd pfd = { .fd = process->pidfd, .events = POLLIN };
  ssize_t n;

  do
    n = read (report, &failure, sizeof failure);
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

gboolean
sandstep_jail_build (SandstepJail *jail, int egress_fd, SandstepJailAttachFunc attach, gpointer user_data,
                     SandstepJailProcess *out, GError **error)
{
  struct clone_args clone_args = {
    .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_PIDFD,
    .exit_signal = SIGCHLD,
  };
  int control[2] = { -1, -1 }, go[2] = { -1, -1 }, report[2] = { -1, -1 };
  char control_text[16], egress_text[16];
  char *init_argv[] = { (char *) "sandstep-init", control_text, egress_fd >= 0 ? egress_text : NULL, NULL };
  SandstepJailChildArgs args = { .jail = jail, .egress = egress_fd, .argv = init_argv };
  g_autoptr(GArray) tree_fds = g_array_new (FALSE, FALSE, sizeof (int));
  g_autofree char *uid_map = g_strdup_printf ("0 %u 1\n", jail->outer_uid);
  g_autofree char *gid_map = g_strdup_printf ("0 %u 1\n", jail->outer_gid);
  gboolean as_root = geteuid () == 0;
  int pidfd = -1;
  pid_t pid;
  int errsv;
  gboolean ok;

  *out = (SandstepJailProcess) { .pid = -1, .pidfd = -1, .control = -1 };
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) < 0 ||
      socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, go) < 0 || pipe2 (report, O_CLOEXEC) < 0)
    {
      errsv = errno;
      ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                 "Could not create the sockets that start a sandbox");
      goto out;
    }
  g_snprintf (control_text, sizeof control_text, "%d", control[1]);
  g_snprintf (egress_text, sizeof egress_text, "%d", egress_fd);
  args.go = go[1];
  args.report = report[1];
  args.control = control[1];
  args.others[0] = go[0];
  args.others[1] = report[0];
  args.others[2] = control[0];

  /* As root, the namespaces belong to the sandbox's uid, so that its
   * network stack (running as that uid) may join them; nothing else on the
   * host runs as that uid. */
  clone_args.pidfd = (guint64) (guintptr) &pidfd;
  if (as_root && (setresgid (-1, jail->outer_gid, -1) < 0 || setresuid (-1, jail->outer_uid, -1) < 0))
    {
      errsv = errno;
      setresgid (-1, 0, -1);
      ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                 "Could not take the sandbox's uid %u to create its namespaces", jail->outer_uid);
      goto out;
    }
  pid = syscall (SYS_clone3, &clone_args, sizeof clone_args);
  if (pid == 0)
    _exit (sandstep_jail_child_main (&args));
  errsv = errno;
  if (as_root && (setresuid (-1, 0, -1) < 0 || setresgid (-1, 0, -1) < 0))
    g_error ("could not take back root after creating a sandbox: %s", g_strerror (errno));
  if (pid < 0)
    {
      g_autofree char *why = sandstep_userns_diagnose ("/proc", SANDSTEP_USERNS_CREATE, errsv);

      if (why != NULL)
        ok = sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                             "Cannot create the sandbox's namespaces (%s): %s", g_strerror (errsv), why);
      else if (errsv == EPERM || errsv == EINVAL || errsv == ENOSPC || errsv == EUSERS || errsv == ENOSYS)
        ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errsv,
                                   "Cannot create the sandbox's namespaces (user, mount, pid, ipc, uts, net); "
                                   "enable unprivileged user namespaces (sysctl user.max_user_namespaces), or run "
                                   "sandstep as root");
      else
        ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Cannot start the sandbox's first process");
      goto out;
    }
  out->pid = pid;
  out->pidfd = pidfd;
  close (go[1]);
  close (report[1]);
  close (control[1]);
  go[1] = report[1] = control[1] = -1;

  ok = write_proc (pid, "setgroups", "deny", error) && write_proc (pid, "uid_map", uid_map, error) &&
       write_proc (pid, "gid_map", gid_map, error) &&
       (jail->trees->len == 0 || make_trees (jail, pid, tree_fds, error));
  if (ok && !send_go (go[0], tree_fds))
    ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                               "Could not tell the sandbox's first process to go on");
  for (guint i = 0; i < tree_fds->len; i++)
    close (g_array_index (tree_fds, int, i));
  /* The child builds its root meanwhile: a sandbox's first move into its cgroup waits for the kernel
   * (sandstep-cgroup-warm.h), and every cgroup operation with it. */
  if (ok && attach != NULL)
    ok = attach (pid, user_data, error);
  if (ok)
    {
      /* Told it is in its cgroup; one that failed meanwhile, or died, says so on the report pipe instead. */
      if (send (go[0], "c", 1, MSG_NOSIGNAL) != 1 && errno != EPIPE && errno != ECONNRESET)
        ok = sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                   "Could not tell the sandbox's first process to go on");
      else
        ok = await_exec (jail, report[0], out, error);
    }
  if (ok)
    {
      out->control = control[0];
      control[0] = -1;
    }
  else
    {
      /* Killed from outside while it started (not a step that failed): say so, so the caller may start
       * another; the command never began. */
      siginfo_t info = { 0 };
      if (waitid (P_PIDFD, out->pidfd, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0 &&
          (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED))
        {
          g_clear_error (error);
          sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_KILLED,
                          "The sandbox's first process was killed (%s) while it started", g_strsignal (info.si_status));
        }
      sandstep_jail_end (out);
    }

out:
  for (int i = 0; i < 2; i++)
    {
      if (control[i] >= 0)
        close (control[i]);
      if (go[i] >= 0)
        close (go[i]);
      if (report[i] >= 0)
        close (report[i]);
    }
  return ok;
}
