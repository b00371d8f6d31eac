/* sandstep-supervision.c: starting and stopping a sandbox's supervisor, from the helper. */
#include "sandstep-supervision.h"

#include "sandstep-paths.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-cgroup.h"
#include "sandstep-error.h"
#include "sandstep-jail-plan.h"
#include "sandstep-limits.h"
#include "sandstep-run-client.h"
#include "sandstep-supervisor.h"

/* How long a caller waits for a supervisor that another caller starts. */
#define START_WAIT_US (20 * G_USEC_PER_SEC)
/* How many supervisors a caller starts that end before they serve. */
#define START_ATTEMPTS 3
/* How long sandstep_supervisor_stop() waits for each signal to work. */
#define STOP_GRACE_MS 5000

char *
sandstep_program_path (const char *name)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  g_autofree char *beside = dir != NULL ? g_build_filename (dir, name, NULL) : NULL;

  if (beside != NULL && g_file_test (beside, G_FILE_TEST_IS_EXECUTABLE))
    return g_steal_pointer (&beside);
#ifdef SANDSTEP_BUILD_ROOT
  /* A program of this build tree that lives elsewhere in it (sandstepd, a test) finds them where they are
   * built; an installed program never looks there. */
  if (self != NULL && g_str_has_prefix (self, SANDSTEP_BUILD_ROOT "/"))
    return g_build_filename (SANDSTEP_BUILD_ROOT, "operators", name, NULL);
#endif
  /* An installed sandstepd: the libexecdir of its own prefix. */
  if (dir != NULL)
    {
      char path[4096];
      if (sandstep_relocate (dir, SANDSTEP_SBINDIR_REL, SANDSTEP_LIBEXECDIR_REL, name, path, sizeof path) ||
          sandstep_relocate (dir, SANDSTEP_BINDIR_REL, SANDSTEP_LIBEXECDIR_REL, name, path, sizeof path))
        return g_strdup (path);
    }
  return g_build_filename (SANDSTEP_LIBEXECDIR, name, NULL);
}

/* What the supervisor and its helpers (pasta, the egress proxy) run with:
 * nothing of the caller's environment but the state directory and the
 * test hooks (SANDSTEP_TEST_*, documented in the README). */
static char **
helper_environment (const char *state_dir)
{
  char **env = g_environ_setenv (NULL, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", TRUE);
  g_auto(GStrv) own = g_get_environ ();

  env = g_environ_setenv (env, "SANDSTEP_STATE_DIR", state_dir, TRUE);
  for (char **e = own; *e; e++)
    if (g_str_has_prefix (*e, "SANDSTEP_TEST_"))
      {
        const char *eq = strchr (*e, '=');
        g_autofree char *name = g_strndup (*e, eq - *e);
        env = g_environ_setenv (env, name, eq + 1, TRUE);
      }
  return env;
}

static char *
default_identity (const char *suffix)
{
  struct passwd *pw = getpwuid (getuid ());
  g_autofree char *user = pw != NULL ? g_strdup (pw->pw_name) : g_strdup_printf ("%u", (unsigned) getuid ());

  return g_strdup_printf ("%s@%s%s", user, g_get_host_name (), suffix);
}

static GVariant *
build_plan (SandstepStore *store, const SandstepRecord *record, char **env, GError **error)
{
  g_autofree char *workspace = sandstep_store_sandbox_path (store, record->handle, "tree/workspace");
  g_autofree char *tmp = sandstep_store_sandbox_path (store, record->handle, "tree/tmp");
  g_autofree char *default_owner = default_identity ("");
  g_autofree char *default_holder = default_identity ("/cli");
  g_autofree char *pasta = g_find_program_in_path ("pasta");
  gboolean as_root = geteuid () == 0;
  SandstepLimits limits = sandstep_limits_resolve (&record->spec->limits);
  SandstepJailConfig config = {
    .workspace = workspace, .tmp = tmp, .spec = record->spec,
    .memory_by_rlimit = sandstep_cgroup_kind () == SANDSTEP_CGROUP_NONE,
    .outer_uid = as_root ? record->uid : getuid (), .outer_gid = as_root ? record->gid : getgid (),
    .idmap = as_root && record->uid != 0,
  };
  g_autoptr(SandstepJail) jail = NULL;
  g_auto(GVariantBuilder) plan = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  if (record->spec->network == SANDSTEP_NETWORK_OPEN && pasta == NULL)
    {
      sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                      "--network=open needs pasta, a user-mode network stack, and none is installed; install the "
                      "Debian package passt, or provision with --network=none or --allow=HOST");
      return NULL;
    }
  jail = sandstep_jail_new (&config, error);
  if (jail == NULL)
    return NULL;
  g_variant_builder_add (&plan, "{sv}", "owner", g_variant_new_bytestring (record->owner));
  g_variant_builder_add (&plan, "{sv}", "default-owner", g_variant_new_bytestring (default_owner));
  g_variant_builder_add (&plan, "{sv}", "default-holder", g_variant_new_bytestring (default_holder));
  g_variant_builder_add (&plan, "{sv}", "network",
                         g_variant_new_string (sandstep_network_to_string (record->spec->network)));
  g_variant_builder_add (&plan, "{sv}", "limits",
                         g_variant_new ("(txxt)", limits.memory, limits.pids, limits.cpu_time_s, limits.disk));
  g_variant_builder_add (&plan, "{sv}", "pasta", g_variant_new_bytestring (pasta != NULL ? pasta : ""));
  g_variant_builder_add (&plan, "{sv}", "helper-env", g_variant_new_bytestring_array ((const char *const *) env, -1));
  g_variant_builder_add (&plan, "{sv}", "jail", sandstep_jail_to_variant (jail));
  return g_variant_ref_sink (g_variant_builder_end (&plan));
}

/* The plan in a sealed memfd: the supervisor reads exactly what was written. */
static int
plan_fd (GVariant *plan, GError **error)
{
  gsize size = g_variant_get_size (plan);
  const char *data = g_variant_get_data (plan);
  int fd = memfd_create ("sandstep-plan", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  gsize done = 0;

  while (fd >= 0 && done < size)
    {
      ssize_t n = write (fd, data + done, size - done);
      if (n <= 0)
        {
          close (fd);
          fd = -1;
          break;
        }
      done += n;
    }
  if (fd < 0 || fcntl (fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                            "Could not hand the sandbox's plan to its supervisor");
      if (fd >= 0)
        close (fd);
      return -1;
    }
  return fd;
}

/* What the supervisor said on its ready pipe: "ok", or "DOMAIN\tCODE\tMESSAGE".  @out_vanished:
 * it ended without a word (killed while it started): nothing ran, and another may be started. */
static gboolean
await_ready (int fd, const char *handle, gboolean *out_vanished, GError **error)
{
  g_autoptr(GString) text = g_string_new (NULL);
  char buf[4096];
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len (text, buf, n);
  if (g_str_has_prefix (text->str, "ok\n"))
    return TRUE;
  {
    g_auto(GStrv) parts = g_strsplit (g_strchomp (text->str), "\t", 3);
    if (g_strv_length (parts) == 3)
      {
        g_set_error_literal (error, g_quark_from_string (parts[0]), (int) g_ascii_strtoll (parts[1], NULL, 10),
                             parts[2]);
        return FALSE;
      }
  }
  *out_vanished = TRUE;
  return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                         "The supervisor of sandbox '%s' ended before it could serve; run the step again, and "
                         "reinstall sandstep if this persists", handle);
}

/* Starts the supervisor, holding @lock (flocked), and waits until it serves. */
static gboolean
start_supervisor (SandstepStore *store, const SandstepRecord *record, int lock, gboolean *out_vanished,
                  GError **error)
{
  char *argv[] = { (char *) "sandstep", (char *) "--supervisor", record->handle, NULL };
  g_autofree char *program = sandstep_program_path ("sandstep-supervise");
  g_autofree char *state_dir = g_canonicalize_filename (store->dir, NULL);
  g_auto(GStrv) env = helper_environment (state_dir);
  g_autoptr(GVariant) plan = build_plan (store, record, env, error);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  sigset_t all, none;
  int plan_memfd, ready[2];
  pid_t pid = -1;
  int errsv;

  if (plan == NULL || (plan_memfd = plan_fd (plan, error)) < 0)
    return FALSE;
  if (pipe2 (ready, O_CLOEXEC) < 0)
    {
      close (plan_memfd);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                   "Could not start the supervisor of sandbox '%s'", record->handle);
    }
  /* Its own session, no terminal, in /, and of ours only what sandstep-supervisor.h lists. */
  posix_spawn_file_actions_init (&actions);
  posix_spawn_file_actions_addopen (&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen (&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen (&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2 (&actions, store->dir_fd, SANDSTEP_SUPERVISOR_STORE_FD);
  posix_spawn_file_actions_adddup2 (&actions, lock, SANDSTEP_SUPERVISOR_LOCK_FD);
  posix_spawn_file_actions_adddup2 (&actions, plan_memfd, SANDSTEP_SUPERVISOR_PLAN_FD);
  posix_spawn_file_actions_adddup2 (&actions, ready[1], SANDSTEP_SUPERVISOR_READY_FD);
  posix_spawn_file_actions_addclosefrom_np (&actions, SANDSTEP_SUPERVISOR_READY_FD + 1);
  posix_spawn_file_actions_addchdir_np (&actions, "/");
  /* Nothing of this caller's signal state: an ignored SIGTERM would outlive a destroy. */
  posix_spawnattr_init (&attributes);
  sigfillset (&all);
  sigemptyset (&none);
  posix_spawnattr_setsigdefault (&attributes, &all);
  posix_spawnattr_setsigmask (&attributes, &none);
  posix_spawnattr_setflags (&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  errsv = posix_spawn (&pid, program, &actions, &attributes, argv, env);
  posix_spawn_file_actions_destroy (&actions);
  posix_spawnattr_destroy (&attributes);
  close (plan_memfd);
  close (ready[1]);
  if (errsv != 0)
    {
      close (ready[0]);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not run the sandbox's supervisor '%s'; reinstall sandstep", program);
    }
  /* It forks at once and the first process ends: never our child for long. */
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  {
    gboolean ok = await_ready (ready[0], record->handle, out_vanished, error);
    close (ready[0]);
    return ok;
  }
}

static int
open_lock (SandstepStore *store, const char *handle, int flags)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, SANDSTEP_RUN_LOCK, NULL);

  return openat (store->dir_fd, rel, flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
}

int
sandstep_supervisor_connect (SandstepStore *store, const SandstepRecord *record, GError **error)
{
  g_autofree char *rel = g_build_filename ("sandboxes", record->handle, NULL);
  int dir_fd = openat (store->dir_fd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  gint64 deadline = g_get_monotonic_time () + START_WAIT_US;
  gulong pause_us = 1000;
  int vanished = 0;
  int sock = -1;

  if (dir_fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not open the directory of sandbox '%s'", record->handle);
      return -1;
    }
  while ((sock = sandstep_run_connect (dir_fd)) < 0)
    {
      int lock = open_lock (store, record->handle, O_CREAT);
      gboolean started;

      if (lock < 0)
        {
          sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                "Could not open the supervisor lock of sandbox '%s'", record->handle);
          break;
        }
      if (flock (lock, LOCK_EX | LOCK_NB) == 0)
        {
          /* Nobody serves the sandbox: start its supervisor.  One that is killed as it starts ran nothing:
           * start another, a few times. */
          gboolean gone = FALSE;
          /* Its first move of the sandbox into its cgroup waits for the kernel: let that wait start now. */
          if (vanished == 0)
            sandstep_cgroup_warm_up ();
          started = start_supervisor (store, record, lock, &gone, error);
          close (lock);
          if (!started && gone && ++vanished < START_ATTEMPTS)
            {
              g_clear_error (error);
              continue;
            }
          if (!started)
            break;
          continue;
        }
      close (lock);
      /* Another caller starts one, or one is ending: ask again in a moment. */
      if (g_get_monotonic_time () >= deadline)
        {
          sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                          "The supervisor of sandbox '%s' did not start serving within %ds; run the step again",
                          record->handle, (int) (START_WAIT_US / G_USEC_PER_SEC));
          break;
        }
      g_usleep (pause_us);
      pause_us = MIN (pause_us * 2, 50000);
    }
  close (dir_fd);
  return sock;
}

/* Sends @sig and waits until @pidfd's process ended; TRUE if it did. */
static gboolean
signal_and_wait (int pidfd, int sig)
{
  struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

  syscall (SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
  return poll (&pfd, 1, STOP_GRACE_MS) > 0;
}

void
sandstep_supervisor_stop (SandstepStore *store, const char *handle)
{
  int lock = open_lock (store, handle, 0);

  if (lock < 0)
    return;
  /* Held with no pid yet, or a dead supervisor's: its starter writes the
   * new one right after the spawn.  Only the supervisor the file names,
   * identified by pid and start time, is signalled. */
  for (int attempt = 0; attempt < 2500; attempt++)
    {
      char text[64] = { 0 };
      int pid = 0, pidfd;
      guint64 start = 0;

      if (flock (lock, LOCK_EX | LOCK_NB) == 0)
        break;
      if (pread (lock, text, sizeof text - 1, 0) > 0 && sscanf (text, "%d %" G_GUINT64_FORMAT, &pid, &start) == 2 &&
          pid > 0 && start != 0 && sandstep_process_start_time (pid) == start &&
          (pidfd = syscall (SYS_pidfd_open, pid, 0)) >= 0)
        {
          /* The start time again, now that the pidfd pins the process. */
          if (sandstep_process_start_time (pid) == start && !signal_and_wait (pidfd, SIGTERM))
            signal_and_wait (pidfd, SIGKILL);
          close (pidfd);
          /* The lock goes with it, or with the reclaim it execs: wait for that too. */
          continue;
        }
      g_usleep (2000);
    }
  close (lock);
}
