/* sandstep-remote.c: the backend interface on a sandstepd, over a SoupSession.
 *
 * Built into the module sandstep-remote.so only (see meson.build and
 * sandstep-remote-open.c): nothing that runs local steps loads libsoup for it.
 *
 * Every call is synchronous, as the vtable is; the session is used only from
 * the thread that made the backend.  The one exception to "one request, one
 * answer" is the claim: its response stays open for as long as the
 * attachment lives (see sandstep-remote.h).
 */
#include "sandstep-remote.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-wire.h"

/* No line of a response is longer: output arrives in 64 KiB pieces, base64'd. */
#define MAX_LINE (1024 * 1024)
/* Error bodies and small JSON answers. */
#define MAX_SMALL_BODY (16 * 1024 * 1024)
/* A quiet server sends a keepalive every SANDSTEP_KEEPALIVE_S; this much silence means it is gone. */
#define IO_TIMEOUT_S (6 * SANDSTEP_KEEPALIVE_S)
#define PUT_BLOCK (64 * 1024)

typedef struct {
  SandstepBackend parent;
  char *url;              /* the default server, without a trailing '/'; NULL: handles name theirs */
  char *token;            /* NULL: none */
  SoupSession *session;
  gint64 created;         /* monotonic µs, for trace() */
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
static void
trace (RemoteBackend *r, const char *what)
{
  if (!g_log_writer_default_would_drop (G_LOG_LEVEL_DEBUG, G_LOG_DOMAIN))
    g_debug ("remote: %s at +%.3f ms", what, (g_get_monotonic_time () - r->created) / 1000.0);
}

static void
target_clear (Target *t)
{
  g_clear_pointer (&t->server, g_free);
  g_clear_pointer (&t->local, g_free);
  g_clear_pointer (&t->shown, g_free);
}

static gboolean
target_parse (RemoteBackend *r, const char *handle, Target *out, GError **error)
{
  memset (out, 0, sizeof *out);
  if (sandstep_handle_split (handle, &out->server, &out->local))
    {
      out->shown = g_strdup (handle);
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

/* The server names sandboxes by their local handle; the caller knows them by
 * the handle it gave, so messages say that one. */
static void
rewrite_error (GError *error, const Target *t)
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

/* ---- requests ---- */

/* Requests are small and answered at once: Nagle's algorithm against the
 * peer's delayed ACK would add tens of milliseconds to each. */
static void
on_network_event (SoupMessage *msg, GSocketClientEvent event, GIOStream *connection, gpointer data)
{
  if (event == G_SOCKET_CLIENT_CONNECTED && G_IS_SOCKET_CONNECTION (connection))
    g_socket_set_option (g_socket_connection_get_socket (G_SOCKET_CONNECTION (connection)), IPPROTO_TCP, TCP_NODELAY,
                         1, NULL);
}

static SoupMessage *
new_message (RemoteBackend *r, const char *server, const char *path, const char *query)
{
  g_autofree char *url = g_strconcat (server, SANDSTEP_API_PREFIX, path, query ? "?" : "", query ? query : "", NULL);
  SoupMessage *msg = soup_message_new (SOUP_METHOD_POST, url);

  if (msg == NULL)
    return NULL;
  g_signal_connect (msg, "network-event", G_CALLBACK (on_network_event), NULL);
  if (r->token != NULL)
    {
      g_autofree char *value = g_strconcat ("Bearer ", r->token, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", value);
    }
  return msg;
}

static void
set_json_body (SoupMessage *msg, JsonBuilder *builder)
{
  g_autoptr(JsonNode) root = json_builder_get_root (builder);
  g_autofree char *text = json_to_string (root, FALSE);
  gsize len = strlen (text);
  g_autoptr(GBytes) bytes = g_bytes_new_take (g_steal_pointer (&text), len);

  soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
}

static gboolean
throw_unreachable (GError **error, const char *server, const GError *cause)
{
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                         "Cannot reach the sandbox server at '%s': %s; check that sandstepd runs there and that "
                         "the URL (--backend, " SANDSTEP_BACKEND_ENV " or the handle) names it",
                         server, cause ? cause->message : "no answer");
}

/* The error of a non-2xx answer whose body is @body. */
static GError *
error_from_answer (SoupMessage *msg, GBytes *body, const Target *t, char **out_holder)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  gsize len = 0;
  const char *data = body != NULL ? g_bytes_get_data (body, &len) : NULL;
  guint status = soup_message_get_status (msg);
  GError *error;

  if (data != NULL && len > 0 && json_parser_load_from_data (parser, data, len, NULL))
    error = sandstep_wire_error_from_json (json_parser_get_root (parser), status, out_holder);
  else
    {
      g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));
      if (out_holder != NULL)
        *out_holder = NULL;
      error = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "The server at '%s' answered HTTP %u %s, not as a sandbox server would; check the URL",
                           url, status, soup_message_get_reason_phrase (msg) ? soup_message_get_reason_phrase (msg) : "");
    }
  rewrite_error (error, t);
  return error;
}

/* Sends @msg and returns its answer's body, or NULL with @error set (a
 * non-2xx answer becomes the error it carries). */
static GBytes *
send_and_read (RemoteBackend *r, SoupMessage *msg, const char *server, const Target *t, char **out_holder,
               GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GBytes) body = soup_session_send_and_read (r->session, msg, NULL, &local_error);

  if (out_holder != NULL)
    *out_holder = NULL;
  if (body == NULL)
    {
      throw_unreachable (error, server, local_error);
      return NULL;
    }
  if (!SOUP_STATUS_IS_SUCCESSFUL (soup_message_get_status (msg)))
    {
      g_propagate_error (error, error_from_answer (msg, body, t, out_holder));
      return NULL;
    }
  return g_steal_pointer (&body);
}

static JsonObject *
call_json (RemoteBackend *r, const char *server, const char *path, JsonBuilder *body, const Target *t,
           GError **error)
{
  g_autoptr(SoupMessage) msg = new_message (r, server, path, NULL);
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
  set_json_body (msg, body);
  answer = send_and_read (r, msg, server, t, NULL, error);
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

static JsonArray *
array_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  return node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

static void
add_identity (JsonBuilder *builder, const SandstepIdentity *who)
{
  json_builder_set_member_name (builder, "owner");
  json_builder_add_string_value (builder, who->owner);
  json_builder_set_member_name (builder, "holder");
  json_builder_add_string_value (builder, who->holder);
}

/* ---- streamed answers: JSON lines ---- */

static void
line_reader_init (LineReader *lr, GInputStream *in)
{
  lr->in = in;
  lr->start = lr->end = 0;
  lr->eof = FALSE;
}

/* The next line without its newline; NULL at the end (error unset) or on error. */
static char *
line_reader_next (LineReader *lr, GError **error)
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

/* Reads what is left of a non-2xx streamed answer (bounded) and turns it into its error. */
static GError *
error_from_stream (SoupMessage *msg, GInputStream *in, const Target *t, char **out_holder)
{
  g_autoptr(GByteArray) body = g_byte_array_new ();
  guint8 buf[8192];
  gssize n;
  g_autoptr(GBytes) bytes = NULL;

  while (body->len < MAX_SMALL_BODY && (n = g_input_stream_read (in, buf, sizeof buf, NULL, NULL)) > 0)
    g_byte_array_append (body, buf, n);
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&body));
  return error_from_answer (msg, bytes, t, out_holder);
}

/* Parses one line of a stream; an empty line is a keepalive (returns NULL, no error). */
static JsonObject *
parse_line (const char *line, const char *server, GError **error)
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

static gboolean
write_all (int fd, const void *data, gsize len)
{
  const char *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      p += n;
      len -= n;
    }
  return TRUE;
}

/* ---- the vtable ---- */

static char *
remote_provision (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                  gboolean *out_existing, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonObject) answer = NULL;
  const char *handle;

  *out_existing = FALSE;
  if (r->url == NULL)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                      "no sandbox server to provision on: pass --backend=URL or set " SANDSTEP_BACKEND_ENV);
      return NULL;
    }
  json_builder_begin_object (builder);
  add_identity (builder, who);
  json_builder_set_member_name (builder, "spec");
  json_builder_add_value (builder, sandstep_spec_to_json (spec, TRUE));
  json_builder_end_object (builder);
  answer = call_json (r, r->url, "/sandboxes", builder, NULL, error);
  if (answer == NULL)
    return NULL;
  handle = json_object_get_string_member_with_default (answer, "handle", NULL);
  if (!sandstep_handle_is_local (handle))
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' provisioned a sandbox but sent no handle for it", r->url);
      return NULL;
    }
  *out_existing = json_object_get_boolean_member_with_default (answer, "existing", FALSE);
  return g_strdup_printf ("%s/%s", r->url, handle);
}

static void remote_detach (SandstepAttachment *parent);

static SandstepAttachment *
remote_try_attach (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  Target t;
  g_autofree char *path = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GError) local_error = NULL;
  RemoteAttachment *a;
  LineReader lr;
  g_autofree char *line = NULL;
  g_autoptr(JsonObject) first = NULL;
  JsonNode *spec_node;

  if (!target_parse (r, handle, &t, error))
    return NULL;
  trace (r, "claim sent");
  path = g_strdup_printf ("/sandboxes/%s/claim", t.local);
  msg = new_message (r, t.server, path, NULL);
  json_builder_begin_object (builder);
  add_identity (builder, who);
  json_builder_end_object (builder);
  set_json_body (msg, builder);
  stream = soup_session_send (r->session, msg, NULL, &local_error);
  if (stream == NULL)
    {
      throw_unreachable (error, t.server, local_error);
      target_clear (&t);
      return NULL;
    }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    {
      /* A busy refusal names its holder: sandstep_backend_attach() waits on it. */
      g_propagate_error (error, error_from_stream (msg, stream, &t, NULL));
      target_clear (&t);
      return NULL;
    }

  a = g_new0 (RemoteAttachment, 1);
  a->parent.backend = backend;
  a->parent.handle = g_strdup (t.shown);
  a->remote = r;
  a->target = t;
  a->claim_msg = g_steal_pointer (&msg);
  a->claim_stream = g_steal_pointer (&stream);
  /* Only the first line is read here: the rest of the answer is the lease. */
  line_reader_init (&lr, a->claim_stream);
  do
    {
      g_free (line);
      line = line_reader_next (&lr, &local_error);
    }
  while (line != NULL && line[0] == '\0');
  if (line != NULL)
    first = parse_line (line, t.server, &local_error);
  if (first == NULL || json_object_get_string_member_with_default (first, "claim", NULL) == NULL)
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' did not confirm the claim on '%s'%s%s", t.server, t.shown,
                      local_error ? ": " : "", local_error ? local_error->message : "");
      remote_detach (&a->parent);
      return NULL;
    }
  a->claim = g_strdup (json_object_get_string_member (first, "claim"));
  a->remaining_at_claim = json_object_get_double_member_with_default (first, "remaining_seconds", 0);
  a->claimed_at = g_get_monotonic_time ();
  spec_node = json_object_get_member (first, "spec");
  a->spec = spec_node != NULL ? sandstep_spec_from_json (spec_node, NULL) : NULL;
  if (a->spec == NULL)
    a->spec = sandstep_spec_new ();
  trace (r, "claimed");
  return &a->parent;
}

static void
remote_detach (SandstepAttachment *parent)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;

  /* Said explicitly, and answered once the claim is gone, so the next step
   * never finds it still held; dropping the connection would end it too. */
  trace (a->remote, "release sent");
  if (a->claim != NULL)
    {
      g_autofree char *path = g_strdup_printf ("/sandboxes/%s/release-claim", a->target.local);
      g_autoptr(SoupMessage) msg = new_message (a->remote, a->target.server, path, NULL);
      g_autoptr(JsonBuilder) builder = json_builder_new ();
      g_autoptr(GBytes) answer = NULL;

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "claim");
      json_builder_add_string_value (builder, a->claim);
      json_builder_end_object (builder);
      set_json_body (msg, builder);
      answer = soup_session_send_and_read (a->remote->session, msg, NULL, NULL);
    }
  trace (a->remote, "released");
  if (a->claim_stream != NULL)
    g_input_stream_close (a->claim_stream, NULL, NULL);
  g_clear_object (&a->claim_stream);
  g_clear_object (&a->claim_msg);
  sandstep_spec_free (a->spec);
  g_free (a->claim);
  target_clear (&a->target);
  g_free (parent->handle);
  g_free (a);
}

static double
remote_remaining_lifetime (SandstepAttachment *parent)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  double left = a->remaining_at_claim - (g_get_monotonic_time () - a->claimed_at) / (double) G_USEC_PER_SEC;

  return MAX (left, 0);
}

static const SandstepSpec *
remote_spec (SandstepAttachment *parent)
{
  return ((RemoteAttachment *) parent)->spec;
}

static void
begin_claimed (JsonBuilder *builder, RemoteAttachment *a)
{
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "claim");
  json_builder_add_string_value (builder, a->claim);
}

/* Sends a claimed request whose answer streams JSON lines; returns the stream. */
static GInputStream *
open_stream (RemoteAttachment *a, const char *op, JsonBuilder *builder, SoupMessage **out_msg, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/sandboxes/%s/%s", a->target.local, op);
  g_autoptr(SoupMessage) msg = new_message (a->remote, a->target.server, path, NULL);
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GError) local_error = NULL;

  set_json_body (msg, builder);
  stream = soup_session_send (a->remote->session, msg, NULL, &local_error);
  if (stream == NULL)
    {
      throw_unreachable (error, a->target.server, local_error);
      return NULL;
    }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    {
      g_propagate_error (error, error_from_stream (msg, stream, &a->target, NULL));
      return NULL;
    }
  *out_msg = g_steal_pointer (&msg);
  return g_steal_pointer (&stream);
}

static gboolean
remote_run_command (SandstepAttachment *parent, const SandstepRunRequest *request, SandstepRunResult *result,
                    GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  gboolean output_open = TRUE;
  LineReader *lr;

  memset (result, 0, sizeof *result);
  begin_claimed (builder, a);
  json_builder_set_member_name (builder, "command");
  json_builder_add_string_value (builder, request->command);
  json_builder_set_member_name (builder, "timeout_s");
  json_builder_add_double_value (builder, request->timeout_s);
  json_builder_end_object (builder);
  trace (a->remote, "run sent");
  stream = open_stream (a, "run", builder, &msg, error);
  if (stream == NULL)
    return FALSE;
  trace (a->remote, "run started");

  lr = g_new0 (LineReader, 1);
  line_reader_init (lr, stream);
  for (;;)
    {
      g_autoptr(GError) local_error = NULL;
      g_autofree char *line = line_reader_next (lr, &local_error);
      g_autoptr(JsonObject) object = NULL;

      if (line == NULL)
        {
          g_free (lr);
          return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                 "The sandbox server at '%s' went away while the command ran (%s); its files are "
                                 "intact; run it again",
                                 a->target.server, local_error ? local_error->message : "the connection closed");
        }
      object = parse_line (line, a->target.server, &local_error);
      if (object == NULL)
        {
          if (local_error == NULL)
            continue;
          g_free (lr);
          g_propagate_error (error, g_steal_pointer (&local_error));
          return FALSE;
        }
      if (json_object_has_member (object, "data"))
        {
          int stream_no = (int) json_object_get_int_member_with_default (object, "stream", 1);
          gsize len = 0;
          g_autofree guchar *data = g_base64_decode (json_object_get_string_member_with_default (object, "data", ""),
                                                     &len);
          if (request->on_output != NULL)
            request->on_output (stream_no == 2 ? 2 : 1, (const char *) data, len, request->user_data);
          else if (output_open)
            output_open = write_all (stream_no == 2 ? request->stderr_fd : request->stdout_fd, data, len);
          continue;
        }
      if (json_object_has_member (object, "error"))
        {
          GError *e = sandstep_wire_error_from_json (json_object_get_member (object, "error"), 500, NULL);
          rewrite_error (e, &a->target);
          g_propagate_error (error, e);
          g_free (lr);
          return FALSE;
        }
      if (json_object_has_member (object, "exit"))
        {
          result->exit_status = (int) json_object_get_int_member (object, "exit");
          result->timed_out = json_object_get_boolean_member_with_default (object, "timed_out", FALSE);
          result->applied_timeout_s = json_object_get_double_member_with_default (object, "applied_timeout_s", 0);
          result->clamped = json_object_get_boolean_member_with_default (object, "clamped", FALSE);
          result->memory_limit_hit = json_object_get_boolean_member_with_default (object, "memory_limit_hit", FALSE);
          result->pids_limit_hit = json_object_get_boolean_member_with_default (object, "pids_limit_hit", FALSE);
          trace (a->remote, "run ended");
          g_free (lr);
          return TRUE;
        }
      /* Anything else is a newer server's news: ignored. */
    }
}

static GBytes *
remote_read_file (SandstepAttachment *parent, const char *path, gsize max_bytes, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/read", a->target.local);
  g_autoptr(SoupMessage) msg = new_message (a->remote, a->target.server, url_path, NULL);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  GBytes *answer;

  begin_claimed (builder, a);
  json_builder_set_member_name (builder, "path");
  json_builder_add_string_value (builder, path);
  json_builder_set_member_name (builder, "max_bytes");
  json_builder_add_int_value (builder, (gint64) MIN (max_bytes, (gsize) G_MAXINT64));
  json_builder_end_object (builder);
  set_json_body (msg, builder);
  answer = send_and_read (a->remote, msg, a->target.server, &a->target, NULL, error);
  if (answer != NULL && g_bytes_get_size (answer) > max_bytes)
    {
      g_bytes_unref (answer);
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' sent more of '%s' than the %" G_GSIZE_FORMAT " bytes asked for",
                      a->target.server, path, max_bytes);
      return NULL;
    }
  return answer;
}

static char *
query_for (const char *first_name, ...) G_GNUC_NULL_TERMINATED;

static char *
query_for (const char *first_name, ...)
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

static gboolean
remote_write_file (SandstepAttachment *parent, const char *path, const void *data, gsize len, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/write", a->target.local);
  g_autofree char *query = query_for ("path", path, NULL);
  g_autoptr(SoupMessage) msg = new_message (a->remote, a->target.server, url_path, query);
  g_autoptr(GBytes) bytes = g_bytes_new_static (data, len);
  g_autoptr(GBytes) answer = NULL;

  soup_message_headers_replace (soup_message_get_request_headers (msg), SANDSTEP_CLAIM_HEADER, a->claim);
  soup_message_set_request_body_from_bytes (msg, "application/octet-stream", bytes);
  answer = send_and_read (a->remote, msg, a->target.server, &a->target, NULL, error);
  return answer != NULL;
}

/* ---- put: the host tree streams as entries: one JSON line each, a file's bytes after its line ---- */

typedef struct {
  int fd;                 /* the pipe the request body reads */
  GError *error;
} PutWriter;

static gboolean
put_header (PutWriter *w, const char *rel, const char *type, mode_t mode, gint64 size, const char *target)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;
  g_autofree char *line = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "path");
  json_builder_add_string_value (builder, rel);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, type);
  json_builder_set_member_name (builder, "mode");
  json_builder_add_int_value (builder, mode & 07777);
  if (size >= 0)
    {
      json_builder_set_member_name (builder, "size");
      json_builder_add_int_value (builder, size);
    }
  if (target != NULL)
    {
      json_builder_set_member_name (builder, "target");
      json_builder_add_string_value (builder, target);
    }
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  text = json_to_string (root, FALSE);
  line = g_strconcat (text, "\n", NULL);
  return write_all (w->fd, line, strlen (line));
}

/* remote_put()'s sink: each entry as a header line, a file's bytes after its header. */
static gboolean
wire_sink_dir (const char *rel, mode_t mode, gpointer data, GError **error)
{
  return put_header (data, rel, "dir", mode, -1, NULL);
}

static gboolean
wire_sink_link (const char *rel, const char *target, gpointer data, GError **error)
{
  return put_header (data, rel, "link", 0777, -1, target);
}

static gboolean
wire_sink_file (const char *rel, int fd, const struct stat *st, const char *shown, gpointer data, GError **error)
{
  PutWriter *w = data;
  char buf[PUT_BLOCK];

  if (!put_header (w, rel, "file", st->st_mode, st->st_size, NULL))
    return FALSE;
  for (guint64 left = st->st_size; left > 0;)
    {
      ssize_t n = read (fd, buf, MIN (left, sizeof buf));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot read '%s' on the host", shown);
      if (n == 0)
        return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_CHANGED,
                               "'%s' on the host was replaced while it was copied; put it again", shown);
      if (!write_all (w->fd, buf, n))
        return FALSE;
      left -= n;
    }
  return TRUE;
}

static const SandstepHostSink wire_sink = { wire_sink_dir, wire_sink_link, wire_sink_file };

typedef struct {
  PutWriter writer;
  char *src;
  struct stat st;
} PutJob;

static gpointer
put_writer_thread (gpointer data)
{
  PutJob *job = data;
  sigset_t pipe_only;

  /* A server that stops reading must not kill us with SIGPIPE: the write fails instead. */
  sigemptyset (&pipe_only);
  sigaddset (&pipe_only, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &pipe_only, NULL);
  if (sandstep_host_walk (job->src, &job->st, "", &wire_sink, &job->writer, &job->writer.error))
    write_all (job->writer.fd, "{\"end\":true}\n", strlen ("{\"end\":true}\n"));
  close (job->writer.fd);
  job->writer.fd = -1;
  return NULL;
}

static gboolean
remote_put (SandstepAttachment *parent, const char *host_src, const char *dest, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *src = NULL;
  g_autofree char *base = NULL;
  g_autofree char *url_path = NULL;
  g_autofree char *query = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) body = NULL;
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GError) server_error = NULL;
  PutJob job = { .writer = { .fd = -1 } };
  GThread *thread;
  int fds[2];
  gboolean contents;

  /* The host side is checked here, with the local backend's words. */
  if (!sandstep_host_source (host_src, &src, &base, &job.st, error))
    return FALSE;
  contents = S_ISDIR (job.st.st_mode) && g_str_has_suffix (host_src, "/");

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot create a pipe to send '%s'", host_src);
  url_path = g_strdup_printf ("/sandboxes/%s/put", a->target.local);
  query = query_for ("dest", dest, "name", base, "contents", contents ? "1" : "0", NULL);
  msg = new_message (a->remote, a->target.server, url_path, query);
  soup_message_headers_replace (soup_message_get_request_headers (msg), SANDSTEP_CLAIM_HEADER, a->claim);
  body = g_unix_input_stream_new (fds[0], TRUE);
  soup_message_set_request_body (msg, "application/x-sandstep-entries", body, -1);

  job.writer.fd = fds[1];
  job.src = src;
  thread = g_thread_new ("sandstep-put", put_writer_thread, &job);
  answer = send_and_read (a->remote, msg, a->target.server, &a->target, NULL, &server_error);
  /* If the server stopped reading, unblock the writer before joining it. */
  g_input_stream_close (body, NULL, NULL);
  g_thread_join (thread);

  /* A host-side failure explains a refused or cut upload better than the server can. */
  if (job.writer.error != NULL)
    {
      g_propagate_error (error, job.writer.error);
      return FALSE;
    }
  if (answer == NULL)
    {
      g_propagate_error (error, g_steal_pointer (&server_error));
      return FALSE;
    }
  return TRUE;
}

/* sandstep_dir_entry_free() lives with the local backend, which this module does not carry. */
static void
dir_entry_free (SandstepDirEntry *entry)
{
  g_free (entry->name);
  g_free (entry);
}

static GPtrArray *
remote_list_directory (SandstepAttachment *parent, const char *path, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/list", a->target.local);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonObject) answer = NULL;
  g_autoptr(GPtrArray) entries = g_ptr_array_new_with_free_func ((GDestroyNotify) dir_entry_free);
  JsonArray *array;

  begin_claimed (builder, a);
  json_builder_set_member_name (builder, "path");
  json_builder_add_string_value (builder, path);
  json_builder_end_object (builder);
  answer = call_json (a->remote, a->target.server, url_path, builder, &a->target, error);
  if (answer == NULL)
    return NULL;
  array = array_member (answer, "entries");
  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    {
      JsonNode *node = json_array_get_element (array, i);
      JsonObject *object = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
      SandstepDirEntry *entry;

      if (object == NULL || json_object_get_string_member_with_default (object, "name", NULL) == NULL)
        continue;
      entry = g_new0 (SandstepDirEntry, 1);
      entry->name = g_strdup (json_object_get_string_member (object, "name"));
      entry->is_dir = json_object_get_boolean_member_with_default (object, "is_dir", FALSE);
      g_ptr_array_add (entries, entry);
    }
  return g_steal_pointer (&entries);
}

static gint64
remote_export_file (SandstepAttachment *parent, const char *path, int dest_fd, guint64 max_bytes, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autofree LineReader *lr = NULL;
  guint64 written = 0;

  begin_claimed (builder, a);
  json_builder_set_member_name (builder, "path");
  json_builder_add_string_value (builder, path);
  json_builder_set_member_name (builder, "max_bytes");
  json_builder_add_int_value (builder, (gint64) MIN (max_bytes, (guint64) G_MAXINT64));
  json_builder_end_object (builder);
  stream = open_stream (a, "export", builder, &msg, error);
  if (stream == NULL)
    return -1;

  lr = g_new0 (LineReader, 1);
  line_reader_init (lr, stream);
  for (;;)
    {
      g_autoptr(GError) local_error = NULL;
      g_autofree char *line = line_reader_next (lr, &local_error);
      g_autoptr(JsonObject) object = NULL;

      if (line == NULL)
        {
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                          "The sandbox server at '%s' went away while '%s' was exported (%s); its files are "
                          "intact; export it again",
                          a->target.server, path, local_error ? local_error->message : "the connection closed");
          return -1;
        }
      object = parse_line (line, a->target.server, &local_error);
      if (object == NULL)
        {
          if (local_error == NULL)
            continue;
          g_propagate_error (error, g_steal_pointer (&local_error));
          return -1;
        }
      if (json_object_has_member (object, "data"))
        {
          gsize len = 0;
          g_autofree guchar *data = g_base64_decode (json_object_get_string_member_with_default (object, "data", ""),
                                                     &len);
          if (written + len > max_bytes)
            {
              sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                              "The sandbox server at '%s' sent more of '%s' than the %" G_GUINT64_FORMAT
                              " bytes allowed", a->target.server, path, max_bytes);
              return -1;
            }
          if (!write_all (dest_fd, data, len))
            {
              sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                    "Cannot write '%s' where it is exported to", path);
              return -1;
            }
          written += len;
          continue;
        }
      if (json_object_has_member (object, "error"))
        {
          GError *e = sandstep_wire_error_from_json (json_object_get_member (object, "error"), 500, NULL);
          rewrite_error (e, &a->target);
          g_propagate_error (error, e);
          return -1;
        }
      if (json_object_has_member (object, "done"))
        return (gint64) written;
    }
}

static JsonNode *
remote_describe (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  JsonNode *node;
  Target t;

  if (!target_parse (r, handle, &t, error))
    return NULL;
  path = g_strdup_printf ("/sandboxes/%s/describe", t.local);
  json_builder_begin_object (builder);
  add_identity (builder, who);
  json_builder_end_object (builder);
  answer = call_json (r, t.server, path, builder, &t, error);
  if (answer != NULL)
    {
      json_object_set_string_member (answer, "handle", t.shown);
      json_object_set_string_member (answer, "backend", "remote");
      json_object_set_string_member (answer, "server", t.server);
    }
  target_clear (&t);
  if (answer == NULL)
    return NULL;
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, answer);
  return node;
}

static gboolean
remote_release (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gint64 keep_s,
                gboolean *out_destroyed, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  Target t;

  *out_destroyed = FALSE;
  if (!target_parse (r, handle, &t, error))
    return FALSE;
  path = g_strdup_printf ("/sandboxes/%s/release", t.local);
  json_builder_begin_object (builder);
  add_identity (builder, who);
  json_builder_set_member_name (builder, "keep_s");
  json_builder_add_int_value (builder, keep_s);
  json_builder_end_object (builder);
  answer = call_json (r, t.server, path, builder, &t, error);
  target_clear (&t);
  if (answer == NULL)
    return FALSE;
  *out_destroyed = json_object_get_boolean_member_with_default (answer, "destroyed", FALSE);
  return TRUE;
}

static gboolean
remote_destroy (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  Target t;

  if (!target_parse (r, handle, &t, error))
    return FALSE;
  path = g_strdup_printf ("/sandboxes/%s/destroy", t.local);
  json_builder_begin_object (builder);
  add_identity (builder, who);
  json_builder_end_object (builder);
  answer = call_json (r, t.server, path, builder, &t, error);
  target_clear (&t);
  return answer != NULL;
}

static gboolean
remote_gc (SandstepBackend *backend, const char *run, gboolean expired_only, GPtrArray *destroyed, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonObject) answer = NULL;
  JsonArray *array;

  if (r->url == NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no sandbox server to reclaim sandboxes on: pass --backend=URL or set "
                           SANDSTEP_BACKEND_ENV);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "run");
  if (run != NULL)
    json_builder_add_string_value (builder, run);
  else
    json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "expired_only");
  json_builder_add_boolean_value (builder, expired_only);
  json_builder_end_object (builder);
  answer = call_json (r, r->url, "/gc", builder, NULL, error);
  if (answer == NULL)
    return FALSE;
  array = array_member (answer, "destroyed");
  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    {
      const char *handle = json_node_get_string (json_array_get_element (array, i));
      if (sandstep_handle_is_local (handle))
        g_ptr_array_add (destroyed, g_strdup_printf ("%s/%s", r->url, handle));
    }
  if (json_object_has_member (answer, "error") && !json_object_get_null_member (answer, "error"))
    {
      g_propagate_error (error, sandstep_wire_error_from_json (json_object_get_member (answer, "error"), 500, NULL));
      return FALSE;
    }
  return TRUE;
}

static void
remote_free (SandstepBackend *backend)
{
  RemoteBackend *r = (RemoteBackend *) backend;

  g_clear_object (&r->session);
  g_free (r->url);
  if (r->token != NULL)
    explicit_bzero (r->token, strlen (r->token));
  g_free (r->token);
  g_free (r);
}

static const SandstepBackendClass remote_class = {
  .name = "remote",
  .provision = remote_provision,
  .try_attach = remote_try_attach,
  .detach = remote_detach,
  .run_command = remote_run_command,
  .read_file = remote_read_file,
  .write_file = remote_write_file,
  .put = remote_put,
  .list_directory = remote_list_directory,
  .export_file = remote_export_file,
  .remaining_lifetime = remote_remaining_lifetime,
  .spec = remote_spec,
  .describe = remote_describe,
  .release = remote_release,
  .destroy = remote_destroy,
  .gc = remote_gc,
  .free = remote_free,
};

SandstepBackend *
sandstep_remote_backend_new (const char *url, const char *token, GError **error)
{
  g_autofree char *server = NULL;
  g_autofree char *secret = NULL;
  const char *ca_file = g_getenv (SANDSTEP_CA_FILE_ENV);
  RemoteBackend *r;

  if (url != NULL)
    {
      server = sandstep_server_url_normalize (url);
      if (server == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "backend '%s' is not a sandbox server URL; give http://HOST:PORT or https://HOST:PORT "
                          "(where sandstepd listens), or 'local'", url);
          return NULL;
        }
    }
  if (token != NULL)
    secret = g_strdup (token);
  else if (g_getenv (SANDSTEP_TOKEN_ENV) != NULL && g_getenv (SANDSTEP_TOKEN_ENV)[0] != '\0')
    secret = g_strstrip (g_strdup (g_getenv (SANDSTEP_TOKEN_ENV)));
  else if (g_getenv (SANDSTEP_TOKEN_FILE_ENV) != NULL && g_getenv (SANDSTEP_TOKEN_FILE_ENV)[0] != '\0')
    {
      secret = sandstep_wire_read_token_file (g_getenv (SANDSTEP_TOKEN_FILE_ENV), error);
      if (secret == NULL)
        return NULL;
    }

  r = g_new0 (RemoteBackend, 1);
  r->parent.klass = &remote_class;
  r->url = g_steal_pointer (&server);
  r->token = g_steal_pointer (&secret);
  r->created = g_get_monotonic_time ();
  r->session = soup_session_new_with_options ("timeout", IO_TIMEOUT_S, "user-agent", "sandstep", NULL);
  /* Straight to the server: no proxy (it would see the token), and no proxy
   * modules loaded at every helper start. */
  soup_session_set_proxy_resolver (r->session, NULL);
  if (ca_file != NULL && ca_file[0] != '\0')
    {
      g_autoptr(GError) local_error = NULL;
      g_autoptr(GTlsDatabase) database = g_tls_file_database_new (ca_file, &local_error);
      if (database == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          SANDSTEP_CA_FILE_ENV " '%s' cannot be used: %s", ca_file, local_error->message);
          remote_free (&r->parent);
          return NULL;
        }
      soup_session_set_tls_database (r->session, database);
    }
  return &r->parent;
}
