/* sandstepd-records.c: the calls that need no claim, on GTask threads.
 *
 * provision, describe, release, destroy, gc and list read and write sandbox
 * records through sandstepd's own local backend; they may wait on a lock or
 * the disk, so each runs off the main loop and answers from it.
 */
#include "sandstepd-private.h"

#include "sandstep-error.h"
#include "sandstep-wire.h"

typedef struct {
  Request *req;
  JsonObject *body;         /* owns what @who and @run point into */
  SandstepIdentity who;
  SandstepSpec *spec;
  gint64 keep_s;
  const char *run;
  const char *owner_prefix;  /* gc: what the token covers (NULL: every owner) */
  const char *owner;        /* list: only this owner's */
  gboolean expired_only;
  gboolean broken;
  /* results */
  JsonObject *answer;
  GError *error;
} RecordJob;

static void
record_job_free (RecordJob *job)
{
  sandstepd_request_unref (job->req);
  if (job->body != NULL)
    json_object_unref (job->body);
  sandstep_spec_free (job->spec);
  if (job->answer != NULL)
    json_object_unref (job->answer);
  g_clear_error (&job->error);
  g_free (job);
}

static void
record_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  RecordJob *job = data;
  SandstepBackend *b = job->req->d->backend;
  const char *handle = job->req->handle;

  switch (job->req->route)
    {
    case ROUTE_PROVISION:
      {
        gboolean existing = FALSE;
        g_autofree char *made = sandstep_backend_provision (b, job->spec, &job->who, &existing, &job->error);
        if (made != NULL)
          job->answer = sandstep_wire_provision_reply (made, existing);
        break;
      }
    case ROUTE_DESCRIBE:
      {
        g_autoptr(JsonNode) node = sandstep_backend_describe (b, handle, &job->who, &job->error);
        if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
          job->answer = json_object_ref (json_node_get_object (node));
        break;
      }
    case ROUTE_RELEASE:
      {
        gboolean destroyed = FALSE;
        if (sandstep_backend_release (b, handle, &job->who, job->keep_s, &destroyed, &job->error))
          job->answer = sandstep_wire_release_reply (destroyed);
        break;
      }
    case ROUTE_DESTROY:
      if (sandstep_backend_destroy (b, handle, &job->who, &job->error))
        job->answer = json_object_new ();
      break;
    case ROUTE_GC:
      {
        g_autoptr(GPtrArray) destroyed = g_ptr_array_new_with_free_func (g_free);
        g_autoptr(GError) error = NULL;

        /* What it reclaimed before a failure is reclaimed: the answer says both. */
        sandstep_backend_gc (b, job->run, job->owner_prefix, job->expired_only, job->broken, destroyed, &error);
        job->answer = sandstep_wire_gc_reply (destroyed, error);
        break;
      }
    case ROUTE_SANDBOXES:
      {
        g_autoptr(GPtrArray) entries = sandstep_backend_list (b, job->run, job->owner, &job->error);

        /* A token for some owners sees only theirs: not a damaged sandbox, which may be anyone's. */
        for (guint i = 0; entries != NULL && i < entries->len;)
          {
            const SandstepListEntry *entry = entries->pdata[i];
            if (job->req->scope->owner_prefix == NULL ||
                (entry->owner != NULL && sandstep_token_entry_covers (job->req->scope, entry->owner)))
              i++;
            else
              g_ptr_array_remove_index (entries, i);
          }
        if (entries != NULL)
          job->answer = sandstep_wire_list_reply (entries);
        break;
      }
    case ROUTE_NONE:
    case ROUTE_HEALTH:
    case ROUTE_CLAIM:
    case ROUTE_RELEASE_CLAIM:
    case ROUTE_RUN:
    case ROUTE_CLAIM_RUN:
    case ROUTE_READ:
    case ROUTE_WRITE:
    case ROUTE_LIST:
    case ROUTE_PUT:
    case ROUTE_EXPORT:
    case ROUTE_FORK:
    case ROUTE_CHECKPOINT:
    case ROUTE_ROLLBACK:
    case ROUTE_CHECKPOINTS:
    case ROUTE_E2B:
      g_assert_not_reached ();
    }
  g_task_return_boolean (task, TRUE);
}

static void
record_done (GObject *source, GAsyncResult *result, gpointer data)
{
  RecordJob *job = g_task_get_task_data (G_TASK (result));

  if (job->error != NULL)
    sandstepd_answer_error (job->req, job->error);
  else
    sandstepd_answer_json (job->req, SOUP_STATUS_OK, job->answer);
}

/* Reads what the route needs from the body; FALSE after answering 400. */
static gboolean
read_body (Request *req, RecordJob *job)
{
  g_autoptr(GError) error = NULL;
  double keep = 0;

  if (req->route == ROUTE_SANDBOXES)
    {
      if (sandstep_wire_read_list_request (job->body, &job->run, &job->owner, &error))
        return job->owner == NULL || sandstepd_check_owner (req, job->owner);
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return FALSE;
    }
  if (req->route == ROUTE_GC)
    {
      /* Without an admin token, gc reclaims only what the token covers. */
      job->owner_prefix = req->scope->owner_prefix;
      if (sandstep_wire_read_gc_request (job->body, &job->run, &job->expired_only, &job->broken, &error))
        return TRUE;
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return FALSE;
    }
  if (!sandstep_wire_read_identity (job->body, &job->who, &error) ||
      (req->route == ROUTE_RELEASE && !sandstep_wire_get_number (job->body, "keep_s", 0, &keep, &error)))
    {
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return FALSE;
    }
  if (!sandstepd_check_owner (req, job->who.owner))
    return FALSE;
  job->keep_s = (gint64) keep;
  if (req->route == ROUTE_PROVISION)
    {
      JsonNode *spec = json_object_get_member (job->body, "spec");

      job->spec = spec != NULL ? sandstep_spec_from_json (spec, &error) : NULL;
      if (job->spec == NULL)
        {
          sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "bad-request",
                                    "send the spec 'sandstep provision' builds", SANDSTEP_USAGE_ERROR,
                                    SANDSTEP_USAGE_ERROR_BAD_VALUE, "The spec cannot be used: %s",
                                    error != NULL ? error->message : "it is missing");
          return FALSE;
        }
      if (job->spec->mounts->len > 0)
        {
          sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "usage", "put the files into the sandbox instead",
                                    SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                    "--mount is refused by a sandbox server: the host path would be the server's, "
                                    "not yours; put the files into the sandbox instead");
          return FALSE;
        }
    }
  return TRUE;
}

void
sandstepd_handle_record (Request *req)
{
  g_autoptr(JsonObject) body = sandstepd_request_body (req);
  g_autoptr(GTask) task = NULL;
  RecordJob *job;

  if (body == NULL)
    return;
  job = g_new0 (RecordJob, 1);
  job->req = sandstepd_request_ref (req);
  job->body = json_object_ref (body);
  if (!read_body (req, job))
    {
      record_job_free (job);
      return;
    }
  task = g_task_new (NULL, NULL, record_done, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) record_job_free);
  g_task_run_in_thread (task, record_thread);
}
