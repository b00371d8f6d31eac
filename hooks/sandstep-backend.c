/* sandstep-backend.c: what every backend shares (the choice of one for a helper run: programs/sandstep-backend-open.c). */
#include "sandstep-backend.h"

#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-programs-libc.h"
#include "sandstep-test-hooks.h"

/* ---- the wrappers ---- */

char *
sandstep_backend_provision (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                            gboolean *out_existing, GError **error)
{
  if (!sandstep_spec_check (spec, error))
    return NULL;
  return backend->klass->provision (backend, spec, who, out_existing, error);
}

/* One try at what needs the claim: attach, or a whole step. */
typedef gboolean (*ClaimTry) (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                              gpointer data, GError **error);

/* Tries until @try succeeds, fails for another reason than a holder, or
 * @wait_s is over. */
static gboolean
with_claim (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, double wait_s,
            SandstepWaitNotify notify, gpointer notify_data, ClaimTry try, gpointer data, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (MAX (wait_s, 0) * G_USEC_PER_SEC);
  gint64 pause_us = SANDSTEP_CLAIM_PAUSE_FIRST_US;
  gboolean notified = FALSE;

  for (;;)
    {
      g_autoptr(GError) refusal = NULL;
      const char *holder;

      if (try (backend, handle, who, data, &refusal))
        return TRUE;
      holder = sandstep_error_get_holder (refusal);
      if (!g_error_matches (refusal, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY) || holder == NULL)
        {
          g_propagate_error (error, g_steal_pointer (&refusal));
          return FALSE;
        }
      if (g_get_monotonic_time () >= deadline)
        {
          if (wait_s <= 0)
            g_propagate_error (error, g_steal_pointer (&refusal));
          else
            sandstep_throw_busy_waited (error, handle, holder, wait_s);
          return FALSE;
        }
      if (!notified && notify != NULL)
        notify (handle, holder, wait_s, notify_data);
      notified = TRUE;
      g_usleep (MIN (pause_us, deadline - g_get_monotonic_time () + 1));
      pause_us = MIN (pause_us * 2, SANDSTEP_CLAIM_PAUSE_MAX_US);
    }
}

static gboolean
try_attach (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gpointer data,
            GError **error)
{
  SandstepAttachment **out = data;

  *out = backend->klass->try_attach (backend, handle, who, error);
  return *out != NULL;
}

SandstepAttachment *
sandstep_backend_attach (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, double wait_s,
                         SandstepWaitNotify notify, gpointer notify_data, GError **error)
{
  SandstepAttachment *attachment = NULL;

  if (!with_claim (backend, handle, who, wait_s, notify, notify_data, try_attach, &attachment, error))
    return NULL;
  return attachment;
}

typedef struct {
  const SandstepRunRequest *request;
  SandstepRanFunc on_ran;
  gpointer ran_data;
} StepTry;

static gboolean
try_run_step (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gpointer data,
              GError **error)
{
  StepTry *step = data;
  g_autoptr(SandstepSpec) spec = NULL;
  SandstepRunResult result = { 0 };

  if (!backend->klass->try_run_step (backend, handle, who, step->request, &result, &spec, error))
    return FALSE;
  step->on_ran (spec, &result, step->ran_data);
  return TRUE;
}

gboolean
sandstep_backend_run_step (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, double wait_s,
                           SandstepWaitNotify notify, gpointer notify_data, const SandstepRunRequest *request,
                           SandstepRanFunc on_ran, gpointer ran_data, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  SandstepRunResult result;
  StepTry step = { request, on_ran, ran_data };

  /* The server cuts the budget to the lifetime it knows. */
  if (backend->klass->try_run_step != NULL)
    {
      gboolean ok = with_claim (backend, handle, who, wait_s, notify, notify_data, try_run_step, &step, error);
      if (backend->klass->end_run_step != NULL)
        backend->klass->end_run_step (backend, request);
      return ok;
    }
  attachment = sandstep_backend_attach (backend, handle, who, wait_s, notify, notify_data, error);
  if (attachment == NULL || !sandstep_attachment_run_command (attachment, request, &result, error))
    return FALSE;
  on_ran (sandstep_attachment_spec (attachment), &result, ran_data);
  return TRUE;
}

JsonNode *
sandstep_backend_describe (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  return backend->klass->describe (backend, handle, who, error);
}

gboolean
sandstep_backend_release (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gint64 keep_s,
                          gboolean *out_destroyed, GError **error)
{
  return backend->klass->release (backend, handle, who, keep_s, out_destroyed, error);
}

gboolean
sandstep_backend_destroy (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  return backend->klass->destroy (backend, handle, who, error);
}

gboolean
sandstep_backend_gc (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
                     gboolean broken, GPtrArray *destroyed, GError **error)
{
  /* The one rule for every backend and caller: without a run, only what has expired; a live sandbox
   * goes only with its run (or its handle, by destroy) named. */
  if (run == NULL)
    expired_only = TRUE;
  return backend->klass->gc (backend, run, owner_prefix, expired_only, broken, destroyed, error);
}

GPtrArray *
sandstep_backend_list (SandstepBackend *backend, const char *run, const char *owner, GError **error)
{
  return backend->klass->list (backend, run, owner, error);
}

static const char *const condition_names[] = { "idle", "running", "held", "expired", "broken" };

const char *
sandstep_condition_to_string (SandstepCondition condition)
{
  return (guint) condition < G_N_ELEMENTS (condition_names) ? condition_names[condition] : "broken";
}

gboolean
sandstep_condition_from_string (const char *text, SandstepCondition *out)
{
  for (gsize i = 0; text != NULL && i < G_N_ELEMENTS (condition_names); i++)
    if (strcmp (text, condition_names[i]) == 0)
      {
        *out = (SandstepCondition) i;
        return TRUE;
      }
  return FALSE;
}

void
sandstep_list_entry_free (SandstepListEntry *entry)
{
  if (entry == NULL)
    return;
  g_free (entry->handle);
  g_free (entry->owner);
  g_free (entry->provisioned_by);
  g_free (entry->held_by);
  g_free (entry->problem);
  g_free (entry->image);
  g_free (entry->image_digest);
  g_free (entry->parent);
  g_free (entry);
}

void
sandstep_backend_free (SandstepBackend *backend)
{
  if (backend != NULL)
    backend->klass->free (backend);
}

void
sandstep_attachment_detach (SandstepAttachment *attachment)
{
  const SandstepBackendClass *klass;

  if (attachment == NULL)
    return;
  klass = attachment->backend->klass;
  /* A release that came while we held the claim left the destruction to us. */
  if (klass->release_due != NULL && klass->release_due (attachment))
    klass->destroy_claimed (attachment);
  klass->detach (attachment);
}

double
sandstep_run_budget (double timeout_s, double remaining_s, SandstepRunResult *result)
{
  double budget = timeout_s > 0 ? MIN (timeout_s, remaining_s) : remaining_s;

  result->clamped = timeout_s <= 0 || timeout_s > remaining_s;
  result->applied_timeout_s = budget;
  return budget;
}

gboolean
sandstep_attachment_run_command (SandstepAttachment *attachment, const SandstepRunRequest *request,
                                 SandstepRunResult *result, GError **error)
{
  SandstepRunRequest within = *request;
  gboolean clamped;

  memset (result, 0, sizeof *result);
  within.own_timeout_s = request->timeout_s;
  /* The command's budget never outlives the sandbox. */
  within.timeout_s = sandstep_run_budget (request->timeout_s, sandstep_attachment_remaining_lifetime (attachment),
                                          result);
  clamped = result->clamped;
  if (!attachment->backend->klass->run_command (attachment, &within, result, error))
    return FALSE;
  /* A server may have cut it further with the lifetime it knows. */
  result->clamped = result->clamped || clamped;
  return TRUE;
}

GBytes *
sandstep_attachment_read_file (SandstepAttachment *attachment, const char *path, gsize max_bytes, GError **error)
{
  return attachment->backend->klass->read_file (attachment, path, max_bytes, error);
}

gboolean
sandstep_attachment_write_file (SandstepAttachment *attachment, const char *path, const void *data, gsize len,
                                GError **error)
{
  return attachment->backend->klass->write_file (attachment, path, data, len, error);
}

/* Forks and checkpoints are the local backend's: sandstepd serves none yet. */
static gboolean
no_forks (SandstepAttachment *attachment, const char *what, GError **error)
{
  return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                         "%s: the %s backend has no forks or checkpoints; use a sandbox of this host (--backend=local)",
                         what, attachment->backend->klass->name);
}

gboolean
sandstep_attachment_fork (SandstepAttachment *attachment, const SandstepIdentity *who, guint count,
                          GPtrArray *out_handles, GError **error)
{
  if (attachment->backend->klass->fork == NULL)
    return no_forks (attachment, "fork", error);
  return attachment->backend->klass->fork (attachment, who, count, out_handles, error);
}

gboolean
sandstep_attachment_checkpoint (SandstepAttachment *attachment, const char *name, GError **error)
{
  if (attachment->backend->klass->checkpoint == NULL)
    return no_forks (attachment, "checkpoint", error);
  return attachment->backend->klass->checkpoint (attachment, name, error);
}

gboolean
sandstep_attachment_rollback (SandstepAttachment *attachment, const char *name, GError **error)
{
  if (attachment->backend->klass->rollback == NULL)
    return no_forks (attachment, "rollback", error);
  return attachment->backend->klass->rollback (attachment, name, error);
}

GPtrArray *
sandstep_attachment_checkpoints (SandstepAttachment *attachment, GError **error)
{
  if (attachment->backend->klass->checkpoints == NULL)
    return no_forks (attachment, "checkpoint --list", error), NULL;
  return attachment->backend->klass->checkpoints (attachment, error);
}

gboolean
sandstep_attachment_put (SandstepAttachment *attachment, const char *host_src, const char *dest, GError **error)
{
  return attachment->backend->klass->put (attachment, host_src, dest, error);
}

GPtrArray *
sandstep_attachment_list_directory (SandstepAttachment *attachment, const char *path, GError **error)
{
  return attachment->backend->klass->list_directory (attachment, path, error);
}

gboolean
sandstep_attachment_open_directory (SandstepAttachment *attachment, const char *path, SandstepWatchedDir *out,
                                    GError **error)
{
  *out = (SandstepWatchedDir) { -1, -1, -1, -1 };
  if (attachment->backend->klass->open_directory == NULL)
    {
      g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                   "The %s backend cannot open '%s' to watch it: its sandboxes' files are not on this host",
                   attachment->backend->klass->name, path);
      return FALSE;
    }
  return attachment->backend->klass->open_directory (attachment, path, out, error);
}

void
sandstep_watched_dir_clear (SandstepWatchedDir *dir)
{
  int *fds[] = { &dir->dir, &dir->root, &dir->keep, &dir->jail };

  for (gsize i = 0; i < G_N_ELEMENTS (fds); i++)
    if (*fds[i] >= 0)
      {
        close (*fds[i]);
        *fds[i] = -1;
      }
}

gint64
sandstep_attachment_export_file (SandstepAttachment *attachment, const char *path, int dest_fd, guint64 max_bytes,
                                 GError **error)
{
  return attachment->backend->klass->export_file (attachment, path, dest_fd, max_bytes, error);
}

double
sandstep_attachment_remaining_lifetime (SandstepAttachment *attachment)
{
  return attachment->backend->klass->remaining_lifetime (attachment);
}

const SandstepSpec *
sandstep_attachment_spec (SandstepAttachment *attachment)
{
  return attachment->backend->klass->spec (attachment);
}
