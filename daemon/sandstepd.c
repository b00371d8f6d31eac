/* sandstepd.c: the backend interface over HTTP, so steps on other machines share sandboxes.
 *
 *   sandstepd [--listen=ADDR:PORT] [--token-file=FILE] [--tls-cert=FILE --tls-key=FILE]
 *             [--state-dir=DIR] [--max-upload=BYTES] [--max-claims=N]
 *
 * One SoupServer on the main loop answers every request; nothing slow runs
 * there.  Record operations (provision, describe, release, destroy, gc) run
 * on GTask threads against the local backend.  Everything done under a claim
 * runs in that claim's worker process (sandstepd-worker.c), which holds the
 * claim exactly as a `sandstep` helper would; the main loop only moves bytes
 * between the worker's pipes and the HTTP connections, with back-pressure.
 *
 * A claim is a lease on a connection: `POST .../claim` answers with one line
 * (the claim id) and then stays open; when that connection ends the lease
 * ends, killing whatever it still runs.  A command's caller that goes away has
 * its command killed.  The API (all bodies JSON unless said otherwise):
 *
 *   GET  /v1/health                                         {"sandstepd": VERSION}
 *   POST /v1/sandboxes              {owner, holder, spec}    {"handle", "existing"}
 *   POST /v1/gc                     {run, expired_only}      {"destroyed": [...], "error"}
 *   POST /v1/sandboxes/H/describe   {owner, holder}          the record
 *   POST /v1/sandboxes/H/release    {owner, holder, keep_s}  {"destroyed"}
 *   POST /v1/sandboxes/H/destroy    {owner, holder}          {}
 *   POST /v1/sandboxes/H/claim      {owner, holder}          JSON lines: {"claim", "remaining_seconds", "spec"}, then
 *                                                            keepalives; {"ended": why} if the server ends it
 *   POST /v1/sandboxes/H/release-claim {claim}               {} once the claim is gone
 *   POST /v1/sandboxes/H/run        {claim, command, timeout_s}  JSON lines: {"stream": 1|2, "data": base64} ...,
 *                                                            then {"exit", "timed_out", ...} or {"error": {...}}
 *   POST /v1/sandboxes/H/read       {claim, path, max_bytes} the file's bytes
 *   POST /v1/sandboxes/H/write?path=P   (X-Sandstep-Claim)  the bytes to write; answers {}
 *   POST /v1/sandboxes/H/list       {claim, path}            {"entries": [{"name", "is_dir"}]}
 *   POST /v1/sandboxes/H/put?dest=D&name=N&contents=0|1 (X-Sandstep-Claim)  entries (sandstepd.h); {}
 *   POST /v1/sandboxes/H/export     {claim, path, max_bytes} JSON lines: {"data": base64} ..., {"done": N} or {"error"}
 *
 * Errors: the HTTP status of their kind and {code, message, hint, domain, error_code}
 * (sandstep-remote-wire.h).  Every request needs "Authorization: Bearer TOKEN"
 * when a token file is given; a missing or wrong one is a 401, logged without it.
 */
#include "sandstepd.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <libsoup/soup.h>
#include <locale.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-units.h"
#include "sandstep-wire.h"
#include "sandstepd-wire.h"

#define DEFAULT_LISTEN "127.0.0.1:7700"
#define MAX_JSON_BODY (1024 * 1024)
#define DEFAULT_MAX_UPLOAD (1ULL << 30)
#define DEFAULT_MAX_CLAIMS 256
#define SPARE_WORKERS 2
/* Unclaimed workers kept beyond the spares after a burst of claims. */
#define MAX_IDLE_WORKERS 8
/* A worker serves this many claims, then a fresh one takes over (bounds any slow leak). */
#define MAX_CLAIMS_PER_WORKER 1000
/* Output held for a slow reader before the command is made to wait. */
#define HIGH_WATER (1024 * 1024)
#define LOW_WATER (256 * 1024)
#define READ_BLOCK (64 * 1024)
#define WORKER_SEND_TIMEOUT_MS 5000
#define STAGING "sandstepd-staging"

#ifndef POLLRDHUP
#define POLLRDHUP 0x2000
#endif

typedef struct _Daemon Daemon;
typedef struct _Worker Worker;
typedef struct _Lease Lease;
typedef struct _Request Request;
typedef struct _Call Call;

typedef enum {
  ROUTE_NONE,
  ROUTE_HEALTH,
  ROUTE_PROVISION,
  ROUTE_GC,
  ROUTE_DESCRIBE,
  ROUTE_RELEASE,
  ROUTE_DESTROY,
  ROUTE_CLAIM,
  ROUTE_RELEASE_CLAIM,
  ROUTE_RUN,
  ROUTE_READ,
  ROUTE_WRITE,
  ROUTE_LIST,
  ROUTE_PUT,
  ROUTE_EXPORT,
} Route;

static const struct {
  const char *name;
  Route route;
} sandbox_routes[] = {
  { "describe", ROUTE_DESCRIBE }, { "release", ROUTE_RELEASE },   { "destroy", ROUTE_DESTROY },
  { "claim", ROUTE_CLAIM },       { "release-claim", ROUTE_RELEASE_CLAIM }, { "run", ROUTE_RUN },
  { "read", ROUTE_READ },         { "write", ROUTE_WRITE },       { "list", ROUTE_LIST },
  { "put", ROUTE_PUT },           { "export", ROUTE_EXPORT },
};

struct _Daemon {
  SoupServer *server;
  SandstepBackend *backend;
  char *state_dir;
  char *staging_dir;
  int staging_fd;
  gboolean has_token;
  guint8 token_digest[32];
  char *self_exe;
  GHashTable *leases;       /* claim id -> Lease (ref) */
  GQueue idle;              /* Workers without a lease (ref) */
  guint n_workers;
  guint max_workers;
  guint64 max_upload;
  gboolean debug;
  guint top_up;
  GTlsCertificate *certificate;
};

/* A message to a worker and what to do with its answer. */
typedef void (*CallDone) (Call *call, JsonObject *reply, int reply_fd, const GError *error);

struct _Call {
  JsonObject *message;
  int fds[SANDSTEPD_WIRE_MAX_FDS];
  guint n_fds;
  gint id;
  CallDone done;
  gpointer data;
  GDestroyNotify destroy;
  gboolean forgotten;       /* its requester went away: answer ignored */
};

struct _Worker {
  int refs;
  Daemon *d;
  GSubprocess *proc;
  int sock;
  guint watch;
  gboolean ready;
  gboolean dead;
  gboolean retiring;        /* never reused: it misbehaved, or served enough claims */
  guint claims;
  Lease *lease;             /* not a ref: the lease owns the worker */
  GQueue queue;             /* Calls not yet sent */
  Call *inflight;
  gint next_id;
};

struct _Lease {
  int refs;
  Daemon *d;
  char *id;
  char *handle;
  char *holder;
  Worker *worker;           /* ref */
  Request *claim;           /* the claim's request (ref) while it streams */
  gboolean active;
  gboolean ended;
  gboolean detached;
  GPtrArray *end_waiters;   /* Requests answered once the claim is gone */
};

struct _Request {
  int refs;
  Daemon *d;
  SoupServerMessage *msg;   /* ref until finished */
  Route route;
  char *handle;
  char *method;
  char *path;
  gboolean refused;         /* answered already while reading (401, 413, ...) */
  GByteArray *body;         /* JSON bodies */
  gsize limit;
  int upload_fd;            /* write: the staged bytes */
  guint64 upload_len;
  SandstepdUpload *upload;  /* put */
  Lease *lease;             /* write, put: the claim, checked with the headers */
  gboolean paused;
  gboolean streaming;
  gboolean finished;
  gboolean completed;
  gsize pending;
  guint keepalive;
  guint hup_watch;
  /* The owner of a streamed answer. */
  void (*on_gone) (Request *req);
  void (*on_drained) (Request *req);
  gpointer owner;
};

static Daemon *the_daemon;

static GSocket *message_socket (SoupServerMessage *msg);

/* ---- logging: the daemon speaks; secrets never appear ---- */

static void say (const char *format, ...) G_GNUC_PRINTF (1, 2);

static void
say (const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;
  g_autoptr(GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%Y-%m-%d %H:%M:%S.%f");

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fprintf (stderr, "%s sandstepd: %s\n", stamp, message);
}

/* ---- requests and answers ---- */

static Request *
request_ref (Request *req)
{
  req->refs++;
  return req;
}

static void
request_unref (Request *req)
{
  if (req == NULL || --req->refs > 0)
    return;
  if (req->body != NULL)
    g_byte_array_unref (req->body);
  if (req->upload_fd >= 0)
    close (req->upload_fd);
  sandstepd_upload_free (req->upload);
  g_clear_object (&req->msg);
  g_free (req->handle);
  g_free (req->method);
  g_free (req->path);
  g_free (req);
}

static char *
object_to_text (JsonObject *object, gsize *out_len)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  char *text;

  json_node_set_object (node, object);
  text = json_to_string (node, FALSE);
  *out_len = strlen (text);
  return text;
}

static void
request_resume (Request *req)
{
  if (req->paused && !req->finished)
    {
      req->paused = FALSE;
      soup_server_message_unpause (req->msg);
    }
}

static void
answer_json (Request *req, guint status, JsonObject *object)
{
  gsize len;
  char *text;

  if (req->finished || req->completed)
    return;
  text = object_to_text (object, &len);
  soup_server_message_set_status (req->msg, status, NULL);
  soup_server_message_set_response (req->msg, "application/json", SOUP_MEMORY_TAKE, text, len);
  req->completed = TRUE;
  request_resume (req);
}

static void
answer_error (Request *req, const GError *error, const char *holder)
{
  g_autoptr(JsonNode) node = sandstep_wire_error_to_json (error, holder);

  if (req->d->debug)
    say ("%s %s: %u %s", req->method, req->path, sandstep_wire_error_status (error), error->message);
  answer_json (req, sandstep_wire_error_status (error), json_node_get_object (node));
}

/* A protocol error (not one of a backend's): @status with its own code and hint. */
static void
answer_protocol (Request *req, guint status, const char *code, const char *hint, GQuark domain, int error_code,
                 const char *format, ...) G_GNUC_PRINTF (7, 8);

static void
answer_protocol (Request *req, guint status, const char *code, const char *hint, GQuark domain, int error_code,
                 const char *format, ...)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  json_object_set_string_member (object, "code", code);
  json_object_set_string_member (object, "message", message);
  json_object_set_string_member (object, "hint", hint);
  json_object_set_string_member (object, "domain", g_quark_to_string (domain));
  json_object_set_int_member (object, "error_code", error_code);
  if (req->d->debug || status == SOUP_STATUS_INTERNAL_SERVER_ERROR)
    say ("%s %s: %u %s", req->method, req->path, status, message);
  answer_json (req, status, object);
}

/* ---- streamed answers: JSON lines, chunked, with back-pressure ---- */

static void
on_wrote_body_data (SoupServerMessage *msg, guint size, gpointer user_data)
{
  Request *req = user_data;

  req->pending = size > req->pending ? 0 : req->pending - size;
  if (req->pending < LOW_WATER && req->on_drained != NULL)
    req->on_drained (req);
}

static void request_gone (Request *req);

static gboolean
on_peer_hup (int fd, GIOCondition condition, gpointer user_data)
{
  Request *req = user_data;

  req->hup_watch = 0;
  request_gone (req);
  return G_SOURCE_REMOVE;
}

static gboolean
on_keepalive (gpointer user_data)
{
  Request *req = user_data;

  if (req->finished || req->completed)
    {
      req->keepalive = 0;
      return G_SOURCE_REMOVE;
    }
  soup_message_body_append (soup_server_message_get_response_body (req->msg), SOUP_MEMORY_STATIC, "\n", 1);
  req->pending += 1;
  req->paused = TRUE;
  request_resume (req);
  return G_SOURCE_CONTINUE;
}

static void
stream_begin (Request *req)
{
  SoupServerMessage *msg = req->msg;
  GSocket *socket = message_socket (msg);

  req->streaming = TRUE;
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_encoding (soup_server_message_get_response_headers (msg), SOUP_ENCODING_CHUNKED);
  soup_message_headers_set_content_type (soup_server_message_get_response_headers (msg), "application/x-ndjson",
                                         NULL);
  /* What is written is dropped: memory holds only what the reader has not taken yet. */
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  g_signal_connect (msg, "wrote-body-data", G_CALLBACK (on_wrote_body_data), req);
  /* A peer that closes its end is gone, even while nothing is written to it. */
  if (socket != NULL)
    req->hup_watch = g_unix_fd_add (g_socket_get_fd (socket), G_IO_HUP | G_IO_ERR | POLLRDHUP, on_peer_hup, req);
  req->keepalive = g_timeout_add_seconds (SANDSTEP_KEEPALIVE_S, on_keepalive, req);
}

static void
stream_take (Request *req, char *data, gsize len)
{
  if (req->finished || req->completed)
    {
      g_free (data);
      return;
    }
  soup_message_body_append (soup_server_message_get_response_body (req->msg), SOUP_MEMORY_TAKE, data, len);
  req->pending += len;
  req->paused = TRUE;
  request_resume (req);
}

static void
stream_object (Request *req, JsonObject *object)
{
  gsize len;
  char *text = object_to_text (object, &len);
  char *line = g_realloc (text, len + 1);

  line[len] = '\n';
  stream_take (req, line, len + 1);
}

static void
stream_end (Request *req)
{
  if (req->finished || req->completed)
    return;
  req->completed = TRUE;
  soup_message_body_complete (soup_server_message_get_response_body (req->msg));
  req->paused = TRUE;
  request_resume (req);
}

static void
stream_error (Request *req, const GError *error)
{
  g_autoptr(JsonObject) line = json_object_new ();

  json_object_set_member (line, "error", sandstep_wire_error_to_json (error, NULL));
  stream_object (req, line);
  stream_end (req);
}

static void
stop_watches (Request *req)
{
  if (req->hup_watch != 0)
    g_source_remove (req->hup_watch);
  req->hup_watch = 0;
  if (req->keepalive != 0)
    g_source_remove (req->keepalive);
  req->keepalive = 0;
}

/* The client is gone (closed, or the answer could not be written). */
static void
request_gone (Request *req)
{
  void (*on_gone) (Request *) = req->on_gone;

  stop_watches (req);
  req->on_gone = NULL;
  req->on_drained = NULL;
  if (on_gone != NULL)
    on_gone (req);
  /* Let libsoup find out and finish the exchange. */
  stream_end (req);
}

static void
on_finished (SoupServerMessage *msg, gpointer user_data)
{
  Request *req = user_data;
  gboolean early = req->streaming && !req->completed;

  req->finished = TRUE;
  stop_watches (req);
  g_signal_handlers_disconnect_by_data (msg, req);
  if (early || req->on_gone != NULL)
    {
      void (*on_gone) (Request *) = req->on_gone;
      req->on_gone = NULL;
      req->on_drained = NULL;
      if (on_gone != NULL)
        on_gone (req);
    }
  request_unref (req);
}

/* ---- workers ---- */

static void worker_fail_all (Worker *w, const GError *error);
static void lease_worker_died (Lease *lease);

static Worker *
worker_ref (Worker *w)
{
  w->refs++;
  return w;
}

static void
call_free (Call *call)
{
  if (call == NULL)
    return;
  if (call->message != NULL)
    json_object_unref (call->message);
  for (guint i = 0; i < call->n_fds; i++)
    if (call->fds[i] >= 0)
      close (call->fds[i]);
  if (call->destroy != NULL)
    call->destroy (call->data);
  g_free (call);
}

static void
worker_unref (Worker *w)
{
  if (w == NULL || --w->refs > 0)
    return;
  g_assert (w->inflight == NULL && g_queue_is_empty (&w->queue));
  if (w->sock >= 0)
    close (w->sock);
  g_clear_object (&w->proc);
  g_free (w);
}

static void worker_died (Worker *w);
static void worker_pump (Worker *w);

static gboolean
fail_dead_worker (gpointer data)
{
  Worker *w = data;

  worker_died (w);
  worker_unref (w);
  return G_SOURCE_REMOVE;
}

static gboolean
pump_later (gpointer data)
{
  Worker *w = data;

  worker_pump (w);
  worker_unref (w);
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
          call_free (call);
          continue;
        }
      call->id = ++w->next_id;
      json_object_set_int_member (call->message, "id", call->id);
      if (!sandstepd_wire_send_object (w->sock, call->message, call->fds, call->n_fds, WORKER_SEND_TIMEOUT_MS,
                                       &error))
        {
          say ("cannot talk to a worker (%s); ending it", error->message);
          g_queue_push_head (&w->queue, call);
          g_subprocess_force_exit (w->proc);
          g_idle_add_full (G_PRIORITY_DEFAULT, fail_dead_worker, worker_ref (w), NULL);
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
static Call *
worker_call (Worker *w, JsonObject *message, const int *fds, guint n_fds, CallDone done, gpointer data,
             GDestroyNotify destroy)
{
  Call *call = g_new0 (Call, 1);

  call->message = message;
  memcpy (call->fds, fds, sizeof (int) * n_fds);
  call->n_fds = n_fds;
  call->done = done;
  call->data = data;
  call->destroy = destroy;
  g_queue_push_tail (&w->queue, call);
  /* Answers always come later, from the main loop, never from inside this call. */
  if (w->dead)
    g_idle_add_full (G_PRIORITY_DEFAULT, fail_dead_worker, worker_ref (w), NULL);
  else
    g_idle_add_full (G_PRIORITY_HIGH, pump_later, worker_ref (w), NULL);
  return call;
}

/* Tells the worker to kill what @call runs, if it runs; its answer still comes. */
static void
worker_cancel (Worker *w, Call *call)
{
  g_autoptr(JsonObject) cancel = NULL;

  if (call == NULL || w->inflight != call || w->dead)
    return;
  cancel = json_object_new ();
  json_object_set_string_member (cancel, "op", "cancel");
  json_object_set_int_member (cancel, "id", call->id);
  sandstepd_wire_send_object (w->sock, cancel, NULL, 0, WORKER_SEND_TIMEOUT_MS, NULL);
}

/* The requester of @call is gone: its answer is dropped, and what it runs is killed. */
static void
worker_forget (Worker *w, Call *call)
{
  if (call == NULL)
    return;
  call->forgotten = TRUE;
  worker_cancel (w, call);
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
          worker_fail_all (w, error);
        }
      return;
    }
  w->dead = TRUE;
  worker_ref (w);
  if (w->watch != 0)
    g_source_remove (w->watch);
  w->watch = 0;
  g_queue_remove (&d->idle, w) ? worker_unref (w) : (void) 0;
  d->n_workers--;
  error = g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                               "The claim's worker process ended while the operation ran");
  worker_fail_all (w, error);
  if (w->lease != NULL)
    lease_worker_died (w->lease);
  worker_unref (w);
}

static void
worker_fail_all (Worker *w, const GError *error)
{
  Call *call;

  if (w->inflight != NULL)
    {
      call = g_steal_pointer (&w->inflight);
      if (!call->forgotten)
        call->done (call, NULL, -1, error);
      call_free (call);
    }
  while ((call = g_queue_pop_head (&w->queue)) != NULL)
    {
      if (!call->forgotten)
        call->done (call, NULL, -1, error);
      call_free (call);
    }
}

static void
worker_message (Worker *w, JsonObject *message, int *fds, guint n_fds)
{
  Call *call;
  int reply_fd = n_fds > 0 ? fds[0] : -1;

  for (guint i = 1; i < n_fds; i++)
    close (fds[i]);
  if (!w->ready)
    {
      if (reply_fd >= 0)
        close (reply_fd);
      if (!json_object_get_boolean_member_with_default (message, "ready", FALSE))
        {
          JsonNode *e = json_object_get_member (message, "error");
          g_autoptr(GError) error = sandstep_wire_error_from_json (e, 500, NULL);
          say ("a worker could not start: %s", error->message);
          worker_died (w);
          return;
        }
      w->ready = TRUE;
      worker_pump (w);
      return;
    }
  call = w->inflight;
  if (call == NULL || json_object_get_int_member_with_default (message, "id", -1) != call->id)
    {
      if (reply_fd >= 0)
        close (reply_fd);
      say ("a worker answered a question it was not asked; ending it");
      g_subprocess_force_exit (w->proc);
      worker_died (w);
      return;
    }
  w->inflight = NULL;
  worker_ref (w);
  if (!call->forgotten)
    {
      if (json_object_has_member (message, "error"))
        {
          g_autoptr(GError) error = sandstep_wire_error_from_json (json_object_get_member (message, "error"), 500,
                                                                   NULL);
          call->done (call, message, reply_fd, error);
        }
      else
        call->done (call, message, reply_fd, NULL);
    }
  if (reply_fd >= 0)
    close (reply_fd);
  call_free (call);
  worker_pump (w);
  worker_unref (w);
}

static gboolean
on_worker_readable (int fd, GIOCondition condition, gpointer user_data)
{
  Worker *w = user_data;

  worker_ref (w);
  for (int i = 0; i < 64 && !w->dead; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonObject) message = NULL;
      int fds[SANDSTEPD_WIRE_MAX_FDS];
      guint n_fds = 0;

      if (!sandstepd_wire_recv (w->sock, &message, fds, &n_fds, &error))
        {
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            break;
          if (error != NULL)
            say ("a worker sent something unreadable (%s); ending it", error->message);
          w->watch = 0;
          worker_died (w);
          worker_unref (w);
          return G_SOURCE_REMOVE;
        }
      worker_message (w, message, fds, n_fds);
    }
  worker_unref (w);
  return G_SOURCE_CONTINUE;
}

static void
on_worker_exited (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Worker *w = user_data;

  g_subprocess_wait_finish (G_SUBPROCESS (source), result, NULL);
  /* Its socket said so already, or is about to; this is the reaping. */
  worker_died (w);
  worker_unref (w);
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
      worker_unref (w);
      return NULL;
    }
  g_unix_set_fd_nonblocking (w->sock, TRUE, NULL);
  w->watch = g_unix_fd_add (w->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, on_worker_readable, w);
  g_subprocess_wait_async (w->proc, NULL, on_worker_exited, worker_ref (w));
  d->n_workers++;
  return w;
}

/* Keeps SPARE_WORKERS started and unclaimed, so a claim never waits for an exec. */
static void
top_up_workers (Daemon *d)
{
  while (g_queue_get_length (&d->idle) < SPARE_WORKERS && d->n_workers < d->max_workers)
    {
      g_autoptr(GError) error = NULL;
      Worker *w = worker_spawn (d, &error);
      if (w == NULL)
        {
          say ("cannot start a worker: %s", error->message);
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
  top_up_workers (d);
  return G_SOURCE_REMOVE;
}

/* An unclaimed worker (ref), or NULL when there are max_workers already. */
static Worker *
take_worker (Daemon *d, GError **error)
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
return_worker (Daemon *d, Worker *w)
{
  if (!w->dead && (w->retiring || g_queue_get_length (&d->idle) >= MAX_IDLE_WORKERS))
    {
      /* Its end of the socket closes: it exits, and is reaped. */
      shutdown (w->sock, SHUT_RDWR);
      w->retiring = TRUE;
    }
  if (w->dead || w->retiring)
    {
      worker_unref (w);
      return;
    }
  g_queue_push_head (&d->idle, w);
}

/* ---- leases ---- */

static void
lease_unref (Lease *lease)
{
  if (lease == NULL || --lease->refs > 0)
    return;
  g_assert (lease->worker == NULL && lease->claim == NULL);
  g_ptr_array_unref (lease->end_waiters);
  g_free (lease->id);
  g_free (lease->handle);
  g_free (lease->holder);
  g_free (lease);
}

static void
lease_answer_waiters (Lease *lease)
{
  for (guint i = 0; i < lease->end_waiters->len; i++)
    {
      g_autoptr(JsonObject) object = json_object_new ();
      answer_json (lease->end_waiters->pdata[i], SOUP_STATUS_OK, object);
    }
  g_ptr_array_set_size (lease->end_waiters, 0);
}

/* The worker is done with the lease: answer who waited, and the worker serves the next claim. */
static void
lease_release_worker (Lease *lease, gboolean clean)
{
  Worker *w = g_steal_pointer (&lease->worker);

  lease->detached = TRUE;
  if (w != NULL)
    {
      w->lease = NULL;
      if (!clean || ++w->claims >= MAX_CLAIMS_PER_WORKER)
        w->retiring = TRUE;
      return_worker (lease->d, w);
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
static void
lease_end (Lease *lease, const char *why, gboolean abrupt)
{
  Daemon *d = lease->d;
  Request *claim;

  if (lease->ended)
    return;
  claim = g_steal_pointer (&lease->claim);
  lease->refs++;
  lease->ended = TRUE;
  if (d->debug)
    say ("claim on %s by '%s' ends: %s", lease->handle, lease->holder, why);
  g_hash_table_remove (d->leases, lease->id);
  if (claim != NULL)
    {
      claim->on_gone = NULL;
      claim->owner = NULL;
      if (!claim->finished && !claim->completed)
        {
          g_autoptr(JsonObject) line = json_object_new ();
          json_object_set_string_member (line, "ended", why);
          stream_object (claim, line);
          stream_end (claim);
        }
      request_unref (claim);
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
          call_free (call);
        }
      if (abrupt && !w->dead)
        {
          w->retiring = TRUE;
          g_subprocess_send_signal (w->proc, SIGKILL);
        }
      else
        worker_cancel (w, w->inflight);
      json_object_set_string_member (detach, "op", "detach");
      lease->refs++;
      worker_call (w, json_object_ref (detach), NULL, 0, on_detached, lease, (GDestroyNotify) lease_unref);
    }
  else
    lease_answer_waiters (lease);
  lease_unref (lease);
}

static void
lease_worker_died (Lease *lease)
{
  lease->refs++;
  if (!lease->ended)
    lease_end (lease, "the sandbox's claim ended on the server (the sandbox was destroyed, or its worker died)", TRUE);
  if (lease->worker != NULL)
    lease_release_worker (lease, FALSE);
  lease_unref (lease);
}

static void
on_claim_gone (Request *req)
{
  Lease *lease = req->owner;

  if (lease != NULL)
    lease_end (lease, "the claim's connection closed", TRUE);
}

static void
on_attached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Lease *lease = call->data;
  Request *req = lease->claim;
  Daemon *d = lease->d;
  g_autoptr(JsonObject) first = NULL;

  if (error != NULL)
    {
      Worker *w = g_steal_pointer (&lease->worker);

      lease->ended = TRUE;
      w->lease = NULL;
      return_worker (d, w);
      if (req != NULL)
        {
          answer_error (req, error, NULL);
          lease->claim = NULL;
          req->owner = NULL;
          request_unref (req);
        }
      return;
    }
  if (req == NULL || req->finished)
    {
      /* The client left while we attached. */
      lease->active = TRUE;
      g_hash_table_insert (d->leases, lease->id, lease);
      lease->refs++;
      lease_end (lease, "the claim's connection closed while attaching", TRUE);
      return;
    }
  lease->active = TRUE;
  g_hash_table_insert (d->leases, lease->id, lease);
  lease->refs++;
  if (d->debug)
    say ("claim %s on %s by '%s'", lease->id, lease->handle, lease->holder);
  stream_begin (req);
  req->on_gone = on_claim_gone;
  first = json_object_new ();
  json_object_set_string_member (first, "claim", lease->id);
  json_object_set_double_member (first, "remaining_seconds",
                                 json_object_get_double_member_with_default (reply, "remaining_seconds", 0));
  if (json_object_has_member (reply, "spec"))
    json_object_set_member (first, "spec", json_node_copy (json_object_get_member (reply, "spec")));
  stream_object (req, first);
}

static char *
new_claim_id (void)
{
  guint8 bytes[16];
  GString *out = g_string_new ("c-");

  for (gsize i = 0; i < sizeof bytes; i++)
    bytes[i] = g_random_int_range (0, 256);
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (out, "%02x", bytes[i]);
  return g_string_free (out, FALSE);
}

/* The lease named by @claim on @handle, or NULL after answering the request. */
static Lease *
find_lease (Request *req, const char *claim)
{
  Lease *lease = claim != NULL ? g_hash_table_lookup (req->d->leases, claim) : NULL;

  if (lease != NULL && lease->active && !lease->ended && lease->worker != NULL &&
      g_strcmp0 (lease->handle, req->handle) == 0)
    return lease;
  answer_protocol (req, SOUP_STATUS_CONFLICT, "no-claim", "attach again (the claim's connection may have dropped)",
                   SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                   "Sandbox '%s' is not claimed with '%s' on this server: the claim ended (its connection closed, "
                   "the server restarted, or the sandbox was destroyed); attach again",
                   req->handle, claim != NULL ? claim : "(no claim)");
  return NULL;
}

/* ---- JSON bodies ---- */

static JsonObject *
body_object (Request *req)
{
  g_autoptr(GError) error = NULL;
  JsonObject *object;

  object = sandstep_wire_parse_object (req->body != NULL ? (const char *) req->body->data : "",
                                       req->body != NULL ? req->body->len : 0, &error);
  if (object == NULL)
    answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-json", "send one JSON object as the body",
                     SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s %s: %s", req->method, req->path,
                     error->message);
  return object;
}

/* A string member, or NULL after answering 400. */
static const char *
need_string (Request *req, JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING &&
      json_node_get_string (node)[0] != '\0')
    return json_node_get_string (node);
  answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "see the API in sandstepd.c", SANDSTEP_USAGE_ERROR,
                   SANDSTEP_USAGE_ERROR_MISSING, "%s %s: the member '%s' must be a non-empty string", req->method,
                   req->path, name);
  return NULL;
}

/* A number member >= 0 (absent: @fallback), or FALSE after answering 400. */
static gboolean
need_number (Request *req, JsonObject *object, const char *name, double fallback, double *out)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = fallback;
      return TRUE;
    }
  if (JSON_NODE_HOLDS_VALUE (node) &&
      (json_node_get_value_type (node) == G_TYPE_DOUBLE || json_node_get_value_type (node) == G_TYPE_INT64))
    {
      *out = json_node_get_double (node);
      if (*out >= 0 && *out < 1e18)
        return TRUE;
    }
  answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "see the API in sandstepd.c", SANDSTEP_USAGE_ERROR,
                   SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s %s: the member '%s' must be a finite number, 0 or more",
                   req->method, req->path, name);
  return FALSE;
}

static gboolean
need_identity (Request *req, JsonObject *object, SandstepIdentity *who)
{
  who->owner = need_string (req, object, "owner");
  if (who->owner == NULL)
    return FALSE;
  who->holder = need_string (req, object, "holder");
  return who->holder != NULL;
}

/* ---- record operations, on threads ---- */

typedef struct {
  Request *req;
  JsonObject *body;
  SandstepIdentity who;
  SandstepSpec *spec;
  gint64 keep_s;
  char *run;
  gboolean expired_only;
  /* results */
  JsonObject *answer;
  GError *error;
  char *holder;
} RecordJob;

static void
record_job_free (RecordJob *job)
{
  request_unref (job->req);
  if (job->body != NULL)
    json_object_unref (job->body);
  sandstep_spec_free (job->spec);
  g_free (job->run);
  if (job->answer != NULL)
    json_object_unref (job->answer);
  g_clear_error (&job->error);
  g_free (job->holder);
  g_free (job);
}

static void
record_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  RecordJob *job = data;
  Daemon *d = job->req->d;
  SandstepBackend *b = d->backend;
  const char *handle = job->req->handle;

  switch (job->req->route)
    {
    case ROUTE_PROVISION:
      {
        gboolean existing = FALSE;
        g_autofree char *made = sandstep_backend_provision (b, job->spec, &job->who, &existing, &job->error);
        if (made != NULL)
          {
            job->answer = json_object_new ();
            json_object_set_string_member (job->answer, "handle", made);
            json_object_set_boolean_member (job->answer, "existing", existing);
          }
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
          {
            job->answer = json_object_new ();
            json_object_set_boolean_member (job->answer, "destroyed", destroyed);
          }
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
        JsonArray *array = json_array_new ();

        sandstep_backend_gc (b, job->run, job->expired_only, destroyed, &error);
        for (guint i = 0; i < destroyed->len; i++)
          json_array_add_string_element (array, destroyed->pdata[i]);
        job->answer = json_object_new ();
        json_object_set_array_member (job->answer, "destroyed", array);
        if (error != NULL)
          json_object_set_member (job->answer, "error", sandstep_wire_error_to_json (error, NULL));
        else
          json_object_set_null_member (job->answer, "error");
        break;
      }
    case ROUTE_NONE:
    case ROUTE_HEALTH:
    case ROUTE_CLAIM:
    case ROUTE_RELEASE_CLAIM:
    case ROUTE_RUN:
    case ROUTE_READ:
    case ROUTE_WRITE:
    case ROUTE_LIST:
    case ROUTE_PUT:
    case ROUTE_EXPORT:
      g_assert_not_reached ();
    }
  g_task_return_boolean (task, TRUE);
}

static void
record_done (GObject *source, GAsyncResult *result, gpointer data)
{
  RecordJob *job = g_task_get_task_data (G_TASK (result));

  if (job->error != NULL)
    answer_error (job->req, job->error, NULL);
  else
    answer_json (job->req, SOUP_STATUS_OK, job->answer);
}

static void
start_record_job (Request *req, RecordJob *job)
{
  g_autoptr(GTask) task = g_task_new (NULL, NULL, record_done, NULL);

  job->req = request_ref (req);
  g_task_set_task_data (task, job, (GDestroyNotify) record_job_free);
  g_task_run_in_thread (task, record_thread);
}

static void
handle_record (Request *req)
{
  g_autoptr(JsonObject) body = body_object (req);
  RecordJob *job;

  if (body == NULL)
    return;
  job = g_new0 (RecordJob, 1);
  job->body = json_object_ref (body);
  if (req->route == ROUTE_GC)
    {
      JsonNode *run = json_object_get_member (body, "run");
      if (run != NULL && !JSON_NODE_HOLDS_NULL (run))
        {
          const char *text = need_string (req, body, "run");
          if (text == NULL)
            {
              record_job_free (job);
              return;
            }
          job->run = g_strdup (text);
        }
      job->expired_only = json_object_get_boolean_member_with_default (body, "expired_only", job->run == NULL);
      start_record_job (req, job);
      return;
    }
  if (!need_identity (req, job->body, &job->who))
    {
      record_job_free (job);
      return;
    }
  if (req->route == ROUTE_PROVISION)
    {
      JsonNode *spec = json_object_get_member (body, "spec");
      g_autoptr(GError) error = NULL;

      job->spec = spec != NULL ? sandstep_spec_from_json (spec, &error) : NULL;
      if (job->spec == NULL)
        {
          answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "send the spec 'sandstep provision' builds",
                           SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "The spec cannot be used: %s",
                           error != NULL ? error->message : "it is missing");
          record_job_free (job);
          return;
        }
      if (job->spec->mounts->len > 0)
        {
          answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "usage", "put the files into the sandbox instead",
                           SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "mount= is refused by a sandbox server: the host path would be the server's, not "
                           "yours; put the files into the sandbox instead");
          record_job_free (job);
          return;
        }
    }
  if (req->route == ROUTE_RELEASE)
    {
      double keep = 0;
      if (!need_number (req, body, "keep_s", 0, &keep))
        {
          record_job_free (job);
          return;
        }
      job->keep_s = (gint64) keep;
    }
  start_record_job (req, job);
}

/* ---- claims ---- */

static void
handle_claim (Request *req)
{
  Daemon *d = req->d;
  g_autoptr(JsonObject) body = body_object (req);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) attach = NULL;
  SandstepIdentity who;
  Lease *lease;
  Worker *w;

  if (body == NULL || !need_identity (req, body, &who))
    return;
  w = take_worker (d, &error);
  if (w == NULL)
    {
      answer_protocol (req, SOUP_STATUS_SERVICE_UNAVAILABLE, "too-many-claims", "try again later",
                       SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, "%s", error->message);
      return;
    }
  lease = g_new0 (Lease, 1);
  lease->refs = 1;
  lease->d = d;
  lease->id = new_claim_id ();
  lease->handle = g_strdup (req->handle);
  lease->holder = g_strdup (who.holder);
  lease->worker = w;
  lease->end_waiters = g_ptr_array_new_with_free_func ((GDestroyNotify) request_unref);
  lease->claim = request_ref (req);
  req->owner = lease;
  w->lease = lease;

  attach = json_object_new ();
  json_object_set_string_member (attach, "op", "attach");
  json_object_set_string_member (attach, "handle", req->handle);
  json_object_set_string_member (attach, "owner", who.owner);
  json_object_set_string_member (attach, "holder", who.holder);
  worker_call (w, g_steal_pointer (&attach), NULL, 0, on_attached, lease, (GDestroyNotify) lease_unref);
}

static void
handle_release_claim (Request *req)
{
  g_autoptr(JsonObject) body = body_object (req);
  const char *claim;
  Lease *lease;

  if (body == NULL || (claim = need_string (req, body, "claim")) == NULL)
    return;
  lease = g_hash_table_lookup (req->d->leases, claim);
  if (lease == NULL || g_strcmp0 (lease->handle, req->handle) != 0)
    {
      g_autoptr(JsonObject) object = json_object_new ();
      answer_json (req, SOUP_STATUS_OK, object);
      return;
    }
  g_ptr_array_add (lease->end_waiters, request_ref (req));
  lease_end (lease, "released by its holder", FALSE);
}

/* ---- commands ---- */

typedef struct {
  int refs;
  Request *req;
  Worker *worker;
  Call *call;
  int fds[2];               /* read ends of stdout, stderr */
  guint watches[2];
  JsonObject *result;
  GError *error;
  gboolean replied;
  gboolean stream_done;     /* the stream's reference is dropped */
} RunStream;

static void run_try_finish (RunStream *run);
static void run_watch (RunStream *run, int i);

static void
run_unref (RunStream *run)
{
  if (--run->refs > 0)
    return;
  for (int i = 0; i < 2; i++)
    {
      if (run->watches[i] != 0)
        g_source_remove (run->watches[i]);
      if (run->fds[i] >= 0)
        close (run->fds[i]);
    }
  if (run->result != NULL)
    json_object_unref (run->result);
  g_clear_error (&run->error);
  request_unref (run->req);
  worker_unref (run->worker);
  g_free (run);
}

static gboolean
on_run_output (int fd, GIOCondition condition, gpointer data)
{
  RunStream *run = data;
  int i = fd == run->fds[0] ? 0 : 1;
  char buf[READ_BLOCK];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      run->watches[i] = 0;
      close (run->fds[i]);
      run->fds[i] = -1;
      run_try_finish (run);
      return G_SOURCE_REMOVE;
    }
  {
    g_autofree char *b64 = g_base64_encode ((const guchar *) buf, n);
    g_autofree char *line = g_strdup_printf ("{\"stream\":%d,\"data\":\"%s\"}\n", i + 1, b64);
    gsize len = strlen (line);
    stream_take (run->req, g_steal_pointer (&line), len);
  }
  if (run->req->pending > HIGH_WATER)
    {
      /* The reader is slow: stop reading; the command waits on its full pipe. */
      run->watches[i] = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
run_watch (RunStream *run, int i)
{
  if (run->fds[i] >= 0 && run->watches[i] == 0)
    run->watches[i] = g_unix_fd_add (run->fds[i], G_IO_IN | G_IO_HUP | G_IO_ERR, on_run_output, run);
}

static void
on_run_drained (Request *req)
{
  RunStream *run = req->owner;

  run_watch (run, 0);
  run_watch (run, 1);
}

/* The stream holds one reference until its answer is complete or its caller gone. */
static void
run_stream_done (RunStream *run)
{
  if (run->stream_done)
    return;
  run->stream_done = TRUE;
  run->req->on_gone = NULL;
  run->req->on_drained = NULL;
  run->req->owner = NULL;
  run_unref (run);
}

static void
run_try_finish (RunStream *run)
{
  if (run->stream_done || !run->replied || run->fds[0] >= 0 || run->fds[1] >= 0)
    return;
  if (run->error != NULL)
    stream_error (run->req, run->error);
  else
    {
      stream_object (run->req, run->result);
      stream_end (run->req);
    }
  run_stream_done (run);
}

static void
on_run_gone (Request *req)
{
  RunStream *run = req->owner;

  /* The caller went away: the command is killed. */
  worker_forget (run->worker, run->call);
  run->call = NULL;
  for (int i = 0; i < 2; i++)
    {
      if (run->watches[i] != 0)
        g_source_remove (run->watches[i]);
      run->watches[i] = 0;
      if (run->fds[i] >= 0)
        close (run->fds[i]);
      run->fds[i] = -1;
    }
  run_stream_done (run);
}

static void
on_run_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  RunStream *run = call->data;

  run->call = NULL;
  run->replied = TRUE;
  if (error != NULL)
    run->error = g_error_copy (error);
  else
    {
      run->result = json_object_ref (reply);
      json_object_remove_member (run->result, "id");
    }
  run_try_finish (run);
}

static gboolean
make_pipe (int fds[2], GError **error)
{
  if (pipe2 (fds, O_CLOEXEC) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Cannot make a pipe");
  g_unix_set_fd_nonblocking (fds[0], TRUE, NULL);
  return TRUE;
}

static void
handle_run (Request *req)
{
  g_autoptr(JsonObject) body = body_object (req);
  g_autoptr(GError) error = NULL;
  const char *command;
  double timeout_s = 0;
  Lease *lease;
  RunStream *run;
  int out[2], err[2], send[2];
  JsonObject *message;

  if (body == NULL || (lease = find_lease (req, json_object_get_string_member_with_default (body, "claim", NULL))) == NULL)
    return;
  command = json_object_get_string_member_with_default (body, "command", NULL);
  if (command == NULL)
    {
      answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "send {claim, command, timeout_s}",
                       SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING, "%s %s: no command", req->method,
                       req->path);
      return;
    }
  if (!need_number (req, body, "timeout_s", 0, &timeout_s))
    return;
  if (!make_pipe (out, &error))
    {
      answer_error (req, error, NULL);
      return;
    }
  if (!make_pipe (err, &error))
    {
      close (out[0]);
      close (out[1]);
      answer_error (req, error, NULL);
      return;
    }
  run = g_new0 (RunStream, 1);
  run->refs = 1;
  run->req = request_ref (req);
  run->worker = worker_ref (lease->worker);
  run->fds[0] = out[0];
  run->fds[1] = err[0];
  req->owner = run;
  stream_begin (req);
  req->on_gone = on_run_gone;
  req->on_drained = on_run_drained;
  run_watch (run, 0);
  run_watch (run, 1);

  message = json_object_new ();
  json_object_set_string_member (message, "op", "run");
  json_object_set_string_member (message, "command", command);
  json_object_set_double_member (message, "timeout_s", timeout_s);
  send[0] = out[1];
  send[1] = err[1];
  run->refs++;
  run->call = worker_call (lease->worker, message, send, 2, on_run_done, run, (GDestroyNotify) run_unref);
}

/* ---- files ---- */

typedef struct {
  int refs;
  Request *req;
  Worker *worker;
  Call *call;
  int fd;
  guint watch;
  gboolean replied;
  gboolean stream_done;
  GError *error;
} ExportStream;

static void
export_unref (ExportStream *ex)
{
  if (--ex->refs > 0)
    return;
  if (ex->watch != 0)
    g_source_remove (ex->watch);
  if (ex->fd >= 0)
    close (ex->fd);
  g_clear_error (&ex->error);
  request_unref (ex->req);
  worker_unref (ex->worker);
  g_free (ex);
}

static void
on_simple_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Request *req = call->data;

  if (error != NULL)
    {
      answer_error (req, error, NULL);
      return;
    }
  switch (req->route)
    {
    case ROUTE_READ:
      {
        g_autoptr(GError) map_error = NULL;
        g_autoptr(GMappedFile) mapped = NULL;
        g_autoptr(GBytes) bytes = NULL;

        if (reply_fd < 0)
          {
            answer_protocol (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                             SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                             "The worker read the file but passed nothing back");
            return;
          }
        if (lseek (reply_fd, 0, SEEK_END) == 0)
          bytes = g_bytes_new_static ("", 0);
        else if ((mapped = g_mapped_file_new_from_fd (reply_fd, FALSE, &map_error)) != NULL)
          bytes = g_mapped_file_get_bytes (mapped);
        if (bytes == NULL)
          {
            answer_protocol (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                             SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, "Cannot map the file read: %s",
                             map_error ? map_error->message : "");
            return;
          }
        soup_server_message_set_status (req->msg, SOUP_STATUS_OK, NULL);
        soup_message_headers_set_content_type (soup_server_message_get_response_headers (req->msg),
                                               "application/octet-stream", NULL);
        soup_message_body_append_bytes (soup_server_message_get_response_body (req->msg), bytes);
        req->completed = TRUE;
        request_resume (req);
        return;
      }
    case ROUTE_LIST:
      json_object_remove_member (reply, "id");
      answer_json (req, SOUP_STATUS_OK, reply);
      return;
    case ROUTE_WRITE:
    case ROUTE_PUT:
      {
        g_autoptr(JsonObject) object = json_object_new ();
        answer_json (req, SOUP_STATUS_OK, object);
        return;
      }
    case ROUTE_NONE:
    case ROUTE_HEALTH:
    case ROUTE_PROVISION:
    case ROUTE_GC:
    case ROUTE_DESCRIBE:
    case ROUTE_RELEASE:
    case ROUTE_DESTROY:
    case ROUTE_CLAIM:
    case ROUTE_RELEASE_CLAIM:
    case ROUTE_RUN:
    case ROUTE_EXPORT:
      g_assert_not_reached ();
    }
}

static void
handle_read_list (Request *req)
{
  g_autoptr(JsonObject) body = body_object (req);
  const char *path;
  double max_bytes = 0;
  Lease *lease;
  JsonObject *message;

  if (body == NULL || (lease = find_lease (req, json_object_get_string_member_with_default (body, "claim", NULL))) == NULL)
    return;
  if ((path = need_string (req, body, "path")) == NULL)
    return;
  message = json_object_new ();
  json_object_set_string_member (message, "op", req->route == ROUTE_READ ? "read" : "list");
  json_object_set_string_member (message, "path", path);
  if (req->route == ROUTE_READ)
    {
      if (!need_number (req, body, "max_bytes", 5 * 1024 * 1024, &max_bytes))
        {
          json_object_unref (message);
          return;
        }
      json_object_set_int_member (message, "max_bytes", (gint64) max_bytes);
    }
  worker_call (lease->worker, message, NULL, 0, on_simple_done, request_ref (req), (GDestroyNotify) request_unref);
}

static void
handle_write (Request *req)
{
  GHashTable *query = g_object_get_data (G_OBJECT (req->msg), "sandstepd-query");
  const char *path = query != NULL ? g_hash_table_lookup (query, "path") : NULL;
  JsonObject *message;
  int fd;

  if (req->lease == NULL || req->lease->ended || req->lease->worker == NULL)
    {
      find_lease (req, NULL);
      return;
    }
  if (path == NULL || path[0] == '\0')
    {
      answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "add ?path=PATH", SANDSTEP_USAGE_ERROR,
                       SANDSTEP_USAGE_ERROR_MISSING, "%s %s: no path", req->method, req->path);
      return;
    }
  message = json_object_new ();
  json_object_set_string_member (message, "op", "write");
  json_object_set_string_member (message, "path", path);
  fd = g_steal_fd (&req->upload_fd);
  worker_call (req->lease->worker, message, &fd, 1, on_simple_done, request_ref (req), (GDestroyNotify) request_unref);
}

typedef struct {
  Request *req;
  SandstepdUpload *upload;
} PutJob;

static void
put_job_free (PutJob *job)
{
  sandstepd_upload_free (job->upload);
  request_unref (job->req);
  g_free (job);
}

static void
on_put_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  PutJob *job = call->data;
  Call shim = *call;

  shim.data = job->req;
  on_simple_done (&shim, reply, reply_fd, error);
}

static void
handle_put (Request *req)
{
  GHashTable *query = g_object_get_data (G_OBJECT (req->msg), "sandstepd-query");
  const char *dest = query != NULL ? g_hash_table_lookup (query, "dest") : NULL;
  const char *contents = query != NULL ? g_hash_table_lookup (query, "contents") : NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *src = NULL;
  JsonObject *message;
  PutJob *job;

  if (req->lease == NULL || req->lease->ended || req->lease->worker == NULL)
    {
      find_lease (req, NULL);
      return;
    }
  if (dest == NULL || dest[0] == '\0' || req->upload == NULL)
    {
      answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "add ?dest=PATH&name=NAME", SANDSTEP_USAGE_ERROR,
                       SANDSTEP_USAGE_ERROR_MISSING, "%s %s: no dest or name", req->method, req->path);
      return;
    }
  if (!sandstepd_upload_finish (req->upload, &error))
    {
      answer_error (req, error, NULL);
      return;
    }
  /* "src/" puts the contents of src, as the local put does. */
  src = g_strconcat (sandstepd_upload_path (req->upload), g_strcmp0 (contents, "1") == 0 ? "/" : "", NULL);
  message = json_object_new ();
  json_object_set_string_member (message, "op", "put");
  json_object_set_string_member (message, "src", src);
  json_object_set_string_member (message, "dest", dest);
  job = g_new0 (PutJob, 1);
  job->req = request_ref (req);
  job->upload = g_steal_pointer (&req->upload);
  worker_call (req->lease->worker, message, NULL, 0, on_put_done, job, (GDestroyNotify) put_job_free);
}

static void export_try_finish (ExportStream *ex);

static gboolean
on_export_data (int fd, GIOCondition condition, gpointer data)
{
  ExportStream *ex = data;
  char buf[READ_BLOCK];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      ex->watch = 0;
      close (ex->fd);
      ex->fd = -1;
      export_try_finish (ex);
      return G_SOURCE_REMOVE;
    }
  {
    g_autofree char *b64 = g_base64_encode ((const guchar *) buf, n);
    g_autofree char *line = g_strdup_printf ("{\"data\":\"%s\"}\n", b64);
    gsize len = strlen (line);
    stream_take (ex->req, g_steal_pointer (&line), len);
  }
  if (ex->req->pending > HIGH_WATER)
    {
      ex->watch = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
on_export_drained (Request *req)
{
  ExportStream *ex = req->owner;

  if (ex->fd >= 0 && ex->watch == 0)
    ex->watch = g_unix_fd_add (ex->fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_export_data, ex);
}

static void
export_stream_done (ExportStream *ex)
{
  if (ex->stream_done)
    return;
  ex->stream_done = TRUE;
  ex->req->on_gone = NULL;
  ex->req->on_drained = NULL;
  ex->req->owner = NULL;
  export_unref (ex);
}

static void
export_try_finish (ExportStream *ex)
{
  if (ex->stream_done || !ex->replied || ex->fd >= 0)
    return;
  if (ex->error != NULL)
    stream_error (ex->req, ex->error);
  else
    {
      g_autoptr(JsonObject) done = json_object_new ();
      json_object_set_boolean_member (done, "done", TRUE);
      stream_object (ex->req, done);
      stream_end (ex->req);
    }
  export_stream_done (ex);
}

static void
on_export_gone (Request *req)
{
  ExportStream *ex = req->owner;

  worker_forget (ex->worker, ex->call);
  ex->call = NULL;
  if (ex->watch != 0)
    g_source_remove (ex->watch);
  ex->watch = 0;
  /* The worker's writes now fail, and its export ends. */
  if (ex->fd >= 0)
    close (ex->fd);
  ex->fd = -1;
  export_stream_done (ex);
}

static void
on_export_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  ExportStream *ex = call->data;

  ex->call = NULL;
  ex->replied = TRUE;
  if (error != NULL)
    ex->error = g_error_copy (error);
  export_try_finish (ex);
}

static void
handle_export (Request *req)
{
  g_autoptr(JsonObject) body = body_object (req);
  g_autoptr(GError) error = NULL;
  double max_bytes = 0;
  const char *path;
  Lease *lease;
  ExportStream *ex;
  JsonObject *message;
  int pipe_fds[2];

  if (body == NULL || (lease = find_lease (req, json_object_get_string_member_with_default (body, "claim", NULL))) == NULL)
    return;
  if ((path = need_string (req, body, "path")) == NULL || !need_number (req, body, "max_bytes", 0, &max_bytes))
    return;
  if (!make_pipe (pipe_fds, &error))
    {
      answer_error (req, error, NULL);
      return;
    }
  ex = g_new0 (ExportStream, 1);
  ex->refs = 2;             /* the stream's and the call's */
  ex->req = request_ref (req);
  ex->worker = worker_ref (lease->worker);
  ex->fd = pipe_fds[0];
  req->owner = ex;
  stream_begin (req);
  req->on_gone = on_export_gone;
  req->on_drained = on_export_drained;
  ex->watch = g_unix_fd_add (ex->fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_export_data, ex);

  message = json_object_new ();
  json_object_set_string_member (message, "op", "export");
  json_object_set_string_member (message, "path", path);
  json_object_set_int_member (message, "max_bytes", (gint64) max_bytes);
  ex->call = worker_call (lease->worker, message, &pipe_fds[1], 1, on_export_done, ex, (GDestroyNotify) export_unref);
}

/* ---- routing, authentication and bodies, as the headers arrive ---- */

static Route
route_for (const char *path, char **out_handle, gboolean *out_bad_handle)
{
  g_auto(GStrv) parts = NULL;
  guint n;

  *out_handle = NULL;
  *out_bad_handle = FALSE;
  if (strcmp (path, SANDSTEP_API_PREFIX "/health") == 0)
    return ROUTE_HEALTH;
  if (strcmp (path, SANDSTEP_API_PREFIX "/sandboxes") == 0)
    return ROUTE_PROVISION;
  if (strcmp (path, SANDSTEP_API_PREFIX "/gc") == 0)
    return ROUTE_GC;
  if (!g_str_has_prefix (path, SANDSTEP_API_PREFIX "/sandboxes/"))
    return ROUTE_NONE;
  parts = g_strsplit (path + strlen (SANDSTEP_API_PREFIX "/sandboxes/"), "/", -1);
  n = g_strv_length (parts);
  if (n != 2)
    return ROUTE_NONE;
  for (gsize i = 0; i < G_N_ELEMENTS (sandbox_routes); i++)
    if (strcmp (parts[1], sandbox_routes[i].name) == 0)
      {
        if (!sandstep_handle_is_local (parts[0]))
          {
            *out_bad_handle = TRUE;
            *out_handle = g_strdup (parts[0]);
            return ROUTE_NONE;
          }
        *out_handle = g_strdup (parts[0]);
        return sandbox_routes[i].route;
      }
  return ROUTE_NONE;
}

static gboolean
authorized (Daemon *d, SoupServerMessage *msg, const char **out_why)
{
  const char *header = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization");
  guint8 digest[32];

  if (!d->has_token)
    return TRUE;
  if (header == NULL || !g_str_has_prefix (header, "Bearer "))
    {
      *out_why = "no token";
      return FALSE;
    }
  sandstep_wire_token_digest (header + strlen ("Bearer "), digest);
  if (!sandstep_wire_digest_equal (digest, d->token_digest))
    {
      *out_why = "a wrong token";
      return FALSE;
    }
  return TRUE;
}

static void
on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  Request *req = user_data;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (chunk, &len);

  if (req->refused)
    return;
  if (req->route == ROUTE_PUT && req->upload != NULL)
    {
      g_autoptr(GError) error = NULL;
      if (!sandstepd_upload_feed (req->upload, data, len, &error) &&
          g_error_matches (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE))
        {
          req->refused = TRUE;
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          answer_error (req, error, NULL);
        }
      return;
    }
  if (req->route == ROUTE_WRITE)
    {
      if (req->upload_len + len > req->d->max_upload)
        {
          req->refused = TRUE;
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          answer_protocol (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                           "write less at a time, or start sandstepd with a larger --max-upload",
                           SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE,
                           "The body is larger than the server's limit of %" G_GUINT64_FORMAT " bytes",
                           req->d->max_upload);
          return;
        }
      for (gsize done = 0; done < len && req->upload_fd >= 0;)
        {
          ssize_t n = write (req->upload_fd, data + done, len - done);
          if (n < 0 && errno == EINTR)
            continue;
          if (n <= 0)
            {
              int errsv = errno;
              req->refused = TRUE;
              answer_protocol (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                               SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                               "Cannot stage the written bytes under '%s': %s", req->d->staging_dir,
                               g_strerror (errsv));
              return;
            }
          done += n;
        }
      req->upload_len += len;
      return;
    }
  if (req->body->len + len > req->limit)
    {
      req->refused = TRUE;
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
      answer_protocol (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                       "send a smaller body; requests are small JSON objects", SANDSTEP_USAGE_ERROR,
                       SANDSTEP_USAGE_ERROR_BAD_VALUE, "The body of %s %s is larger than %" G_GSIZE_FORMAT " bytes",
                       req->method, req->path, req->limit);
      return;
    }
  g_byte_array_append (req->body, data, len);
}

static int
open_staged_file (Daemon *d)
{
  int fd = openat (d->staging_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
    {
      g_autofree char *name = g_strdup_printf ("write-%08x%08x", g_random_int (), g_random_int ());
      fd = openat (d->staging_fd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd >= 0)
        unlinkat (d->staging_fd, name, 0);
    }
  return fd;
}

static void on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data);

static void
on_got_headers (SoupServerMessage *msg, gpointer user_data)
{
  Daemon *d = user_data;
  Request *req = g_new0 (Request, 1);
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  GUri *uri = soup_server_message_get_uri (msg);
  const char *why = NULL;
  gboolean bad_handle = FALSE;
  goffset length;

  /* Made here, not when the connection waits for a request: a keep-alive
   * connection that closes instead never finishes that message. */
  req->refs = 1;              /* released when the exchange finishes */
  req->d = d;
  req->msg = g_object_ref (msg);
  req->upload_fd = -1;
  g_object_set_data (G_OBJECT (msg), "sandstepd-request", req);
  g_signal_connect (msg, "got-chunk", G_CALLBACK (on_got_chunk), req);
  g_signal_connect (msg, "finished", G_CALLBACK (on_finished), req);

  req->method = g_strdup (soup_server_message_get_method (msg));
  req->path = g_strdup (uri != NULL ? g_uri_get_path (uri) : "?");
  /* Everything the body brings is handled as it comes: nothing accumulates unbounded. */
  soup_message_body_set_accumulate (soup_server_message_get_request_body (msg), FALSE);
  req->body = g_byte_array_new ();
  req->limit = MAX_JSON_BODY;

  if (soup_server_message_get_status (msg) != 0)
    {
      /* libsoup refused it already (e.g. ".." in an encoded path): say so in JSON. */
      req->refused = TRUE;
      answer_protocol (req, soup_server_message_get_status (msg), "bad-path",
                       "request /v1/... paths without '..' segments", SANDSTEP_USAGE_ERROR,
                       SANDSTEP_USAGE_ERROR_BAD_VALUE, "The request path is refused");
      return;
    }
  if (!authorized (d, msg, &why))
    {
      GInetSocketAddress *remote = G_INET_SOCKET_ADDRESS (soup_server_message_get_remote_address (msg));
      g_autofree char *from = remote != NULL ? g_inet_address_to_string (g_inet_socket_address_get_address (remote))
                                             : g_strdup ("?");
      req->refused = TRUE;
      say ("refused %s %s from %s: %s", req->method, req->path, from, why);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "WWW-Authenticate",
                                    "Bearer realm=\"sandstepd\"");
      answer_protocol (req, SOUP_STATUS_UNAUTHORIZED, "unauthorized",
                       "set SANDSTEP_TOKEN or SANDSTEP_TOKEN_FILE to the token sandstepd was started with",
                       SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                       "The sandbox server refused the request: it carried %s; set " SANDSTEP_TOKEN_ENV " or "
                       SANDSTEP_TOKEN_FILE_ENV " to the token sandstepd was started with", why);
      return;
    }

  req->route = route_for (req->path, &req->handle, &bad_handle);
  if (bad_handle)
    {
      req->refused = TRUE;
      answer_protocol (req, SOUP_STATUS_BAD_REQUEST, "bad-handle", "pass the handle 'sandstep provision' printed",
                       SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                       "'%s' is not a sandbox handle (they look like sandstep-0123456789abcdef)", req->handle);
      return;
    }
  if (req->route == ROUTE_NONE)
    {
      req->refused = TRUE;
      answer_protocol (req, SOUP_STATUS_NOT_FOUND, "no-route", "see the API at the top of sandstepd.c",
                       SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "No such API: %s %s", req->method,
                       req->path);
      return;
    }
  if ((req->route == ROUTE_HEALTH) != (strcmp (req->method, SOUP_METHOD_GET) == 0) ||
      (req->route != ROUTE_HEALTH && strcmp (req->method, SOUP_METHOD_POST) != 0))
    {
      req->refused = TRUE;
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Allow",
                                    req->route == ROUTE_HEALTH ? "GET" : "POST");
      answer_protocol (req, SOUP_STATUS_METHOD_NOT_ALLOWED, "method",
                       req->route == ROUTE_HEALTH ? "use GET" : "use POST", SANDSTEP_USAGE_ERROR,
                       SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s is not accepted on %s", req->method, req->path);
      return;
    }

  length = soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH
             ? soup_message_headers_get_content_length (headers)
             : -1;
  if (req->route == ROUTE_WRITE || req->route == ROUTE_PUT)
    {
      const char *claim = soup_message_headers_get_one (headers, SANDSTEP_CLAIM_HEADER);
      Lease *lease = claim != NULL ? g_hash_table_lookup (d->leases, claim) : NULL;
      GHashTable *query = g_uri_get_query (uri) != NULL ? soup_form_decode (g_uri_get_query (uri)) : NULL;
      g_autoptr(GError) error = NULL;

      if (query != NULL)
        g_object_set_data_full (G_OBJECT (msg), "sandstepd-query", query, (GDestroyNotify) g_hash_table_unref);
      /* Unclaimed uploads are refused before a byte is staged. */
      if (find_lease (req, claim) == NULL)
        {
          req->refused = TRUE;
          return;
        }
      req->lease = lease;
      if (length > 0 && (guint64) length > d->max_upload)
        {
          req->refused = TRUE;
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          answer_protocol (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                           "send less at a time, or start sandstepd with a larger --max-upload", SANDSTEP_PATH_ERROR,
                           SANDSTEP_PATH_ERROR_TOO_LARGE,
                           "The body is larger than the server's limit of %" G_GUINT64_FORMAT " bytes", d->max_upload);
          return;
        }
      if (req->route == ROUTE_WRITE)
        {
          req->upload_fd = open_staged_file (d);
          if (req->upload_fd < 0)
            {
              req->refused = TRUE;
              answer_protocol (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                               SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                               "Cannot stage a write under '%s': %s", d->staging_dir, g_strerror (errno));
            }
        }
      else
        {
          const char *name = query != NULL ? g_hash_table_lookup (query, "name") : NULL;
          req->upload = sandstepd_upload_new (d->staging_fd, d->staging_dir, name, d->max_upload, &error);
          if (req->upload == NULL)
            {
              req->refused = TRUE;
              answer_error (req, error, NULL);
            }
        }
      return;
    }
  if (length > (goffset) req->limit)
    {
      req->refused = TRUE;
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
      answer_protocol (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                       "send a smaller body; requests are small JSON objects", SANDSTEP_USAGE_ERROR,
                       SANDSTEP_USAGE_ERROR_BAD_VALUE, "The body of %s %s is larger than %" G_GSIZE_FORMAT " bytes",
                       req->method, req->path, req->limit);
    }
}

static void
on_request_started (SoupServer *server, SoupServerMessage *msg, gpointer user_data)
{
  g_signal_connect (msg, "got-headers", G_CALLBACK (on_got_headers), user_data);
}

/* The body is in: do the work (the refused ones never get here: libsoup skips a message with a status). */
static void
on_request (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  Request *req = g_object_get_data (G_OBJECT (msg), "sandstepd-request");

  if (req == NULL || req->refused || req->completed)
    return;
  if (req->d->debug)
    say ("%s %s", req->method, req->path);
  soup_server_message_pause (msg);
  req->paused = TRUE;
  switch (req->route)
    {
    case ROUTE_HEALTH:
      {
        g_autoptr(JsonObject) object = json_object_new ();
        json_object_set_string_member (object, "sandstepd", SANDSTEP_VERSION);
        answer_json (req, SOUP_STATUS_OK, object);
        break;
      }
    case ROUTE_PROVISION:
    case ROUTE_GC:
    case ROUTE_DESCRIBE:
    case ROUTE_RELEASE:
    case ROUTE_DESTROY:
      handle_record (req);
      break;
    case ROUTE_CLAIM:
      handle_claim (req);
      break;
    case ROUTE_RELEASE_CLAIM:
      handle_release_claim (req);
      break;
    case ROUTE_RUN:
      handle_run (req);
      break;
    case ROUTE_READ:
    case ROUTE_LIST:
      handle_read_list (req);
      break;
    case ROUTE_WRITE:
      handle_write (req);
      break;
    case ROUTE_PUT:
      handle_put (req);
      break;
    case ROUTE_EXPORT:
      handle_export (req);
      break;
    case ROUTE_NONE:
      break;
    }
}

/* ---- connections ----
 *
 * sandstepd accepts connections itself and hands each to the SoupServer
 * (soup_server_accept_iostream), rather than letting SoupServer listen:
 * libsoup before 3.4 leaks a GSocket for every connection its own listener
 * accepts (fixed upstream by b545d5f0), and before 3.3 every keep-alive
 * connection a client closes while idle (d20c6601).  A server without
 * listeners also closes each connection after its answer, so none idles.
 * The socket rides on the remote address object, which lives exactly as
 * long as the connection: requests find it there for TCP_NODELAY and to
 * notice a peer that hangs up. */

static GSocket *
message_socket (SoupServerMessage *msg)
{
  GSocketAddress *remote = soup_server_message_get_remote_address (msg);

  return remote != NULL ? g_object_get_data (G_OBJECT (remote), "sandstepd-socket") : NULL;
}

typedef struct {
  Daemon *d;
  GSocketConnection *connection;
  GSocketAddress *local;
  GSocketAddress *remote;
} Handshake;

static void
handshake_free (Handshake *h)
{
  g_clear_object (&h->connection);
  g_clear_object (&h->local);
  g_clear_object (&h->remote);
  g_free (h);
}

static void
accept_stream (Daemon *d, GIOStream *stream, GSocketAddress *local, GSocketAddress *remote)
{
  g_autoptr(GError) error = NULL;

  if (!soup_server_accept_iostream (d->server, stream, local, remote, &error))
    say ("cannot serve a connection: %s", error->message);
}

static void
on_handshake (GObject *source, GAsyncResult *result, gpointer data)
{
  Handshake *h = data;
  g_autoptr(GError) error = NULL;

  if (g_tls_connection_handshake_finish (G_TLS_CONNECTION (source), result, &error))
    accept_stream (h->d, G_IO_STREAM (source), h->local, h->remote);
  else
    {
      if (h->d->debug)
        say ("a TLS handshake failed: %s", error->message);
      g_io_stream_close (G_IO_STREAM (source), NULL, NULL);
    }
  g_object_unref (source);
  handshake_free (h);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source, gpointer data)
{
  Daemon *d = data;
  GSocket *socket = g_socket_connection_get_socket (connection);
  g_autoptr(GSocketAddress) local = g_socket_connection_get_local_address (connection, NULL);
  g_autoptr(GSocketAddress) remote = g_socket_connection_get_remote_address (connection, NULL);

  if (local == NULL || remote == NULL)
    return TRUE;
  /* Answers are written in pieces (headers, chunks): without this, Nagle's
   * algorithm and the client's delayed ACK add tens of milliseconds each. */
  g_socket_set_option (socket, IPPROTO_TCP, TCP_NODELAY, 1, NULL);
  g_object_set_data_full (G_OBJECT (remote), "sandstepd-socket", g_object_ref (socket), g_object_unref);
  if (d->certificate != NULL)
    {
      g_autoptr(GError) error = NULL;
      GIOStream *tls = g_tls_server_connection_new (G_IO_STREAM (connection), d->certificate, &error);
      Handshake *h;

      if (tls == NULL)
        {
          say ("cannot serve TLS: %s", error->message);
          return TRUE;
        }
      h = g_new0 (Handshake, 1);
      h->d = d;
      h->connection = g_object_ref (connection);
      h->local = g_steal_pointer (&local);
      h->remote = g_steal_pointer (&remote);
      g_tls_connection_handshake_async (G_TLS_CONNECTION (tls), G_PRIORITY_DEFAULT, NULL, on_handshake, h);
      return TRUE;
    }
  accept_stream (d, G_IO_STREAM (connection), local, remote);
  return TRUE;
}

/* ---- startup ---- */

static gboolean
parse_listen (const char *text, GInetSocketAddress **out, GError **error)
{
  g_autofree char *host = NULL;
  guint16 port;
  GSocketAddress *address;

  if (sandstep_parse_host_port (text, FALSE, &host, &port) &&
      (address = g_inet_socket_address_new_from_string (host, port)) != NULL)
    {
      *out = G_INET_SOCKET_ADDRESS (address);
      return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "--listen '%s' is not ADDRESS:PORT (e.g. 127.0.0.1:7700, [::1]:7700, 0.0.0.0:7700)", text);
}

static gboolean
on_quit_signal (gpointer data)
{
  say ("stopping; sandboxes stay in '%s'", the_daemon->state_dir);
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

/* sandstep-init sits beside `sandstep`; in a build tree sandstepd is elsewhere, so point the jail at it. */
static void
find_init (const char *self_exe)
{
  g_autofree char *dir = g_path_get_dirname (self_exe);
  g_autofree char *beside = g_build_filename (dir, "sandstep-init", NULL);

  if (g_getenv ("SANDSTEP_INIT") != NULL || g_file_test (beside, G_FILE_TEST_IS_EXECUTABLE))
    return;
#ifdef SANDSTEPD_BUILD_INIT
  if (g_file_test (SANDSTEPD_BUILD_INIT, G_FILE_TEST_IS_EXECUTABLE))
    g_setenv ("SANDSTEP_INIT", SANDSTEPD_BUILD_INIT, TRUE);
#endif
}

static void
clean_staging (Daemon *d)
{
  DIR *dir;
  struct dirent *entry;
  int fd = fcntl (d->staging_fd, F_DUPFD_CLOEXEC, 3);

  dir = fd >= 0 ? fdopendir (fd) : NULL;
  if (dir == NULL)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  while ((entry = readdir (dir)) != NULL)
    if (strcmp (entry->d_name, ".") != 0 && strcmp (entry->d_name, "..") != 0)
      sandstep_remove_tree_at (d->staging_fd, entry->d_name);
  closedir (dir);
}

static int
usage_error (const char *message)
{
  g_printerr ("sandstepd: %s\n", message);
  return SANDSTEP_EXIT_USAGE;
}

int
main (int argc, char **argv)
{
  g_autofree char *listen = NULL;
  g_autofree char *token_file = NULL;
  g_autofree char *tls_cert = NULL;
  g_autofree char *tls_key = NULL;
  g_autofree char *state_dir = NULL;
  g_autofree char *max_upload = NULL;
  int max_claims = DEFAULT_MAX_CLAIMS;
  gboolean worker = FALSE;
  gboolean version = FALSE;
  int parent = 0;
  GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen, "Address and port to serve (default " DEFAULT_LISTEN "; port 0: any free one)", "ADDR:PORT" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file, "Require this bearer token (the file's first line) on every request", "FILE" },
    { "tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &tls_cert, "Serve HTTPS with this PEM certificate (chain)", "FILE" },
    { "tls-key", 0, 0, G_OPTION_ARG_FILENAME, &tls_key, "The certificate's PEM private key", "FILE" },
    { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &state_dir, "Where sandboxes live (default $SANDSTEP_STATE_DIR, else sandstep's default)", "DIR" },
    { "max-upload", 0, 0, G_OPTION_ARG_STRING, &max_upload, "Largest put or write accepted (default 1G)", "BYTES" },
    { "max-claims", 0, 0, G_OPTION_ARG_INT, &max_claims, "Claims held at once (default 256)", "N" },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version", NULL },
    { "worker", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &worker, NULL, NULL },
    { "parent", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &parent, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- serve sandstep sandboxes over HTTP");
  g_autoptr(GError) error = NULL;
  g_autoptr(GInetSocketAddress) address = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GSocketService) service = NULL;
  g_autoptr(GSocketAddress) effective = NULL;
  g_autofree char *token = NULL;
  Daemon *d;

  setlocale (LC_ALL, "");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    return usage_error (error->message);
  if (version)
    {
      g_print ("sandstepd %s\n", SANDSTEP_VERSION);
      return 0;
    }
  if (worker)
    return sandstepd_worker_main (3, state_dir, parent);
  signal (SIGPIPE, SIG_IGN);

  d = g_new0 (Daemon, 1);
  the_daemon = d;
  d->debug = g_getenv ("SANDSTEPD_DEBUG") != NULL;
  d->max_workers = max_claims > 0 ? (guint) max_claims : DEFAULT_MAX_CLAIMS;
  d->max_upload = DEFAULT_MAX_UPLOAD;
  d->staging_fd = -1;
  g_queue_init (&d->idle);
  d->leases = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) lease_unref);
  if (max_upload != NULL && !sandstep_parse_size (max_upload, &d->max_upload, NULL))
    return usage_error ("--max-upload must be a size: bytes, or a number with K, M or G");

  if (!parse_listen (listen != NULL ? listen : DEFAULT_LISTEN, &address, &error))
    return usage_error (error->message);
  if (token_file != NULL)
    {
      token = sandstep_wire_read_token_file (token_file, &error);
      if (token == NULL)
        return usage_error (error->message);
      sandstep_wire_token_digest (token, d->token_digest);
      explicit_bzero (token, strlen (token));
      d->has_token = TRUE;
    }
  if (!g_inet_address_get_is_loopback (g_inet_socket_address_get_address (address)) && !d->has_token)
    return usage_error ("refusing to listen beyond loopback without a token: anyone who reaches the port could run "
                        "commands; pass --token-file=FILE (and --tls-cert/--tls-key), or listen on 127.0.0.1");
  if ((tls_cert != NULL) != (tls_key != NULL))
    return usage_error ("--tls-cert and --tls-key go together");

  d->state_dir = state_dir != NULL ? g_strdup (state_dir) : sandstep_local_backend_default_dir ();
  d->backend = sandstep_local_backend_new (d->state_dir, &error);
  if (d->backend == NULL)
    {
      g_printerr ("sandstepd: %s\n", error->message);
      return sandstep_error_exit_status (error);
    }
  d->staging_dir = g_build_filename (d->state_dir, STAGING, NULL);
  if ((mkdir (d->staging_dir, 0700) < 0 && errno != EEXIST) ||
      (d->staging_fd = open (d->staging_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    {
      g_printerr ("sandstepd: cannot use the staging directory '%s': %s\n", d->staging_dir, g_strerror (errno));
      return SANDSTEP_EXIT_INTERNAL;
    }
  clean_staging (d);
  d->self_exe = g_file_read_link ("/proc/self/exe", NULL);
  if (d->self_exe == NULL)
    d->self_exe = g_strdup (argv[0]);
  find_init (d->self_exe);

  d->server = soup_server_new ("server-header", "sandstepd/" SANDSTEP_VERSION, NULL);
  if (tls_cert != NULL)
    {
      d->certificate = g_tls_certificate_new_from_files (tls_cert, tls_key, &error);
      if (d->certificate == NULL)
        {
          g_printerr ("sandstepd: cannot use the TLS certificate '%s' and key '%s': %s\n", tls_cert, tls_key,
                      error->message);
          return SANDSTEP_EXIT_USAGE;
        }
    }
  g_signal_connect (d->server, "request-started", G_CALLBACK (on_request_started), d);
  soup_server_add_handler (d->server, NULL, on_request, d, NULL);

  /* Connections are accepted here and handed to the SoupServer (see on_incoming). */
  service = g_socket_service_new ();
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), G_SOCKET_ADDRESS (address), G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, NULL, &effective, &error))
    {
      g_autofree char *shown = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (address));
      g_printerr ("sandstepd: cannot listen on %s: %s\n", shown, error->message);
      return SANDSTEP_EXIT_INTERNAL;
    }
  g_signal_connect (service, "incoming", G_CALLBACK (on_incoming), d);
  g_socket_service_start (service);
  if (!g_inet_address_get_is_loopback (g_inet_socket_address_get_address (address)) && tls_cert == NULL)
    say ("warning: serving beyond loopback without TLS: the token and all traffic travel in clear text");

  top_up_workers (d);
  {
    GInetAddress *host = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (effective));
    g_autofree char *text = g_inet_address_to_string (host);
    gboolean v6 = g_inet_address_get_family (host) == G_SOCKET_FAMILY_IPV6;

    /* Tests and scripts read this line to learn the port. */
    printf ("sandstepd: listening on %s://%s%s%s:%u\n", d->certificate != NULL ? "https" : "http", v6 ? "[" : "",
            text, v6 ? "]" : "", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective)));
  }
  fflush (stdout);
  say ("serving sandboxes of '%s'%s", d->state_dir, d->has_token ? " (token required)" : "");

  loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, on_quit_signal, loop);
  g_unix_signal_add (SIGINT, on_quit_signal, loop);
  g_main_loop_run (loop);
  /* Workers die with us (PR_SET_PDEATHSIG), their jails with them; the claims go with the processes. */
  return 0;
}
