/* sandstepd-leases.c: a claim is a lease on a connection.
 *
 * POST .../claim takes an unclaimed worker, which attaches as a `sandstep`
 * helper would, and answers with one line (the claim id, the remaining
 * lifetime and the spec) that stays open; every later call names the claim.
 * When that connection ends the lease ends, and the worker is killed with
 * whatever it still runs, exactly as a helper dies with its step.
 */
#include "sandstepd-private.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

void
sandstepd_lease_unref (Lease *lease)
{
  if (lease == NULL || --lease->refs > 0)
    return;
  g_assert (lease->worker == NULL && lease->claim == NULL);
  g_ptr_array_unref (lease->end_waiters);
  g_free (lease->id);
  g_free (lease->handle);
  g_free (lease->holder);
  g_free (lease->owner);
  g_free (lease);
}

static void
lease_answer_waiters (Lease *lease)
{
  void (*on_released) (gpointer data) = g_steal_pointer (&lease->on_released);

  for (guint i = 0; i < lease->end_waiters->len; i++)
    {
      g_autoptr(JsonObject) object = json_object_new ();
      sandstepd_answer_json (lease->end_waiters->pdata[i], SOUP_STATUS_OK, object);
    }
  g_ptr_array_set_size (lease->end_waiters, 0);
  if (on_released != NULL)
    on_released (lease->on_released_data);
}

/* The worker is done with the lease: answer who waited, and the worker serves the next claim. */
static void
lease_release_worker (Lease *lease, gboolean clean)
{
  Worker *w = g_steal_pointer (&lease->worker);

  lease->detached = TRUE;
  if (w != NULL)
    {
      w->died = NULL;
      w->holder = NULL;
      if (!clean || ++w->claims >= SANDSTEPD_MAX_CLAIMS_PER_WORKER)
        w->retiring = TRUE;
      sandstepd_worker_return (lease->d, w);
    }
  lease_answer_waiters (lease);
}

static void
on_detached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Lease *lease = call->data;

  if (lease->worker != NULL)
    lease_release_worker (lease, error == NULL);
}

/* Ends the lease: its claim stream closes and its worker detaches.  @abrupt
 * (the holder's connection is gone): the worker is killed instead, exactly as
 * a `sandstep` helper dies with its step, so the claim and whatever it runs
 * end together, at once; a spare worker takes its place. */
void
sandstepd_lease_end (Lease *lease, const char *why, gboolean abrupt)
{
  Daemon *d = lease->d;
  Request *claim;

  if (lease->ended)
    return;
  claim = g_steal_pointer (&lease->claim);
  lease->refs++;
  lease->ended = TRUE;
  if (d->debug)
    sandstepd_say ("claim on %s by '%s' ends: %s", lease->handle, lease->holder, why);
  g_hash_table_remove (d->leases, lease->id);
  if (claim != NULL)
    {
      claim->on_gone = NULL;
      claim->owner = NULL;
      if (!claim->finished && !claim->completed)
        {
          g_autoptr(JsonObject) line = sandstep_wire_ended_line (why);
          sandstepd_stream_object (claim, line);
          sandstepd_stream_end (claim);
        }
      sandstepd_request_unref (claim);
    }
  if (lease->worker != NULL)
    {
      Worker *w = lease->worker;
      g_autoptr(JsonObject) detach = json_object_new ();

      g_autoptr(GError) ended = g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                                     "The claim ended before the operation could run: its "
                                                     "connection closed, or the sandbox was destroyed");
      GQueue queued = w->queue;
      Call *call;

      /* What waits is refused, what runs is killed (its caller gets its end), then the claim goes. */
      g_queue_init (&w->queue);
      while ((call = g_queue_pop_head (&queued)) != NULL)
        {
          if (!call->forgotten)
            call->done (call, NULL, -1, ended);
          sandstepd_call_free (call);
        }
      if (abrupt && !w->dead)
        {
          w->retiring = TRUE;
          g_subprocess_send_signal (w->proc, SIGKILL);
        }
      else
        sandstepd_worker_cancel (w, w->inflight);
      lease->refs++;
      sandstepd_worker_call (w, "detach", json_object_ref (detach), NULL, 0, on_detached, lease,
                             (GDestroyNotify) sandstepd_lease_unref);
    }
  else
    lease_answer_waiters (lease);
  sandstepd_lease_unref (lease);
}

/* The lease's worker died (sandstepd-workers.c tells its holder). */
static void
lease_worker_died (gpointer data)
{
  Lease *lease = data;

  lease->refs++;
  if (!lease->ended)
    sandstepd_lease_end (lease, "the sandbox's claim ended on the server (the sandbox was destroyed, or its worker died)", TRUE);
  if (lease->worker != NULL)
    lease_release_worker (lease, FALSE);
  sandstepd_lease_unref (lease);
}

static void
on_claim_gone (Request *req)
{
  Lease *lease = req->owner;

  if (lease != NULL)
    sandstepd_lease_end (lease, "the claim's connection closed", TRUE);
}

static void
on_attached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Lease *lease = call->data;
  Request *req = lease->claim;
  g_autoptr(JsonObject) first = NULL;

  if (error != NULL)
    {
      sandstepd_lease_abandon (lease);
      if (req != NULL)
        {
          sandstepd_answer_error (req, error);
          lease->claim = NULL;
          req->owner = NULL;
          sandstepd_request_unref (req);
        }
      return;
    }
  sandstepd_lease_activate (lease);
  if (req == NULL || req->finished)
    {
      /* The client left while we attached. */
      sandstepd_lease_end (lease, "the claim's connection closed while attaching", TRUE);
      return;
    }
  sandstepd_stream_begin (req);
  req->on_gone = on_claim_gone;
  first = sandstep_wire_claim_line (reply, lease->id);
  sandstepd_stream_object (req, first);
}

static char *
new_claim_id (void)
{
  guint8 bytes[16];
  GString *out = g_string_new ("c-");

  /* A claim id lets its bearer use the sandbox: never guessable. */
  if (getrandom (bytes, sizeof bytes, 0) != sizeof bytes)
    g_error ("getrandom() failed: %s", g_strerror (errno));
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (out, "%02x", bytes[i]);
  return g_string_free (out, FALSE);
}

/* The lease named by @claim on @handle, or NULL after answering the request. */
Lease *
sandstepd_find_lease (Request *req, const char *claim)
{
  Lease *lease = claim != NULL ? g_hash_table_lookup (req->d->leases, claim) : NULL;

  /* A claim made under another token's owners is no claim of this one's. */
  if (lease != NULL && lease->active && !lease->ended && lease->worker != NULL &&
      g_strcmp0 (lease->handle, req->handle) == 0 && sandstep_token_entry_covers (req->scope, lease->owner))
    return lease;
  sandstepd_answer_refusal (req, SOUP_STATUS_CONFLICT, "no-claim",
                            "attach again (the claim's connection may have dropped)", SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                            "Sandbox '%s' is not claimed with '%s' on this server: the claim ended (its connection "
                            "closed, the server restarted, or the sandbox was destroyed); attach again",
                            req->handle, claim != NULL ? claim : "(no claim)");
  return NULL;
}

Lease *
sandstepd_claimed_body (Request *req, JsonObject **out_body)
{
  JsonObject *body = sandstepd_request_body (req);
  Lease *lease;

  *out_body = body;
  if (body == NULL)
    return NULL;
  lease = sandstepd_find_lease (req, json_object_get_string_member_with_default (body, "claim", NULL));
  return lease;
}

Lease *
sandstepd_lease_new (Request *req, const SandstepIdentity *who, Worker *w)
{
  Lease *lease = g_new0 (Lease, 1);

  lease->refs = 1;
  lease->d = req->d;
  lease->id = new_claim_id ();
  lease->handle = g_strdup (req->handle);
  lease->holder = g_strdup (who->holder);
  lease->owner = g_strdup (who->owner);
  lease->worker = w;
  lease->end_waiters = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstepd_request_unref);
  w->died = lease_worker_died;
  w->holder = lease;
  return lease;
}

void
sandstepd_lease_activate (Lease *lease)
{
  lease->active = TRUE;
  g_hash_table_insert (lease->d->leases, lease->id, lease);
  lease->refs++;
  if (lease->d->debug)
    sandstepd_say ("claim %s on %s by '%s'", lease->id, lease->handle, lease->holder);
}

void
sandstepd_lease_abandon (Lease *lease)
{
  Worker *w = g_steal_pointer (&lease->worker);

  lease->ended = TRUE;
  if (w != NULL)
    {
      w->died = NULL;
      w->holder = NULL;
      sandstepd_worker_return (lease->d, w);
    }
}

typedef struct {
  char *owner;
  char *holder;
} ClaimWho;

static void
claim_who_free (ClaimWho *who)
{
  g_free (who->owner);
  g_free (who->holder);
  g_free (who);
}

/* A worker is free for the claim: it attaches. */
static void
on_claim_worker (Request *req, Worker *w, gpointer data)
{
  ClaimWho *claim_who = data;
  SandstepIdentity who = { claim_who->owner, claim_who->holder, NULL };
  Lease *lease = sandstepd_lease_new (req, &who, w);

  lease->claim = sandstepd_request_ref (req);
  req->owner = lease;
  sandstepd_worker_call (w, "attach", sandstep_wire_attach_request (req->handle, &who), NULL, 0, on_attached, lease,
                         (GDestroyNotify) sandstepd_lease_unref);
  claim_who_free (claim_who);
}

void
sandstepd_handle_claim (Request *req)
{
  g_autoptr(JsonObject) body = sandstepd_request_body (req);
  g_autoptr(GError) error = NULL;
  SandstepIdentity who;
  ClaimWho *claim_who;

  if (body == NULL)
    return;
  if (!sandstep_wire_read_identity (body, &who, &error))
    {
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return;
    }
  if (!sandstepd_check_owner (req, who.owner))
    return;
  claim_who = g_new0 (ClaimWho, 1);
  claim_who->owner = g_strdup (who.owner);
  claim_who->holder = g_strdup (who.holder);
  sandstepd_worker_request (req, who.owner, on_claim_worker, claim_who, (GDestroyNotify) claim_who_free);
}

void
sandstepd_handle_release_claim (Request *req)
{
  g_autoptr(JsonObject) body = sandstepd_request_body (req);
  g_autoptr(GError) error = NULL;
  const char *claim;
  Lease *lease;

  if (body == NULL)
    return;
  if (!sandstep_wire_get_string (body, "claim", &claim, &error))
    {
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return;
    }
  lease = g_hash_table_lookup (req->d->leases, claim);
  if (lease == NULL || g_strcmp0 (lease->handle, req->handle) != 0 ||
      !sandstep_token_entry_covers (req->scope, lease->owner))
    {
      g_autoptr(JsonObject) object = json_object_new ();
      sandstepd_answer_json (req, SOUP_STATUS_OK, object);
      return;
    }
  g_ptr_array_add (lease->end_waiters, sandstepd_request_ref (req));
  sandstepd_lease_end (lease, "released by its holder", FALSE);
}
