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
#include "sandstep-http-guard.h"
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
  g_free (req->keepalive_frame);
  if (req->tees != NULL)
    g_ptr_array_unref (req->tees);
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
  if (req->keepalive_frame != NULL)
    soup_message_body_append (soup_server_message_get_response_body (req->msg), SOUP_MEMORY_COPY,
                              req->keepalive_frame, req->keepalive_len);
  else
    soup_message_body_append (soup_server_message_get_response_body (req->msg), SOUP_MEMORY_STATIC, "\n", 1);
  req->pending += req->keepalive_frame != NULL ? req->keepalive_len : 1;
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

/* A slow tee is not waited for (the stream it copies waits for its own reader only): past this, it is cut. */
#define SANDSTEPD_TEE_MAX (4 * SANDSTEPD_HIGH_WATER)

void
sandstepd_stream_tee (Request *req, Request *tee)
{
  if (req->tees == NULL)
    req->tees = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstepd_request_unref);
  g_ptr_array_add (req->tees, sandstepd_request_ref (tee));
}

/* Copies @data to @req's tees, forgetting those that are over. */
static void
tees_take (Request *req, const char *data, gsize len)
{
  for (guint i = 0; req->tees != NULL && i < req->tees->len;)
    {
      Request *tee = req->tees->pdata[i];

      if (tee->finished || tee->completed)
        {
          g_ptr_array_remove_index_fast (req->tees, i);
          continue;
        }
      if (tee->pending > SANDSTEPD_TEE_MAX)
        sandstepd_stream_end (tee);
      else
        sandstepd_stream_take (tee, g_memdup2 (data, len), len);
      i++;
    }
}

void
sandstepd_stream_take (Request *req, char *data, gsize len)
{
  /* Tees outlive their stream only when it keeps them (keep_tees); otherwise they ended with it. */
  tees_take (req, data, len);
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
  for (guint i = 0; req->tees != NULL && i < req->tees->len; i++)
    sandstepd_stream_end (req->tees->pdata[i]);
  g_clear_pointer (&req->tees, g_ptr_array_unref);
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
  GPtrArray *kept;

  stop_watches (req);
  req->on_gone = NULL;
  req->on_drained = NULL;
  if (on_gone != NULL)
    on_gone (req);
  /* Let libsoup find out and finish the exchange; tees it keeps go on without it. */
  kept = req->keep_tees ? g_steal_pointer (&req->tees) : NULL;
  sandstepd_stream_end (req);
  req->tees = kept;
}

void
sandstepd_request_finished (SoupServerMessage *msg, gpointer user_data)
{
  Request *req = user_data;
  gboolean early = req->streaming && !req->completed;

  req->finished = TRUE;
  stop_watches (req);
  /* Its tees end with it, cut when it ended early, unless it keeps them (what it streams outlives it). */
  if (!req->keep_tees)
    {
      for (guint i = 0; req->tees != NULL && i < req->tees->len; i++)
        sandstepd_stream_end (req->tees->pdata[i]);
      g_clear_pointer (&req->tees, g_ptr_array_unref);
    }
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

/* ---- connections: accepted, capped and given deadlines by the one guard (hooks/sandstep-http-guard.h) ---- */

static void
say_line (const char *line)
{
  sandstepd_say ("%s", line);
}

GSocket *
sandstepd_message_socket (SoupServerMessage *msg)
{
  return sandstep_http_guard_message_socket (msg);
}

void
sandstepd_conn_got_headers (SoupServerMessage *msg)
{
  sandstep_http_guard_got_headers (msg);
}

void
sandstepd_conn_body_progress (SoupServerMessage *msg)
{
  sandstep_http_guard_body_progress (msg);
}

void
sandstepd_conn_body_done (SoupServerMessage *msg)
{
  sandstep_http_guard_body_done (msg);
}

void
sandstepd_listen (Daemon *d, GSocket *listener)
{
  SandstepHttpGuardConfig config = {
    .header_timeout_s = d->header_timeout_s,
    .idle_timeout_s = d->idle_timeout_s,
    .max_connections = d->max_connections,
    .max_connections_per_peer = SANDSTEPD_MAX_CONNECTIONS_PER_PEER,
    .max_pending = SANDSTEPD_MAX_PENDING,
    .max_pending_per_peer = SANDSTEPD_MAX_PENDING_PER_PEER,
    .certificate = d->certificate,
    .debug = d->debug,
    .say = say_line,
  };

  d->guard = sandstep_http_guard_new (d->server, listener, &config);
}
