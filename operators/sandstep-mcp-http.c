/* sandstep-mcp-http.c: the MCP server over Streamable HTTP, on a loopback address.
 *
 * One endpoint, /mcp.  POST answers application/json (202 for
 * notifications), GET 405 (no server stream), DELETE ends a session.  A
 * request whose Origin is not a loopback origin, or whose Host is not a
 * loopback name or the bound address (DNS rebinding), gets 403; one without
 * the server's bearer token 401.  Loopback is not a boundary: every local
 * user, and every sandbox with network=open, reaches the port.
 */
#include "sandstep-mcp-private.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>

#include "sandstep-error.h"
#include "sandstep-token.h"
#include "sandstep-units.h"

/* A body bigger than this is refused (HTTP 413). */
#define MAX_HTTP_BODY SANDSTEP_MCP_MAX_MESSAGE

static gboolean
host_is_loopback (SandstepMcpServer *server, const char *host)
{
  g_autoptr(GInetAddress) address = NULL;
  g_autofree char *lower = g_ascii_strdown (host, -1);
  gsize len = strlen (lower);

  if (len > 0 && lower[len - 1] == '.')
    lower[--len] = '\0';
  if (strcmp (lower, "localhost") == 0 || g_str_has_suffix (lower, ".localhost"))
    return TRUE;
  if (server->bound_host != NULL && g_ascii_strcasecmp (lower, server->bound_host) == 0)
    return TRUE;
  address = g_inet_address_new_from_string (lower);
  return address != NULL && g_inet_address_get_is_loopback (address);
}

static void
http_set_json (SoupServerMessage *msg, guint status, const char *body)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, body, strlen (body));
}

static void
http_refuse (SoupServerMessage *msg, guint status, int code, const char *message)
{
  g_autofree char *body = sandstep_mcp_response_error (NULL, code, message);

  http_set_json (msg, status, body);
}

/* The body as it comes, bounded whatever its encoding: libsoup would hold a
 * chunked body of any size. */
typedef struct {
  GByteArray *data;
  gboolean over;
} HttpBody;

static void
http_body_free (HttpBody *body)
{
  if (body->data != NULL)
    g_byte_array_unref (body->data);
  g_free (body);
}

static void
http_body_refuse (SoupServerMessage *msg)
{
  g_autofree char *message = g_strdup_printf ("The message is over the limit of %d bytes", MAX_HTTP_BODY);

  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
  http_refuse (msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, SANDSTEP_MCP_ERROR_REFUSED, message);
}

static void
http_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  HttpBody *body = user_data;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (chunk, &len);

  /* A body that keeps coming keeps its connection; one that stops is cut at the idle deadline. */
  sandstep_http_guard_body_progress (msg);
  if (body->over || soup_server_message_get_status (msg) != 0)
    return;
  if (body->data->len + len > MAX_HTTP_BODY)
    {
      body->over = TRUE;
      g_clear_pointer (&body->data, g_byte_array_unref);
      body->data = g_byte_array_new ();
      if (soup_server_message_get_status (msg) == 0)
        http_body_refuse (msg);
      return;
    }
  g_byte_array_append (body->data, data, len);
}

/* The body is in: no idle deadline while the call runs. */
static void
http_got_body (SoupServerMessage *msg, gpointer user_data)
{
  sandstep_http_guard_body_done (msg);
}

/* Before the body is read: who may talk to us at all. */
static void
http_early_handler (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query,
                    gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *host_value = soup_message_headers_get_one (headers, "Host");
  const char *origin = soup_message_headers_get_one (headers, "Origin");
  g_autofree char *host = sandstep_host_header_host (host_value);
  HttpBody *body;
  goffset length;

  /* The headers are in: the header deadline ends, the body's idle deadline starts. */
  sandstep_http_guard_got_headers (msg);
  g_signal_connect (msg, "got-body", G_CALLBACK (http_got_body), NULL);
  /* The body is gathered here, never by libsoup, so it stays bounded; a
   * refused request's is dropped as it comes. */
  body = g_new0 (HttpBody, 1);
  body->data = g_byte_array_new ();
  g_object_set_data_full (G_OBJECT (msg), "sandstep-mcp-body", body, (GDestroyNotify) http_body_free);
  soup_message_body_set_accumulate (soup_server_message_get_request_body (msg), FALSE);
  g_signal_connect (msg, "got-chunk", G_CALLBACK (http_got_chunk), body);

  /* DNS rebinding: a page from evil.example whose name now points at
   * 127.0.0.1 still sends "Host: evil.example". */
  if (host == NULL || !host_is_loopback (server, host))
    {
      g_autofree char *message = g_strdup_printf ("Forbidden: Host '%s' is not this loopback server",
                                                  host_value != NULL ? host_value : "");
      g_debug ("%s", message);
      http_refuse (msg, SOUP_STATUS_FORBIDDEN, SANDSTEP_MCP_ERROR_REFUSED, message);
      return;
    }
  /* A browser page of another origin: only loopback pages may call us. */
  if (origin != NULL)
    {
      g_autoptr(GUri) uri = g_uri_parse (origin, G_URI_FLAGS_NONE, NULL);
      const char *scheme = uri != NULL ? g_uri_get_scheme (uri) : NULL;
      const char *origin_host = uri != NULL ? g_uri_get_host (uri) : NULL;

      if (uri == NULL || (g_strcmp0 (scheme, "http") != 0 && g_strcmp0 (scheme, "https") != 0) ||
          origin_host == NULL || !host_is_loopback (server, origin_host))
        {
          g_autofree char *message = g_strdup_printf ("Forbidden: Origin '%s' is not a loopback origin", origin);
          g_debug ("%s", message);
          http_refuse (msg, SOUP_STATUS_FORBIDDEN, SANDSTEP_MCP_ERROR_REFUSED, message);
          return;
        }
    }
  /* Only the agent it was started for: loopback reaches every local user and every open sandbox. */
  if (server->token == NULL ||
      !sandstep_token_header_matches (soup_message_headers_get_one (headers, "Authorization"), server->token_digest))
    {
      g_debug ("refused %s %s: no or a wrong bearer token", soup_server_message_get_method (msg), path);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "WWW-Authenticate", "Bearer");
      http_refuse (msg, SOUP_STATUS_UNAUTHORIZED, SANDSTEP_MCP_ERROR_REFUSED,
                   "Unauthorized: send \"Authorization: Bearer TOKEN\" with this server's token "
                   "($SANDSTEP_MCP_TOKEN for an agent of 'sandstep tools', the --token-file of 'sandstep mcp')");
      return;
    }
  length = soup_message_headers_get_content_length (headers);
  if (soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH && length > MAX_HTTP_BODY)
    {
      g_autofree char *message = g_strdup_printf ("The message is %" G_GOFFSET_FORMAT " bytes, over the limit of "
                                                  "%d bytes", length, MAX_HTTP_BODY);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
      http_refuse (msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, SANDSTEP_MCP_ERROR_REFUSED, message);
      return;
    }
}

typedef struct {
  SandstepMcpServer *server;
  SoupServerMessage *msg;
  char *session;             /* issue this Mcp-Session-Id with the reply (initialize) */
  gboolean paused;
  gboolean answered;
  gboolean finished;         /* the message is done (sent, or the client went away) */
  gboolean terminal;         /* the reply answers a terminal failure */
  gboolean modern;           /* a request of the 2026-07-28 era: an error's code picks the HTTP status */
  int refs;
} HttpExchange;

static void
http_exchange_unref (HttpExchange *exchange)
{
  if (--exchange->refs > 0)
    return;
  g_object_unref (exchange->msg);
  g_free (exchange->session);
  g_free (exchange);
}

static void
http_finished (SoupServerMessage *msg, gpointer user_data)
{
  HttpExchange *exchange = user_data;

  if (exchange->finished)
    return;
  exchange->finished = TRUE;
  sandstep_mcp_reply_delivered (exchange->server, exchange->terminal);
  g_signal_handlers_disconnect_by_data (msg, exchange);
  http_exchange_unref (exchange);
}

static gboolean
reply_is_result (const char *reply)
{
  g_autoptr(JsonNode) root = json_from_string (reply, NULL);

  return root != NULL && JSON_NODE_HOLDS_OBJECT (root) && json_object_has_member (json_node_get_object (root), "result");
}

/* 2026-07-28 over HTTP: an unknown method is 404, a version or header the
 * server refuses 400; everything else goes out as 200, as before. */
static guint
modern_reply_status (const char *reply)
{
  g_autoptr(JsonNode) root = json_from_string (reply, NULL);
  JsonObject *error;
  gint64 code;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) ||
      !json_object_has_member (json_node_get_object (root), "error"))
    return SOUP_STATUS_OK;
  error = json_object_get_object_member (json_node_get_object (root), "error");
  code = error != NULL ? json_object_get_int_member_with_default (error, "code", 0) : 0;
  if (code == SANDSTEP_MCP_ERROR_METHOD_NOT_FOUND)
    return SOUP_STATUS_NOT_FOUND;
  if (code == SANDSTEP_MCP_ERROR_UNSUPPORTED_VERSION || code == SANDSTEP_MCP_ERROR_HEADER_MISMATCH)
    return SOUP_STATUS_BAD_REQUEST;
  return SOUP_STATUS_OK;
}

static void
http_reply (SandstepMcpServer *server, const char *reply, gpointer user_data)
{
  HttpExchange *exchange = user_data;

  exchange->answered = TRUE;
  exchange->terminal = server->replying_terminal;
  if (!exchange->finished)
    {
      SoupMessageHeaders *headers = soup_server_message_get_response_headers (exchange->msg);

      if (reply == NULL)
        {
          /* A notification or a response: accepted, nothing to say. */
          soup_server_message_set_status (exchange->msg, SOUP_STATUS_ACCEPTED, NULL);
        }
      else
        {
          /* A session starts with a successful initialize. */
          if (exchange->session != NULL && reply_is_result (reply))
            {
              g_hash_table_add (server->sessions, g_strdup (exchange->session));
              soup_message_headers_replace (headers, "Mcp-Session-Id", exchange->session);
            }
          http_set_json (exchange->msg, exchange->modern ? modern_reply_status (reply) : SOUP_STATUS_OK, reply);
        }
      if (exchange->paused)
        soup_server_message_unpause (exchange->msg);
    }
  else if (exchange->terminal)
    sandstep_mcp_reply_delivered (server, TRUE);
  http_exchange_unref (exchange);
}

static char *
new_session_id (void)
{
  guint8 bytes[16];
  GString *id = g_string_new (NULL);

  if (getrandom (bytes, sizeof bytes, 0) != sizeof bytes)
    g_error ("getrandom() failed: %s", g_strerror (errno));
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (id, "%02x", bytes[i]);
  return g_string_free (id, FALSE);
}

/* A request of the 2026-07-28 era: a JSON-RPC object whose params._meta names a version. */
static gboolean
http_request_is_modern (JsonNode *root, JsonObject **out_params, const char **out_method)
{
  JsonObject *message;
  JsonNode *params;

  if (!JSON_NODE_HOLDS_OBJECT (root))
    return FALSE;
  message = json_node_get_object (root);
  params = json_object_get_member (message, "params");
  if (params == NULL || !JSON_NODE_HOLDS_OBJECT (params) || !sandstep_mcp_request_is_modern (json_node_get_object (params)))
    return FALSE;
  *out_params = json_node_get_object (params);
  *out_method = sandstep_mcp_member_string (message, "method");
  return TRUE;
}

/* 2026-07-28: MCP-Protocol-Version, Mcp-Method and (for tools/call) Mcp-Name
 * mirror the body, so that a proxy may route on the headers alone; when one
 * disagrees, 400 with -32020 naming it. */
static gboolean
http_modern_headers_match (SoupServerMessage *msg, JsonNode *root, JsonObject *params, const char *method)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  JsonNode *id = json_object_get_member (json_node_get_object (root), "id");
  const char *version = sandstep_mcp_request_version (params);
  const char *name = g_strcmp0 (method, "tools/call") == 0 ? sandstep_mcp_member_string (params, "name") : NULL;
  const struct { const char *header; const char *body; const char *where; } checks[] = {
    { "MCP-Protocol-Version", version, "params._meta[\"" SANDSTEP_MCP_META_VERSION "\"]" },
    { "Mcp-Method", method, "method" },
    { "Mcp-Name", name, "params.name" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (checks); i++)
    {
      const char *value = soup_message_headers_get_one (headers, checks[i].header);
      g_autofree char *message = NULL;
      g_autofree char *text = NULL;

      if (checks[i].body == NULL || g_strcmp0 (value, checks[i].body) == 0)
        continue;
      if (value == NULL)
        message = g_strdup_printf ("Header mismatch: the body has %s \"%s\" but the %s header is missing; send "
                                   "\"%s: %s\"", checks[i].where, checks[i].body, checks[i].header,
                                   checks[i].header, checks[i].body);
      else
        message = g_strdup_printf ("Header mismatch: the body has %s \"%s\" but the %s header says \"%s\"; they "
                                   "must be the same", checks[i].where, checks[i].body, checks[i].header, value);
      text = sandstep_mcp_response_error (sandstep_mcp_id_is_valid (id) ? id : NULL,
                                          SANDSTEP_MCP_ERROR_HEADER_MISMATCH, message);
      http_set_json (msg, SOUP_STATUS_BAD_REQUEST, text);
      return FALSE;
    }
  return TRUE;
}

static void
http_post (SandstepMcpServer *server, SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  HttpBody *body = g_object_get_data (G_OBJECT (msg), "sandstep-mcp-body");
  const char *session = soup_message_headers_get_one (headers, "Mcp-Session-Id");
  const char *version = soup_message_headers_get_one (headers, "MCP-Protocol-Version");
  const char *content_type = soup_message_headers_get_content_type (headers, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  JsonObject *params = NULL;
  const char *method = NULL;
  gboolean modern;
  HttpExchange *exchange;
  gsize length;
  const char *data;

  if (content_type != NULL && g_ascii_strcasecmp (content_type, "application/json") != 0)
    {
      g_autofree char *message = g_strdup_printf ("Unsupported Content-Type '%s': send JSON-RPC messages as "
                                                  "application/json", content_type);
      http_refuse (msg, SOUP_STATUS_UNSUPPORTED_MEDIA_TYPE, SANDSTEP_MCP_ERROR_REFUSED, message);
      return;
    }
  if (body == NULL || body->over)
    {
      http_body_refuse (msg);
      return;
    }
  data = (const char *) body->data->data;
  length = body->data->len;
  root = sandstep_mcp_parse_message (data != NULL ? data : "", length, &error);
  if (root == NULL)
    {
      g_autofree char *message = sandstep_mcp_parse_error_message (error);
      g_autofree char *text = sandstep_mcp_response_error (NULL, SANDSTEP_MCP_ERROR_PARSE, message);
      http_set_json (msg, SOUP_STATUS_BAD_REQUEST, text);
      return;
    }
  modern = http_request_is_modern (root, &params, &method);
  if (modern)
    {
      /* No sessions in this era; the headers must say what the body says. */
      if (!http_modern_headers_match (msg, root, params, method))
        return;
    }
  else
    {
      if (version != NULL && !sandstep_mcp_version_is_supported (version))
        {
          g_autofree char *message = g_strdup_printf (
            "Unsupported MCP-Protocol-Version '%s'; supported: %s, %s, %s, %s after initialize, and %s with the "
            "version in each request's params._meta[\"%s\"]",
            version, sandstep_mcp_protocol_versions[0], sandstep_mcp_protocol_versions[1],
            sandstep_mcp_protocol_versions[2], sandstep_mcp_protocol_versions[3], SANDSTEP_MCP_MODERN_VERSION,
            SANDSTEP_MCP_META_VERSION);
          http_refuse (msg, SOUP_STATUS_BAD_REQUEST, SANDSTEP_MCP_ERROR_REFUSED, message);
          return;
        }
      if (session != NULL && !g_hash_table_contains (server->sessions, session))
        {
          http_refuse (msg, SOUP_STATUS_NOT_FOUND, SANDSTEP_MCP_ERROR_REFUSED,
                       "Session not found: it ended or was never issued; initialize again");
          return;
        }
    }

  exchange = g_new0 (HttpExchange, 1);
  exchange->modern = modern;
  exchange->server = server;
  exchange->msg = g_object_ref (msg);
  exchange->refs = 2;      /* one for the reply, one for "finished" */
  g_signal_connect (msg, "finished", G_CALLBACK (http_finished), exchange);
  if (JSON_NODE_HOLDS_OBJECT (root) &&
      g_strcmp0 (sandstep_mcp_member_string (json_node_get_object (root), "method"), "initialize") == 0 &&
      json_object_has_member (json_node_get_object (root), "id"))
    exchange->session = new_session_id ();

  sandstep_mcp_handle_node (server, root, http_reply, exchange);
  if (!exchange->answered)
    {
      exchange->paused = TRUE;
      soup_server_message_pause (msg);
    }
}

static void
http_handler (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  const char *method = soup_server_message_get_method (msg);
  SoupMessageHeaders *response_headers = soup_server_message_get_response_headers (msg);

  if (strcmp (path, SANDSTEP_MCP_PATH) != 0)
    {
      http_refuse (msg, SOUP_STATUS_NOT_FOUND, SANDSTEP_MCP_ERROR_REFUSED,
                   "Not found: the MCP endpoint is " SANDSTEP_MCP_PATH);
      return;
    }
  if (strcmp (method, SOUP_METHOD_POST) == 0)
    http_post (server, msg);
  else if (strcmp (method, SOUP_METHOD_DELETE) == 0)
    {
      const char *session = soup_message_headers_get_one (soup_server_message_get_request_headers (msg),
                                                          "Mcp-Session-Id");
      if (session == NULL)
        http_refuse (msg, SOUP_STATUS_BAD_REQUEST, SANDSTEP_MCP_ERROR_REFUSED,
                     "DELETE ends a session: send its Mcp-Session-Id");
      else if (!g_hash_table_remove (server->sessions, session))
        http_refuse (msg, SOUP_STATUS_NOT_FOUND, SANDSTEP_MCP_ERROR_REFUSED,
                     "Session not found: it ended or was never issued");
      else
        soup_server_message_set_status (msg, SOUP_STATUS_NO_CONTENT, NULL);
    }
  else
    {
      /* GET would open a stream of server messages; this server sends none. */
      soup_message_headers_replace (response_headers, "Allow", "POST, DELETE");
      http_refuse (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, SANDSTEP_MCP_ERROR_REFUSED,
                   "Method not allowed: POST JSON-RPC messages; this server offers no event stream");
    }
}

/* Splits "PORT", "ADDR:PORT" or "[ADDR]:PORT" and checks that ADDR is loopback. */
static gboolean
parse_listen_address (const char *text, char **out_host, guint16 *out_port, GError **error)
{
  g_autofree char *host = NULL;
  g_autoptr(GInetAddress) address = NULL;
  guint16 port;
  const char *expected = "ADDR:PORT with a loopback ADDR (127.0.0.1, [::1] or localhost) and a PORT from 0 "
                         "(pick a free one) to 65535";

  if (text == NULL || text[0] == '\0')
    text = "127.0.0.1:0";
  if (!sandstep_parse_host_port (text, TRUE, &host, &port))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--http '%s' is not %s", text, expected);
  if (host[0] == '\0' || g_ascii_strcasecmp (host, "localhost") == 0)
    {
      g_free (host);
      host = g_strdup ("127.0.0.1");
    }
  address = g_inet_address_new_from_string (host);
  if (address == NULL || !g_inet_address_get_is_loopback (address))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--http '%s': '%s' is not a loopback address. The MCP endpoint runs commands in the "
                           "sandbox and speaks plain HTTP, so sandstep serves it on loopback only (127.0.0.1, "
                           "[::1] or localhost); reach it from another machine through an SSH tunnel", text, host);
  *out_host = g_inet_address_to_string (address);
  *out_port = port;
  return TRUE;
}

const char *
sandstep_mcp_server_http_token (SandstepMcpServer *server)
{
  return server->token;
}

gboolean
sandstep_mcp_check_address (const char *address, GError **error)
{
  g_autofree char *host = NULL;
  guint16 port;

  return parse_listen_address (address, &host, &port, error);
}

/* Slow and idle clients, as sandstepd meets them (hooks/sandstep-http-guard.h): every local user can connect. */
#define MCP_HEADERS_DEADLINE_S 10
#define MCP_BODY_IDLE_S 30
#define MCP_MAX_CONNECTIONS_PER_PEER 256
#define MCP_MAX_PENDING_PER_PEER 32
#define MCP_MAX_PENDING 64

/* Connections in all: half the descriptors this process may open, so the sandbox's own work keeps some. */
static guint
mcp_connection_limit (void)
{
  struct rlimit nofile;

  if (getrlimit (RLIMIT_NOFILE, &nofile) < 0 || nofile.rlim_cur == RLIM_INFINITY)
    return 512;
  return (guint) CLAMP (nofile.rlim_cur / 2, 16, 4096);
}

char *
sandstep_mcp_server_listen_http (SandstepMcpServer *server, const char *address, GError **error)
{
  g_autofree char *host = NULL;
  g_autoptr(GInetAddress) inet = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(GSocketAddress) local = NULL;
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(SoupServer) soup = NULL;
  g_autoptr(GError) local_error = NULL;
  guint port = 0;
  guint16 wanted_port = 0;
  SandstepHttpGuardConfig config = {
    .header_timeout_s = MCP_HEADERS_DEADLINE_S,
    .idle_timeout_s = MCP_BODY_IDLE_S,
    .max_connections = mcp_connection_limit (),
    .max_connections_per_peer = MCP_MAX_CONNECTIONS_PER_PEER,
    .max_pending = MCP_MAX_PENDING,
    .max_pending_per_peer = MCP_MAX_PENDING_PER_PEER,
  };

  g_return_val_if_fail (server->http == NULL, NULL);
  if (!parse_listen_address (address, &host, &wanted_port, error))
    return NULL;
  inet = g_inet_address_new_from_string (host);
  socket_address = g_inet_socket_address_new (inet, wanted_port);
  soup = soup_server_new ("server-header", "sandstep-mcp ", NULL);
  /* Accepted by the guard and handed to libsoup, never by libsoup's own listener (see the guard's header). */
  listener = g_socket_new (g_socket_address_get_family (socket_address), G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP,
                           &local_error);
  if (listener != NULL)
    g_socket_set_listen_backlog (listener, 256);
  if (listener == NULL || !g_socket_bind (listener, socket_address, TRUE, &local_error) ||
      !g_socket_listen (listener, &local_error) || (local = g_socket_get_local_address (listener, &local_error)) == NULL)
    {
      /* A port someone chose and someone else holds is the caller's to change. */
      if (wanted_port != 0)
        sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                        "--http '%s': %s; choose another port, or 0 for a free one", address, local_error->message);
      else
        g_propagate_prefixed_error (error, g_steal_pointer (&local_error), "Cannot serve MCP over HTTP: ");
      return NULL;
    }
  if (G_IS_INET_SOCKET_ADDRESS (local))
    port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));
  if (port == 0)
    {
      g_set_error (error, SANDSTEP_MCP_ERROR, SANDSTEP_MCP_ERROR_INTERNAL, "Cannot tell which port the MCP server "
                   "listens on");
      return NULL;
    }
  soup_server_add_early_handler (soup, NULL, http_early_handler, server, NULL);
  soup_server_add_handler (soup, NULL, http_handler, server, NULL);
  server->http_guard = sandstep_http_guard_new (soup, listener, &config);

  server->token = sandstep_token_new ();
  sandstep_token_digest (server->token, server->token_digest);
  server->bound_host = g_steal_pointer (&host);
  server->http = g_steal_pointer (&soup);
  if (strchr (server->bound_host, ':') != NULL)
    return g_strdup_printf ("http://[%s]:%u" SANDSTEP_MCP_PATH, server->bound_host, port);
  return g_strdup_printf ("http://%s:%u" SANDSTEP_MCP_PATH, server->bound_host, port);
}
