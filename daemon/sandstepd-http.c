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

void
sandstepd_answer_json (Request *req, guint status, JsonObject *object)
{
  gsize len;
  char *text;

  if (req->finished || req->completed)
    return;
  text = sandstep_wire_to_text (object, &len);
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
 * notice a peer that hangs up. */

GSocket *
sandstepd_message_socket (SoupServerMessage *msg)
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

gboolean
sandstepd_on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source, gpointer data)
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
          sandstepd_say ("cannot serve TLS: %s", error->message);
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
