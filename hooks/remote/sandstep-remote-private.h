/* sandstep-remote-private.h: what the files of the remote backend share.
 *
 * sandstep-remote-http.c talks HTTP to a sandstepd (requests, answers,
 * errors, streamed lines), sandstep-remote-put.c streams a host tree for a
 * put, and sandstep-remote.c is the backend interface built on both.  Every
 * body and line is encoded and read by hooks/sandstep-wire.c.  Nothing here
 * is exported from the module.
 */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "sandstep-remote.h"
#include "sandstep-wire.h"
#include "sandstep-write-libc.h"

G_BEGIN_DECLS

/* A quiet server sends a keepalive every SANDSTEP_KEEPALIVE_S; this much silence means it is gone. */
#define SANDSTEP_REMOTE_IO_TIMEOUT_S (6 * SANDSTEP_KEEPALIVE_S)

/* Servers a step may send its token to besides --backend, one URL a line
 * ('#' comments): the user's file, then the system's. */
#define SANDSTEP_SERVERS_FILE "sandstep/servers"
#define SANDSTEP_SYSTEM_SERVERS_FILE "/etc/sandstep/servers"
/* Set to 1 to speak plain http:// to a server that is not on loopback. */
#define SANDSTEP_ALLOW_HTTP_ENV "SANDSTEP_ALLOW_HTTP"

typedef struct {
  SandstepBackend parent;
  char *url;              /* the default server, without a trailing '/'; NULL: handles name theirs */
  char *token;            /* NULL: none */
  GPtrArray *trusted;     /* normalized server URLs of the servers files */
  char *trusted_from;     /* the files read, for messages */
  gboolean allow_http;    /* $SANDSTEP_ALLOW_HTTP=1 */
  SoupSession *session;
  gint64 created;         /* monotonic µs, for sandstep_remote_trace() */
  /* A step's request line and stdin, kept for its tries while the sandbox is busy (sandstep-remote-step.c). */
  int spool_fd;
  const SandstepRunRequest *spool_for;
  goffset spool_len;
} RemoteBackend;

/* Where one handle lives, and how the caller wrote it (for messages). */
typedef struct {
  char *server;
  char *local;
  char *shown;
} Target;

typedef struct {
  GInputStream *in;
  guint8 buf[65536];
  gsize start, end;
  gboolean eof;
} LineReader;

typedef struct {
  SandstepAttachment parent;
  RemoteBackend *remote;
  Target target;
  char *claim;
  SoupMessage *claim_msg;
  GInputStream *claim_stream;
  SandstepSpec *spec;
  double remaining_at_claim;
  gint64 claimed_at;      /* monotonic µs */
} RemoteAttachment;

/* Where the time of a call goes, at debug level (G_MESSAGES_DEBUG=sandstep-hooks). */
G_GNUC_INTERNAL void sandstep_remote_trace (RemoteBackend *r, const char *what);

/* TRUE when @server is the configured one or listed in a servers file: the
 * only servers that get the token. */
G_GNUC_INTERNAL gboolean sandstep_remote_server_trusted (RemoteBackend *r, const char *server);
/* FALSE with a usage error when @server is plain http:// beyond loopback and
 * $SANDSTEP_ALLOW_HTTP is not 1. */
G_GNUC_INTERNAL gboolean sandstep_remote_check_scheme (RemoteBackend *r, const char *server, GError **error);

/* The server and local handle of @handle: a remote handle, or a local one on
 * the default server; a server that is not trusted while a token is
 * configured is refused, the token unsent. */
G_GNUC_INTERNAL gboolean sandstep_remote_target_parse (RemoteBackend *r, const char *handle, Target *out,
                                                       GError **error);
G_GNUC_INTERNAL void sandstep_remote_target_clear (Target *t);
/* The server names sandboxes by their local handle; messages say the handle the caller gave. */
G_GNUC_INTERNAL void sandstep_remote_rewrite_error (GError *error, const Target *t);

/* A POST to @server's API @path (and @query), with the token. */
G_GNUC_INTERNAL SoupMessage *sandstep_remote_message (RemoteBackend *r, const char *server, const char *path,
                                                      const char *query);
/* Takes @body. */
G_GNUC_INTERNAL void sandstep_remote_set_body (SoupMessage *msg, JsonObject *body);
G_GNUC_INTERNAL gboolean sandstep_remote_throw_unreachable (GError **error, const char *server, const GError *cause);

/* Sends @msg; its answer's body, or NULL with @error set (a non-2xx answer becomes the error it carries). */
G_GNUC_INTERNAL GBytes *sandstep_remote_send_and_read (RemoteBackend *r, SoupMessage *msg, const char *server,
                                                       const Target *t, GError **error);
/* POSTs @body (taken) to @path and reads the JSON object it answers. */
G_GNUC_INTERNAL JsonObject *sandstep_remote_call (RemoteBackend *r, const char *server, const char *path,
                                                  JsonObject *body, const Target *t, GError **error);
/* POSTs @body (taken) to the claimed call @op and returns the stream of its JSON lines. */
G_GNUC_INTERNAL GInputStream *sandstep_remote_open_stream (RemoteAttachment *a, const char *op, JsonObject *body,
                                                           SoupMessage **out_msg, GError **error);
/* What is left of a non-2xx streamed answer (bounded), as its error. */
G_GNUC_INTERNAL GError *sandstep_remote_error_from_stream (SoupMessage *msg, GInputStream *in, const Target *t);

G_GNUC_INTERNAL void sandstep_remote_line_reader_init (LineReader *lr, GInputStream *in);
/* The next line without its newline; NULL at the end (error unset) or on error. */
G_GNUC_INTERNAL char *sandstep_remote_line_reader_next (LineReader *lr, GError **error);
/* One line of a stream; an empty line is a keepalive (NULL, no error). */
G_GNUC_INTERNAL JsonObject *sandstep_remote_parse_line (const char *line, const char *server, GError **error);

/* "a=b&c=d" from name-value pairs, NULL-terminated, values escaped. */
G_GNUC_INTERNAL char *sandstep_remote_query (const char *first_name, ...) G_GNUC_NULL_TERMINATED;

/* What a command's output does: to @data's RunOutput's fds or callback. */
typedef struct {
  const SandstepRunRequest *request;
  gboolean output_open;
} RunOutput;
typedef gboolean (*DataFunc) (int stream, GBytes *bytes, gpointer data, GError **error);
G_GNUC_INTERNAL gboolean sandstep_remote_on_run_output (int stream, GBytes *bytes, gpointer data, GError **error);
/* The lines of a streamed answer after the data: the result, or an error
 * (rewritten to the caller's handle).  Returns the line that is not data,
 * or NULL with @error set when the server went away (@what: "the command
 * ran", "'PATH' was exported"). */
G_GNUC_INTERNAL JsonObject *sandstep_remote_read_stream (RemoteAttachment *a, GInputStream *stream, const char *what,
                                                         const char *again, DataFunc on_data, gpointer data,
                                                         GError **error);
/* The same, from @lr (which may hold what was read already). */
G_GNUC_INTERNAL JsonObject *sandstep_remote_read_stream_from (RemoteAttachment *a, LineReader *lr, const char *what,
                                                              const char *again, DataFunc on_data, gpointer data,
                                                              GError **error);

/* The try_run_step of the vtable: claim, run and release in one request (sandstep-remote-step.c). */
G_GNUC_INTERNAL gboolean sandstep_remote_try_run_step (SandstepBackend *backend, const char *handle,
                                                       const SandstepIdentity *who, const SandstepRunRequest *request,
                                                       SandstepRunResult *result, SandstepSpec **out_spec,
                                                       GError **error);
/* Its end_run_step: the spooled stdin of the request goes. */
G_GNUC_INTERNAL void sandstep_remote_end_run_step (SandstepBackend *backend, const SandstepRunRequest *request);

/* The put of the vtable: the host tree streams as entries (sandstep-remote-put.c). */
G_GNUC_INTERNAL gboolean sandstep_remote_put (SandstepAttachment *parent, const char *host_src, const char *dest,
                                              GError **error);

G_END_DECLS
