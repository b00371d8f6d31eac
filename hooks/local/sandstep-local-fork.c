/* sandstep-local-fork.c: forks and checkpoints of the local backend, over frozen layers (sandstep-layers.h). */
#include "sandstep-local-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-read-libc.h"
#include "sandstep-handle.h"
#include "sandstep-image-root.h"
#include "sandstep-layers.h"
#include "sandstep-supervision.h"
#include "sandstep-supervisor.h"
#include "sandstep-teardown.h"
#include "sandstep-test-hooks.h"
#include "sandstep-uid-slots.h"

/* In the programs that link the image store (sandstep-image-root.h). */
#pragma weak sandstep_image_root_set_user

/* How many forks one call makes at most: each is a sandbox, with its supervisor when it runs. */
#define MAX_FORKS 256

/* What finds the @i-th of @count forks of @parent again: the caller's holder with the parent named, so that a
 * holder that provisioned the parent (the command line's default one) forks it, and forks of two parents by one
 * holder are two. */
static char *
fork_holder (const char *holder, const char *parent, guint i, guint count)
{
  g_autofree char *which = count == 1 ? g_strdup ("") : g_strdup_printf (" #%u", i + 1);

  return g_strdup_printf ("%s (fork%s of %s)", holder, which, parent);
}

/* The live sandbox of @owner's @holder, if there is one to reuse; refused when damaged, as provision does. */
static char *
find_fork (SandstepStore *store, const char *owner, const char *holder, GError **error)
{
  g_autofree char *handle = sandstep_store_find_holder (store, owner, holder);
  g_autoptr(SandstepRecord) record = NULL;
  g_autoptr(GError) local_error = NULL;

  if (handle == NULL)
    return NULL;
  record = sandstep_store_load (store, handle, &local_error);
  if (record == NULL && g_error_matches (local_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BROKEN))
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&local_error), "'%s' already made a sandbox: ", holder);
      return NULL;
    }
  if (record == NULL || record->released || g_get_real_time () / G_USEC_PER_SEC >= record->expires)
    return NULL;
  return g_steal_pointer (&handle);
}

/* A new sandbox over @parent's layers, of the same owner and spec, with the lifetime @parent has left. */
static char *
make_fork (LocalBackend *local, const SandstepRecord *parent, const char *holder, GError **error)
{
  SandstepStore *store = local->store;
  g_autoptr(SandstepRecord) record = g_new0 (SandstepRecord, 1);

  record->handle = sandstep_handle_new ();
  record->owner = g_strdup (parent->owner);
  record->holder = g_strdup (holder);
  record->created = g_get_real_time () / G_USEC_PER_SEC;
  record->expires = parent->expires;
  record->spec = sandstep_spec_copy (parent->spec);
  record->parent = g_strdup (parent->handle);
  record->layers = g_strdupv (parent->layers);
  sandstep_uid_slot_take (store, record);
  /* The holder first, as provision: a kill after the sandbox appears leaves it findable. */
  if (!sandstep_store_set_holder (store, record->owner, holder, record->handle, error) ||
      !sandstep_store_create (store, record, error))
    {
      sandstep_store_forget_holder (store, record->owner, holder, record->handle);
      return NULL;
    }
  /* Named among its layers' and its image's users before anyone can use it. */
  if (!sandstep_layers_add_user (store, record->layers, record->handle, error) ||
      (record->spec->image_digest != NULL && sandstep_image_root_set_user != NULL &&
       !sandstep_image_root_set_user (record->spec->image_digest, record->handle, TRUE, error)))
    {
      sandstep_sandbox_destroy (store, record->handle, -1, NULL);
      return NULL;
    }
  return g_strdup (record->handle);
}

/* The sandbox's files frozen into a layer, its supervisor stopped first: a live overlay's layers are never
 * renamed under it, and processes do not outlive a command anyway (the one exception, an agent's Python
 * session, holds the claim, so a fork waits for it). */
/* Forks, checkpoints and rollbacks move the files: never beside others' calls (SandstepIdentity.beside). */
static gboolean
claimed (LocalAttachment *attachment, GError **error)
{
  if (attachment->claim_fd >= 0)
    return TRUE;
  return sandstep_throw_busy (error, attachment->holder,
                              "Sandbox '%s' is held by '%s', whose calls run beside each other; a fork, checkpoint "
                              "or rollback waits until none runs: try it again then",
                              attachment->parent.handle, attachment->holder);
}

static gboolean
freeze (LocalAttachment *attachment, GError **error)
{
  SandstepStore *store = attachment->local->store;

  if (!claimed (attachment, error))
    return FALSE;

  /* Nothing changed since the last freeze (a second fork of a prepared sandbox): its top layer is the snapshot,
   * and its jail may live on. */
  if (sandstep_layers_unchanged (store, attachment->record))
    return TRUE;
  sandstep_supervisor_stop (store, attachment->parent.handle);
  if (attachment->tree_fd >= 0)
    {
      close (attachment->tree_fd);
      attachment->tree_fd = -1;
    }
  return sandstep_layers_freeze (store, attachment->record, error);
}

gboolean
sandstep_local_fork (SandstepAttachment *parent, const SandstepIdentity *who, guint count, GPtrArray *out_handles,
                     GError **error)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  LocalBackend *local = attachment->local;
  SandstepStore *store = local->store;
  const SandstepRecord *record = attachment->record;
  g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func (g_free);
  gboolean all_found = TRUE;
  gboolean ok = TRUE;

  if (count == 0 || count > MAX_FORKS)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--count=%u: a fork makes 1 to %d sandboxes; fork again for more", count, MAX_FORKS);
  /* Get-or-create by holder: a retried fork target finds the forks it made, and freezes nothing. */
  for (guint i = 0; i < count; i++)
    {
      g_autofree char *holder = fork_holder (who->holder, parent->handle, i, count);
      g_autoptr(GError) local_error = NULL;
      char *handle = find_fork (store, record->owner, holder, &local_error);

      if (local_error != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return FALSE;
        }
      all_found = all_found && handle != NULL;
      g_ptr_array_add (found, handle);
    }
  if (!all_found && !freeze (attachment, error))
    return FALSE;
  if (!sandstep_store_lock_provision (store, error))
    return FALSE;
  for (guint i = 0; ok && i < count; i++)
    {
      g_autofree char *holder = fork_holder (who->holder, parent->handle, i, count);
      g_autofree char *handle = g_strdup (found->pdata[i]);

      /* Under the lock: one made meanwhile by the same holder (a retry racing us) counts too. */
      if (handle == NULL)
        handle = find_fork (store, record->owner, holder, error);
      if (handle == NULL && (error == NULL || *error == NULL))
        handle = make_fork (local, record, holder, error);
      if (handle == NULL)
        ok = FALSE;
      else
        g_ptr_array_add (out_handles, g_steal_pointer (&handle));
    }
  sandstep_store_unlock_provision (store);
  for (guint i = 0; ok && i < out_handles->len; i++)
    if (found->pdata[i] == NULL)
      {
        g_autoptr(SandstepRecord) made = sandstep_store_load (store, out_handles->pdata[i], NULL);
        if (made != NULL)
          sandstep_supervisor_prepare (store, made);
      }
  return ok;
}

gboolean
sandstep_local_checkpoint (SandstepAttachment *parent, const char *name, GError **error)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  SandstepRecord *record = attachment->record;

  if (!sandstep_checkpoint_name_is_valid (name))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "checkpoint name '%s': use 1 to 64 letters, digits, '.', '_', '-' or ':', not starting "
                           "with '.' or '-'", name);
  if (!freeze (attachment, error))
    return FALSE;
  if (record->checkpoints == NULL)
    record->checkpoints = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_strfreev);
  /* A name taken again names the files as they are now: a retried step checkpoints again. */
  g_hash_table_replace (record->checkpoints, g_strdup (name), g_strdupv (record->layers));
  return sandstep_store_save (attachment->local->store, record, error);
}

gboolean
sandstep_local_rollback (SandstepAttachment *parent, const char *name, GError **error)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  SandstepRecord *record = attachment->record;
  char **layers = record->checkpoints != NULL ? g_hash_table_lookup (record->checkpoints, name) : NULL;
  g_auto(GStrv) copy = NULL;

  if (layers == NULL)
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
                           "Sandbox '%s' has no checkpoint '%s'; 'sandstep checkpoint --list --handle=%s' names "
                           "those it has", parent->handle, name, parent->handle);
  if (!claimed (attachment, error))
    return FALSE;
  copy = g_strdupv (layers);
  sandstep_supervisor_stop (attachment->local->store, parent->handle);
  if (attachment->tree_fd >= 0)
    {
      close (attachment->tree_fd);
      attachment->tree_fd = -1;
    }
  return sandstep_layers_reset (attachment->local->store, record, copy, error);
}

GPtrArray *
sandstep_local_checkpoints (SandstepAttachment *parent, GError **error)
{
  return sandstep_record_checkpoint_names (((LocalAttachment *) parent)->record);
}

/* init of the sandbox's live jail, as "/proc/PID" opened, if the supervisor says one runs and it is still the
 * process it named (not a recycled pid); else -1.  With @out_pidfd, a pidfd of it too. */
static int
open_init (LocalAttachment *attachment, int *out_pidfd)
{
  g_autofree char *path = sandstep_store_sandbox_path (attachment->local->store, attachment->parent.handle,
                                                       SANDSTEP_SUPERVISOR_INIT_FILE);
  g_autofree char *text = NULL, *proc = NULL;
  guint64 pid, start;
  int fd, pidfd = -1;

  if (!g_file_get_contents (path, &text, NULL, NULL) || sscanf (text, "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT,
                                                                &pid, &start) != 2 || pid == 0 || pid > G_MAXINT)
    return -1;
  proc = g_strdup_printf ("/proc/%d", (int) pid);
  fd = open (proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0 && out_pidfd != NULL)
    pidfd = (int) syscall (SYS_pidfd_open, (pid_t) pid, 0);
  /* Opened first, checked after: the fds name that process whatever happens to the pid (it was init's when the
   * file was read, and is still, so it was all along). */
  if (fd >= 0 && (start == 0 || sandstep_process_start_time ((pid_t) pid) != start ||
                  (out_pidfd != NULL && (pidfd < 0 || fcntl (pidfd, F_SETFD, FD_CLOEXEC) < 0))))
    {
      close (fd);
      if (pidfd >= 0)
        close (pidfd);
      return -1;
    }
  if (out_pidfd != NULL)
    *out_pidfd = pidfd;
  return fd;
}

/* A test's pause between finding the supervisor and its jail, in which the supervisor may end idle unless the
 * caller keeps its jail (SANDSTEP_TEST_JAIL_LOOKUP_PAUSE_MS, sandstep-test-hooks.h). */
static void
pause_for_test (void)
{
  const char *value = sandstep_test_hook ("SANDSTEP_TEST_JAIL_LOOKUP_PAUSE_MS");
  guint64 ms;

  if (value != NULL && g_ascii_string_to_unsigned (value, 10, 1, 600000, &ms, NULL))
    g_usleep (ms * 1000);
}

int
sandstep_local_layered_tree (LocalAttachment *attachment, int *out_init_pidfd, GError **error)
{
  SandstepStore *store = attachment->local->store;

  /* Twice: a supervisor whose jail ended (idle, or stale) is stopped, and the next one builds it. */
  for (int attempt = 0; attempt < 2; attempt++)
    {
      int sock = sandstep_supervisor_connect (store, attachment->record, error);
      int init, tree;

      if (sock < 0)
        return -1;
      /* Started (and its jail built) or running: nothing to ask it. */
      close (sock);
      pause_for_test ();
      init = open_init (attachment, out_init_pidfd);
      if (init >= 0)
        {
          tree = openat (init, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC);
          close (init);
          if (tree >= 0)
            return tree;
          if (out_init_pidfd != NULL)
            {
              close (*out_init_pidfd);
              *out_init_pidfd = -1;
            }
        }
      /* Beside others' calls, their jail is never stopped under them. */
      if (attachment->claim_fd < 0)
        break;
      sandstep_supervisor_stop (store, attachment->parent.handle);
    }
  sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                  "Could not reach the files of sandbox '%s' through its jail; run a command in it to see why, or "
                  "destroy it", attachment->parent.handle);
  return -1;
}

/* ---- retry-safe steps (--retry=clean) ---- */

/* The checkpoint of @holder's target, which is also the name of its state beside the record: "running" from its
 * first line, "done" once its last line succeeded. */
static char *
retry_name (const char *holder)
{
  g_autofree char *sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, holder, -1);

  return g_strdup_printf ("retry-%.16s", sum);
}

static char *
retry_state (LocalAttachment *attachment, const char *name)
{
  g_autofree char *path = sandstep_store_sandbox_path (attachment->local->store, attachment->parent.handle, name);
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return g_strdup (g_strstrip (text));
}

gboolean
sandstep_local_retry_begin (LocalAttachment *attachment, GError **error)
{
  g_autofree char *name = retry_name (attachment->holder);
  g_autofree char *state = retry_state (attachment, name);
  gboolean failed = g_strcmp0 (state, "running") == 0 && attachment->record->checkpoints != NULL &&
                    g_hash_table_contains (attachment->record->checkpoints, name);

  /* The last attempt began and did not succeed: this one starts from where it started, not from what it left. */
  if (failed ? !sandstep_local_rollback (&attachment->parent, name, error)
             : !sandstep_local_checkpoint (&attachment->parent, name, error))
    return FALSE;
  return sandstep_store_write_member (attachment->local->store, attachment->parent.handle, name, "running\n",
                                      strlen ("running\n"), error);
}

void
sandstep_local_retry_done (LocalAttachment *attachment)
{
  g_autofree char *name = retry_name (attachment->holder);
  g_autoptr(GError) error = NULL;

  /* The next run of the target (its inputs changed) starts from what this one left, checkpointed anew. */
  if (!sandstep_store_write_member (attachment->local->store, attachment->parent.handle, name, "done\n",
                                    strlen ("done\n"), &error))
    g_debug ("Could not note that '%s' succeeded: %s", attachment->holder, error->message);
}
