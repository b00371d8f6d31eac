/* sandstepd-layers.c: fork, checkpoint, rollback and the checkpoints' names, under a claim, done by the claim's
 * worker as the helper does them (hooks/local/sandstep-local-fork.c). */
#include "sandstepd-private.h"

#include "sandstep-error.h"
#include "sandstep-wire.h"

static void
on_layers_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Request *req = call->data;

  if (error != NULL)
    {
      sandstepd_answer_error (req, error);
      return;
    }
  /* The worker's answer is the client's: {"handles"}, {"names"} or {}. */
  json_object_remove_member (reply, "id");
  sandstepd_answer_json (req, SOUP_STATUS_OK, reply);
}

void
sandstepd_handle_layers (Request *req)
{
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(GError) error = NULL;
  Lease *lease = sandstepd_claimed_body (req, &body);
  const char *op = NULL;
  JsonObject *message = NULL;

  if (lease == NULL)
    return;
  if (req->route == ROUTE_FORK)
    {
      const char *holder;
      guint count;
      if (sandstep_wire_read_fork_request (body, &holder, &count, &error))
        message = sandstep_wire_fork_request (NULL, holder, count);
      op = "fork";
    }
  else if (req->route == ROUTE_CHECKPOINT || req->route == ROUTE_ROLLBACK)
    {
      const char *name;
      if (sandstep_wire_get_string (body, "name", &name, &error))
        message = sandstep_wire_name_request (NULL, name);
      op = req->route == ROUTE_CHECKPOINT ? "checkpoint" : "rollback";
    }
  else
    {
      message = json_object_new ();
      op = "checkpoints";
    }
  if (message == NULL)
    {
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return;
    }
  sandstepd_worker_call (lease->worker, op, message, NULL, 0, on_layers_done, sandstepd_request_ref (req),
                         (GDestroyNotify) sandstepd_request_unref);
}
