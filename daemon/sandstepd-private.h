/* sandstepd-private.h: what the files of sandstepd share.
 *
 * One SoupServer on the main loop answers every request; nothing slow runs
 * there.  sandstepd-routes.c reads each request as its headers and body
 * arrive and hands it to its handler: record operations on GTask threads
 * (sandstepd-records.c), claims (sandstepd-leases.c), and everything done
 * under a claim through that claim's worker process (sandstepd-workers.c,
 * sandstepd-worker.c).  Answers, streamed or not, and connections are
 * sandstepd-http.c's; a command's output and an export stream through
 * sandstepd-streams.c.
 */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "sandstep-backend.h"
#include "sandstep-http-guard.h"
#include "sandstep-token.h"
#include "sandstepd-channel.h"
#include "sandstepd.h"

G_BEGIN_DECLS

/* Bodies of the JSON requests are small. */
#define SANDSTEPD_MAX_JSON_BODY (1024 * 1024)
/* Output held for a slow reader before the command is made to wait. */
#define SANDSTEPD_HIGH_WATER (1024 * 1024)
#define SANDSTEPD_LOW_WATER (256 * 1024)
#define SANDSTEPD_STAGING "sandstepd-staging"
/* A worker serves this many claims, then a fresh one takes over (bounds any slow leak). */
#define SANDSTEPD_MAX_CLAIMS_PER_WORKER 1000
/* Requests that wait for a worker (sandstepd-workers.c): at most this many at once, each at most this long. */
#define SANDSTEPD_MAX_WAITING 1024
#define SANDSTEPD_WAIT_FOR_WORKER_S 30
/* Slow and hostile clients (hooks/sandstep-http-guard.h); the two
 * deadlines are --header-timeout and --idle-timeout. */
#define SANDSTEPD_HEADERS_DEADLINE_S 10
#define SANDSTEPD_BODY_IDLE_S 30
#define SANDSTEPD_MAX_PENDING_PER_PEER 32
#define SANDSTEPD_MAX_PENDING 256
#define SANDSTEPD_MAX_CONNECTIONS_PER_PEER 1024
#define SANDSTEPD_MAX_CONNECTIONS 4096
/* The hint of a request whose members are wrong. */
#define SANDSTEPD_API_HINT "see the API in hooks/sandstep-wire.h"

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
  ROUTE_SANDBOXES,          /* POST /v1/list: every sandbox, as `sandstep list` shows them */
  ROUTE_DESCRIBE,
  ROUTE_RELEASE,
  ROUTE_DESTROY,
  ROUTE_CLAIM,
  ROUTE_RELEASE_CLAIM,
  ROUTE_CLAIM_RUN,          /* claim, run and release in one exchange (sandstepd-step.c) */
  ROUTE_RUN,
  ROUTE_READ,
  ROUTE_WRITE,
  ROUTE_LIST,
  ROUTE_PUT,
  ROUTE_EXPORT,
  ROUTE_FORK,               /* forks and checkpoints under a claim (sandstepd-layers.c) */
  ROUTE_CHECKPOINT,
  ROUTE_ROLLBACK,
  ROUTE_CHECKPOINTS,
  ROUTE_E2B,                /* E2B's platform API and envd, beside /v1 (sandstepd-e2b.c) */
} Route;

struct _Daemon {
  SoupServer *server;
  SandstepBackend *backend;
  char *state_dir;
  char *staging_dir;
  int staging_fd;
  SandstepTokenSet *tokens;   /* every request needs one of them */
  char **server_names;        /* Host names accepted besides addresses, localhost and this host's name */
  GHashTable *e2b_templates;  /* E2B template name -> image reference (--e2b-template); NULL: none */
  char *self_exe;
  GHashTable *leases;       /* claim id -> Lease (ref) */
  GQueue idle;              /* Workers without a lease (ref), the most recently used first */
  guint n_workers;
  guint n_starting;         /* started, not yet ready */
  GHashTable *waiting;      /* owner -> its requests that wait for a worker (sandstepd-workers.c) */
  GQueue waiting_turns;     /* the owners with requests waiting, in the order they are served */
  guint n_waiting;
  guint retire_timer;
  guint spawn_timer;
  gint64 last_return;       /* monotonic time a worker last came back */
  guint max_workers;
  guint64 max_upload;
  gboolean debug;
  guint top_up;
  GTlsCertificate *certificate;
  /* connections (sandstepd-http.c, by hooks/sandstep-http-guard.h) */
  SandstepHttpGuard *guard;
  guint max_connections;
  guint header_timeout_s;
  guint idle_timeout_s;
};

/* A message to a worker and what to do with its answer. */
typedef void (*CallDone) (Call *call, JsonObject *reply, int reply_fd, const GError *error);

struct _Call {
  JsonObject *message;
  int fds[SANDSTEPD_CHANNEL_MAX_FDS];
  guint n_fds;
  gint id;
  CallDone done;
  gpointer data;
  GDestroyNotify destroy;
  gboolean forgotten;       /* its requester went away: answer ignored */
  /* The answer's fds after the first (open-directory: the files' root, and a jail's keep and pidfd), for done() to
   * take; -1 where none came. */
  int more_fds[SANDSTEPD_CHANNEL_MAX_FDS - 1];
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
  gint64 idle_since;        /* monotonic time it was last returned */
  /* Who holds it, told when it dies (a lease: sandstepd-leases.c); not a ref: the holder owns the worker. */
  void (*died) (gpointer holder);
  gpointer holder;
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
  char *owner;              /* the owner that claimed it: a token must cover it to use the claim */
  Worker *worker;           /* ref */
  Request *claim;           /* the claim's request (ref) while it streams */
  gboolean active;
  gboolean ended;
  gboolean detached;
  GPtrArray *end_waiters;   /* Requests answered once the claim is gone */
  /* Called once the claim is gone (after the waiters), at most once. */
  void (*on_released) (gpointer data);
  gpointer on_released_data;
};

struct _Request {
  int refs;
  Daemon *d;
  SoupServerMessage *msg;   /* ref until finished */
  Route route;
  char *handle;
  char *method;
  char *path;
  const SandstepTokenEntry *scope;  /* the token it carried (the daemon's) */
  char *caller_owner;       /* the caller's owner, once its body named one */
  gboolean refused;         /* answered already while reading (401, 413, ...) */
  gboolean mid_body;        /* refused while its body comes: answered at once, the rest never read */
  GByteArray *body;         /* JSON bodies */
  gsize limit;
  int upload_fd;            /* write: the staged bytes; claim-run: the command's stdin */
  gboolean line_done;       /* claim-run: its first line is in req->body, the rest goes to upload_fd */
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
  /* What a streamed answer sends to keep its connection alive: NULL, a newline (JSON lines); else a frame of
   * its protocol (E2B's envd). */
  char *keepalive_frame;
  gsize keepalive_len;
  /* Streamed answers that get a copy of every byte this one takes from now on, and end with it (E2B's
   * commands.connect); NULL: none. */
  GPtrArray *tees;
  /* The tees outlive this answer's connection: they go on getting what it takes, and end when it ends (an E2B
   * command, which outlives the call that started it). */
  gboolean keep_tees;
};

/* ---- sandstepd-http.c: logging, answers, streamed answers, connections ---- */

/* One line on stderr with a time stamp; secrets never go in. */
void sandstepd_say (const char *format, ...) G_GNUC_PRINTF (1, 2);

Request *sandstepd_request_new (Daemon *d, SoupServerMessage *msg);
Request *sandstepd_request_ref (Request *req);
void sandstepd_request_unref (Request *req);
void sandstepd_request_resume (Request *req);

void sandstepd_answer_json (Request *req, guint status, JsonObject *object);
/* A backend's error, with the HTTP status, code and hint of its kind. */
void sandstepd_answer_error (Request *req, const GError *error);
/* A refusal of the protocol (not one of a backend's): @status with its own code and hint. */
void sandstepd_answer_refusal (Request *req, guint status, const char *code, const char *hint, GQuark domain,
                               int error_code, const char *format, ...) G_GNUC_PRINTF (7, 8);
/* The same for an error the wire module gave (a bad member), prefixed with the method and path. */
void sandstepd_answer_bad_request (Request *req, const char *hint, const GError *error);

/* TRUE when the request's token covers @owner (and remembers it as the
 * caller's); else answers 403 naming @owner and what the token covers. */
gboolean sandstepd_check_owner (Request *req, const char *owner);

/* The request's body as a JSON object, or NULL after answering 400. */
JsonObject *sandstepd_request_body (Request *req);

/* A streamed answer: chunked JSON lines, with keepalives and a watch on the peer. */
void sandstepd_stream_begin (Request *req);
void sandstepd_stream_take (Request *req, char *data, gsize len);
void sandstepd_stream_object (Request *req, JsonObject *object);
void sandstepd_stream_end (Request *req);
void sandstepd_stream_error (Request *req, const GError *error);
/* @tee (begun already) gets a copy of what @req's stream takes from now on, and ends when it ends; a tee whose
 * reader falls SANDSTEPD_TEE_MAX bytes behind is ended (with no last frame: its reader sees the stream cut). */
void sandstepd_stream_tee (Request *req, Request *tee);
/* libsoup's "finished": the exchange is over, whoever ended it. */
void sandstepd_request_finished (SoupServerMessage *msg, gpointer user_data);

/* The connection's socket, for TCP_NODELAY and to notice a peer that hangs up. */
GSocket *sandstepd_message_socket (SoupServerMessage *msg);
/* Accepts on @listener (bound and listening) from the main loop: counts and
 * caps connections, shakes hands for TLS, hands each stream to libsoup. */
void sandstepd_listen (Daemon *d, GSocket *listener);
/* A request's headers are in; a body chunk came; the body is in (or the exchange is over). */
void sandstepd_conn_got_headers (SoupServerMessage *msg);
void sandstepd_conn_body_progress (SoupServerMessage *msg);
void sandstepd_conn_body_done (SoupServerMessage *msg);

/* ---- sandstepd-workers.c: the pool of worker processes and the calls they answer ---- */

Worker *sandstepd_worker_ref (Worker *w);
void sandstepd_worker_unref (Worker *w);
/* Queues operation @op (attach, run, read, ...) for @w: @message with "op" and "id" set, taking
 * @message and @fds; @done runs later, from the main loop. */
Call *sandstepd_worker_call (Worker *w, const char *op, JsonObject *message, const int *fds, guint n_fds,
                             CallDone done, gpointer data, GDestroyNotify destroy);
void sandstepd_call_free (Call *call);
/* Tells the worker to kill what @call runs, if it runs; its answer still comes. */
void sandstepd_worker_cancel (Worker *w, Call *call);
/* The requester of @call is gone: its answer is dropped, and what it runs is killed. */
void sandstepd_worker_forget (Worker *w, Call *call);
/* Answers every call of @w with @error. */
void sandstepd_worker_fail_all (Worker *w, const GError *error);
/* The pool's parts of @d: no worker yet. */
void sandstepd_workers_init (Daemon *d);
/* Keeps spare workers started and unclaimed, so a claim never waits for an exec. */
void sandstepd_workers_top_up (Daemon *d);
/* An unclaimed worker (ref), or NULL when there are max_workers already. */
Worker *sandstepd_worker_take (Daemon *d, GError **error);
/* A ready worker (ref) for @req, whose token covers @owner: @granted gets it, later or at once, taking @data;
 * meanwhile @req waits in @owner's turn (owners are served in turn, so one owner's many requests never starve
 * another's).  When none comes in time or too many wait, @req is answered 503 and @destroy frees @data. */
typedef void (*WorkerGranted) (Request *req, Worker *w, gpointer data);
void sandstepd_worker_request (Request *req, const char *owner, WorkerGranted granted, gpointer data,
                               GDestroyNotify destroy);
/* Back to the idle ones, or retired. */
void sandstepd_worker_return (Daemon *d, Worker *w);

/* ---- sandstepd-leases.c: claims held by a connection ---- */

void sandstepd_lease_unref (Lease *lease);
/* The worker of @lease died: the claim is over. */
/* The lease named by @claim on @req's handle, or NULL after answering the request. */
Lease *sandstepd_find_lease (Request *req, const char *claim);
/* The JSON body of a claimed call (in @out_body, NULL after answering 400) and its lease,
 * or NULL after answering the request. */
Lease *sandstepd_claimed_body (Request *req, JsonObject **out_body);
void sandstepd_handle_claim (Request *req);
void sandstepd_handle_release_claim (Request *req);
/* A lease on @req's handle for @who, its worker @w (taken), not yet attached: the caller sends the attach. */
Lease *sandstepd_lease_new (Request *req, const SandstepIdentity *who, Worker *w);
/* The attach succeeded: the lease is in the table and can be ended. */
void sandstepd_lease_activate (Lease *lease);
/* The attach failed: the worker goes back, the lease is over. */
void sandstepd_lease_abandon (Lease *lease);
/* Ends @lease (see sandstepd-leases.c); @abrupt: its holder went away, its worker is killed. */
void sandstepd_lease_end (Lease *lease, const char *why, gboolean abrupt);

/* ---- sandstepd-step.c: claim-run, a step's command in one exchange ---- */

void sandstepd_handle_claim_run (Request *req);

/* ---- sandstepd-records.c: provision, describe, release, destroy, gc ---- */

void sandstepd_handle_record (Request *req);

/* ---- sandstepd-streams.c: run and export, output streamed as JSON lines ---- */

void sandstepd_handle_run (Request *req);
void sandstepd_handle_export (Request *req);
/* claim-run's stream: @first (taken) as the first line, then the output of
 * @message (taken: a worker's "run") on @lease's worker, with @stdin_fd
 * (taken; -1: none); the lease ends cleanly before the last line goes, or
 * abruptly when the caller goes away. */
void sandstepd_stream_step (Request *req, Lease *lease, JsonObject *first, JsonObject *message, int stdin_fd);

/* How a streamed command's answer is framed when not in sandstep's JSON lines (E2B's envd: Connect's envelopes).
 * Each function returns newly allocated bytes. */
typedef struct {
  const char *content_type;
  char *(*first) (gsize *out_len);
  /* Output @data of stream 1 (stdout) or 2 (stderr). */
  char *(*data) (int stream, const char *data, gsize len, gsize *out_len);
  /* The end: from the worker's run @reply, or @error (then @reply is NULL). */
  char *(*last) (JsonObject *reply, const GError *error, gsize *out_len);
  char *(*keepalive) (gsize *out_len);
} SandstepdFraming;

/* Operation @op (taken @message) on @lease's worker, its two output pipes and its reply framed by @framing; the
 * lease stays when the answer ends (E2B's runCode: the Python session lives on), and ends abruptly, with what
 * it runs, when the caller goes away before. */
void sandstepd_stream_op_framed (Request *req, Lease *lease, const char *op, JsonObject *message,
                                 const SandstepdFraming *framing);
/* A command (taken @message: a worker's "run", with @stdin_fd, taken, -1: none) framed by @framing that outlives
 * its caller (E2B's commands): it holds @lease and ends it before its last bytes go; when @req's connection goes
 * it runs on, its output going to @req's tees (none: dropped, never waited for), until it ends or the lease is
 * ended (a kill, the sandbox's end). */
void sandstepd_stream_step_detached (Request *req, Lease *lease, JsonObject *message, const SandstepdFraming *framing,
                                     int stdin_fd);

/* ---- sandstepd-files.c: read, list, write, put ---- */

void sandstepd_handle_read_list (Request *req);
/* fork, checkpoint, rollback and checkpoints under a claim (sandstepd-layers.c). */
void sandstepd_handle_layers (Request *req);
void sandstepd_handle_write (Request *req);
void sandstepd_handle_put (Request *req);

/* ---- sandstepd-e2b.c, sandstepd-envd.c: E2B's API (docs/e2b.md) ---- */
/* (What both answer with, their errors and owners, is in sandstepd-e2b-answer.h.) */

/* TRUE when @path is one of E2B's (the platform API's or envd's), whose requests sandstepd-e2b.c reads. */
gboolean sandstepd_e2b_is_path (const char *path);
/* Reads --e2b-template's NAME=REF pairs into @d; FALSE with @error naming a bad one. */
gboolean sandstepd_e2b_set_templates (Daemon *d, char **pairs, GError **error);
gboolean sandstepd_envd_is_path (const char *path);
/* The token entry an E2B request for @path carries (X-API-KEY, or envd's X-Access-Token; on the code
 * interpreter's routes, a sandbox's E2B-Traffic-Access-Token), or NULL with why not. */
const SandstepTokenEntry *sandstepd_e2b_authorized (Daemon *d, SoupServerMessage *msg, const char *path,
                                                    const char **out_why);
void sandstepd_handle_e2b (Request *req);
void sandstepd_handle_envd (Request *req);
/* The owner of the sandboxes an E2B key of @scope creates. */
char *sandstepd_e2b_owner (const SandstepTokenEntry *scope);

/* ---- sandstepd-routes.c: what a request is, who may send it, its body ---- */

/* libsoup's "request-started": reading starts here. */
void sandstepd_on_request_started (SoupServer *server, SoupServerMessage *msg, gpointer user_data);
/* The handler: the body is in; do the work. */
void sandstepd_on_request (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                           gpointer user_data);

G_END_DECLS
