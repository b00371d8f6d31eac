/* sandstepd-workers.c: the worker processes that hold claims, and the calls they answer.
 *
 * A few workers are kept started and unclaimed, so a claim never waits for
 * an exec; a claim takes one (sandstepd-leases.c), and every call under the
 * claim is one message to it (sandstepd-channel.h) whose answer comes back
 * later, from the main loop.  One call runs at a time per worker; the rest
 * queue, in order.
 *
 * A claim that finds no ready worker waits for one rather than starting one
 * of its own: starting a worker costs about 5 ms of CPU, and 200 clients at
 * once each starting one kept the CPUs busy with starts for a second while
 * the workers already there sat idle (docs/performance.md).  A worker that
 * comes back goes to the next waiting claim, owner after owner in turn.
 * More start only while claims wait and no worker came back for
 * RETURN_QUIET_MS (the workers there hold long commands), MAX_STARTING at a
 * time; workers stay for IDLE_RETIRE_S after their last claim, so a pool
 * grown for long commands serves the next ones.  Every worker still holds
 * one claim at a time.
 */
#include "sandstepd-private.h"

#include <errno.h>
#include <glib-unix.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

#define SPARE_WORKERS 2
/* Workers started at once for waiting claims: a start is CPU that the running commands need too. */
#define MAX_STARTING 2
/* An unclaimed worker beyond the spares ends after this long without a claim. */
#define IDLE_RETIRE_S 60
/* Claims wait for workers that come back rather than start more, unless none came back for this long. */
#define RETURN_QUIET_MS 20
#define WORKER_SEND_TIMEOUT_MS 5000

/* A request that waits for a worker. */
typedef struct {
  Request *req;             /* ref */
  char *owner;
  WorkerGranted granted;
  gpointer data;
  GDestroyNotify destroy;
  guint timeout;
} Waiter;

/* One owner's waiting requests, in order. */
typedef struct {
  char *owner;
  GQueue waiters;
} Turn;

static void
turn_free (Turn *turn)
{
  g_free (turn->owner);
  g_free (turn);
}

static void worker_died (Worker *w);
static void worker_pump (Worker *w);
static void workers_dispatch (Daemon *d);

void
sandstepd_call_free (Call *call)
{
  if (call == NULL)
    return;
  if (call->message != NULL)
    json_object_unref (call->message);
  for (guint i = 0; i < call->n_fds; i++)
    if (call->fds[i] >= 0)
      close (call->fds[i]);
  for (guint i = 0; i < G_N_ELEMENTS (call->more_fds); i++)
    if (call->more_fds[i] >= 0)
      close (call->more_fds[i]);
  if (call->destroy != NULL)
    call->destroy (call->data);
  g_free (call);
}

Worker *
sandstepd_worker_ref (Worker *w)
{
  w->refs++;
  return w;
}

void
sandstepd_worker_unref (Worker *w)
{
  if (w == NULL || --w->refs > 0)
    return;
  g_assert (w->inflight == NULL && g_queue_is_empty (&w->queue));
  if (w->sock >= 0)
    close (w->sock);
  g_clear_object (&w->proc);
  g_free (w);
}

static gboolean
fail_dead_worker (gpointer data)
{
  Worker *w = data;

  worker_died (w);
  sandstepd_worker_unref (w);
  return G_SOURCE_REMOVE;
}

static gboolean
pump_later (gpointer data)
{
  Worker *w = data;

  worker_pump (w);
  sandstepd_worker_unref (w);
  return G_SOURCE_REMOVE;
}

static void
worker_pump (Worker *w)
{
  while (w->ready && !w->dead && w->inflight == NULL && !g_queue_is_empty (&w->queue))
    {
      Call *call = g_queue_pop_head (&w->queue);
      g_autoptr(GError) error = NULL;

      if (call->forgotten)
        {
          sandstepd_call_free (call);
          continue;
        }
      call->id = ++w->next_id;
      json_object_set_int_member (call->message, "id", call->id);
      if (!sandstepd_channel_send_object (w->sock, call->message, call->fds, call->n_fds, WORKER_SEND_TIMEOUT_MS,
                                       &error))
        {
          sandstepd_say ("cannot talk to a worker (%s); ending it", error->message);
          g_queue_push_head (&w->queue, call);
          g_subprocess_force_exit (w->proc);
          g_idle_add_full (G_PRIORITY_DEFAULT, fail_dead_worker, sandstepd_worker_ref (w), NULL);
          return;
        }
      /* Sent: the worker has its own copies now. */
      for (guint i = 0; i < call->n_fds; i++)
        {
          close (call->fds[i]);
          call->fds[i] = -1;
        }
      w->inflight = call;
    }
}

/* Queues @message for @w, taking @fds. */
Call *
sandstepd_worker_call (Worker *w, const char *op, JsonObject *message, const int *fds, guint n_fds, CallDone done,
                       gpointer data, GDestroyNotify destroy)
{
  Call *call = g_new0 (Call, 1);

  call->message = message;
  json_object_set_string_member (message, "op", op);
  memcpy (call->fds, fds, sizeof (int) * n_fds);
  call->n_fds = n_fds;
  for (guint i = 0; i < G_N_ELEMENTS (call->more_fds); i++)
    call->more_fds[i] = -1;
  call->done = done;
  call->data = data;
  call->destroy = destroy;
  g_queue_push_tail (&w->queue, call);
  /* Answers always come later, from the main loop, never from inside this call. */
  if (w->dead)
    g_idle_add_full (G_PRIORITY_DEFAULT, fail_dead_worker, sandstepd_worker_ref (w), NULL);
  else
    g_idle_add_full (G_PRIORITY_HIGH, pump_later, sandstepd_worker_ref (w), NULL);
  return call;
}

/* Tells the worker to kill what @call runs, if it runs; its answer still comes. */
void
sandstepd_worker_cancel (Worker *w, Call *call)
{
  g_autoptr(JsonObject) cancel = NULL;

  if (call == NULL || w->inflight != call || w->dead)
    return;
  cancel = json_object_new ();
  json_object_set_string_member (cancel, "op", "cancel");
  json_object_set_int_member (cancel, "id", call->id);
  sandstepd_channel_send_object (w->sock, cancel, NULL, 0, WORKER_SEND_TIMEOUT_MS, NULL);
}

/* The requester of @call is gone: its answer is dropped, and what it runs is killed. */
void
sandstepd_worker_forget (Worker *w, Call *call)
{
  if (call == NULL)
    return;
  call->forgotten = TRUE;
  sandstepd_worker_cancel (w, call);
}

static void
worker_died (Worker *w)
{
  Daemon *d = w->d;
  g_autoptr(GError) error = NULL;

  if (w->dead)
    {
      /* Calls queued since are answered now. */
      if (w->inflight != NULL || !g_queue_is_empty (&w->queue))
        {
          error = g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                       "The claim's worker process has ended");
          sandstepd_worker_fail_all (w, error);
        }
      return;
    }
  w->dead = TRUE;
  if (!w->ready)
    d->n_starting--;
  sandstepd_worker_ref (w);
  if (w->watch != 0)
    g_source_remove (w->watch);
  w->watch = 0;
  g_queue_remove (&d->idle, w) ? sandstepd_worker_unref (w) : (void) 0;
  d->n_workers--;
  error = g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                               "The claim's worker process ended while the operation ran");
  sandstepd_worker_fail_all (w, error);
  if (w->died != NULL)
    w->died (w->holder);
  /* Claims that waited for it (or for a place under --max-claims) get another. */
  workers_dispatch (d);
  sandstepd_worker_unref (w);
}

void
sandstepd_worker_fail_all (Worker *w, const GError *error)
{
  Call *call;

  if (w->inflight != NULL)
    {
      call = g_steal_pointer (&w->inflight);
      if (!call->forgotten)
        call->done (call, NULL, -1, error);
      sandstepd_call_free (call);
    }
  while ((call = g_queue_pop_head (&w->queue)) != NULL)
    {
      if (!call->forgotten)
        call->done (call, NULL, -1, error);
      sandstepd_call_free (call);
    }
}

/* Closes the fds of an answer nobody takes. */
static void
close_fds (int *fds, guint n_fds)
{
  for (guint i = 0; i < n_fds; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

static void
worker_message (Worker *w, JsonObject *message, int *fds, guint n_fds)
{
  Call *call;
  int reply_fd = n_fds > 0 ? fds[0] : -1;

  if (!w->ready)
    {
      close_fds (fds, n_fds);
      if (!json_object_get_boolean_member_with_default (message, "ready", FALSE))
        {
          g_autoptr(GError) error = sandstep_wire_error_from_json (json_object_get_member (message, "error"), 500);
          sandstepd_say ("a worker could not start: %s", error->message);
          worker_died (w);
          return;
        }
      w->ready = TRUE;
      w->d->n_starting--;
      w->idle_since = g_get_monotonic_time ();
      worker_pump (w);
      workers_dispatch (w->d);
      return;
    }
  call = w->inflight;
  if (call == NULL || json_object_get_int_member_with_default (message, "id", -1) != call->id)
    {
      close_fds (fds, n_fds);
      sandstepd_say ("a worker answered a question it was not asked; ending it");
      g_subprocess_force_exit (w->proc);
      worker_died (w);
      return;
    }
  w->inflight = NULL;
  for (guint i = 1; i < n_fds && i - 1 < G_N_ELEMENTS (call->more_fds); i++)
    call->more_fds[i - 1] = fds[i];
  sandstepd_worker_ref (w);
  if (!call->forgotten)
    {
      g_autoptr(GError) error = sandstep_wire_read_error_line (message);

      call->done (call, message, reply_fd, error);
    }
  if (reply_fd >= 0)
    close (reply_fd);
  sandstepd_call_free (call);
  worker_pump (w);
  sandstepd_worker_unref (w);
}

static gboolean
on_worker_readable (int fd, GIOCondition condition, gpointer user_data)
{
  Worker *w = user_data;

  sandstepd_worker_ref (w);
  for (int i = 0; i < 64 && !w->dead; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonObject) message = NULL;
      int fds[SANDSTEPD_CHANNEL_MAX_FDS];
      guint n_fds = 0;

      if (!sandstepd_channel_recv (w->sock, &message, fds, &n_fds, &error))
        {
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            break;
          if (error != NULL)
            sandstepd_say ("a worker sent something unreadable (%s); ending it", error->message);
          w->watch = 0;
          worker_died (w);
          sandstepd_worker_unref (w);
          return G_SOURCE_REMOVE;
        }
      worker_message (w, message, fds, n_fds);
    }
  sandstepd_worker_unref (w);
  return G_SOURCE_CONTINUE;
}

static void
on_worker_exited (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Worker *w = user_data;

  g_subprocess_wait_finish (G_SUBPROCESS (source), result, NULL);
  /* Its socket said so already, or is about to; this is the reaping. */
  worker_died (w);
  sandstepd_worker_unref (w);
}

static Worker *
worker_spawn (Daemon *d, GError **error)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autofree char *state_arg = g_strconcat ("--state-dir=", d->state_dir, NULL);
  g_autofree char *parent_arg = g_strdup_printf ("--parent=%d", (int) getpid ());
  const char *argv[] = { d->self_exe, "--worker", state_arg, parent_arg, NULL };
  int pair[2];
  Worker *w;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Cannot make a socket for a worker"),
           NULL;
  g_subprocess_launcher_take_fd (launcher, pair[1], 3);
  w = g_new0 (Worker, 1);
  w->refs = 1;
  w->d = d;
  w->sock = pair[0];
  g_queue_init (&w->queue);
  w->proc = g_subprocess_launcher_spawnv (launcher, argv, error);
  if (w->proc == NULL)
    {
      sandstepd_worker_unref (w);
      return NULL;
    }
  g_unix_set_fd_nonblocking (w->sock, TRUE, NULL);
  w->watch = g_unix_fd_add (w->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, on_worker_readable, w);
  g_subprocess_wait_async (w->proc, NULL, on_worker_exited, sandstepd_worker_ref (w));
  d->n_workers++;
  d->n_starting++;
  return w;
}

void
sandstepd_workers_init (Daemon *d)
{
  g_queue_init (&d->idle);
  g_queue_init (&d->waiting_turns);
  d->waiting = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) turn_free);
}

/* Keeps SPARE_WORKERS started and unclaimed, so a claim never waits for an exec. */
void
sandstepd_workers_top_up (Daemon *d)
{
  /* While claims wait, workers_dispatch() starts what they need, MAX_STARTING at a time. */
  while (g_queue_get_length (&d->idle) < SPARE_WORKERS && d->n_workers < d->max_workers && d->n_waiting == 0)
    {
      g_autoptr(GError) error = NULL;
      Worker *w = worker_spawn (d, &error);
      if (w == NULL)
        {
          sandstepd_say ("cannot start a worker: %s", error->message);
          return;
        }
      g_queue_push_tail (&d->idle, w);
    }
}

static gboolean
top_up_later (gpointer data)
{
  Daemon *d = data;

  d->top_up = 0;
  sandstepd_workers_top_up (d);
  return G_SOURCE_REMOVE;
}

/* An unclaimed worker (ref), or NULL when there are max_workers already. */
Worker *
sandstepd_worker_take (Daemon *d, GError **error)
{
  Worker *w = NULL;

  for (GList *l = d->idle.head; l != NULL; l = l->next)
    if (((Worker *) l->data)->ready)
      {
        w = l->data;
        g_queue_delete_link (&d->idle, l);
        break;
      }
  if (w == NULL)
    w = g_queue_pop_head (&d->idle);
  if (w == NULL && d->n_workers < d->max_workers)
    w = worker_spawn (d, error);
  else if (w == NULL)
    sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                    "The sandbox server holds %u claims, its limit (--max-claims); try again later",
                    d->max_workers);
  /* The spare is replaced when the loop is idle: never on a request's way. */
  if (d->top_up == 0)
    d->top_up = g_idle_add_full (G_PRIORITY_LOW, top_up_later, d, NULL);
  return w;
}

static void
waiter_free (Waiter *waiter)
{
  if (waiter->timeout != 0)
    g_source_remove (waiter->timeout);
  if (waiter->destroy != NULL && waiter->data != NULL)
    waiter->destroy (waiter->data);
  sandstepd_request_unref (waiter->req);
  g_free (waiter->owner);
  g_free (waiter);
}

/* The next waiting request, the owners taking turns: the owner served goes to the back of the line. */
static Waiter *
waiter_next (Daemon *d)
{
  Turn *turn = g_queue_pop_head (&d->waiting_turns);
  Waiter *waiter;

  if (turn == NULL)
    return NULL;
  waiter = g_queue_pop_head (&turn->waiters);
  d->n_waiting--;
  if (g_queue_is_empty (&turn->waiters))
    g_hash_table_remove (d->waiting, turn->owner);
  else
    g_queue_push_tail (&d->waiting_turns, turn);
  return waiter;
}

static gboolean
on_wait_timeout (gpointer data)
{
  Waiter *waiter = data;
  Daemon *d = waiter->req->d;
  Turn *turn = g_hash_table_lookup (d->waiting, waiter->owner);

  waiter->timeout = 0;
  g_queue_remove (&turn->waiters, waiter);
  d->n_waiting--;
  if (g_queue_is_empty (&turn->waiters))
    {
      g_queue_remove (&d->waiting_turns, turn);
      g_hash_table_remove (d->waiting, turn->owner);
    }
  sandstepd_answer_refusal (waiter->req, SOUP_STATUS_SERVICE_UNAVAILABLE, "too-many-claims", "try again later",
                            SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                            "The sandbox server had no free worker for %d s (%u of at most %u claims held, "
                            "--max-claims); try again later", SANDSTEPD_WAIT_FOR_WORKER_S,
                            g_hash_table_size (d->leases), d->max_workers);
  waiter_free (waiter);
  return G_SOURCE_REMOVE;
}

static Worker *
idle_ready_pop (Daemon *d)
{
  for (GList *l = d->idle.head; l != NULL; l = l->next)
    if (((Worker *) l->data)->ready)
      {
        Worker *w = l->data;
        g_queue_delete_link (&d->idle, l);
        return w;
      }
  return NULL;
}

static gboolean
dispatch_later (gpointer data)
{
  Daemon *d = data;

  d->spawn_timer = 0;
  workers_dispatch (d);
  return G_SOURCE_REMOVE;
}

/* Hands ready workers to waiting requests, in turn; starts more while requests wait. */
static void
workers_dispatch (Daemon *d)
{
  while (d->n_waiting > 0)
    {
      Worker *w = idle_ready_pop (d);
      Waiter *waiter;

      if (w == NULL)
        break;
      waiter = waiter_next (d);
      if (waiter->req->finished)
        {
          /* Its client left while it waited. */
          g_queue_push_head (&d->idle, w);
          waiter_free (waiter);
          continue;
        }
      waiter->granted (waiter->req, w, g_steal_pointer (&waiter->data));
      waiter_free (waiter);
    }
  if (d->n_waiting > 0 && g_get_monotonic_time () - d->last_return < RETURN_QUIET_MS * 1000)
    {
      /* Workers come back: the waiting claims will have them.  Look again once they stop coming. */
      if (d->spawn_timer == 0)
        d->spawn_timer = g_timeout_add (RETURN_QUIET_MS, dispatch_later, d);
      return;
    }
  while (d->n_waiting > d->n_starting && d->n_starting < MAX_STARTING && d->n_workers < d->max_workers)
    {
      g_autoptr(GError) error = NULL;
      Worker *w = worker_spawn (d, &error);

      if (w == NULL)
        {
          sandstepd_say ("cannot start a worker: %s", error->message);
          break;
        }
      g_queue_push_tail (&d->idle, w);
    }
}

void
sandstepd_worker_request (Request *req, const char *owner, WorkerGranted granted, gpointer data,
                          GDestroyNotify destroy)
{
  Daemon *d = req->d;
  Waiter *waiter;
  Turn *turn;

  if (d->n_waiting >= SANDSTEPD_MAX_WAITING)
    {
      sandstepd_answer_refusal (req, SOUP_STATUS_SERVICE_UNAVAILABLE, "too-many-claims", "try again later",
                                SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                "The sandbox server has %u requests waiting for a worker, its limit; try again later",
                                d->n_waiting);
      if (destroy != NULL)
        destroy (data);
      return;
    }
  waiter = g_new0 (Waiter, 1);
  waiter->req = sandstepd_request_ref (req);
  waiter->owner = g_strdup (owner);
  waiter->granted = granted;
  waiter->data = data;
  waiter->destroy = destroy;
  waiter->timeout = g_timeout_add_seconds (SANDSTEPD_WAIT_FOR_WORKER_S, on_wait_timeout, waiter);
  turn = g_hash_table_lookup (d->waiting, owner);
  if (turn == NULL)
    {
      turn = g_new0 (Turn, 1);
      turn->owner = g_strdup (owner);
      g_queue_init (&turn->waiters);
      g_hash_table_insert (d->waiting, turn->owner, turn);
      g_queue_push_tail (&d->waiting_turns, turn);
    }
  g_queue_push_tail (&turn->waiters, waiter);
  d->n_waiting++;
  workers_dispatch (d);
  if (d->top_up == 0)
    d->top_up = g_idle_add_full (G_PRIORITY_LOW, top_up_later, d, NULL);
}

/* Ends unclaimed workers beyond the spares that went IDLE_RETIRE_S without a claim (the oldest are last). */
static gboolean
retire_idle (gpointer data)
{
  Daemon *d = data;
  gint64 before = g_get_monotonic_time () - IDLE_RETIRE_S * G_USEC_PER_SEC;

  while (g_queue_get_length (&d->idle) > SPARE_WORKERS)
    {
      Worker *w = g_queue_peek_tail (&d->idle);

      if (!w->ready || w->idle_since > before)
        break;
      g_queue_pop_tail (&d->idle);
      /* Its end of the socket closes: it exits, and is reaped. */
      shutdown (w->sock, SHUT_RDWR);
      w->retiring = TRUE;
      sandstepd_worker_unref (w);
    }
  return G_SOURCE_CONTINUE;
}

void
sandstepd_worker_return (Daemon *d, Worker *w)
{
  if (!w->dead && w->retiring)
    {
      /* Its end of the socket closes: it exits, and is reaped. */
      shutdown (w->sock, SHUT_RDWR);
    }
  if (w->dead || w->retiring)
    {
      sandstepd_worker_unref (w);
      /* A place under --max-claims is free: a waiting claim may start a worker in it. */
      workers_dispatch (d);
      return;
    }
  w->idle_since = g_get_monotonic_time ();
  d->last_return = w->idle_since;
  g_queue_push_head (&d->idle, w);
  if (d->retire_timer == 0)
    d->retire_timer = g_timeout_add_seconds (IDLE_RETIRE_S / 4, retire_idle, d);
  workers_dispatch (d);
}
