/* sandstepd-step.c: claim-run, a step's command in one exchange.
 *
 * A `sandstep run` through a sandstepd is one request: its first line names
 * who asks and the command, the rest of its body is the command's stdin
 * (staged on disk as it comes, sandstepd-routes.c).  A worker attaches for
 * it as for a claim; a refusal (busy, another owner, gone) is the answer's
 * plain error, before anything ran, so the client may ask again.  Once
 * attached, the answer streams: the claim's line (the spec, which the
 * client's report needs), the command's output, and its result, which goes
 * only once the claim is released, so the step's next command never finds
 * the sandbox still held.  The claim is held by this request: when its
 * connection ends, the worker is killed with the command, as a helper dies
 * with its step.
 */
#include "sandstepd-private.h"

#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

typedef struct {
  Request *req;             /* ref */
  Lease *lease;             /* ref; NULL while it waits for a worker */
  char *owner;
  char *holder;
  char *command;
  double timeout_s;
  int stdin_fd;
} Step;

static void
step_free (Step *step)
{
  sandstepd_request_unref (step->req);
  sandstepd_lease_unref (step->lease);
  g_free (step->owner);
  g_free (step->holder);
  g_free (step->command);
  if (step->stdin_fd >= 0)
    close (step->stdin_fd);
  g_free (step);
}

static void
on_step_attached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Step *step = call->data;
  Lease *lease = step->lease;
  Request *req = step->req;

  if (error != NULL)
    {
      /* Nothing ran: the client may wait and ask again. */
      sandstepd_lease_abandon (lease);
      sandstepd_answer_error (req, error);
      return;
    }
  sandstepd_lease_activate (lease);
  if (req->finished)
    {
      sandstepd_lease_end (lease, "the step's connection closed while attaching", TRUE);
      return;
    }
  sandstepd_stream_step (req, lease, sandstep_wire_claim_line (reply, lease->id),
                         sandstep_wire_run_request (NULL, step->command, step->timeout_s),
                         g_steal_fd (&step->stdin_fd));
}

/* A worker is free for the step: it attaches. */
static void
on_step_worker (Request *req, Worker *w, gpointer data)
{
  Step *step = data;
  SandstepIdentity who = { step->owner, step->holder, NULL };

  step->lease = sandstepd_lease_new (req, &who, w);
  /* The step holds the lease until the attach is answered; the table, and the stream, once it is active. */
  sandstepd_worker_call (w, "attach", sandstep_wire_attach_request (req->handle, &who), NULL, 0, on_step_attached,
                         step, (GDestroyNotify) step_free);
}

void
sandstepd_handle_claim_run (Request *req)
{
  g_autoptr(JsonObject) body = sandstepd_request_body (req);
  g_autoptr(GError) error = NULL;
  SandstepIdentity who = { NULL, NULL, NULL };
  const char *command = NULL;
  double timeout_s = 0;
  Step *step;

  if (body == NULL)
    return;
  if (!sandstep_wire_read_identity (body, &who, &error) ||
      !sandstep_wire_read_run_request (body, &command, &timeout_s, &error))
    {
      sandstepd_answer_bad_request (req, "send a line {owner, holder, command, timeout_s}, then the stdin", error);
      return;
    }
  if (!sandstepd_check_owner (req, who.owner))
    return;
  step = g_new0 (Step, 1);
  step->req = sandstepd_request_ref (req);
  step->owner = g_strdup (who.owner);
  step->holder = g_strdup (who.holder);
  step->command = g_strdup (command);
  step->timeout_s = timeout_s;
  step->stdin_fd = -1;
  if (req->upload_len > 0)
    {
      step->stdin_fd = g_steal_fd (&req->upload_fd);
      lseek (step->stdin_fd, 0, SEEK_SET);
    }
  sandstepd_worker_request (req, who.owner, on_step_worker, step, (GDestroyNotify) step_free);
}
