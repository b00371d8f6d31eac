/* sandstep-supervision.c: starting and stopping a sandbox's supervisor, from the helper. */
#include "sandstep-supervision.h"

#include "sandstep-programs-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
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
#include "sandstep-read-libc.h"
#include "sandstep-image-root.h"
#include "sandstep-jail-plan.h"
#include "sandstep-layers.h"
#include "sandstep-limits.h"
#include "sandstep-plan-inputs.h"
#include "sandstep-run-client.h"
#include "sandstep-seccomp.h"
#include "sandstep-supervisor.h"

/* In the programs that link the image store (sandstep-image-root.h). */
#pragma weak sandstep_image_root_resolve

/* How long a caller waits for a supervisor that another caller starts. */
#define START_WAIT_US (20 * G_USEC_PER_SEC)
/* How many supervisors a caller starts that end before they serve. */
#define START_ATTEMPTS 3
/* How long sandstep_supervisor_stop() waits for each signal to work. */
#define STOP_GRACE_MS 5000

static char *
default_identity (const char *suffix)
{
  struct passwd *pw = getpwuid (getuid ());
  g_autofree char *user = pw != NULL ? g_strdup (pw->pw_name) : g_strdup_printf ("%u", (unsigned) getuid ());

  return g_strdup_printf ("%s@%s%s", user, g_get_host_name (), suffix);
}

/* @record's plan, with the host files it was compiled from (sandstep-plan-inputs.h): the jail's image, then
 * the rest as a GVariant, 8-aligned (sandstep-jail-image.h). */
static GBytes *
build_plan (SandstepStore *store, const SandstepRecord *record, GError **error)
{
  g_autofree char *workspace = sandstep_store_sandbox_path (store, record->handle, "tree/workspace");
  g_autofree char *tmp = sandstep_store_sandbox_path (store, record->handle, "tree/tmp");
  g_autofree char *record_path = sandstep_store_sandbox_path (store, record->handle, "record.json");
  g_autofree char *default_owner = default_identity ("");
  g_autofree char *default_holder = default_identity ("/cli");
  g_autofree char *pasta = g_find_program_in_path ("pasta");
  g_autofree char *supervisor = sandstep_program_path (NULL, "sandstep-supervise");
  gboolean as_root = geteuid () == 0;
  SandstepLimits limits = sandstep_limits_resolve (&record->spec->limits);
  g_auto(GVariantBuilder) inputs = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE (SANDSTEP_PLAN_INPUTS_TYPE));
  SandstepJailConfig config = {
    .workspace = workspace, .tmp = tmp, .spec = record->spec,
    .memory_by_rlimit = sandstep_cgroup_kind () == SANDSTEP_CGROUP_NONE,
    .outer_uid = as_root ? record->uid : getuid (), .outer_gid = as_root ? record->gid : getgid (),
    .idmap = as_root && record->uid != 0,
    .inputs = &inputs,
  };
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) image_env = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *image_rw = NULL, *rw = NULL;
  g_autoptr(GPtrArray) tree_layers = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(SandstepJail) jail = NULL;
  g_autoptr(GBytes) seccomp = NULL, image = NULL;
  g_autoptr(GVariant) rest = NULL;
  g_autoptr(GByteArray) file = NULL;
  g_auto(GVariantBuilder) plan = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  if (record->spec->network == SANDSTEP_NETWORK_OPEN && pasta == NULL)
    {
      sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                      "--network=open needs pasta, a user-mode network stack, and none is installed; install the "
                      "Debian package passt, or provision with --network=none or --allow=HOST");
      return NULL;
    }
  if (record->spec->image_digest != NULL)
    {
      if (sandstep_image_root_resolve == NULL)
        {
          sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                          "image '%s': this program has no image store; run the sandbox through 'sandstep'",
                          record->spec->image);
          return NULL;
        }
      if (!sandstep_image_root_resolve (record->spec->image_digest, layers, image_env, error))
        return NULL;
      g_ptr_array_add (layers, NULL);
      g_ptr_array_add (image_env, NULL);
      config.image_layers = (const char *const *) layers->pdata;
      config.image_env = (const char *const *) image_env->pdata;
      if (!record->spec->root_readonly)
        config.image_rw = image_rw = sandstep_store_sandbox_path (store, record->handle, "root");
    }
  if (record->layers != NULL)
    {
      for (gsize i = 0; record->layers[i] != NULL; i++)
        g_ptr_array_add (tree_layers, sandstep_layers_path (store, record->layers[i]));
      g_ptr_array_add (tree_layers, NULL);
      config.tree_layers = (const char *const *) tree_layers->pdata;
      config.rw = rw = sandstep_store_sandbox_path (store, record->handle, "rw");
    }
  sandstep_plan_inputs_add (&inputs, record_path, SANDSTEP_PLAN_INPUT_CONTENT, FALSE, NULL);
  if (pasta != NULL)
    sandstep_plan_inputs_add (&inputs, pasta, SANDSTEP_PLAN_INPUT_CONTENT, TRUE, NULL);
  /* Another build of sandstep may read the plan otherwise. */
  sandstep_plan_inputs_add (&inputs, supervisor, SANDSTEP_PLAN_INPUT_CONTENT, TRUE, NULL);
  jail = sandstep_jail_new (&config, error);
  if (jail == NULL || (seccomp = sandstep_seccomp_program (error)) == NULL)
    return NULL;
  g_variant_builder_add (&plan, "{sv}", "host", g_variant_new_bytestring (g_get_host_name ()));
  g_variant_builder_add (&plan, "{sv}", "inputs", g_variant_builder_end (&inputs));
  g_variant_builder_add (&plan, "{sv}", "cgroup-kind", g_variant_new_uint32 (sandstep_cgroup_kind ()));
  g_variant_builder_add (&plan, "{sv}", "owner", g_variant_new_bytestring (record->owner));
  g_variant_builder_add (&plan, "{sv}", "default-owner", g_variant_new_bytestring (default_owner));
  g_variant_builder_add (&plan, "{sv}", "default-holder", g_variant_new_bytestring (default_holder));
  g_variant_builder_add (&plan, "{sv}", "network",
                         g_variant_new_bytestring (sandstep_network_to_string (record->spec->network)));
  g_variant_builder_add (&plan, "{sv}", "limits",
                         g_variant_new ("(txxt)", limits.memory, limits.pids, limits.cpu_time_s, limits.disk));
  g_variant_builder_add (&plan, "{sv}", "cpu-io", g_variant_new ("(xx)", limits.millicpus, limits.io_weight));
  g_variant_builder_add (&plan, "{sv}", "pasta", g_variant_new_bytestring (pasta != NULL ? pasta : ""));
  g_variant_builder_add (&plan, "{sv}", "retry-clean", g_variant_new_boolean (record->spec->retry_clean));
  g_variant_builder_add (&plan, "{sv}", "jail", sandstep_jail_to_variant (jail));
  rest = g_variant_ref_sink (g_variant_builder_end (&plan));
  image = sandstep_jail_to_image (jail, seccomp);
  file = g_byte_array_sized_new (g_bytes_get_size (image) + 8 + g_variant_get_size (rest));
  g_byte_array_append (file, g_bytes_get_data (image, NULL), g_bytes_get_size (image));
  g_byte_array_set_size (file, (file->len + 7) & ~7u);
  memset (file->data + g_bytes_get_size (image), 0, file->len - g_bytes_get_size (image));
  g_byte_array_append (file, g_variant_get_data (rest), g_variant_get_size (rest));
  return g_byte_array_free_to_bytes (g_steal_pointer (&file));
}

/* Kept beside the record, for the front to start a supervisor with; a first command without it takes the
 * helper's way, which keeps one. */
static void
keep_plan (SandstepStore *store, const char *handle, GBytes *plan)
{
  g_autoptr(GError) error = NULL;

  if (!sandstep_store_write_member (store, handle, SANDSTEP_PLAN_FILE, g_bytes_get_data (plan, NULL),
                                    g_bytes_get_size (plan), &error))
    g_debug ("Could not keep the plan of sandbox '%s': %s", handle, error->message);
}

static int
open_lock (SandstepStore *store, const char *handle, int flags)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, SANDSTEP_RUN_LOCK, NULL);

  return openat (store->dir_fd, rel, flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
}

void
sandstep_supervisor_prepare (SandstepStore *store, const SandstepRecord *record)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) plan = build_plan (store, record, &error);
  int lock;

  /* A spec the plan cannot be made for fails its first command, through the helper, which says why. */
  if (plan == NULL)
    g_debug ("No plan kept for sandbox '%s': %s", record->handle, error->message);
  else
    keep_plan (store, record->handle, plan);
  /* Made now, so that the first command makes no file: its first after a quiet spell costs a few tenths of a
   * millisecond on ext4 here. */
  lock = open_lock (store, record->handle, O_CREAT);
  if (lock >= 0)
    close (lock);
  /* And its cgroup, for the same reason (a cgroup made costs a first command a quarter of a millisecond here):
   * its first supervisor takes it, and removes it when it ends, as every supervisor does its own. */
  if (plan != NULL)
    {
      SandstepLimits limits = sandstep_limits_resolve (&record->spec->limits);
      g_autoptr(GError) cgroup_error = NULL;
      SandstepCgroupLimits cgroup_limits = { limits.memory, limits.pids, limits.millicpus, limits.io_weight };
      SandstepCgroup *cgroup = sandstep_cgroup_make (record->handle, &cgroup_limits, &cgroup_error);
      g_autofree char *record_path = sandstep_store_sandbox_path (store, record->handle, "record.json");
      if (cgroup == NULL && cgroup_error != NULL)
        g_debug ("No cgroup made yet for sandbox '%s': %s", record->handle, cgroup_error->message);
      sandstep_cgroup_free (cgroup);
      /* Destroyed meanwhile (by a gc of its run, say): its destroy may have looked for the cgroup before it was
       * made, and it must not outlive the sandbox. */
      if (cgroup != NULL && !g_file_test (record_path, G_FILE_TEST_EXISTS))
        sandstep_cgroup_remove (record->handle);
    }
}

/* The plan in a sealed memfd: the supervisor reads exactly what was written. */
static int
plan_fd (GBytes *plan, GError **error)
{
  gsize size;
  const char *data = g_bytes_get_data (plan, &size);
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
        /* Through the table of our domains: a quark made from the name alone lacks the private part that an
         * extended domain (SANDSTEP_SANDBOX_ERROR) frees, and freeing it aborted the helper. */
        g_propagate_error (error, sandstep_error_new_from_name (parts[0], g_ascii_strtoll (parts[1], NULL, 10),
                                                                parts[2]));
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
  g_autofree char *program = sandstep_program_path (NULL, "sandstep-supervise");
  g_autofree char *state_dir = g_canonicalize_filename (store->dir, NULL);
  g_autoptr(GBytes) plan = build_plan (store, record, error);
  char **env;
  int plan_memfd, ready;
  gboolean ok;

  if (plan == NULL || (plan_memfd = plan_fd (plan, error)) < 0)
    return FALSE;
  keep_plan (store, record->handle, plan);
  env = sandstep_supervisor_environment (state_dir, (char *const *) environ);
  ready = env != NULL ? sandstep_supervisor_spawn (program, record->handle, store->dir_fd, lock, plan_memfd, -1, env,
                                                   NULL, -1)
                      : (errno = ENOMEM, -1);
  sandstep_supervisor_environment_free (env);
  close (plan_memfd);
  if (ready < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not run the sandbox's supervisor '%s'; reinstall sandstep", program);
  ok = await_ready (ready, record->handle, out_vanished, error);
  close (ready);
  return ok;
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
      int lock;
      gboolean started;

      if (sock == SANDSTEP_RUN_CONNECT_NOT_OURS)
        {
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                          "The supervisor socket of sandbox '%s' in '%s' is served by another user; nothing was "
                          "sent to it.  Check who can write that state directory, then destroy the sandbox",
                          record->handle, store->dir);
          break;
        }
      lock = open_lock (store, record->handle, O_CREAT);

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
          /* It builds the jail, moving no process by its pid: no warm-up (sandstep-cgroup-warm.h). */
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
