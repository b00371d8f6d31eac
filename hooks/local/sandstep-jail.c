/* sandstep-jail.c: one command in a fresh Linux jail.
 *
 * Construction order follows bubblewrap's: one clone() with every namespace,
 * the child maps its own uid, makes its mounts private, builds a tmpfs root
 * with read-only /usr, the persistent /workspace and /tmp, a minimal /dev and
 * its own /proc, pivots into it, then becomes a tiny init that forks the
 * command.  The command gets setsid, no capabilities, no_new_privs and the
 * seccomp filter, last, right before execve.
 *
 * Everything the child needs is computed here first (SandstepJail), because
 * between clone and exec the child may only make plain system calls.
 */
#include "sandstep-jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-etc.h"
#include "sandstep-jail-init.h"
#include "sandstep-launch-wire.h"
#include "sandstep-limits.h"
#include "sandstep-seccomp.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The jail's root is a tmpfs mounted here, in the child's private mount namespace. */
#define NEWROOT "/tmp"

typedef enum {
  OP_TMPFS,      /* mount a tmpfs at path, data as options */
  OP_MKDIR,
  OP_TOUCH,      /* an empty file to bind a file onto */
  OP_SYMLINK,    /* path -> source */
  OP_BIND,       /* bind source (or /proc/self/fd/fd) on path */
  OP_REMOUNT,    /* change the flags of the bind at path */
  OP_PROC,
  OP_OPEN,       /* open the host path (not under NEWROOT) into a slot */
} OpKind;

/* Host directories bound from an fd opened in the child: an fd opened by the
 * parent belongs to the parent's mount namespace, and mount(2) refuses to bind
 * it (EINVAL); the child opens them before the tmpfs root can cover them. */
#define MAX_SLOTS 64

typedef struct {
  OpKind kind;
  char *path;           /* absolute, under NEWROOT */
  char *source;
  char *data;           /* OP_TMPFS: the mount options */
  unsigned long flags;
  int slot;             /* OP_OPEN: the slot to fill; OP_BIND: the slot to bind from, or -1 */
  char *what;           /* for messages: what this step does, in words */
} JailOp;

struct _SandstepJail {
  GArray *ops;          /* of JailOp */
  int n_slots;
  int slots[MAX_SLOTS]; /* filled by OP_OPEN in the child */
  gboolean new_net;
  gboolean relay;       /* network=allow: init relays the proxy port to the host's proxy */
  char uid_map[64];
  char gid_map[64];
  char **env_base;       /* see build_environment() */
  char **env_own;
  char **envp;          /* for a command started with the jail: this process's terminal and locale */
  GBytes *seccomp;
  struct sock_fprog seccomp_prog;
  int last_cap;
  int n_rlimits;
  struct { int resource; struct rlimit value; } rlimits[8];
  int init_fd;          /* sandstep-init, exec'd by fd: it is not visible inside */
};

/* Failure steps the child can report besides the ops (which are 0..n-1). */
enum {
  STEP_PARENT_GONE = -100,
  STEP_SETGROUPS,
  STEP_UID_MAP,
  STEP_GID_MAP,
  STEP_PRIVATE,
  STEP_PIVOT,
  STEP_ROOT_RDONLY,
  STEP_LOOPBACK,
  STEP_HOSTNAME,
  STEP_SETSID,
  STEP_RLIMIT,
  STEP_STDIO,
  STEP_CHDIR,
  STEP_SECUREBITS,
  STEP_CAPS,
  STEP_NNP,
  STEP_SECCOMP,
  STEP_INIT_FD,
  /* and SANDSTEP_JAIL_STEP_EXEC, SANDSTEP_JAIL_STEP_INIT from sandstep-init */
};

typedef SandstepJailFailure ChildFailure;

/* The child runs on its own stack in the helper's memory (CLONE_VM): no page
 * tables are copied, and the helper sleeps until the child execs init. */
#define CHILD_STACK_SIZE (256 * 1024)

typedef struct {
  SandstepJail *jail;
  int report_fd;
  int life_fd;
  int keep_fd;          /* open across the exec of init too, or -1 */
  int stdio[3];
  char *const *argv;
} ChildArgs;

static void
jail_op_clear (JailOp *op)
{
  g_free (op->path);
  g_free (op->source);
  g_free (op->data);
  g_free (op->what);
}

static void
add_op (SandstepJail *jail, OpKind kind, const char *path, const char *source, unsigned long flags,
        const char *data, const char *what)
{
  JailOp op = {
    .kind = kind,
    .path = kind == OP_OPEN ? g_strdup (path) : g_strconcat (NEWROOT, path, NULL),
    .slot = -1,
    .source = g_strdup (source),
    .data = g_strdup (data),
    .flags = flags,
    .what = g_strdup (what),
  };
  g_array_append_val (jail->ops, op);
}

static void
add_tmpfs (SandstepJail *jail, const char *path, unsigned long flags, const char *options, const char *what)
{
  add_op (jail, OP_TMPFS, path, NULL, flags, options, what);
}

/* The flags the kernel locks on a mount seen from a user namespace: a remount
 * must repeat them or it fails with EPERM. */
static unsigned long
locked_mount_flags (const char *path)
{
  struct statvfs st;
  unsigned long flags = MS_NOSUID | MS_NODEV;

  if (statvfs (path, &st) < 0)
    return flags;
  if (st.f_flag & ST_RDONLY)
    flags |= MS_RDONLY;
  if (st.f_flag & ST_NOEXEC)
    flags |= MS_NOEXEC;
  if (st.f_flag & ST_NOATIME)
    flags |= MS_NOATIME;
  if (st.f_flag & ST_NODIRATIME)
    flags |= MS_NODIRATIME;
  if (st.f_flag & ST_RELATIME)
    flags |= MS_RELATIME;
  if (!(st.f_flag & (ST_NOATIME | ST_RELATIME)))
    flags |= MS_STRICTATIME;
  return flags;
}

/* Binds @host_path on @target.  With @early, the child opens the host path
 * before the tmpfs root is mounted (the path may lie under NEWROOT). */
static gboolean
add_bind (SandstepJail *jail, const char *host_path, gboolean early, const char *target, gboolean read_only,
          gboolean is_dir, GError **error)
{
  g_autofree char *what = g_strdup_printf ("bind '%s' on %s", host_path, target);
  unsigned long flags = locked_mount_flags (host_path) | (read_only ? MS_RDONLY : 0);
  int slot = -1;

  if (early)
    {
      if (jail->n_slots == MAX_SLOTS)
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                               "Too many mounts for one sandbox (at most %d); use fewer data mounts", MAX_SLOTS - 2);
      slot = jail->n_slots++;
      /* Opens run first: insert before every other op. */
      JailOp open_op = { .kind = OP_OPEN, .path = g_strdup (host_path), .slot = slot, .what = g_strdup (what) };
      g_array_insert_val (jail->ops, slot, open_op);
    }
  add_op (jail, is_dir ? OP_MKDIR : OP_TOUCH, target, NULL, 0, NULL, what);
  add_op (jail, OP_BIND, target, early ? "/proc/self/fd/XXXXXXXXXXXX" : host_path, MS_BIND | MS_REC, NULL, what);
  g_array_index (jail->ops, JailOp, jail->ops->len - 1).slot = slot;
  add_op (jail, OP_REMOUNT, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL, what);
  return TRUE;
}

typedef struct {
  SandstepJail *jail;
  GError **error;
  gboolean ok;
} LiveEtc;

static void
bind_live_etc (const char *host_path, gboolean is_dir, gpointer data)
{
  LiveEtc *live = data;

  if (live->ok)
    live->ok = add_bind (live->jail, host_path, FALSE, host_path, TRUE, is_dir, live->error);
}

/* The sandbox's copy of /etc (sandstep-etc.c), with the host directories it lists bound live on top. */
static gboolean
add_etc (SandstepJail *jail, const char *etc_dir, GError **error)
{
  LiveEtc live = { jail, error, TRUE };

  add_op (jail, OP_MKDIR, "/etc", NULL, 0755, NULL, "create /etc");
  if (!add_bind (jail, etc_dir, TRUE, "/etc", TRUE, TRUE, error))
    return FALSE;
  sandstep_etc_foreach_live (bind_live_etc, &live);
  return live.ok;
}

static void
add_dev (SandstepJail *jail)
{
  static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
  static const char *const links[][2] = {
    { "/dev/fd", "/proc/self/fd" }, { "/dev/stdin", "/proc/self/fd/0" },
    { "/dev/stdout", "/proc/self/fd/1" }, { "/dev/stderr", "/proc/self/fd/2" },
  };

  add_op (jail, OP_MKDIR, "/dev", NULL, 0755, NULL, "create /dev");
  add_tmpfs (jail, "/dev", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64", "mount a tmpfs on /dev");
  for (gsize i = 0; i < G_N_ELEMENTS (nodes); i++)
    {
      g_autofree char *path = g_strconcat ("/dev/", nodes[i], NULL);
      g_autofree char *what = g_strdup_printf ("bind the device %s", path);
      add_op (jail, OP_TOUCH, path, NULL, 0, NULL, what);
      add_op (jail, OP_BIND, path, path, MS_BIND, NULL, what);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (links); i++)
    add_op (jail, OP_SYMLINK, links[i][0], links[i][1], 0, NULL, links[i][0]);
  add_op (jail, OP_MKDIR, "/dev/shm", NULL, 01777, NULL, "create /dev/shm");
  add_tmpfs (jail, "/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=64m", "mount a tmpfs on /dev/shm");
  add_op (jail, OP_REMOUNT, "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL,
          "make /dev read-only");
}

/* The top-level links of a merged-/usr system (/bin -> usr/bin); where the
 * host has a real directory instead, it is bound read-only. */
static void
add_usr (SandstepJail *jail)
{
  static const char *const tops[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };

  add_bind (jail, "/usr", FALSE, "/usr", TRUE, TRUE, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (tops); i++)
    {
      struct stat st;
      if (lstat (tops[i], &st) < 0)
        continue;
      if (S_ISLNK (st.st_mode))
        {
          g_autofree char *target = g_file_read_link (tops[i], NULL);
          if (target != NULL)
            add_op (jail, OP_SYMLINK, tops[i], target, 0, NULL, tops[i]);
        }
      else if (S_ISDIR (st.st_mode))
        add_bind (jail, tops[i], FALSE, tops[i], TRUE, TRUE, NULL);
    }
}

/* The host-wide knobs and views of /proc.  The jail's uid 0 is the caller's
 * uid, which for a root helper is the host's root: without these masks it
 * could write global sysctls such as kernel.core_pattern (a pipe run as host
 * root) and the other root-only files of /proc.  Docker masks the same. */
static void
add_proc_masks (SandstepJail *jail)
{
  static const char *const read_only_dirs[] = { "sys", "irq", "bus", "fs", "sysvipc" };
  static const char *const hidden_files[] = {
    "sysrq-trigger", "kcore", "kmsg", "keys", "key-users", "timer_list", "sched_debug", "latency_stats",
    "kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "config.gz", "slabinfo", "vmallocinfo",
  };
  static const char *const hidden_dirs[] = { "acpi", "scsi", "asound", "driver", "tty", "dynamic_debug" };
  g_autofree char *first_file = NULL;
  g_autofree char *first_dir = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (read_only_dirs); i++)
    {
      g_autofree char *host = g_strconcat ("/proc/", read_only_dirs[i], NULL);
      g_autofree char *inside = g_strconcat (NEWROOT, host, NULL);
      g_autofree char *what = g_strdup_printf ("make %s read-only", host);
      if (!g_file_test (host, G_FILE_TEST_IS_DIR))
        continue;
      /* Bound onto itself (the jail's own /proc/NAME), so that it can be remounted read-only. */
      add_op (jail, OP_BIND, host, inside, MS_BIND | MS_REC, NULL, what);
      add_op (jail, OP_REMOUNT, host, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL, what);
    }
  /* The first mask of each kind gets its mount flags; the others are binds of it, which carry them. */
  for (gsize i = 0; i < G_N_ELEMENTS (hidden_files); i++)
    {
      g_autofree char *host = g_strconcat ("/proc/", hidden_files[i], NULL);
      g_autofree char *what = g_strdup_printf ("hide %s", host);
      if (!g_file_test (host, G_FILE_TEST_EXISTS))
        continue;
      /* The mask is /dev/null: a read sees nothing, a write vanishes, the real file is out of reach. */
      if (first_file == NULL)
        {
          add_op (jail, OP_BIND, host, "/dev/null", MS_BIND, NULL, what);
          add_op (jail, OP_REMOUNT, host, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL,
                  what);
          first_file = g_strconcat (NEWROOT, host, NULL);
        }
      else
        add_op (jail, OP_BIND, host, first_file, MS_BIND, NULL, what);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (hidden_dirs); i++)
    {
      g_autofree char *host = g_strconcat ("/proc/", hidden_dirs[i], NULL);
      g_autofree char *what = g_strdup_printf ("hide %s", host);
      if (!g_file_test (host, G_FILE_TEST_IS_DIR))
        continue;
      if (first_dir == NULL)
        {
          add_tmpfs (jail, host, MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "mode=0555,size=0", what);
          first_dir = g_strconcat (NEWROOT, host, NULL);
        }
      else
        add_op (jail, OP_BIND, host, first_dir, MS_BIND, NULL, what);
    }
}

/* What the jail's environment is made of: the fixed variables and the spec's
 * own, with the caller's terminal and locale between them (the spec wins). */
static void
build_environment (SandstepJail *jail, const SandstepSpec *spec)
{
  GHashTableIter iter;
  gpointer key, value;
  char **base = NULL, **own = NULL;

  base = g_environ_setenv (base, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", TRUE);
  base = g_environ_setenv (base, "HOME", "/workspace", TRUE);
  base = g_environ_setenv (base, "PWD", "/workspace", TRUE);
  base = g_environ_setenv (base, "TMPDIR", "/tmp", TRUE);
  base = g_environ_setenv (base, "USER", "root", TRUE);
  base = g_environ_setenv (base, "LOGNAME", "root", TRUE);
  base = g_environ_setenv (base, "SHELL", "/bin/sh", TRUE);
  base = g_environ_setenv (base, "HOSTNAME", SANDSTEP_JAIL_HOSTNAME, TRUE);
  base = g_environ_setenv (base, "SANDSTEP", "1", TRUE);
  if (spec->network == SANDSTEP_NETWORK_ALLOW)
    {
      static const char *const proxy_vars[] = { "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                                "ALL_PROXY", "all_proxy" };
      for (gsize i = 0; i < G_N_ELEMENTS (proxy_vars); i++)
        base = g_environ_setenv (base, proxy_vars[i], SANDSTEP_PROXY_URL, TRUE);
      base = g_environ_setenv (base, "NO_PROXY", "localhost,127.0.0.1,::1", TRUE);
      base = g_environ_setenv (base, "no_proxy", "localhost,127.0.0.1,::1", TRUE);
    }
  g_hash_table_iter_init (&iter, spec->env);
  while (g_hash_table_iter_next (&iter, &key, &value))
    own = g_environ_setenv (own, key, value, TRUE);
  g_hash_table_iter_init (&iter, spec->secrets);
  while (g_hash_table_iter_next (&iter, &key, &value))
    own = g_environ_setenv (own, key, value, TRUE);
  jail->env_base = base;
  jail->env_own = own;
}

/* The command's environment, with the terminal and locale of @caller_env. */
static char **
jail_environment (SandstepJail *jail, char **caller_env)
{
  static const char *const passthrough[] = { SANDSTEP_PASSTHROUGH_ENV };
  char **envp = g_strdupv (jail->env_base);

  for (gsize i = 0; i < G_N_ELEMENTS (passthrough); i++)
    {
      const char *value = g_environ_getenv (caller_env, passthrough[i]);
      if (value != NULL)
        envp = g_environ_setenv (envp, passthrough[i], value, TRUE);
    }
  for (char **e = jail->env_own; e != NULL && *e != NULL; e++)
    {
      const char *eq = strchr (*e, '=');
      g_autofree char *name = g_strndup (*e, eq - *e);
      envp = g_environ_setenv (envp, name, eq + 1, TRUE);
    }
  return envp;
}

static void
add_rlimit (SandstepJail *jail, int resource, rlim_t soft, rlim_t hard)
{
  jail->rlimits[jail->n_rlimits].resource = resource;
  jail->rlimits[jail->n_rlimits].value.rlim_cur = soft;
  jail->rlimits[jail->n_rlimits].value.rlim_max = hard;
  jail->n_rlimits++;
}

static void
set_rlimits (SandstepJail *jail, const SandstepJailConfig *config)
{
  SandstepLimits limits = sandstep_limits_resolve (&config->spec->limits);

  add_rlimit (jail, RLIMIT_CORE, 0, 0);
  add_rlimit (jail, RLIMIT_NOFILE, SANDSTEP_DEFAULT_NOFILE, SANDSTEP_DEFAULT_NOFILE);
  add_rlimit (jail, RLIMIT_FSIZE, limits.disk, limits.disk);
  /* SIGXCPU at the limit, SIGKILL a second later for a command that ignores it. */
  add_rlimit (jail, RLIMIT_CPU, limits.cpu_time_s, limits.cpu_time_s + 1);
  /* Counted per user namespace: this bounds the command's processes even without a cgroup. */
  add_rlimit (jail, RLIMIT_NPROC, limits.pids, limits.pids);
  if (config->memory_by_rlimit)
    add_rlimit (jail, RLIMIT_AS, limits.memory, limits.memory);
}

/* sandstep-init lives beside the helper in a build tree, else in libexecdir. */
static int
open_init (GError **error)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  g_autofree char *beside = dir != NULL ? g_build_filename (dir, "sandstep-init", NULL) : NULL;
  const char *given = g_getenv ("SANDSTEP_INIT");
  const char *candidates[] = { given, beside, SANDSTEP_LIBEXECDIR "/sandstep-init" };

  for (gsize i = 0; i < G_N_ELEMENTS (candidates); i++)
    {
      int fd;
      if (candidates[i] == NULL || (fd = open (candidates[i], O_PATH | O_CLOEXEC)) < 0)
        continue;
      return fd;
    }
  sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                  "Cannot find sandstep-init beside '%s' or in '%s'; reinstall sandstep, or set SANDSTEP_INIT",
                  self ? self : "sandstep", SANDSTEP_LIBEXECDIR);
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
sandstep_jail_new (const SandstepJailConfig *config, GError **error)
{
  g_autoptr(SandstepJail) jail = g_new0 (SandstepJail, 1);

  jail->ops = g_array_new (FALSE, TRUE, sizeof (JailOp));
  g_array_set_clear_func (jail->ops, (GDestroyNotify) jail_op_clear);
  jail->new_net = config->spec->network != SANDSTEP_NETWORK_OPEN;
  jail->relay = config->spec->network == SANDSTEP_NETWORK_ALLOW;
  if (jail->relay && config->proxy_dir == NULL)
    {
      sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                      "network=allow needs the egress proxy, and this backend started none");
      return NULL;
    }
  g_snprintf (jail->uid_map, sizeof jail->uid_map, "0 %u 1\n", (unsigned) getuid ());
  g_snprintf (jail->gid_map, sizeof jail->gid_map, "0 %u 1\n", (unsigned) getgid ());
  build_environment (jail, config->spec);
  jail->envp = jail_environment (jail, environ);
  jail->last_cap = read_last_cap ();
  set_rlimits (jail, config);
  jail->init_fd = open_init (error);
  if (jail->init_fd < 0)
    return NULL;

  jail->seccomp = sandstep_seccomp_program (error);
  if (jail->seccomp == NULL)
    return NULL;
  jail->seccomp_prog.len = g_bytes_get_size (jail->seccomp) / sizeof (struct sock_filter);
  jail->seccomp_prog.filter = (struct sock_filter *) g_bytes_get_data (jail->seccomp, NULL);

  add_tmpfs (jail, "", MS_NOSUID | MS_NODEV, "mode=0755,size=4m,nr_inodes=4096", "mount the tmpfs root");
  add_usr (jail);
  if (!add_bind (jail, config->workspace, TRUE, "/workspace", FALSE, TRUE, error) ||
      !add_bind (jail, config->tmp, TRUE, "/tmp", FALSE, TRUE, error))
    return NULL;
  if (!add_etc (jail, config->etc_dir, error))
    return NULL;
  add_dev (jail);
  if (jail->relay)
    {
      add_op (jail, OP_MKDIR, "/run", NULL, 0755, NULL, "create /run");
      if (!add_bind (jail, config->proxy_dir, TRUE, "/run/sandstep", TRUE, TRUE, error))
        return NULL;
    }

  if (config->spec->mounts->len > 0)
    add_op (jail, OP_MKDIR, "/data", NULL, 0755, NULL, "create /data");
  for (guint i = 0; i < config->spec->mounts->len; i++)
    {
      const SandstepMount *mount = config->spec->mounts->pdata[i];
      g_autofree char *target = g_strconcat ("/data/", mount->name, NULL);
      struct stat st;

      if (stat (mount->host_path, &st) < 0)
        {
          sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                "The data mount '%s' for %s cannot be used; provision again with a path that exists",
                                mount->host_path, target);
          return NULL;
        }
      if (!add_bind (jail, mount->host_path, TRUE, target, TRUE, S_ISDIR (st.st_mode), error))
        return NULL;
    }

  /* proc must be mounted while the host's full /proc is still visible. */
  add_op (jail, OP_MKDIR, "/proc", NULL, 0555, NULL, "create /proc");
  add_op (jail, OP_PROC, "/proc", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, "mount /proc");
  add_proc_masks (jail);
  return g_steal_pointer (&jail);
}

void
sandstep_jail_free (SandstepJail *jail)
{
  if (jail == NULL)
    return;
  if (jail->ops != NULL)
    g_array_unref (jail->ops);
  g_strfreev (jail->envp);
  g_strfreev (jail->env_base);
  g_strfreev (jail->env_own);
  if (jail->init_fd > 0)
    close (jail->init_fd);
  if (jail->seccomp != NULL)
    g_bytes_unref (jail->seccomp);
  g_free (jail);
}

/* ---- the child: plain system calls only from here to execve ---- */

static G_NORETURN void
child_fail (int report_fd, int step, int errsv)
{
  ChildFailure failure = { step, errsv };

  if (write (report_fd, &failure, sizeof failure) < 0)
    {
      /* nothing more can be said */
    }
  _exit (125);
}

static int
write_file_at_once (const char *path, const char *data, gsize len, int open_flags)
{
  int fd = open (path, open_flags | O_CLOEXEC, 0644);
  int ok;

  if (fd < 0)
    return -1;
  ok = write (fd, data, len) == (ssize_t) len;
  close (fd);
  return ok ? 0 : -1;
}

/* Writes "/proc/self/fd/N" into @buf (at least 27 bytes) without libc formatting. */
static void
format_fd_path (char *buf, int fd)
{
  static const char prefix[] = "/proc/self/fd/";
  char digits[16];
  int n = 0;

  memcpy (buf, prefix, sizeof prefix - 1);
  do
    digits[n++] = '0' + fd % 10;
  while ((fd /= 10) > 0);
  for (int i = 0; i < n; i++)
    buf[sizeof prefix - 1 + i] = digits[n - 1 - i];
  buf[sizeof prefix - 1 + n] = '\0';
}

static int
run_op (SandstepJail *jail, JailOp *op)
{
  int fd;

  switch (op->kind)
    {
    case OP_TMPFS:
      return mount ("tmpfs", op->path[0] ? op->path : "/", "tmpfs", op->flags, op->data);
    case OP_MKDIR:
      return mkdir (op->path, op->flags ? (mode_t) op->flags : 0755) < 0 && errno != EEXIST ? -1 : 0;
    case OP_TOUCH:
      /* Read-only: the file may already stand in a read-only bind (/etc). */
      fd = open (op->path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
      if (fd < 0)
        return -1;
      close (fd);
      return 0;
    case OP_SYMLINK:
      return symlink (op->source, op->path);
    case OP_BIND:
      if (op->slot >= 0)
        format_fd_path (op->source, jail->slots[op->slot]);
      return mount (op->source, op->path, NULL, op->flags, NULL);
    case OP_REMOUNT:
      return mount (NULL, op->path, NULL, op->flags, NULL);
    case OP_PROC:
      return mount ("proc", op->path, "proc", op->flags, NULL);
    case OP_OPEN:
      fd = open (op->path, O_PATH | O_CLOEXEC);
      jail->slots[op->slot] = fd;
      return fd < 0 ? -1 : 0;
    }
  errno = EINVAL;
  return -1;
}

static int
bring_up_loopback (void)
{
  struct ifreq ifr = { .ifr_name = "lo" };
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int r = -1;

  if (fd < 0)
    return -1;
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) == 0)
    {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      r = ioctl (fd, SIOCSIFFLAGS, &ifr);
    }
  close (fd);
  return r;
}

static int
drop_capabilities (int last_cap)
{
  struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
  struct __user_cap_data_struct data[2] = { { 0 } };

  for (int cap = 0; cap <= last_cap; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return -1;
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -1;
  return syscall (SYS_capset, &header, data);
}

static int
child_main (void *data)
{
  static const unsigned long securebits =
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  ChildArgs *args = data;
  SandstepJail *jail = args->jail;
  int report_fd = args->report_fd;
  struct pollfd life = { .fd = args->life_fd, .events = POLLIN };

  /* Die with the helper; if it already died before this line, notice it now. */
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || poll (&life, 1, 0) != 0)
    child_fail (report_fd, STEP_PARENT_GONE, errno);

  /* If a memory limit is hit, the kernel picks the command, never the helper. */
  write_file_at_once ("/proc/self/oom_score_adj", "1000", 4, O_WRONLY);
  if (write_file_at_once ("/proc/self/setgroups", "deny", 4, O_WRONLY) < 0)
    child_fail (report_fd, STEP_SETGROUPS, errno);
  if (write_file_at_once ("/proc/self/uid_map", jail->uid_map, strlen (jail->uid_map), O_WRONLY) < 0)
    child_fail (report_fd, STEP_UID_MAP, errno);
  if (write_file_at_once ("/proc/self/gid_map", jail->gid_map, strlen (jail->gid_map), O_WRONLY) < 0)
    child_fail (report_fd, STEP_GID_MAP, errno);
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    child_fail (report_fd, STEP_PRIVATE, errno);

  for (guint i = 0; i < jail->ops->len; i++)
    if (run_op (jail, &g_array_index (jail->ops, JailOp, i)) < 0)
      child_fail (report_fd, (int) i, errno);

  if (chdir (NEWROOT) < 0 || syscall (SYS_pivot_root, ".", ".") < 0 || umount2 (".", MNT_DETACH) < 0 ||
      chdir ("/") < 0)
    child_fail (report_fd, STEP_PIVOT, errno);
  if (mount (NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
    child_fail (report_fd, STEP_ROOT_RDONLY, errno);
  if (jail->new_net && bring_up_loopback () < 0)
    child_fail (report_fd, STEP_LOOPBACK, errno);
  if (sethostname (SANDSTEP_JAIL_HOSTNAME, strlen (SANDSTEP_JAIL_HOSTNAME)) < 0)
    child_fail (report_fd, STEP_HOSTNAME, errno);
  if (setsid () < 0)
    child_fail (report_fd, STEP_SETSID, errno);
  for (int i = 0; i < jail->n_rlimits; i++)
    if (setrlimit (jail->rlimits[i].resource, &jail->rlimits[i].value) < 0)
      child_fail (report_fd, STEP_RLIMIT, errno);

  for (int i = 0; i < 3; i++)
    {
      int fd = args->stdio[i] >= 0 ? args->stdio[i] : open ("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
      if (fd < 0 || dup2 (fd, i) < 0)
        child_fail (report_fd, STEP_STDIO, errno);
    }
  /* Every other inherited fd closes at exec; init gets the report pipe only. */
  if (syscall (SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    child_fail (report_fd, STEP_STDIO, errno);
  if (chdir ("/workspace") < 0)
    child_fail (report_fd, STEP_CHDIR, errno);
  if (prctl (PR_SET_SECUREBITS, securebits, 0, 0, 0) < 0)
    child_fail (report_fd, STEP_SECUREBITS, errno);
  if (drop_capabilities (jail->last_cap) < 0)
    child_fail (report_fd, STEP_CAPS, errno);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    child_fail (report_fd, STEP_NNP, errno);
  if (prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &jail->seccomp_prog, 0, 0) < 0)
    child_fail (report_fd, STEP_SECCOMP, errno);
  if (fcntl (report_fd, F_SETFD, 0) < 0 || (args->keep_fd >= 0 && fcntl (args->keep_fd, F_SETFD, 0) < 0))
    child_fail (report_fd, STEP_INIT_FD, errno);
  /* A mask survives exec: the command must not inherit the signals its
   * starter blocks (a launcher blocks SIGTERM to read it from a signalfd). */
  {
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
  }
  syscall (SYS_execveat, jail->init_fd, "", args->argv, jail->envp, AT_EMPTY_PATH);
  fcntl (report_fd, F_SETFD, FD_CLOEXEC);
  child_fail (report_fd, STEP_INIT_FD, errno);
}

/* ---- the parent ---- */

static char *
describe_step (SandstepJail *jail, int step)
{
  if (step >= 0 && (guint) step < jail->ops->len)
    return g_strdup (g_array_index (jail->ops, JailOp, step).what);
  switch (step)
    {
    case STEP_PARENT_GONE: return g_strdup ("tie the jail to the helper's life");
    case STEP_SETGROUPS:   return g_strdup ("deny setgroups in the user namespace");
    case STEP_UID_MAP:     return g_strdup ("write the user namespace's uid map");
    case STEP_GID_MAP:     return g_strdup ("write the user namespace's gid map");
    case STEP_PRIVATE:     return g_strdup ("make the mount namespace private");
    case STEP_PIVOT:       return g_strdup ("pivot into the jail's root");
    case STEP_ROOT_RDONLY: return g_strdup ("make the jail's root read-only");
    case STEP_LOOPBACK:    return g_strdup ("bring up the loopback interface");
    case STEP_HOSTNAME:    return g_strdup ("set the jail's hostname");
    case STEP_SETSID:      return g_strdup ("start a new session");
    case STEP_RLIMIT:      return g_strdup ("set resource limits");
    case STEP_STDIO:       return g_strdup ("set up the command's standard streams");
    case STEP_CHDIR:       return g_strdup ("enter /workspace");
    case STEP_SECUREBITS:  return g_strdup ("lock the securebits");
    case STEP_CAPS:        return g_strdup ("drop every capability");
    case STEP_NNP:         return g_strdup ("set no_new_privs");
    case STEP_SECCOMP:     return g_strdup ("install the seccomp filter");
    case STEP_INIT_FD:     return g_strdup ("execute the jail's init (sandstep-init)");
    case SANDSTEP_JAIL_STEP_INIT: return g_strdup ("fork the command under the jail's init");
    case SANDSTEP_JAIL_STEP_EXEC: return g_strdup ("execute /bin/sh");
    default:               return g_strdup_printf ("step %d", step);
    }
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
  if (words[0] == NULL || strchr (words[0], '=') != NULL ||
      g_strv_contains (builtins, words[0]))
    return NULL;
  return g_steal_pointer (&words);
}

static int
dup_high (int fd)
{
  return fd < 0 ? -1 : fcntl (fd, F_DUPFD_CLOEXEC, 10);
}

/* init's arguments after its report fd for @command: try the words directly
 * when the shell would only exec them, else `/bin/sh -c COMMAND`. */
static GPtrArray *
command_argv (SandstepJail *jail, const char *command)
{
  g_auto(GStrv) words = simple_command_words (command);
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  if (jail->relay)
    {
      g_ptr_array_add (argv, g_strdup ("--relay"));
      g_ptr_array_add (argv, g_strdup (SANDSTEP_PROXY_PORT));
      g_ptr_array_add (argv, g_strdup ("/run/sandstep/proxy.sock"));
    }
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

/* Clones the jail's child, which builds the jail and execs init with
 * @init_args after its report fd; returns once that exec is done
 * (CLONE_VFORK), with the read end of the report pipe.  @control, when
 * not -1, stays open across the exec. */
static gboolean
clone_jail (SandstepJail *jail, GPtrArray *init_args, const int stdio[3], int control, SandstepJailProcess *out,
            int *out_report, GError **error)
{
  int flags = CLONE_VM | CLONE_VFORK | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
              CLONE_NEWCGROUP | CLONE_PIDFD | SIGCHLD;
  int report[2] = { -1, -1 }, life[2] = { -1, -1 };
  char report_text[16];
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  ChildArgs args = { .jail = jail, .keep_fd = control };
  g_autofree guint8 *stack = NULL;
  int pidfd = -1;
  pid_t pid;
  int errsv;

  if (jail->new_net)
    flags |= CLONE_NEWNET;

  /* Above fd 9, so the child's dup2 onto 0..2 can never clobber one of them. */
  for (int i = 0; i < 3; i++)
    args.stdio[i] = dup_high (stdio[i]);
  if (pipe2 (report, O_CLOEXEC) < 0 || pipe2 (life, O_CLOEXEC) < 0)
    {
      errsv = errno;
      pid = -1;
      goto out;
    }
  g_snprintf (report_text, sizeof report_text, "%d", report[1]);
  g_ptr_array_add (argv, (char *) "sandstep-init");
  g_ptr_array_add (argv, report_text);
  for (guint i = 0; i < init_args->len; i++)
    g_ptr_array_add (argv, init_args->pdata[i]);
  g_ptr_array_add (argv, NULL);
  args.argv = (char *const *) argv->pdata;
  args.report_fd = report[1];
  args.life_fd = life[0];

  stack = g_malloc (CHILD_STACK_SIZE);
  pid = clone (child_main, stack + CHILD_STACK_SIZE, flags, &args, &pidfd);
  errsv = errno;

out:
  for (int i = 0; i < 3; i++)
    if (args.stdio[i] >= 0)
      close (args.stdio[i]);
  if (report[1] >= 0)
    close (report[1]);
  /* The child checked the life pipe before its exec, and clone returned after it. */
  if (life[0] >= 0)
    close (life[0]);
  if (life[1] >= 0)
    close (life[1]);

  if (pid < 0)
    {
      if (report[0] >= 0)
        close (report[0]);
      if (errsv == EPERM || errsv == EINVAL || errsv == ENOSPC || errsv == EUSERS)
        return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errsv,
                                     "Cannot create the sandbox's namespaces (user, mount, pid, ipc, uts%s); "
                                     "enable unprivileged user namespaces (sysctl user.max_user_namespaces)",
                                     jail->new_net ? ", net" : "");
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Cannot start the sandbox's process");
    }
  out->pid = pid;
  out->pidfd = pidfd;
  *out_report = report[0];
  return TRUE;
}

/* Kills and reaps a jail that will not run (or no longer runs) its command. */
static void
end_jail (SandstepJailProcess *process)
{
  if (process->pidfd < 0)
    return;
  sandstep_jail_kill (process);
  while (waitid (P_PIDFD, process->pidfd, &(siginfo_t) { 0 }, WEXITED) < 0 && errno == EINTR)
    ;
  close (process->pidfd);
  process->pidfd = -1;
}

/* EOF on the report pipe: the command was exec'd (or the jail died before it
 * could say anything).  A report names the step that failed; the jail is
 * reaped then.  Takes @report. */
static gboolean
await_exec (SandstepJail *jail, int report, SandstepJailProcess *process, GError **error)
{
  ChildFailure failure;
  ssize_t n;

  do
    n = read (report, &failure, sizeof failure);
  while (n < 0 && errno == EINTR);
  close (report);

  if (n == (ssize_t) sizeof failure)
    {
      g_autofree char *what = describe_step (jail, failure.step);
      end_jail (process);
      return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                             "The jail could not %s: %s", what, g_strerror (failure.errsv));
    }
  return TRUE;
}

gboolean
sandstep_jail_spawn (SandstepJail *jail, const char *command, int stdin_fd, int stdout_fd, int stderr_fd,
                     SandstepJailProcess *out_process, GError **error)
{
  g_autoptr(GPtrArray) args = command_argv (jail, command);
  const int stdio[3] = { stdin_fd, stdout_fd, stderr_fd };
  int report;

  return clone_jail (jail, args, stdio, -1, out_process, &report, error) &&
         await_exec (jail, report, out_process, error);
}

/* The host path each bind takes, in op order: an OP_OPEN's, or a bind's source outside the new root. */
static const char *
op_host_source (const JailOp *op)
{
  if (op->kind == OP_OPEN)
    return op->path;
  if (op->kind == OP_BIND && op->slot < 0 && op->source != NULL && !g_str_has_prefix (op->source, NEWROOT "/"))
    return op->source;
  return NULL;
}

/* Fills @ready's sources; -1 where a path cannot be seen (then never current). */
static void
stat_sources (SandstepJail *jail, SandstepJailReady *ready)
{
  ready->n_sources = 0;
  for (guint i = 0; i < jail->ops->len && ready->n_sources < SANDSTEP_JAIL_MAX_SOURCES; i++)
    {
      const char *path = op_host_source (&g_array_index (jail->ops, JailOp, i));
      struct stat st;
      if (path == NULL)
        continue;
      if (stat (path, &st) < 0)
        st.st_dev = st.st_ino = (ino_t) -1;
      ready->sources[ready->n_sources].dev = st.st_dev;
      ready->sources[ready->n_sources].ino = st.st_ino;
      ready->n_sources++;
    }
}

gboolean
sandstep_jail_ready_current (SandstepJail *jail, const SandstepJailReady *ready)
{
  SandstepJailReady now;

  stat_sources (jail, &now);
  if (now.n_sources != ready->n_sources)
    return FALSE;
  for (int i = 0; i < now.n_sources; i++)
    if (now.sources[i].ino == (ino_t) -1 || now.sources[i].dev != ready->sources[i].dev ||
        now.sources[i].ino != ready->sources[i].ino)
      return FALSE;
  return TRUE;
}

gboolean
sandstep_jail_prepare (SandstepJail *jail, SandstepJailReady *out_ready, GError **error)
{
  static const int no_stdio[3] = { -1, -1, -1 };
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  int pair[2];
  gboolean ok;

  out_ready->control = out_ready->report = -1;
  out_ready->process.pidfd = -1;
  if (jail->relay)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                           "A jail with network=allow starts with its command, not ahead of it");
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not create the socket that hands a jail its command");
  g_ptr_array_add (args, g_strdup ("--serve"));
  g_ptr_array_add (args, g_strdup_printf ("%d", pair[1]));
  stat_sources (jail, out_ready);
  ok = clone_jail (jail, args, no_stdio, pair[1], &out_ready->process, &out_ready->report, error);
  close (pair[1]);
  if (!ok)
    {
      close (pair[0]);
      return FALSE;
    }
  /* clone() also returns when the child failed before exec'ing init: then
   * the report is already there (init, waiting, holds the pipe open). */
  {
    struct pollfd pfd = { .fd = out_ready->report, .events = POLLIN };
    if (poll (&pfd, 1, 0) > 0)
      {
        int report = out_ready->report;
        out_ready->report = -1;
        close (pair[0]);
        if (!await_exec (jail, report, &out_ready->process, error))
          return FALSE;
        /* EOF: init itself ended at once. */
        end_jail (&out_ready->process);
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                               "The jail's init ended before it could wait for a command");
      }
  }
  out_ready->control = pair[0];
  return TRUE;
}

gboolean
sandstep_jail_start (SandstepJail *jail, SandstepJailReady *ready, const char *command, const int stdio[3],
                     char **caller_env, SandstepJailProcess *out_process, int *out_status_fd, GError **error)
{
  g_autoptr(GPtrArray) args = command_argv (jail, command);
  g_auto(GStrv) envp = jail_environment (jail, caller_env);
  g_autoptr(GString) message = g_string_new (NULL);
  union { char buf[CMSG_SPACE (3 * sizeof (int))]; struct cmsghdr align; } control;
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  ssize_t sent;
  int report = ready->report;

  /* argc, the arguments, then the environment: NUL-terminated strings. */
  g_string_append_printf (message, "%u", args->len);
  g_string_append_c (message, '\0');
  for (guint i = 0; i < args->len; i++)
    g_string_append_len (message, args->pdata[i], strlen (args->pdata[i]) + 1);
  for (char **e = envp; *e; e++)
    g_string_append_len (message, *e, strlen (*e) + 1);
  iov.iov_base = message->str;
  iov.iov_len = message->len;
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (3 * sizeof (int));
  memcpy (CMSG_DATA (cmsg), stdio, 3 * sizeof (int));

  *out_process = ready->process;
  ready->process.pidfd = -1;
  ready->report = -1;
  *out_status_fd = ready->control;
  ready->control = -1;
  do
    sent = sendmsg (*out_status_fd, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent < 0)
    {
      int errsv = errno;
      close (*out_status_fd);
      *out_status_fd = -1;
      close (report);
      end_jail (out_process);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not hand the command to the jail built for it");
    }
  if (!await_exec (jail, report, out_process, error))
    {
      close (*out_status_fd);
      *out_status_fd = -1;
      return FALSE;
    }
  return TRUE;
}

void
sandstep_jail_ready_clear (SandstepJailReady *ready)
{
  if (ready->control >= 0)
    close (ready->control);
  if (ready->report >= 0)
    close (ready->report);
  end_jail (&ready->process);
  ready->control = ready->report = -1;
}

void
sandstep_jail_kill (SandstepJailProcess *process)
{
  if (process->pidfd >= 0)
    syscall (SYS_pidfd_send_signal, process->pidfd, SIGKILL, NULL, 0);
}

gboolean
sandstep_jail_wait (SandstepJailProcess *process, gint64 deadline, int *out_exit, gboolean *out_timed_out,
                    GError **error)
{
  struct pollfd pfd = { .fd = process->pidfd, .events = POLLIN };
  gboolean timed_out = FALSE;
  siginfo_t info = { 0 };

  for (;;)
    {
      int timeout_ms = -1;
      int r;

      if (deadline > 0)
        {
          gint64 left = deadline - g_get_monotonic_time ();
          if (left <= 0)
            {
              timed_out = TRUE;
              sandstep_jail_kill (process);
              break;
            }
          timeout_ms = (int) MIN ((left + 999) / 1000, G_MAXINT);
        }
      r = poll (&pfd, 1, timeout_ms);
      if (r > 0)
        break;
      if (r < 0 && errno != EINTR)
        return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                     "Could not wait for the sandbox's process");
    }

  while (waitid (P_PIDFD, process->pidfd, &info, WEXITED) < 0)
    if (errno != EINTR)
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                   "Could not collect the sandbox's process");
  close (process->pidfd);
  process->pidfd = -1;

  *out_timed_out = timed_out;
  *out_exit = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  return TRUE;
}

gboolean
sandstep_jail_wait_output (SandstepJailProcess *process, gint64 deadline, int out_fd, int err_fd,
                           SandstepOutputFunc on_output, gpointer user_data, int *out_exit, gboolean *out_timed_out,
                           GError **error)
{
  struct pollfd pfds[3] = {
    { .fd = process->pidfd, .events = POLLIN },
    { .fd = out_fd, .events = POLLIN },
    { .fd = err_fd, .events = POLLIN },
  };
  char buf[65536];
  gboolean ended = FALSE;
  gboolean timed_out = FALSE;
  gboolean ok;

  /* Until the jail ends and both pipes reach EOF.  The pipes close for good
   * when the jail's pid namespace is gone: nothing inside can keep them open. */
  while (!ended || pfds[1].fd >= 0 || pfds[2].fd >= 0)
    {
      int timeout_ms = -1;
      int r;

      if (!ended && deadline > 0)
        {
          gint64 left = deadline - g_get_monotonic_time ();
          if (left <= 0)
            {
              timed_out = TRUE;
              sandstep_jail_kill (process);
              left = 0;
            }
          timeout_ms = (int) MIN ((left + 999) / 1000, G_MAXINT);
        }
      if (ended)
        pfds[0].fd = -1;
      r = poll (pfds, 3, timeout_ms);
      if (r < 0 && errno != EINTR)
        {
          sandstep_jail_kill (process);
          break;
        }
      if (r <= 0)
        continue;
      if (pfds[0].fd >= 0 && (pfds[0].revents & (POLLIN | POLLHUP)))
        ended = TRUE;
      for (int i = 1; i < 3; i++)
        {
          ssize_t n;
          if (pfds[i].fd < 0 || !(pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          n = read (pfds[i].fd, buf, sizeof buf);
          if (n > 0)
            on_output (i, buf, n, user_data);
          else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            {
              close (pfds[i].fd);
              pfds[i].fd = -1;
            }
        }
    }
  for (int i = 1; i < 3; i++)
    if (pfds[i].fd >= 0)
      close (pfds[i].fd);
  ok = sandstep_jail_wait (process, 0, out_exit, out_timed_out, error);
  *out_timed_out = *out_timed_out || timed_out;
  return ok;
}
