/* sandstepd-http.c: sandstepd's side of HTTP: its log, its answers (whole or streamed), its connections. */
#include "sandstepd-private.h"

#include <glib-unix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

#ifndef POLLRDHUP
#define POLLRDHUP 0x2000
#endif

/* ---- logging: the daemon speaks; secrets never appear ---- */

void
sandstepd_say (const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;
  g_autoptr(GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%Y-%m-%d %H:%M:%S.%f");
  g_autofree char *shown = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  /* A path or a name a client sent must not start a log line of its own. */
  shown = sandstep_escape (message, -1, 0, SANDSTEP_ESCAPE_LINE);
  fprintf (stderr, "%s sandstepd: %s\n", stamp, shown);
}

/* ---- requests and answers ---- */

Request *
sandstepd_request_ref (Request *req)
{
  req->refs++;
  return req;
}

void
sandstepd_request_unref (Request *req)
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
  g_free (req->caller_owner);
  g_free (req->method);
  g_free (req->path);
  g_free (req);
}

void
sandstepd_request_resume (Request *req)
{
  if (req->paused && !req->finished)
    {
      req->paused = FALSE;
      soup_server_message_unpause (req->msg);
    }
}

/* What is still read, and dropped, after an answer given half-way through a
 * body: closing at once would reset the connection, and the peer could lose
 * the answer with its unread bytes. */
#define LINGER_S 2
#define LINGER_BYTES (8 * 1024 * 1024)

typedef struct {
  GIOStream *stream;
  guint8 buf[65536];
  gsize drained;
  guint timer;
  GCancellable *cancellable;
} Linger;

static void
linger_end (Linger *l)
{
  if (l->timer != 0)
    g_source_remove (l->timer);
  g_io_stream_close (l->stream, NULL, NULL);
  g_object_unref (l->stream);
  g_object_unref (l->cancellable);
  g_free (l);
}

static gboolean
on_linger_over (gpointer data)
{
  Linger *l = data;

  l->timer = 0;
  g_cancellable_cancel (l->cancellable);
  return G_SOURCE_REMOVE;
}

static void
on_linger_read (GObject *source, GAsyncResult *result, gpointer data)
{
  Linger *l = data;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), result, NULL);

  if (n <= 0 || (l->drained += n) >= LINGER_BYTES)
    {
      linger_end (l);
      return;
    }
  g_input_stream_read_async (G_INPUT_STREAM (source), l->buf, sizeof l->buf, G_PRIORITY_DEFAULT, l->cancellable,
                             on_linger_read, l);
}

/* libsoup answers only once it has read the whole body, which may never
 * end: the connection is taken from it, answered by hand, its sending side
 * shut, and closed once the peer has stopped too (or LINGER_S later). */
static void
answer_and_close (Request *req, guint status, const char *text, gsize len)
{
  g_autoptr(GIOStream) stream = NULL;
  g_autofree char *head = g_strdup_printf ("HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                                           "Content-Length: %" G_GSIZE_FORMAT "\r\nConnection: close\r\n\r\n",
                                           status, soup_status_get_phrase (status), len);
  GSocket *socket = sandstepd_message_socket (req->msg);
  GOutputStream *out;
  Linger *l;

  req->completed = TRUE;
  sandstepd_request_ref (req);
  if (socket != NULL)
    g_object_ref (socket);
  stream = soup_server_message_steal_connection (req->msg);
  if (stream != NULL)
    {
      out = g_io_stream_get_output_stream (stream);
      if (g_output_stream_write_all (out, head, strlen (head), NULL, NULL, NULL) &&
          g_output_stream_write_all (out, text, len, NULL, NULL, NULL) && g_output_stream_flush (out, NULL, NULL))
        {
          if (socket != NULL && G_IS_SOCKET_CONNECTION (stream))
            g_socket_shutdown (socket, FALSE, TRUE, NULL);
          l = g_new0 (Linger, 1);
          l->stream = g_steal_pointer (&stream);
          l->cancellable = g_cancellable_new ();
          l->timer = g_timeout_add_seconds (LINGER_S, on_linger_over, l);
          g_input_stream_read_async (g_io_stream_get_input_stream (l->stream), l->buf, sizeof l->buf,
                                     G_PRIORITY_DEFAULT, l->cancellable, on_linger_read, l);
        }
      else
        g_io_stream_close (stream, NULL, NULL);
    }
  if (socket != NULL)
    g_object_unref (socket);
  sandstepd_request_unref (req);
}

void
sandstepd_answer_json (Request *req, guint status, JsonObject *object)
{
  gsize len;
  char *text;

  if (req->finished || req->completed)
    return;
  text = sandstep_wire_to_text (object, &len);
  if (req->mid_body)
    {
      answer_and_close (req, status, text, len);
      g_free (text);
      return;
    }
  soup_server_message_set_status (req->msg, status, NULL);
  soup_server_message_set_response (req->msg, "application/json", SOUP_MEMORY_TAKE, text, len);
  req->completed = TRUE;
  sandstepd_request_resume (req);
}

static void
answer_node (Request *req, guint status, JsonNode *node)
{
  sandstepd_answer_json (req, status, json_node_get_object (node));
}

void
sandstepd_answer_error (Request *req, const GError *error)
{
  g_autoptr(GError) hidden = NULL;
  g_autoptr(JsonNode) node = NULL;

  /* A token for some owners only learns nothing of another owner's sandbox. */
  if (req->scope != NULL && req->scope->owner_prefix != NULL &&
      g_error_matches (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER))
    {
      hidden = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
                            "Sandbox '%s' is not owned by '%s'. Use the handle this run provisioned, or pass the "
                            "owner that provisioned it (--owner or SANDSTEP_OWNER)",
                            req->handle != NULL ? req->handle : "?", req->caller_owner != NULL ? req->caller_owner : "?");
      error = hidden;
    }
  node = sandstep_wire_error_to_json (error);

  if (req->d->debug)
    sandstepd_say ("%s %s: %u %s", req->method, req->path, sandstep_wire_error_status (error), error->message);
  answer_node (req, sandstep_wire_error_status (error), node);
}

void
sandstepd_answer_refusal (Request *req, guint status, const char *code, const char *hint, GQuark domain,
                          int error_code, const char *format, ...)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;
  va_list args;

  va_start (args, format);
  error = g_error_new_valist (domain, error_code, format, args);
  va_end (args);
  /* A body over the limit says which limit, as a file too large does. */
  if (g_error_matches (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE))
    sandstep_error_set_size (error, 0, req->d->max_upload);
  node = sandstep_wire_refusal_to_json (error, code, hint);
  if (req->d->debug || status == SOUP_STATUS_INTERNAL_SERVER_ERROR)
    sandstepd_say ("%s %s: %u %s", req->method, req->path, status, error->message);
  answer_node (req, status, node);
}

void
sandstepd_answer_bad_request (Request *req, const char *hint, const GError *error)
{
  sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "bad-request", hint, error->domain, error->code, "%s %s: %s",
                            req->method, req->path, error->message);
}

gboolean
sandstepd_check_owner (Request *req, const char *owner)
{
  g_free (req->caller_owner);
  req->caller_owner = g_strdup (owner);
  if (sandstep_token_entry_covers (req->scope, owner))
    return TRUE;
  sandstepd_answer_refusal (req, SOUP_STATUS_FORBIDDEN, "forbidden",
                            "use a token that covers this owner, or the owner this token covers",
                            SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
                            "The token of this request covers owners under '%s' only, and '%s' is not one of them",
                            req->scope->owner_prefix, owner);
  return FALSE;
}

JsonObject *
sandstepd_request_body (Request *req)
{
  g_autoptr(GError) error = NULL;
  JsonObject *object;

  object = sandstep_wire_parse_object (req->body != NULL ? (const char *) req->body->data : "",
                                       req->body != NULL ? req->body->len : 0, &error);
  if (object == NULL)
    sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "bad-json", "send one JSON object as the body",
                              SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s %s: %s", req->method,
                              req->path, error->message);
  return object;
}

/* ---- streamed answers: JSON lines, chunked, with back-pressure ---- */

static void
on_wrote_body_data (SoupServerMessage *msg, guint size, gpointer user_data)
{
  Request *req = user_data;

  req->pending = size > req->pending ? 0 : req->pending - size;
  if (req->pending < SANDSTEPD_LOW_WATER && req->on_drained != NULL)
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
  sandstepd_request_resume (req);
  return G_SOURCE_CONTINUE;
}

void
sandstepd_stream_begin (Request *req)
{
  SoupServerMessage *msg = req->msg;
  GSocket *socket = sandstepd_message_socket (msg);

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

void
sandstepd_stream_take (Request *req, char *data, gsize len)
{
  if (req->finished || req->completed)
    {
      g_free (data);
      return;
    }
  soup_message_body_append (soup_server_message_get_response_body (req->msg), SOUP_MEMORY_TAKE, data, len);
  req->pending += len;
  req->paused = TRUE;
  sandstepd_request_resume (req);
}

void
sandstepd_stream_object (Request *req, JsonObject *object)
{
  gsize len;
  char *line = sandstep_wire_to_line (object, &len);

  sandstepd_stream_take (req, line, len);
}

void
sandstepd_stream_end (Request *req)
{
  if (req->finished || req->completed)
    return;
  req->completed = TRUE;
  soup_message_body_complete (soup_server_message_get_response_body (req->msg));
  req->paused = TRUE;
  sandstepd_request_resume (req);
}

void
sandstepd_stream_error (Request *req, const GError *error)
{
  g_autoptr(JsonObject) line = sandstep_wire_error_line (error);

  sandstepd_stream_object (req, line);
  sandstepd_stream_end (req);
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
  sandstepd_stream_end (req);
}

void
sandstepd_request_finished (SoupServerMessage *msg, gpointer user_data)
{
  Request *req = user_data;
  gboolean early = req->streaming && !req->completed;

  req->finished = TRUE;
  stop_watches (req);
  sandstepd_conn_body_done (msg);
  g_signal_handlers_disconnect_by_data (msg, req);
  if (early || req->on_gone != NULL)
    {
      void (*on_gone) (Request *) = req->on_gone;
      req->on_gone = NULL;
      req->on_drained = NULL;
      if (on_gone != NULL)
        on_gone (req);
    }
  sandstepd_request_unref (req);
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
 * notice a peer that hangs up.
 *
 * Slow and hostile clients: a connection must bring its request's headers
 * within --header-timeout of being accepted (TLS handshake included), and a
 * body must keep coming (no gap over --idle-timeout); else it is shut down.  A connection that has not
 * brought its headers yet is pending: a peer holds at most
 * SANDSTEPD_MAX_PENDING_PER_PEER of them and all peers
 * SANDSTEPD_MAX_PENDING, and a new one evicts the oldest, so half-open
 * connections cannot crowd out a client that sends its request at once.
 * Connections are capped per peer and in all (beyond: closed at once), and
 * when file descriptors run out, accepting backs off (100 ms doubling to 2
 * s) and the oldest pending connection is evicted, instead of spinning on a
 * listening socket that stays readable. */

GSocket *
sandstepd_message_socket (SoupServerMessage *msg)
{
  GSocketAddress *remote = soup_server_message_get_remote_address (msg);

  return remote != NULL ? g_object_get_data (G_OBJECT (remote), "sandstepd-socket") : NULL;
}

typedef struct _Conn Conn;
struct _Conn {
  Daemon *d;
  GSocket *socket;          /* ref */
  char *peer;               /* its address, as text */
  gboolean pending;         /* its request's headers have not all come */
  gboolean closed;          /* shut down by us */
  guint timer;              /* the deadline that runs now, or 0 */
};

static void
conn_stop_timer (Conn *conn)
{
  if (conn->timer != 0)
    g_source_remove (conn->timer);
  conn->timer = 0;
}

static void
conn_unpend (Conn *conn)
{
  if (!conn->pending)
    return;
  conn->pending = FALSE;
  g_queue_remove (&conn->d->pending, conn);
}

/* Shuts the connection down: libsoup reads its end, and lets it go. */
static void
conn_shut (Conn *conn, const char *why)
{
  if (conn->closed)
    return;
  conn->closed = TRUE;
  conn_stop_timer (conn);
  conn_unpend (conn);
  if (conn->d->debug)
    sandstepd_say ("closing a connection from %s: %s", conn->peer, why);
  g_socket_shutdown (conn->socket, TRUE, TRUE, NULL);
}

static gboolean
on_headers_deadline (gpointer data)
{
  Conn *conn = data;

  conn->timer = 0;
  conn_shut (conn, "no request within --header-timeout");
  return G_SOURCE_REMOVE;
}

static gboolean
on_body_idle (gpointer data)
{
  Conn *conn = data;

  conn->timer = 0;
  conn_shut (conn, "the body stopped coming for --idle-timeout");
  return G_SOURCE_REMOVE;
}

/* The connection's Conn, for a message of it. */
static Conn *
conn_of (SoupServerMessage *msg)
{
  GSocket *socket = sandstepd_message_socket (msg);

  return socket != NULL ? g_object_get_data (G_OBJECT (socket), "sandstepd-conn") : NULL;
}

void
sandstepd_conn_got_headers (SoupServerMessage *msg)
{
  Conn *conn = conn_of (msg);

  if (conn == NULL || conn->closed)
    return;
  conn_unpend (conn);
  conn_stop_timer (conn);
  conn->timer = g_timeout_add_seconds (conn->d->idle_timeout_s, on_body_idle, conn);
}

void
sandstepd_conn_body_progress (SoupServerMessage *msg)
{
  Conn *conn = conn_of (msg);

  if (conn == NULL || conn->closed || conn->timer == 0)
    return;
  /* Rearmed at most once a second: chunks come by the thousand. */
  if (g_source_get_ready_time (g_main_context_find_source_by_id (NULL, conn->timer)) -
        g_get_monotonic_time () > ((gint64) conn->d->idle_timeout_s - 1) * G_USEC_PER_SEC)
    return;
  conn_stop_timer (conn);
  conn->timer = g_timeout_add_seconds (conn->d->idle_timeout_s, on_body_idle, conn);
}

void
sandstepd_conn_body_done (SoupServerMessage *msg)
{
  Conn *conn = conn_of (msg);

  if (conn != NULL)
    conn_stop_timer (conn);
}

/* The connection has gone (libsoup let the stream go). */
static void
conn_gone (gpointer data, GObject *where_the_connection_was)
{
  Conn *conn = data;
  Daemon *d = conn->d;
  guint count = GPOINTER_TO_UINT (g_hash_table_lookup (d->peers, conn->peer));

  conn_stop_timer (conn);
  conn_unpend (conn);
  if (count <= 1)
    g_hash_table_remove (d->peers, conn->peer);
  else
    g_hash_table_insert (d->peers, g_strdup (conn->peer), GUINT_TO_POINTER (count - 1));
  d->n_connections--;
  g_object_set_data (G_OBJECT (conn->socket), "sandstepd-conn", NULL);
  g_object_unref (conn->socket);
  g_free (conn->peer);
  g_free (conn);
}

/* Makes room for one more pending connection of @peer: the oldest of that
 * peer's, or of all, goes. */
static void
evict_pending (Daemon *d, const char *peer)
{
  guint of_peer = 0;
  Conn *oldest_of_peer = NULL;

  for (GList *l = d->pending.head; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (strcmp (c->peer, peer) == 0 && of_peer++ == 0)
        oldest_of_peer = c;
    }
  if (of_peer >= SANDSTEPD_MAX_PENDING_PER_PEER)
    conn_shut (oldest_of_peer, "too many connections of this peer send no request");
  else if (d->pending.length >= SANDSTEPD_MAX_PENDING)
    conn_shut (g_queue_peek_head (&d->pending), "too many connections send no request");
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
    sandstepd_say ("cannot serve a connection: %s", error->message);
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
        sandstepd_say ("a TLS handshake failed: %s", error->message);
      g_io_stream_close (G_IO_STREAM (source), NULL, NULL);
    }
  g_object_unref (source);
  handshake_free (h);
}

/* One accepted connection: counted, given its deadline, handed to libsoup (through TLS). */
static void
serve_connection (Daemon *d, GSocketConnection *connection)
{
  GSocket *socket = g_socket_connection_get_socket (connection);
  g_autoptr(GSocketAddress) local = g_socket_connection_get_local_address (connection, NULL);
  g_autoptr(GSocketAddress) remote = g_socket_connection_get_remote_address (connection, NULL);
  g_autofree char *peer = NULL;
  guint of_peer;
  Conn *conn;

  if (local == NULL || remote == NULL || !G_IS_INET_SOCKET_ADDRESS (remote))
    return;
  peer = g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (remote)));
  of_peer = GPOINTER_TO_UINT (g_hash_table_lookup (d->peers, peer));
  if (d->n_connections >= d->max_connections || of_peer >= SANDSTEPD_MAX_CONNECTIONS_PER_PEER)
    {
      if (d->debug)
        sandstepd_say ("refusing a connection from %s: %u open (%u of it)", peer, d->n_connections, of_peer);
      return;   /* closed as the last reference goes */
    }
  evict_pending (d, peer);

  conn = g_new0 (Conn, 1);
  conn->d = d;
  conn->socket = g_object_ref (socket);
  conn->peer = g_strdup (peer);
  conn->pending = TRUE;
  g_queue_push_tail (&d->pending, conn);
  g_hash_table_insert (d->peers, g_strdup (peer), GUINT_TO_POINTER (of_peer + 1));
  d->n_connections++;
  conn->timer = g_timeout_add_seconds (d->header_timeout_s, on_headers_deadline, conn);
  g_object_set_data (G_OBJECT (socket), "sandstepd-conn", conn);
  g_object_weak_ref (G_OBJECT (connection), conn_gone, conn);

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
          sandstepd_say ("cannot serve TLS: %s", error->message);
          return;
        }
      h = g_new0 (Handshake, 1);
      h->d = d;
      h->connection = g_object_ref (connection);
      h->local = g_steal_pointer (&local);
      h->remote = g_steal_pointer (&remote);
      g_tls_connection_handshake_async (G_TLS_CONNECTION (tls), G_PRIORITY_DEFAULT, NULL, on_handshake, h);
      return;
    }
  accept_stream (d, G_IO_STREAM (connection), local, remote);
}

static gboolean on_acceptable (GSocket *listener, GIOCondition condition, gpointer data);

static void
watch_listener (Daemon *d)
{
  GSource *source = g_socket_create_source (d->listener, G_IO_IN, NULL);

  g_source_set_callback (source, G_SOURCE_FUNC (on_acceptable), d, NULL);
  d->accept_watch = g_source_attach (source, NULL);
  g_source_unref (source);
}

static gboolean
on_accept_again (gpointer data)
{
  Daemon *d = data;

  d->accept_retry = 0;
  watch_listener (d);
  return G_SOURCE_REMOVE;
}

static gboolean
on_acceptable (GSocket *listener, GIOCondition condition, gpointer data)
{
  Daemon *d = data;

  /* A burst at a time, so one busy peer cannot hold the loop. */
  for (int i = 0; i < 64; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GSocket) socket = g_socket_accept (listener, NULL, &error);
      g_autoptr(GSocketConnection) connection = NULL;

      if (socket == NULL)
        {
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            break;
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TOO_MANY_OPEN_FILES) ||
              g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE))
            {
              /* The socket stays readable: stop watching it a while, and free a descriptor. */
              guint evict = (d->pending.length + 3) / 4;

              /* Pending connections are the likely cause: the oldest quarter goes, and while there
               * are such, accepting resumes soon; with none, it backs off further. */
              if (d->accept_backoff_ms == 0 || d->debug)
                sandstepd_say ("cannot accept connections: %s; closing %u that sent no request", error->message,
                               evict);
              d->accept_backoff_ms = evict > 0 ? 100 : MIN (MAX (d->accept_backoff_ms, 50) * 2, 2000);
              for (guint k = 0; k < evict && !g_queue_is_empty (&d->pending); k++)
                conn_shut (g_queue_peek_head (&d->pending), "file descriptors ran out");
              d->accept_watch = 0;
              d->accept_retry = g_timeout_add (d->accept_backoff_ms, on_accept_again, d);
              return G_SOURCE_REMOVE;
            }
          if (d->debug)
            sandstepd_say ("cannot accept a connection: %s", error->message);
          continue;
        }
      d->accept_backoff_ms = 0;
      connection = g_socket_connection_factory_create_connection (socket);
      serve_connection (d, connection);
    }
  return G_SOURCE_CONTINUE;
}

void
sandstepd_listen (Daemon *d, GSocket *listener)
{
  d->listener = g_object_ref (listener);
  d->peers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_queue_init (&d->pending);
  g_socket_set_blocking (listener, FALSE);
  watch_listener (d);
}
