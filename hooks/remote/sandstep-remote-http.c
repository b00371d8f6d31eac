/* sandstep-remote-http.c: requests to a sandstepd, its answers and errors, and its streamed lines. */
#include "sandstep-remote-private.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-json.h"

/* No line of a response is longer: output arrives in 64 KiB pieces, base64'd. */
#define MAX_LINE (1024 * 1024)
/* Error bodies and small JSON answers. */
#define MAX_SMALL_BODY (16 * 1024 * 1024)

void
sandstep_remote_trace (RemoteBackend *r, const char *what)
{
  if (!g_log_writer_default_would_drop (G_LOG_LEVEL_DEBUG, G_LOG_DOMAIN))
    g_debug ("remote: %s at +%.3f ms", what, (g_get_monotonic_time () - r->created) / 1000.0);
}

void
sandstep_remote_target_clear (Target *t)
{
  g_clear_pointer (&t->server, g_free);
  g_clear_pointer (&t->local, g_free);
  g_clear_pointer (&t->shown, g_free);
}

/* Two server URLs name the same server: scheme, host (any case), port (the
 * scheme's default when absent) and path prefix. */
static gboolean
same_server (const char *a, const char *b)
{
  g_autoptr(GUri) ua = a != NULL ? g_uri_parse (a, G_URI_FLAGS_NONE, NULL) : NULL;
  g_autoptr(GUri) ub = b != NULL ? g_uri_parse (b, G_URI_FLAGS_NONE, NULL) : NULL;
  int pa, pb;

  if (ua == NULL || ub == NULL)
    return FALSE;
  pa = g_uri_get_port (ua) > 0 ? g_uri_get_port (ua) : (g_strcmp0 (g_uri_get_scheme (ua), "https") == 0 ? 443 : 80);
  pb = g_uri_get_port (ub) > 0 ? g_uri_get_port (ub) : (g_strcmp0 (g_uri_get_scheme (ub), "https") == 0 ? 443 : 80);
  return g_strcmp0 (g_uri_get_scheme (ua), g_uri_get_scheme (ub)) == 0 &&
         g_ascii_strcasecmp (g_uri_get_host (ua), g_uri_get_host (ub)) == 0 && pa == pb &&
         g_strcmp0 (g_uri_get_path (ua), g_uri_get_path (ub)) == 0;
}

gboolean
sandstep_remote_server_trusted (RemoteBackend *r, const char *server)
{
  if (same_server (server, r->url))
    return TRUE;
  for (guint i = 0; r->trusted != NULL && i < r->trusted->len; i++)
    if (same_server (server, r->trusted->pdata[i]))
      return TRUE;
  return FALSE;
}

gboolean
sandstep_remote_check_scheme (RemoteBackend *r, const char *server, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse (server, G_URI_FLAGS_NONE, NULL);
  g_autoptr(GInetAddress) address = NULL;
  const char *host;

  if (uri == NULL || g_strcmp0 (g_uri_get_scheme (uri), "http") != 0 || r->allow_http)
    return TRUE;
  host = g_uri_get_host (uri);
  address = host != NULL ? g_inet_address_new_from_string (host) : NULL;
  if ((address != NULL && g_inet_address_get_is_loopback (address)) || g_ascii_strcasecmp (host, "localhost") == 0)
    return TRUE;
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "The sandbox server '%s' is plain http:// beyond loopback: its token and every file would "
                         "travel in clear; serve it over https:// (sandstepd --tls-cert/--tls-key), or set "
                         SANDSTEP_ALLOW_HTTP_ENV "=1 on a network you trust", server);
}

gboolean
sandstep_remote_target_parse (RemoteBackend *r, const char *handle, Target *out, GError **error)
{
  memset (out, 0, sizeof *out);
  if (sandstep_handle_split (handle, &out->server, &out->local))
    {
      out->shown = g_strdup (handle);
      if (!sandstep_remote_check_scheme (r, out->server, error))
        {
          sandstep_remote_target_clear (out);
          return FALSE;
        }
      /* A handle file is data anyone may have written: it never chooses who gets the token. */
      if (r->token != NULL && !sandstep_remote_server_trusted (r, out->server))
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "The handle names the sandbox server '%s', which this step is not configured for (%s%s%s); "
                          "sandstep sends its token only to those: pass --backend=%s (or set " SANDSTEP_BACKEND_ENV
                          "), or list it in %s", out->server, r->url != NULL ? "--backend is '" : "no --backend",
                          r->url != NULL ? r->url : "", r->url != NULL ? "'" : "", out->server, r->trusted_from);
          sandstep_remote_target_clear (out);
          return FALSE;
        }
      return TRUE;
    }
  if (sandstep_handle_is_local (handle))
    {
      if (r->url == NULL)
        return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                               "'%s' names no sandbox server: use the whole handle 'sandstep provision' printed "
                               "(http://HOST:PORT/%s), or pass --backend=URL (or set " SANDSTEP_BACKEND_ENV ")",
                               handle, handle);
      out->server = g_strdup (r->url);
      out->local = g_strdup (handle);
      out->shown = g_strdup (handle);
      return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                         "'%s' is not a sandbox handle (they look like http://HOST:PORT/sandstep-0123456789abcdef); "
                         "pass the line 'sandstep provision' printed", handle);
}

void
sandstep_remote_rewrite_error (GError *error, const Target *t)
{
  g_autofree char *from = NULL;
  g_autofree char *to = NULL;
  g_auto(GStrv) parts = NULL;

  if (error == NULL || t == NULL || t->local == NULL || strcmp (t->local, t->shown) == 0)
    return;
  from = g_strdup_printf ("'%s'", t->local);
  to = g_strdup_printf ("'%s'", t->shown);
  parts = g_strsplit (error->message, from, -1);
  g_free (error->message);
  error->message = g_strjoinv (to, parts);
}

/* Requests are small and answered at once: Nagle's algorithm against the
 * peer's delayed ACK would add tens of milliseconds to each. */
static void
on_network_event (SoupMessage *msg, GSocketClientEvent event, GIOStream *connection, gpointer data)
{
  if (event == G_SOCKET_CLIENT_CONNECTED && G_IS_SOCKET_CONNECTION (connection))
    g_socket_set_option (g_socket_connection_get_socket (G_SOCKET_CONNECTION (connection)), IPPROTO_TCP, TCP_NODELAY,
                         1, NULL);
}

SoupMessage *
sandstep_remote_message (RemoteBackend *r, const char *server, const char *path, const char *query)
{
  g_autofree char *url = g_strconcat (server, SANDSTEP_API_PREFIX, path, query ? "?" : "", query ? query : "", NULL);
  SoupMessage *msg = soup_message_new (SOUP_METHOD_POST, url);

  if (msg == NULL)
    return NULL;
  g_signal_connect (msg, "network-event", G_CALLBACK (on_network_event), NULL);
  /* A redirect would take the request, and its token, elsewhere. */
  soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
  if (r->token != NULL && sandstep_remote_server_trusted (r, server))
    {
      g_autofree char *value = g_strconcat ("Bearer ", r->token, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", value);
    }
  return msg;
}

void
sandstep_remote_set_body (SoupMessage *msg, JsonObject *body)
{
  g_autoptr(JsonObject) owned = body;
  gsize len;
  char *text = sandstep_wire_to_text (owned, &len);
  g_autoptr(GBytes) bytes = g_bytes_new_take (text, len);

  soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
}

gboolean
sandstep_remote_throw_unreachable (GError **error, const char *server, const GError *cause)
{
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                         "Cannot reach the sandbox server at '%s': %s; check that sandstepd runs there and that "
                         "the URL (--backend, " SANDSTEP_BACKEND_ENV " or the handle) names it",
                         server, cause ? cause->message : "no answer");
}

/* The error of a non-2xx answer whose body is @body. */
static GError *
error_from_answer (SoupMessage *msg, GBytes *body, const Target *t)
{
  gsize len = 0;
  const char *data = body != NULL ? g_bytes_get_data (body, &len) : NULL;
  guint status = soup_message_get_status (msg);
  g_autoptr(JsonNode) root = data != NULL && len > 0 ? sandstep_json_parse (data, len, MAX_SMALL_BODY, NULL) : NULL;
  GError *error;

  if (root != NULL)
    error = sandstep_wire_error_from_json (root, status);
  else
    {
      g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));
      error = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "The server at '%s' answered HTTP %u %s, not as a sandbox server would; check the URL",
                           url, status,
                           soup_message_get_reason_phrase (msg) ? soup_message_get_reason_phrase (msg) : "");
    }
  sandstep_remote_rewrite_error (error, t);
  return error;
}

GBytes *
sandstep_remote_send_and_read (RemoteBackend *r, SoupMessage *msg, const char *server, const Target *t,
                               GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GBytes) body = soup_session_send_and_read (r->session, msg, NULL, &local_error);

  if (body == NULL)
    {
      sandstep_remote_throw_unreachable (error, server, local_error);
      return NULL;
    }
  if (!SOUP_STATUS_IS_SUCCESSFUL (soup_message_get_status (msg)))
    {
      g_propagate_error (error, error_from_answer (msg, body, t));
      return NULL;
    }
  return g_steal_pointer (&body);
}

JsonObject *
sandstep_remote_call (RemoteBackend *r, const char *server, const char *path, JsonObject *body, const Target *t,
                      GError **error)
{
  g_autoptr(JsonObject) owned = body;
  g_autoptr(SoupMessage) msg = sandstep_remote_message (r, server, path, NULL);
  g_autoptr(GBytes) answer = NULL;
  JsonObject *object;
  gsize len = 0;
  const char *data;
  g_autoptr(GError) local_error = NULL;

  if (msg == NULL)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "'%s' is not a usable sandbox server URL", server);
      return NULL;
    }
  sandstep_remote_set_body (msg, g_steal_pointer (&owned));
  answer = sandstep_remote_send_and_read (r, msg, server, t, error);
  if (answer == NULL)
    return NULL;
  data = g_bytes_get_data (answer, &len);
  if (len == 0)
    return json_object_new ();
  object = sandstep_wire_parse_object (data, len, &local_error);
  if (object == NULL)
    sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                    "The sandbox server at '%s' sent an answer this client cannot read (%s); are both the same "
                    "version?", server, local_error->message);
  return object;
}

void
sandstep_remote_line_reader_init (LineReader *lr, GInputStream *in)
{
  lr->in = in;
  lr->start = lr->end = 0;
  lr->eof = FALSE;
}

char *
sandstep_remote_line_reader_next (LineReader *lr, GError **error)
{
  g_autoptr(GByteArray) line = g_byte_array_new ();

  for (;;)
    {
      guint8 *nl;
      gssize n;

      if (lr->start < lr->end)
        {
          nl = memchr (lr->buf + lr->start, '\n', lr->end - lr->start);
          if (nl != NULL)
            {
              gsize take = nl - (lr->buf + lr->start);
              g_byte_array_append (line, lr->buf + lr->start, take);
              lr->start += take + 1;
              g_byte_array_append (line, (const guint8 *) "", 1);
              return (char *) g_byte_array_free (g_steal_pointer (&line), FALSE);
            }
          g_byte_array_append (line, lr->buf + lr->start, lr->end - lr->start);
          lr->start = lr->end = 0;
          if (line->len > MAX_LINE)
            {
              g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "a line of the answer is too long");
              return NULL;
            }
        }
      if (lr->eof)
        {
          if (line->len > 0)
            g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT, "the answer ended mid-line");
          return NULL;
        }
      n = g_input_stream_read (lr->in, lr->buf, sizeof lr->buf, NULL, error);
      if (n < 0)
        return NULL;
      if (n == 0)
        lr->eof = TRUE;
      lr->start = 0;
      lr->end = n;
    }
}

GError *
sandstep_remote_error_from_stream (SoupMessage *msg, GInputStream *in, const Target *t)
{
  g_autoptr(GByteArray) body = g_byte_array_new ();
  guint8 buf[8192];
  gssize n;
  g_autoptr(GBytes) bytes = NULL;

  while (body->len < MAX_SMALL_BODY && (n = g_input_stream_read (in, buf, sizeof buf, NULL, NULL)) > 0)
    g_byte_array_append (body, buf, n);
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&body));
  return error_from_answer (msg, bytes, t);
}

JsonObject *
sandstep_remote_parse_line (const char *line, const char *server, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  JsonObject *object;

  if (line[0] == '\0')
    return NULL;
  object = sandstep_wire_parse_object (line, strlen (line), &local_error);
  if (object == NULL)
    sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                    "The sandbox server at '%s' sent a line this client cannot read (%s)", server,
                    local_error->message);
  return object;
}

GInputStream *
sandstep_remote_open_stream (RemoteAttachment *a, const char *op, JsonObject *body, SoupMessage **out_msg,
                             GError **error)
{
  g_autofree char *path = g_strdup_printf ("/sandboxes/%s/%s", a->target.local, op);
  g_autoptr(SoupMessage) msg = sandstep_remote_message (a->remote, a->target.server, path, NULL);
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GError) local_error = NULL;

  sandstep_remote_set_body (msg, body);
  stream = soup_session_send (a->remote->session, msg, NULL, &local_error);
  if (stream == NULL)
    {
      sandstep_remote_throw_unreachable (error, a->target.server, local_error);
      return NULL;
    }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    {
      g_propagate_error (error, sandstep_remote_error_from_stream (msg, stream, &a->target));
      return NULL;
    }
  *out_msg = g_steal_pointer (&msg);
  return g_steal_pointer (&stream);
}

char *
sandstep_remote_query (const char *first_name, ...)
{
  GString *out = g_string_new (NULL);
  va_list args;

  va_start (args, first_name);
  for (const char *name = first_name; name != NULL; name = va_arg (args, const char *))
    {
      const char *value = va_arg (args, const char *);
      g_autofree char *escaped = g_uri_escape_string (value, NULL, FALSE);
      g_string_append_printf (out, "%s%s=%s", out->len ? "&" : "", name, escaped);
    }
  va_end (args);
  return g_string_free (out, FALSE);
}

/* ---- a streamed answer: its data lines handed on, its end or error returned ---- */

JsonObject *
sandstep_remote_read_stream (RemoteAttachment *a, GInputStream *stream, const char *what, const char *again,
                             DataFunc on_data, gpointer data, GError **error)
{
  g_autofree LineReader *lr = g_new0 (LineReader, 1);

  sandstep_remote_line_reader_init (lr, stream);
  return sandstep_remote_read_stream_from (a, lr, what, again, on_data, data, error);
}

JsonObject *
sandstep_remote_read_stream_from (RemoteAttachment *a, LineReader *lr, const char *what, const char *again,
                                  DataFunc on_data, gpointer data, GError **error)
{
  for (;;)
    {
      g_autoptr(GError) local_error = NULL;
      g_autofree char *line = sandstep_remote_line_reader_next (lr, &local_error);
      g_autoptr(JsonObject) object = NULL;
      g_autoptr(GBytes) bytes = NULL;
      GError *failed;
      int stream_no = 1;

      if (line == NULL)
        {
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                          "The sandbox server at '%s' went away while %s (%s); its files are intact; %s",
                          a->target.server, what, local_error ? local_error->message : "the connection closed",
                          again);
          return NULL;
        }
      object = sandstep_remote_parse_line (line, a->target.server, &local_error);
      if (object == NULL)
        {
          if (local_error == NULL)
            continue;
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      if ((bytes = sandstep_wire_read_data_line (object, &stream_no)) != NULL)
        {
          if (!on_data (stream_no, bytes, data, error))
            return NULL;
          continue;
        }
      if ((failed = sandstep_wire_read_error_line (object)) != NULL)
        {
          sandstep_remote_rewrite_error (failed, &a->target);
          g_propagate_error (error, failed);
          return NULL;
        }
      return g_steal_pointer (&object);
    }
}

gboolean
sandstep_remote_on_run_output (int stream, GBytes *bytes, gpointer data, GError **error)
{
  RunOutput *out = data;
  gsize len = 0;
  const char *chunk = g_bytes_get_data (bytes, &len);

  if (out->request->on_output != NULL)
    out->request->on_output (stream, chunk, len, out->request->user_data);
  else if (out->output_open)
    out->output_open = sandstep_write_all (stream == 2 ? out->request->stderr_fd : out->request->stdout_fd,
                                                  chunk, len);
  return TRUE;
}
