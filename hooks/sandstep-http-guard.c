/* sandstep-http-guard.c: accepting an HTTP server's connections, with deadlines and caps (see the header). */
#include "sandstep-http-guard.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

struct _SandstepHttpGuard {
  SandstepHttpGuardConfig config;
  SoupServer *server;         /* ref */
  GSocket *listener;          /* ref; NULL once freed */
  guint accept_watch;
  guint accept_retry;
  guint accept_backoff_ms;
  GHashTable *peers;          /* peer address -> connections open (GUINT_TO_POINTER) */
  GQueue pending;             /* Conn *, oldest first: no request headers yet */
  guint n_connections;
  gboolean freed;             /* sandstep_http_guard_free() came: gone with the last connection */
};

static void G_GNUC_PRINTF (2, 3)
guard_say (SandstepHttpGuard *d, const char *format, ...)
{
  va_list args;
  g_autofree char *line = NULL;

  va_start (args, format);
  line = g_strdup_vprintf (format, args);
  va_end (args);
  if (d->config.say != NULL)
    d->config.say (line);
  else
    g_debug ("%s", line);
}

static void
guard_destroy (SandstepHttpGuard *d)
{
  g_clear_object (&d->config.certificate);
  g_clear_object (&d->server);
  g_hash_table_unref (d->peers);
  g_free (d);
}

GSocket *
sandstep_http_guard_message_socket (SoupServerMessage *msg)
{
  GSocketAddress *remote = soup_server_message_get_remote_address (msg);

  return remote != NULL ? g_object_get_data (G_OBJECT (remote), "sandstep-guard-socket") : NULL;
}

typedef struct _Conn Conn;
struct _Conn {
  SandstepHttpGuard *d;
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
  if (conn->d->config.debug)
    guard_say (conn->d, "closing a connection from %s: %s", conn->peer, why);
  g_socket_shutdown (conn->socket, TRUE, TRUE, NULL);
}

static gboolean
on_headers_deadline (gpointer data)
{
  Conn *conn = data;

  conn->timer = 0;
  conn_shut (conn, "no request within the header deadline");
  return G_SOURCE_REMOVE;
}

static gboolean
on_body_idle (gpointer data)
{
  Conn *conn = data;

  conn->timer = 0;
  conn_shut (conn, "the body stopped coming for the idle deadline");
  return G_SOURCE_REMOVE;
}

/* The connection's Conn, for a message of it. */
static Conn *
conn_of (SoupServerMessage *msg)
{
  GSocket *socket = sandstep_http_guard_message_socket (msg);

  return socket != NULL ? g_object_get_data (G_OBJECT (socket), "sandstep-guard-conn") : NULL;
}

void
sandstep_http_guard_got_headers (SoupServerMessage *msg)
{
  Conn *conn = conn_of (msg);

  /* libsoup keeps a connection for the next request only when it has listeners of its own, and the server fed
   * here has none: it closes the connection after this answer, so the answer says so.  Unsaid, a client keeps
   * the connection and may send its next request as the close arrives ('other side closed'). */
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
  if (conn == NULL || conn->closed)
    return;
  conn_unpend (conn);
  conn_stop_timer (conn);
  conn->timer = g_timeout_add_seconds (conn->d->config.idle_timeout_s, on_body_idle, conn);
}

void
sandstep_http_guard_body_progress (SoupServerMessage *msg)
{
  Conn *conn = conn_of (msg);

  if (conn == NULL || conn->closed || conn->timer == 0)
    return;
  /* Rearmed at most once a second: chunks come by the thousand. */
  if (g_source_get_ready_time (g_main_context_find_source_by_id (NULL, conn->timer)) -
        g_get_monotonic_time () > ((gint64) conn->d->config.idle_timeout_s - 1) * G_USEC_PER_SEC)
    return;
  conn_stop_timer (conn);
  conn->timer = g_timeout_add_seconds (conn->d->config.idle_timeout_s, on_body_idle, conn);
}

void
sandstep_http_guard_body_done (SoupServerMessage *msg)
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
  SandstepHttpGuard *d = conn->d;
  guint count = GPOINTER_TO_UINT (g_hash_table_lookup (d->peers, conn->peer));

  conn_stop_timer (conn);
  conn_unpend (conn);
  if (count <= 1)
    g_hash_table_remove (d->peers, conn->peer);
  else
    g_hash_table_insert (d->peers, g_strdup (conn->peer), GUINT_TO_POINTER (count - 1));
  d->n_connections--;
  g_object_set_data (G_OBJECT (conn->socket), "sandstep-guard-conn", NULL);
  g_object_unref (conn->socket);
  g_free (conn->peer);
  g_free (conn);
  if (d->freed && d->n_connections == 0)
    guard_destroy (d);
}

/* Makes room for one more pending connection of @peer: the oldest of that
 * peer's, or of all, goes. */
static void
evict_pending (SandstepHttpGuard *d, const char *peer)
{
  guint of_peer = 0;
  Conn *oldest_of_peer = NULL;

  for (GList *l = d->pending.head; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (strcmp (c->peer, peer) == 0 && of_peer++ == 0)
        oldest_of_peer = c;
    }
  if (of_peer >= d->config.max_pending_per_peer)
    conn_shut (oldest_of_peer, "too many connections of this peer send no request");
  else if (d->pending.length >= d->config.max_pending)
    conn_shut (g_queue_peek_head (&d->pending), "too many connections send no request");
}

typedef struct {
  SandstepHttpGuard *d;
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
accept_stream (SandstepHttpGuard *d, GIOStream *stream, GSocketAddress *local, GSocketAddress *remote)
{
  g_autoptr(GError) error = NULL;

  if (!soup_server_accept_iostream (d->server, stream, local, remote, &error))
    guard_say (d, "cannot serve a connection: %s", error->message);
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
      if (h->d->config.debug)
        guard_say (h->d, "a TLS handshake failed: %s", error->message);
      g_io_stream_close (G_IO_STREAM (source), NULL, NULL);
    }
  g_object_unref (source);
  handshake_free (h);
}

/* One accepted connection: counted, given its deadline, handed to libsoup (through TLS). */
static void
serve_connection (SandstepHttpGuard *d, GSocketConnection *connection)
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
  if (d->n_connections >= d->config.max_connections || of_peer >= d->config.max_connections_per_peer)
    {
      if (d->config.debug)
        guard_say (d, "refusing a connection from %s: %u open (%u of it)", peer, d->n_connections, of_peer);
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
  conn->timer = g_timeout_add_seconds (d->config.header_timeout_s, on_headers_deadline, conn);
  g_object_set_data (G_OBJECT (socket), "sandstep-guard-conn", conn);
  g_object_weak_ref (G_OBJECT (connection), conn_gone, conn);

  /* Answers are written in pieces (headers, chunks): without this, Nagle's
   * algorithm and the client's delayed ACK add tens of milliseconds each. */
  g_socket_set_option (socket, IPPROTO_TCP, TCP_NODELAY, 1, NULL);
  g_object_set_data_full (G_OBJECT (remote), "sandstep-guard-socket", g_object_ref (socket), g_object_unref);
  if (d->config.certificate != NULL)
    {
      g_autoptr(GError) error = NULL;
      GIOStream *tls = g_tls_server_connection_new (G_IO_STREAM (connection), d->config.certificate, &error);
      Handshake *h;

      if (tls == NULL)
        {
          guard_say (d, "cannot serve TLS: %s", error->message);
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
watch_listener (SandstepHttpGuard *d)
{
  GSource *source = g_socket_create_source (d->listener, G_IO_IN, NULL);

  g_source_set_callback (source, G_SOURCE_FUNC (on_acceptable), d, NULL);
  d->accept_watch = g_source_attach (source, NULL);
  g_source_unref (source);
}

static gboolean
on_accept_again (gpointer data)
{
  SandstepHttpGuard *d = data;

  d->accept_retry = 0;
  watch_listener (d);
  return G_SOURCE_REMOVE;
}

static gboolean
on_acceptable (GSocket *listener, GIOCondition condition, gpointer data)
{
  SandstepHttpGuard *d = data;

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
              if (d->accept_backoff_ms == 0 || d->config.debug)
                guard_say (d, "cannot accept connections: %s; closing %u that sent no request", error->message,
                               evict);
              d->accept_backoff_ms = evict > 0 ? 100 : MIN (MAX (d->accept_backoff_ms, 50) * 2, 2000);
              for (guint k = 0; k < evict && !g_queue_is_empty (&d->pending); k++)
                conn_shut (g_queue_peek_head (&d->pending), "file descriptors ran out");
              d->accept_watch = 0;
              d->accept_retry = g_timeout_add (d->accept_backoff_ms, on_accept_again, d);
              return G_SOURCE_REMOVE;
            }
          if (d->config.debug)
            guard_say (d, "cannot accept a connection: %s", error->message);
          continue;
        }
      d->accept_backoff_ms = 0;
      connection = g_socket_connection_factory_create_connection (socket);
      serve_connection (d, connection);
    }
  return G_SOURCE_CONTINUE;
}

SandstepHttpGuard *
sandstep_http_guard_new (SoupServer *server, GSocket *listener, const SandstepHttpGuardConfig *config)
{
  SandstepHttpGuard *d = g_new0 (SandstepHttpGuard, 1);

  d->config = *config;
  if (d->config.certificate != NULL)
    g_object_ref (d->config.certificate);
  d->server = g_object_ref (server);
  d->listener = g_object_ref (listener);
  d->peers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_queue_init (&d->pending);
  g_socket_set_blocking (listener, FALSE);
  watch_listener (d);
  return d;
}

GSocket *
sandstep_http_guard_listener (const SandstepHttpGuard *guard)
{
  return guard->listener;
}

guint
sandstep_http_guard_count (const SandstepHttpGuard *guard)
{
  return guard->n_connections;
}

void
sandstep_http_guard_free (SandstepHttpGuard *guard)
{
  if (guard == NULL)
    return;
  if (guard->accept_watch != 0)
    g_source_remove (guard->accept_watch);
  if (guard->accept_retry != 0)
    g_source_remove (guard->accept_retry);
  guard->accept_watch = guard->accept_retry = 0;
  g_clear_object (&guard->listener);
  /* Connections still open count on it: the last one frees it. */
  guard->freed = TRUE;
  if (guard->n_connections == 0)
    guard_destroy (guard);
}
