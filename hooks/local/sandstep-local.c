/* sandstep-local.c: the local backend: jails on this machine, state in a directory. */
#include "sandstep-backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-error.h"
#include "sandstep-image-root.h"

#include "sandstep-jail-init.h"
#include "sandstep-json.h"
#include "sandstep-limits.h"
#include "sandstep-local.h"
#include "sandstep-proxy.h"
#include "sandstep-run-client.h"
#include "sandstep-state-dir.h"
#include "sandstep-step.h"
#include "sandstep-store.h"
#include "sandstep-supervision.h"
#include "sandstep-supervisor.h"
#include "sandstep-supervisor-keep.h"
#include "sandstep-teardown.h"
#include "sandstep-tree.h"
#include "sandstep-uid-slots.h"
#include "sandstep-uids.h"

#include "sandstep-local-private.h"
#include "sandstep-layers.h"

/* In the programs that link the image store (sandstep-image-root.h). */
#pragma weak sandstep_image_root_set_user
#pragma weak sandstep_image_root_pull
#pragma weak sandstep_image_root_hold

static gint64
now_unix (void)
{
  return g_get_real_time () / G_USEC_PER_SEC;
}

static char *
format_time (gint64 unix_seconds)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc (unix_seconds);

  return t != NULL ? g_date_time_format (t, "%Y-%m-%d %H:%M:%S UTC") : g_strdup ("(unknown)");
}

static gboolean
check_owner (const SandstepRecord *record, const SandstepIdentity *who, GError **error)
{
  if (g_strcmp0 (record->owner, who->owner) == 0)
    return TRUE;
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
                         "Sandbox '%s' is not owned by '%s': it carries owner '%s'. Use the handle this run "
                         "provisioned, or pass the owner that provisioned it (--owner or SANDSTEP_OWNER)",
                         record->handle, who->owner, record->owner);
}

static gboolean
check_alive (const SandstepRecord *record, GError **error)
{
  gint64 now = now_unix ();
  g_autofree char *when = NULL;

  if (now < record->expires)
    return TRUE;
  when = format_time (record->expires);
  if (record->released)
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
                           "Sandbox '%s' was released at the end of its DAG and is destroyed once its last command "
                           "ends; provision a new one", record->handle);
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_EXPIRED,
                         "Sandbox '%s' expired at %s, at the end of its %" G_GINT64_FORMAT "s lifetime; provision a "
                         "new one (--lifetime=DURATION), and reclaim this one with 'sandstep gc --expired'",
                         record->handle, when, record->spec->lifetime_s);
}

/* A CPU cap that this host cannot set is refused, from the command line and through sandstepd alike: a step
 * relies on it, and without a cgroup it would be a silent no-op. */
static gboolean
check_cpu_cap (const SandstepSpec *spec, GError **error)
{
  g_autofree char *why = spec->limits.millicpus != 0 ? sandstep_cgroup_cpu_cap_unavailable () : NULL;

  if (why != NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                           "--cpus=%g cannot apply: %s; provision without --cpus, or as root on a host with the "
                           "cgroup cpu controller", spec->limits.millicpus / 1000.0, why);
  return TRUE;
}

static char *
provision_held (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                gboolean *out_existing, GError **error)
{
  LocalBackend *local = (LocalBackend *) backend;
  SandstepStore *store = local->store;
  g_autoptr(SandstepRecord) record = NULL;
  g_autofree char *existing = NULL;
  g_autoptr(SandstepSpec) pulled = NULL;

  *out_existing = FALSE;
  if (!check_cpu_cap (spec, error))
    return NULL;
  /* Refused now, not by every command after (the rule is the supervisor's, which starts the stack). */
  if (spec->network == SANDSTEP_NETWORK_OPEN && !sandstep_network_open_usable (error))
    return NULL;
  /* An image named by its reference only (a provision through sandstepd): pulled here, before the lock, as a
   * provision on this host pulls before it asks. */
  if (spec->image != NULL && spec->image_digest == NULL)
    {
      if (sandstep_image_root_pull == NULL)
        {
          sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                          "image '%s': this program has no image store; provision through 'sandstep'", spec->image);
          return NULL;
        }
      pulled = sandstep_spec_copy (spec);
      g_clear_pointer (&pulled->image, g_free);
      pulled->image_digest = sandstep_image_root_pull (spec->image, &pulled->image, error);
      if (pulled->image_digest == NULL)
        return NULL;
      spec = pulled;
    }
  if (!sandstep_store_lock_provision (store, error))
    return NULL;
  /* What a provision killed part way left: this one holds the lock, so nothing else is being built. */
  sandstep_store_sweep (store, FALSE);

  /* Get-or-create by holder: a retried step finds the sandbox it made. */
  existing = sandstep_store_find_holder (store, who->owner, who->holder);
  if (existing != NULL)
    {
      g_autoptr(GError) load_error = NULL;
      g_autoptr(SandstepRecord) old = sandstep_store_load (store, existing, &load_error);
      if (old != NULL && now_unix () < old->expires && !old->released)
        {
          g_autofree char *differences = sandstep_spec_differences (old->spec, spec);

          sandstep_store_unlock_provision (store);
          /* A retry asks for what it asked before; anything else is another sandbox. */
          if (differences != NULL)
            {
              sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_CONFLICT,
                              "'%s' already provisioned sandbox '%s' with another spec: %s. Destroy that sandbox "
                              "first ('sandstep destroy' with its handle), or provision under another holder",
                              who->holder, existing, differences);
              return NULL;
            }
          *out_existing = TRUE;
          return g_steal_pointer (&existing);
        }
      /* A damaged one is refused, named, with what to do: a second sandbox for the holder would leave the first
       * to leak unnoticed (and the step's handle file would name another sandbox than before). */
      if (old == NULL && g_error_matches (load_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BROKEN))
        {
          sandstep_store_unlock_provision (store);
          g_propagate_prefixed_error (error, g_steal_pointer (&load_error), "'%s' already provisioned a sandbox: ",
                                      who->holder);
          return NULL;
        }
      /* Over or released (or gone): this holder gets a new one. */
      if (old != NULL)
        sandstep_sandbox_destroy (store, existing, -1, NULL);
    }

  /* An image's root needs the image store (hooks/image/), linked where pulls run. */
  if (spec->image_digest != NULL && sandstep_image_root_set_user == NULL)
    {
      sandstep_store_unlock_provision (store);
      sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                      "image '%s': this program has no image store; provision through 'sandstep'", spec->image);
      return NULL;
    }

  record = g_new0 (SandstepRecord, 1);
  record->handle = sandstep_handle_new ();
  record->owner = g_strdup (who->owner);
  record->holder = g_strdup (who->holder);
  record->created = now_unix ();
  record->expires = record->created + spec->lifetime_s;
  record->spec = sandstep_spec_copy (spec);
  sandstep_uid_slot_take (local->store, record);
  /* The holder first: a kill after the sandbox appears must leave it findable, or a retry makes a second. */
  if (!sandstep_store_set_holder (store, who->owner, who->holder, record->handle, error) ||
      !sandstep_store_create (store, record, error))
    {
      sandstep_store_forget_holder (store, who->owner, who->holder, record->handle);
      sandstep_store_unlock_provision (store);
      return NULL;
    }
  /* Named among the image's users before anyone can use the sandbox: `gc --images` keeps the image. */
  if (spec->image_digest != NULL && !sandstep_image_root_set_user (spec->image_digest, record->handle, TRUE, error))
    {
      sandstep_store_unlock_provision (store);
      sandstep_sandbox_destroy (store, record->handle, -1, NULL);
      return NULL;
    }
  sandstep_store_unlock_provision (store);
  sandstep_supervisor_prepare (store, record);
  return g_strdup (record->handle);
}

/* An image named by its reference only (through sandstepd) is pulled here: the image store stays held from
 * before the pull until the sandbox is among the image's users, or `gc --images` could remove the image
 * between the two (sandstep-image-root.h). */
static char *
local_provision (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                 gboolean *out_existing, GError **error)
{
  int hold = -1;
  char *handle;

  if (spec->image != NULL && spec->image_digest == NULL && sandstep_image_root_hold != NULL &&
      (hold = sandstep_image_root_hold (error)) < 0)
    return NULL;
  handle = provision_held (backend, spec, who, out_existing, error);
  if (hold >= 0)
    close (hold);
  return handle;
}

static void local_detach (SandstepAttachment *attachment);

/* Under the claim: refuses while another recipe (another holder's, or the
 * same holder's in another make) holds the sandbox between its lines, and
 * leaves a hold for this one's recipe when this line is not its last
 * (sandstep-step.h). */
static gboolean
judge_step (LocalBackend *local, const char *handle, const SandstepIdentity *who, SandstepStep *out_step,
            gboolean want_first, gboolean *out_first, GError **error)
{
  char holder[SANDSTEP_STEP_HOLDER_MAX];
  pid_t make_pid = 0;
  int dir = sandstep_local_open_dir (local, handle);

  memset (out_step, 0, sizeof *out_step);
  *out_first = FALSE;
  if (dir < 0)
    return TRUE;
  if (who->step != NULL && !sandstep_step_scan (who->step, out_step))
    memset (out_step, 0, sizeof *out_step);
  /* A recipe's line that finds no hold of its own recipe before it starts one: the target's first line (read only
   * for a retry-safe sandbox, which acts on it). */
  if (want_first && out_step->pid > 0)
    {
      pid_t held_pid = 0;
      *out_first = !sandstep_step_held (dir, holder, sizeof holder, &held_pid) || held_pid != out_step->pid ||
                   strcmp (holder, who->holder) != 0;
    }
  if (sandstep_step_bars (dir, who->holder, out_step, holder, sizeof holder, &make_pid))
    {
      close (dir);
      memset (out_step, 0, sizeof *out_step);
      return sandstep_throw_busy (error, holder,
                                  "Sandbox '%s' is held by '%s', whose make recipe (make pid %d) holds it from its "
                                  "first sandbox line to its last, and one step uses a sandbox at a time; wait for it "
                                  "(--wait=SECONDS), or provision one sandbox per step",
                                  handle, holder, (int) make_pid);
    }
  if (out_step->pid > 0 && !sandstep_step_update (dir, who->holder, out_step))
    g_debug ("Could not leave the recipe's hold on '%s': %s", handle, g_strerror (errno));
  close (dir);
  return TRUE;
}

/* The attachment made, its tree opened: a layered sandbox's files are reached through its jail, for each use
 * (tools_tree()).  NULL, the attachment gone, when the tree cannot be opened. */
static SandstepAttachment *
attached (LocalAttachment *attachment, GError **error)
{
  g_autofree char *tree = NULL;

  if (attachment->record->layers == NULL)
    {
      tree = sandstep_store_sandbox_path (attachment->local->store, attachment->parent.handle, "tree");
      attachment->tree_fd = sandstep_tree_open (tree, error);
      if (attachment->tree_fd < 0)
        {
          local_detach (&attachment->parent);
          return NULL;
        }
    }
  return &attachment->parent;
}

/* Beside the claim of another attachment of @who's holder: its files and commands, with no claim of its own (so
 * no recipe's hold, recovery or checkpoint, which are the claim's). */
static SandstepAttachment *
attach_beside (LocalBackend *local, const char *handle, const SandstepIdentity *who, SandstepRecord *record,
               GError **error)
{
  LocalAttachment *attachment = g_new0 (LocalAttachment, 1);

  attachment->holder = g_strdup (who->holder);
  attachment->parent.backend = &local->parent;
  attachment->parent.handle = g_strdup (handle);
  attachment->local = local;
  attachment->record = record;
  attachment->claim_fd = -1;
  attachment->tree_fd = -1;
  attachment->tools_keep = -1;
  attachment->beside = TRUE;
  return attached (attachment, error);
}

static SandstepAttachment *
local_try_attach (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  gboolean first = FALSE;
  LocalBackend *local = (LocalBackend *) backend;
  g_autoptr(SandstepRecord) record = sandstep_store_load (local->store, handle, error);
  g_autofree char *current = NULL;
  LocalAttachment *attachment;
  int fd;

  /* A refused attach must leave no claim behind: check before claiming. */
  if (record == NULL || !check_owner (record, who, error) || !check_alive (record, error))
    return NULL;

  fd = sandstep_store_try_claim (local->store, handle, who->holder, &current, error);
  if (fd < 0 && who->beside && current != NULL && strcmp (current, who->holder) == 0)
    return attach_beside (local, handle, who, g_steal_pointer (&record), error);
  if (fd < 0)
    {
      if (current != NULL)
        sandstep_throw_busy (error, current,
                             "Sandbox '%s' is held by '%s', and one step uses a sandbox at a time; wait for it "
                             "(--wait=SECONDS) or provision one sandbox per step",
                             handle, current);
      return NULL;
    }

  /* The record may have changed before the claim (released, destroyed, or extended). */
  g_clear_pointer (&record, sandstep_record_free);
  record = sandstep_store_load (local->store, handle, error);
  if (record == NULL || !check_alive (record, error))
    {
      close (fd);
      return NULL;
    }

  attachment = g_new0 (LocalAttachment, 1);
  if (!judge_step (local, handle, who, &attachment->step, record->spec->retry_clean, &first, error))
    {
      close (fd);
      g_free (attachment);
      return NULL;
    }
  attachment->holder = g_strdup (who->holder);
  attachment->parent.backend = backend;
  attachment->parent.handle = g_strdup (handle);
  attachment->local = local;
  attachment->record = g_steal_pointer (&record);
  attachment->claim_fd = fd;
  attachment->tree_fd = -1;
  attachment->tools_keep = -1;
  attachment->beside = who->beside;
  /* A fork or checkpoint killed part way is finished or undone before anything uses the files. */
  if (!sandstep_layers_recover (local->store, attachment->record, error))
    {
      local_detach (&attachment->parent);
      return NULL;
    }
  /* A retry-safe sandbox (--retry=clean): a target's first line checkpoints it, or rolls a failed attempt back. */
  if (first && attachment->record->spec->retry_clean && !sandstep_local_retry_begin (attachment, error))
    {
      local_detach (&attachment->parent);
      return NULL;
    }
  return attached (attachment, error);
}

static gboolean
local_release_due (SandstepAttachment *parent)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  g_autoptr(SandstepRecord) now = NULL;

  /* Beside another's claim: destroying is that claim's. */
  if (attachment->claim_fd < 0)
    return FALSE;
  now = sandstep_store_load (attachment->local->store, parent->handle, NULL);
  return now != NULL && now->released && now_unix () >= now->expires;
}

static void
local_destroy_claimed (SandstepAttachment *parent)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;

  sandstep_sandbox_destroy (attachment->local->store, parent->handle, attachment->claim_fd, NULL);
}

static void
local_detach (SandstepAttachment *parent)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;

  if (attachment->tree_fd >= 0)
    close (attachment->tree_fd);
  if (attachment->tools_keep >= 0)
    close (attachment->tools_keep);
  /* The recipe's last line for this sandbox ends its hold, still under the claim. */
  if (attachment->claim_fd >= 0 && attachment->step.pid > 0 && attachment->step.ends)
    {
      if (attachment->record->spec->retry_clean && !attachment->run_failed)
        sandstep_local_retry_done (attachment);
      int dir = sandstep_local_open_dir (attachment->local, parent->handle);
      if (dir >= 0)
        {
          sandstep_step_update (dir, attachment->holder, &attachment->step);
          close (dir);
        }
    }
  if (attachment->claim_fd >= 0)
    close (attachment->claim_fd);
  g_free (attachment->holder);
  sandstep_record_free (attachment->record);
  g_free (parent->handle);
  g_free (attachment);
}

static double
local_remaining_lifetime (SandstepAttachment *parent)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  double left = attachment->record->expires - g_get_real_time () / (double) G_USEC_PER_SEC;

  return MAX (left, 0);
}

static const SandstepSpec *
local_spec (SandstepAttachment *parent)
{
  return ((LocalAttachment *) parent)->record->spec;
}

static void
relay_notice (const char *text, void *user_data)
{
  const SandstepRunRequest *request = user_data;

  if (request->on_notice != NULL)
    request->on_notice (text, request->user_data);
}

static void
relay_output (int stream, const char *data, size_t len, void *user_data)
{
  const SandstepRunRequest *request = user_data;

  request->on_output (stream, data, len, request->user_data);
}

/* The caller's terminal and locale, which a command may see. */
static char **
passthrough_environment (void)
{
  static const char *const names[] = { SANDSTEP_PASSTHROUGH_ENV };
  GPtrArray *env = g_ptr_array_new ();

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      const char *value = g_getenv (names[i]);
      if (value != NULL)
        g_ptr_array_add (env, g_strconcat (names[i], "=", value, NULL));
    }
  g_ptr_array_add (env, NULL);
  return (char **) g_ptr_array_free (env, FALSE);
}

/* Asks supervisors until one has run the command or says why not. */
static gboolean
run_through_supervisor (LocalAttachment *attachment, SandstepRunCall *call, SandstepRunResult *result,
                        GError **error)
{
  SandstepRunCallResult outcome;

  /* A supervisor that ends as we ask ran nothing: ask the next one. */
  for (int attempt = 0; attempt < 5; attempt++)
    {
      int sock = sandstep_supervisor_connect (attachment->local->store, attachment->record, error);
      if (sock < 0)
        return FALSE;
      sandstep_run_call (sock, call, &outcome);
      close (sock);
      switch (outcome.outcome)
        {
        case SANDSTEP_RUN_CALL_RETRY:
          continue;
        case SANDSTEP_RUN_CALL_CANCELLED:
          return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                                 "The command was stopped: its caller went away");
        case SANDSTEP_RUN_CALL_ERROR:
          return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, "%s", outcome.text);
        case SANDSTEP_RUN_CALL_BUSY:
          /* Never for a caller that holds the claim, as this one does; a supervisor that says so anyway. */
          return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY, "%s", outcome.text);
        case SANDSTEP_RUN_CALL_LOST:
          return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, "%s",
                                 SANDSTEP_RUN_LOST_TEXT);
        case SANDSTEP_RUN_CALL_FALLBACK:
          /* Beside another's claim, a turn that did not come in time. */
          if (attachment->claim_fd < 0)
            return sandstep_throw_busy (error, attachment->holder,
                                        "Sandbox '%s' is busy: its commands did not make room for one more of "
                                        "'%s' in %g s (a make step waits for its turn, or it is being built "
                                        "again); try again", attachment->parent.handle, attachment->holder,
                                        SANDSTEP_BESIDE_WAIT_S);
          {
            /* Refused although this step holds the claim: the sandbox changed under it. */
            g_autoptr(SandstepRecord) now = sandstep_store_load (attachment->local->store,
                                                                 attachment->parent.handle, error);
            if (now == NULL || !check_alive (now, error))
              return FALSE;
            return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                   "The supervisor of sandbox '%s' refused the command although this step "
                                   "holds the sandbox; run the step again", attachment->parent.handle);
          }
        case SANDSTEP_RUN_CALL_DONE:
          {
            const SandstepRunReply *reply = &outcome.reply;
            gboolean memory_hit = (reply->flags & SANDSTEP_RUN_MEMORY_HIT) != 0;
            if (reply->flags & SANDSTEP_RUN_EXEC_FAILED)
              return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                                           reply->exit_status, "The jail could not execute /bin/sh");
            /* The sandbox went down under the command, and not for a limit it hit. */
            if ((reply->flags & SANDSTEP_RUN_INTERRUPTED) && !memory_hit)
              return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, "%s",
                                     SANDSTEP_RUN_LOST_TEXT);
            result->exit_status = reply->exit_status;
            result->timed_out = (reply->flags & SANDSTEP_RUN_TIMED_OUT) != 0;
            result->applied_timeout_s = reply->applied_timeout_s;
            result->clamped = (reply->flags & SANDSTEP_RUN_CLAMPED) != 0;
            result->memory_limit_hit = memory_hit;
            result->pids_limit_hit = (reply->flags & SANDSTEP_RUN_PIDS_HIT) != 0;
            return TRUE;
          }
        }
    }
  return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                         "The supervisor of sandbox '%s' kept ending before it could run the command; run the "
                         "step again", attachment->parent.handle);
}

/* Every command goes to the sandbox's supervisor, which this attachment's claim entitles to run it. */
static gboolean
local_run_command (SandstepAttachment *parent, const SandstepRunRequest *request, SandstepRunResult *result,
                   GError **error)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  g_auto(GStrv) env = passthrough_environment ();
  char timeout_text[G_ASCII_DTOSTR_BUF_SIZE] = "";
  char wait_text[G_ASCII_DTOSTR_BUF_SIZE] = "";
  SandstepRunCall call = {
    .env = env,
    .stdio = { request->stdin_fd, request->stdout_fd, request->stderr_fd },
    .claim_fd = attachment->claim_fd,
    .beside = attachment->beside,
    .cancel_fd = -1,
    .on_output = request->on_output != NULL ? relay_output : NULL,
    .on_notice = relay_notice,
    .user_data = (void *) request,
  };
  gboolean ok;

  if (!check_alive (attachment->record, error))
    return FALSE;
  /* The supervisor cuts the budget to the lifetime itself, and moves it when a release moves the lifetime: it gets
   * the caller's own. */
  if (request->own_timeout_s > 0)
    g_ascii_dtostr (timeout_text, sizeof timeout_text, request->own_timeout_s);
  call.field[SANDSTEP_RUN_FIELD_HANDLE] = parent->handle;
  call.field[SANDSTEP_RUN_FIELD_OWNER] = attachment->record->owner;
  /* The attachment's holder: commands of one holder run beside each other when they ask to. */
  call.field[SANDSTEP_RUN_FIELD_HOLDER] = attachment->holder != NULL ? attachment->holder : attachment->record->holder;
  /* Beside another's claim, a command waits for a turn as E2B's calls wait for a claim, then is busy. */
  if (attachment->claim_fd < 0)
    g_ascii_dtostr (wait_text, sizeof wait_text, SANDSTEP_BESIDE_WAIT_S);
  call.field[SANDSTEP_RUN_FIELD_WAIT] = wait_text;
  call.field[SANDSTEP_RUN_FIELD_TIMEOUT] = timeout_text;
  call.field[SANDSTEP_RUN_FIELD_COMMAND] = request->command;
  if (request->cancellable != NULL)
    call.cancel_fd = g_cancellable_get_fd (request->cancellable);
  ok = run_through_supervisor (attachment, &call, result, error);
  if (call.cancel_fd >= 0)
    g_cancellable_release_fd (request->cancellable);
  /* A target whose last line fails has not succeeded: its retry starts clean (--retry=clean). */
  if (!ok || result->timed_out || !WIFEXITED (result->exit_status) || WEXITSTATUS (result->exit_status) != 0)
    attachment->run_failed = TRUE;
  return ok;
}

/* A shared lock on the keep file of @attachment's sandbox (sandstep-supervisor-keep.h), taken before its jail is
 * looked for: a supervisor ending idle is waited for, and the jail found stays while the lock is held.  -1 with
 * @error set when it cannot be taken; @what names the use, for the message. */
static int
keep_jail (LocalAttachment *attachment, const char *what, GError **error)
{
  int dir_fd = sandstep_local_open_dir (attachment->local, attachment->parent.handle);
  int keep = dir_fd < 0 ? -1 : sandstep_supervisor_keep (dir_fd);
  int errsv = errno;

  if (dir_fd >= 0)
    close (dir_fd);
  if (keep < 0)
    sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                          "Cannot keep the jail of sandbox '%s' to %s; try again, or run a command in the sandbox "
                          "to see what is wrong", attachment->parent.handle, what);
  return keep;
}

/* The files the tools work on: the sandbox's tree, or a layered sandbox's as its live jail has them, opened
 * anew for each use and kept until tools_done() (its supervisor may end between two uses, never during one; one
 * overlay for tools and commands, never two). */
static int
tools_tree (SandstepAttachment *parent, GError **error)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;

  if (attachment->record->layers == NULL)
    return attachment->tree_fd;
  if (attachment->tree_fd >= 0)
    close (attachment->tree_fd);
  attachment->tree_fd = -1;
  attachment->tools_keep = keep_jail (attachment, "reach its files", error);
  if (attachment->tools_keep >= 0)
    attachment->tree_fd = sandstep_local_layered_tree (attachment, NULL, error);
  return attachment->tree_fd;
}

/* A file tool is done with the jail: its supervisor may end when idle. */
static void
tools_done (SandstepAttachment *parent)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;

  if (attachment->tools_keep >= 0)
    close (attachment->tools_keep);
  attachment->tools_keep = -1;
}

/* As root, what the tools make in a layered sandbox is made through its jail's overlay, whose user namespace maps
 * the sandbox's host uid and not root's (EOVERFLOW): made as that uid.  -1, -1: as ourselves. */
static void
maker_of (SandstepAttachment *parent, int *out_uid, int *out_gid)
{
  const SandstepRecord *record = ((LocalAttachment *) parent)->record;
  gboolean maker = record->layers != NULL && geteuid () == 0 && record->uid != 0;

  *out_uid = maker ? (int) record->uid : -1;
  *out_gid = maker ? (int) record->gid : -1;
}

static GBytes *
local_read_file (SandstepAttachment *parent, const char *path, gsize max_bytes, GError **error)
{
  int tree = tools_tree (parent, error);
  GBytes *bytes = tree < 0 ? NULL : sandstep_tree_read_file (tree, path, max_bytes, error);

  tools_done (parent);
  return bytes;
}

static gboolean
local_write_file (SandstepAttachment *parent, const char *path, const void *data, gsize len, GError **error)
{
  int tree = tools_tree (parent, error);
  int uid, gid, old;
  gboolean ok;

  if (tree < 0)
    {
      tools_done (parent);
      return FALSE;
    }
  maker_of (parent, &uid, &gid);
  old = sandstep_tree_maker_begin (uid, gid);
  ok = sandstep_tree_write_file (tree, path, data, len, error);
  sandstep_tree_maker_end (old);
  tools_done (parent);
  return ok;
}

static gboolean
local_put (SandstepAttachment *parent, const char *host_src, const char *dest, GError **error)
{
  int tree = tools_tree (parent, error);
  int uid, gid;
  gboolean ok;

  /* As write_file's, but the host is read as ourselves. */
  maker_of (parent, &uid, &gid);
  ok = tree >= 0 && sandstep_tree_put_as (tree, host_src, dest, uid, gid, error);
  tools_done (parent);
  return ok;
}

static GPtrArray *
local_list_directory (SandstepAttachment *parent, const char *path, GError **error)
{
  int tree = tools_tree (parent, error);
  GPtrArray *entries = tree < 0 ? NULL : sandstep_tree_list (tree, path, error);

  tools_done (parent);
  return entries;
}

/* A layered sandbox's files are its live jail's overlay: the watch keeps that jail (sandstep-supervisor-keep.h),
 * kept before the jail is found, so that the one found stays, and learns of its end from its init's pidfd. */
static gboolean
local_open_directory (SandstepAttachment *parent, const char *path, SandstepWatchedDir *out, GError **error)
{
  LocalAttachment *attachment = (LocalAttachment *) parent;
  int tree;

  if (attachment->record->layers != NULL)
    {
      g_autofree char *what = g_strdup_printf ("watch '%s'", path);

      out->keep = keep_jail (attachment, what, error);
      if (out->keep < 0)
        return FALSE;
      if (attachment->tree_fd >= 0)
        close (attachment->tree_fd);
      attachment->tree_fd = sandstep_local_layered_tree (attachment, &out->jail, error);
      tree = attachment->tree_fd;
    }
  else
    tree = attachment->tree_fd;
  out->dir = tree < 0 ? -1 : sandstep_tree_open_directory (tree, path, error);
  if (out->dir < 0)
    {
      sandstep_watched_dir_clear (out);
      return FALSE;
    }
  /* The root of the files: a fork or checkpoint renames the tree into a layer, a destroy removes it. */
  out->root = fcntl (tree, F_DUPFD_CLOEXEC, 0);
  if (out->root < 0)
    {
      int errsv = errno;
      sandstep_watched_dir_clear (out);
      return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                   "Cannot keep the files of sandbox '%s' to watch '%s'", parent->handle, path);
    }
  return TRUE;
}

static gint64
local_export_file (SandstepAttachment *parent, const char *path, int dest_fd, guint64 max_bytes, GError **error)
{
  int tree = tools_tree (parent, error);
  gint64 size = tree < 0 ? -1 : sandstep_tree_export (tree, path, dest_fd, max_bytes, error);

  tools_done (parent);
  return size;
}

static JsonNode *
local_describe (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  LocalBackend *local = (LocalBackend *) backend;
  g_autoptr(SandstepRecord) record = sandstep_store_load (local->store, handle, error);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autofree char *created = NULL;
  g_autofree char *expires = NULL;
  g_autofree char *held_by = NULL;
  gboolean running = FALSE;

  if (record == NULL || !check_owner (record, who, error))
    return NULL;
  created = format_time (record->created);
  expires = format_time (record->expires);

  /* Who holds it now, without taking the claim. */
  held_by = sandstep_local_current_user (local, handle, &running);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "handle");
  json_builder_add_string_value (builder, record->handle);
  json_builder_set_member_name (builder, "backend");
  json_builder_add_string_value (builder, "local");
  json_builder_set_member_name (builder, "owner");
  json_builder_add_string_value (builder, record->owner);
  json_builder_set_member_name (builder, "provisioned_by");
  json_builder_add_string_value (builder, record->holder);
  json_builder_set_member_name (builder, "held_by");
  if (held_by != NULL)
    json_builder_add_string_value (builder, held_by);
  else
    json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "created");
  json_builder_add_string_value (builder, created);
  json_builder_set_member_name (builder, "expires");
  json_builder_add_string_value (builder, expires);
  json_builder_set_member_name (builder, "remaining_seconds");
  json_builder_add_int_value (builder, MAX (record->expires - now_unix (), 0));
  json_builder_set_member_name (builder, "released");
  json_builder_add_boolean_value (builder, record->released);
  /* The host uid the sandbox's uid 0 is (sandstep-uids.h). */
  json_builder_set_member_name (builder, "uid");
  json_builder_add_int_value (builder, geteuid () == 0 ? record->uid : getuid ());
  /* The limits in force, not the record's 0 for "the default" (this record is our copy, never stored). */
  record->spec->limits = sandstep_limits_resolve (&record->spec->limits);
  json_builder_set_member_name (builder, "spec");
  json_builder_add_value (builder, sandstep_spec_to_json (record->spec, FALSE));
  /* Lineage (sandstep-layers.h): the sandbox forked from, the layers under its own changes, its checkpoints. */
  json_builder_set_member_name (builder, "parent");
  if (record->parent != NULL)
    json_builder_add_string_value (builder, record->parent);
  else
    json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "layers");
  json_builder_add_int_value (builder, record->layers != NULL ? g_strv_length (record->layers) : 0);
  json_builder_set_member_name (builder, "checkpoints");
  json_builder_begin_array (builder);
  {
    g_autoptr(GPtrArray) names = sandstep_record_checkpoint_names (record);
    for (guint i = 0; i < names->len; i++)
      json_builder_add_string_value (builder, names->pdata[i]);
  }
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static gboolean
local_release (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gint64 keep_s,
               gboolean *out_destroyed, GError **error)
{
  LocalBackend *local = (LocalBackend *) backend;
  g_autoptr(SandstepRecord) record = sandstep_store_load (local->store, handle, error);
  g_autofree char *current = NULL;
  int fd;

  g_autoptr(GError) save_error = NULL;

  *out_destroyed = FALSE;
  if (record == NULL || !check_owner (record, who, error))
    return FALSE;
  record->released = TRUE;
  record->expires = now_unix () + keep_s;
  /* With nothing kept, the end is "once idle": a command that runs is not cut by it (a kept end, E2B's setTimeout
   * among them, moves the commands' budgets with it). */
  record->ends_when_idle = keep_s == 0;
  /* Recorded before the claim is tried, so that a holder ending meanwhile sees it and destroys. */
  if (!sandstep_store_save (local->store, record, &save_error) &&
      (keep_s > 0 || !g_error_matches (save_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NO_SPACE)))
    {
      g_propagate_error (error, g_steal_pointer (&save_error));
      return FALSE;
    }
  if (keep_s > 0)
    return TRUE;
  /* Destroy now unless a command runs; then its operator destroys it when it ends. */
  fd = sandstep_store_try_claim (local->store, handle, who->holder, &current, NULL);
  if (fd < 0 && save_error != NULL)
    {
      /* A full disk kept the release from being recorded, and a command holds the sandbox. */
      g_propagate_prefixed_error (error, g_steal_pointer (&save_error),
                                  "Sandbox '%s' is left until its lifetime ends: it could not be marked released "
                                  "while '%s' holds it: ", handle, current != NULL ? current : "a command");
      return FALSE;
    }
  if (fd < 0)
    return TRUE;
  *out_destroyed = sandstep_sandbox_destroy (local->store, handle, fd, error);
  close (fd);
  return *out_destroyed;
}

static gboolean
local_destroy (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  LocalBackend *local = (LocalBackend *) backend;
  g_autoptr(GError) local_error = NULL;
  g_autoptr(SandstepRecord) record = sandstep_store_load (local->store, handle, &local_error);

  if (record == NULL && g_error_matches (local_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND))
    return TRUE;
  /* An unreadable record must not make a sandbox impossible to destroy. */
  if (record != NULL && !check_owner (record, who, error))
    return FALSE;
  return sandstep_sandbox_destroy (local->store, handle, -1, error);
}

static void
local_free (SandstepBackend *backend)
{
  LocalBackend *local = (LocalBackend *) backend;

  sandstep_store_free (local->store);
  g_free (local);
}

static const SandstepBackendClass local_class = {
  .name = "local",
  .provision = local_provision,
  .try_attach = local_try_attach,
  .detach = local_detach,
  .release_due = local_release_due,
  .destroy_claimed = local_destroy_claimed,
  .run_command = local_run_command,
  .read_file = local_read_file,
  .write_file = local_write_file,
  .put = local_put,
  .list_directory = local_list_directory,
  .open_directory = local_open_directory,
  .export_file = local_export_file,
  .remaining_lifetime = local_remaining_lifetime,
  .spec = local_spec,
  .describe = local_describe,
  .release = local_release,
  .destroy = local_destroy,
  .gc = sandstep_local_gc,
  .list = sandstep_local_list,
  .fork = sandstep_local_fork,
  .checkpoint = sandstep_local_checkpoint,
  .rollback = sandstep_local_rollback,
  .checkpoints = sandstep_local_checkpoints,
  .free = local_free,
};

char *
sandstep_local_backend_default_dir (void)
{
  return sandstep_state_dir ();
}

SandstepBackend *
sandstep_local_backend_new (const char *state_dir, GError **error)
{
  g_autofree char *dir = state_dir != NULL ? g_strdup (state_dir) : sandstep_state_dir ();
  SandstepStore *store = sandstep_store_open (dir, error);
  LocalBackend *local;

  if (store == NULL)
    return NULL;
  local = g_new0 (LocalBackend, 1);
  local->parent.klass = &local_class;
  local->store = store;
  return &local->parent;
}

int
sandstep_local_reclaim_main (const char *handle)
{
  g_autofree char *dir = sandstep_state_dir ();
  g_autoptr(SandstepStore) store = sandstep_store_open (dir, NULL);
  g_autoptr(SandstepRecord) record = NULL;

  if (store == NULL || !sandstep_handle_is_valid (handle) ||
      (record = sandstep_store_load (store, handle, NULL)) == NULL)
    return 0;
  /* Only what its supervisor found: released, and its kept time over. */
  if (record->released && now_unix () >= record->expires)
    sandstep_sandbox_destroy (store, handle, -1, NULL);
  return 0;
}

int
sandstep_local_egress_main (const char *handle)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = sandstep_state_dir ();
  g_autoptr(SandstepStore) store = sandstep_store_open (dir, &error);
  g_autoptr(SandstepRecord) record = NULL;
  g_autofree char *log_path = NULL;
  SandstepEgress *egress;
  gboolean ok;

  if (store == NULL || !sandstep_handle_is_valid (handle) ||
      (record = sandstep_store_load (store, handle, &error)) == NULL ||
      (egress = sandstep_egress_new (record->spec->allow_hosts, record->spec->allow_cidrs, &error)) == NULL)
    {
      g_autofree char *why = sandstep_escape (error != NULL ? error->message : "not a sandbox handle", -1, 0,
                                              SANDSTEP_ESCAPE_LINE);

      g_printerr ("sandstep --egress: %s\n", why);
      return SANDSTEP_EXIT_INTERNAL;
    }
  log_path = sandstep_store_sandbox_path (store, handle, "egress.log");
  ok = sandstep_proxy_serve (3, egress, handle, log_path, 4, &error);
  sandstep_egress_free (egress);
  if (!ok)
    {
      g_printerr ("sandstep --egress: %s\n", error->message);
      return SANDSTEP_EXIT_INTERNAL;
    }
  return 0;
}
