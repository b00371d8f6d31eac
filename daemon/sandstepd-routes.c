/* sandstepd-routes.c: what a request is, who may send it, and its body, as they arrive.
 *
 * Each request is read as its headers and body come in, never accumulated
 * unbounded: a bad path, a missing or wrong token, an unknown route or a
 * body over its limit is refused before the body is read; write's and put's
 * bodies are staged on disk as they come.  Once the body is in, the route's
 * handler runs (sandstepd_on_request()).
 */
#include "sandstepd-private.h"
#include "sandstepd-e2b-answer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-egress.h"
#include "sandstep-error.h"
#include "sandstep-token.h"
#include "sandstep-units.h"
#include "sandstep-wire.h"

static void handle_health (Request *req);

/* How a route's body is read as it comes (on_got_chunk()). */
typedef enum {
  BODY_JSON,            /* a JSON object, up to SANDSTEPD_MAX_JSON_BODY */
  BODY_NONE,            /* GET: none */
  BODY_STAGED,          /* bytes staged on disk, up to --max-upload */
  BODY_ENTRIES,         /* put's entries, unpacked as they come (sandstepd-upload.c) */
  BODY_LINE_THEN_STDIN, /* a JSON line, then the command's stdin, staged */
} RouteBody;

/* THE route table: every API of sandstepd, what it takes and who does it.  A sandbox's routes are
 * SANDSTEP_API_PREFIX/sandboxes/HANDLE/NAME; the others SANDSTEP_API_PREFIX/NAME. */
typedef struct {
  Route route;
  const char *method;
  const char *name;
  gboolean of_sandbox;
  /* What the body must be: a web page can send text/plain or a form to anyone by a simple POST, never these. */
  const char *content_type;
  RouteBody body;
  void (*handler) (Request *req);
} RouteSpec;

static const RouteSpec routes[] = {
  /* route                method  name              sandbox content type                      body */
  { ROUTE_HEALTH,         "GET",  "health",         FALSE, NULL,                             BODY_NONE,
    handle_health },
  { ROUTE_PROVISION,      "POST", "sandboxes",      FALSE, "application/json",               BODY_JSON,
    sandstepd_handle_record },
  { ROUTE_GC,             "POST", "gc",             FALSE, "application/json",               BODY_JSON,
    sandstepd_handle_record },
  { ROUTE_SANDBOXES,      "POST", "list",           FALSE, "application/json",               BODY_JSON,
    sandstepd_handle_record },
  { ROUTE_DESCRIBE,       "POST", "describe",       TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_record },
  { ROUTE_RELEASE,        "POST", "release",        TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_record },
  { ROUTE_DESTROY,        "POST", "destroy",        TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_record },
  { ROUTE_CLAIM,          "POST", "claim",          TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_claim },
  { ROUTE_RELEASE_CLAIM,  "POST", "release-claim",  TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_release_claim },
  { ROUTE_RUN,            "POST", "run",            TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_run },
  { ROUTE_CLAIM_RUN,      "POST", "claim-run",      TRUE,  SANDSTEP_RUN_STEP_TYPE,           BODY_LINE_THEN_STDIN,
    sandstepd_handle_claim_run },
  { ROUTE_READ,           "POST", "read",           TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_read_list },
  { ROUTE_WRITE,          "POST", "write",          TRUE,  "application/octet-stream",       BODY_STAGED,
    sandstepd_handle_write },
  { ROUTE_LIST,           "POST", "list",           TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_read_list },
  { ROUTE_PUT,            "POST", "put",            TRUE,  "application/x-sandstep-entries", BODY_ENTRIES,
    sandstepd_handle_put },
  { ROUTE_EXPORT,         "POST", "export",         TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_export },
  { ROUTE_FORK,           "POST", "fork",           TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_layers },
  { ROUTE_CHECKPOINT,     "POST", "checkpoint",     TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_layers },
  { ROUTE_ROLLBACK,       "POST", "rollback",       TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_layers },
  { ROUTE_CHECKPOINTS,    "POST", "checkpoints",    TRUE,  "application/json",               BODY_JSON,
    sandstepd_handle_layers },
  /* E2B's routes (sandstepd_e2b_is_path()): their own paths, methods, keys and error shape. */
  { ROUTE_E2B,            NULL,   NULL,             FALSE, NULL,                             BODY_JSON,
    sandstepd_handle_e2b },
};

static const RouteSpec *
spec_of (Route route)
{
  for (gsize i = 0; i < G_N_ELEMENTS (routes); i++)
    if (routes[i].route == route)
      return &routes[i];
  return NULL;
}

/* The route of @path whatever its method, or NULL; a sandbox's route with a handle that is not one sets
 * *@out_bad_handle. */
static const RouteSpec *
route_for (const char *path, char **out_handle, gboolean *out_bad_handle)
{
  const char *rest = g_str_has_prefix (path, SANDSTEP_API_PREFIX "/") ? path + strlen (SANDSTEP_API_PREFIX "/")
                                                                      : NULL;
  g_auto(GStrv) parts = NULL;

  *out_handle = NULL;
  *out_bad_handle = FALSE;
  if (rest == NULL)
    return NULL;
  parts = g_strsplit (rest, "/", -1);
  for (gsize i = 0; i < G_N_ELEMENTS (routes); i++)
    {
      const RouteSpec *spec = &routes[i];
      if (spec->name == NULL)
        continue;
      if (!spec->of_sandbox ? g_strv_length (parts) != 1 || strcmp (parts[0], spec->name) != 0
                            : g_strv_length (parts) != 3 || strcmp (parts[0], "sandboxes") != 0 ||
                                strcmp (parts[2], spec->name) != 0)
        continue;
      if (spec->of_sandbox)
        {
          *out_handle = g_strdup (parts[1]);
          if (!sandstep_handle_is_local (parts[1]))
            {
              *out_bad_handle = TRUE;
              return NULL;
            }
        }
      return spec;
    }
  return NULL;
}

/* The token entry the request carries, or NULL with why not. */
static const SandstepTokenEntry *
authorized (Daemon *d, SoupServerMessage *msg, const char **out_why)
{
  const char *header = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization");
  const SandstepTokenEntry *entry;

  if (header == NULL || g_ascii_strncasecmp (header, "Bearer ", strlen ("Bearer ")) != 0)
    {
      *out_why = "no token";
      return NULL;
    }
  entry = sandstep_token_set_match (d->tokens, header);
  if (entry == NULL)
    *out_why = "a wrong token";
  return entry;
}

/* An address is ours when we listen on it, or, listening on every address
 * (0.0.0.0, ::), when it is one of this host's. */
static gboolean
address_is_ours (Daemon *d, GInetAddress *address)
{
  GSocket *listener = d->guard != NULL ? sandstep_http_guard_listener (d->guard) : NULL;
  g_autoptr(GSocketAddress) local = listener != NULL ? g_socket_get_local_address (listener, NULL) : NULL;
  GInetAddress *bound;

  if (local == NULL || !G_IS_INET_SOCKET_ADDRESS (local))
    return FALSE;
  bound = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (local));
  if (g_inet_address_get_is_any (bound))
    return sandstep_egress_address_is_own (address);
  return g_inet_address_equal (bound, address);
}

/* A request for a name that points at us only by accident (DNS rebinding)
 * names another host: our listening addresses, localhost, this host's name
 * and the names given with --server-name are ours. */
static gboolean
host_is_ours (Daemon *d, const char *value)
{
  g_autofree char *host = sandstep_host_header_host (value);
  g_autoptr(GInetAddress) address = NULL;

  if (host == NULL || host[0] == '\0')
    return FALSE;
  address = g_inet_address_new_from_string (host);
  if ((address != NULL && address_is_ours (d, address)) || strcmp (host, "localhost") == 0 ||
      g_str_has_suffix (host, ".localhost") ||
      g_ascii_strcasecmp (host, g_get_host_name ()) == 0)
    return TRUE;
  for (char **n = d->server_names; n != NULL && *n != NULL; n++)
    if (g_ascii_strcasecmp (host, *n) == 0)
      return TRUE;
  return FALSE;
}

/* A JSON body over its limit; the connection closes rather than read the rest. */
static void
refuse_large_body (Request *req)
{
  req->refused = TRUE;
  soup_message_headers_replace (soup_server_message_get_response_headers (req->msg), "Connection", "close");
  sandstepd_answer_refusal (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                            "send a smaller body; requests are small JSON objects", SANDSTEP_USAGE_ERROR,
                            SANDSTEP_USAGE_ERROR_BAD_VALUE, "The body of %s %s is larger than %" G_GSIZE_FORMAT
                            " bytes", req->method, req->path, req->limit);
}

/* Written bytes, or a claim-run's stdin, over --max-upload; the connection closes rather than read the rest. */
static void
refuse_upload_too_large (Request *req)
{
  gboolean is_stdin = spec_of (req->route)->body == BODY_LINE_THEN_STDIN;

  req->refused = TRUE;
  soup_message_headers_replace (soup_server_message_get_response_headers (req->msg), "Connection", "close");
  sandstepd_answer_refusal (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                            is_stdin ? "give the command less on stdin (put a large input with sandstep put), "
                                       "or start sandstepd with a larger --max-upload"
                                     : "write less at a time, or start sandstepd with a larger --max-upload",
                            SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE,
                            "The %s is larger than the server's limit of %" G_GUINT64_FORMAT " bytes%s",
                            is_stdin ? "command's stdin" : "body", req->d->max_upload,
                            is_stdin ? "; give it less (put a large input with 'sandstep put'), or start "
                                       "sandstepd with a larger --max-upload" : "");
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

/* A body that could not be staged: the server's trouble (a caller mid-body says so first). */
static void
refuse_staging (Request *req, const char *what, int errsv)
{
  req->refused = TRUE;
  sandstepd_answer_refusal (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                            SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, "Cannot stage %s under '%s': %s",
                            what, req->d->staging_dir, g_strerror (errsv));
}

/* Bytes of a write, or of a claim-run's stdin: staged on disk as they come, up to --max-upload. */
static void
stage_bytes (Request *req, const guint8 *data, gsize len)
{
  if (req->upload_len + len > req->d->max_upload)
    {
      req->mid_body = TRUE;
      refuse_upload_too_large (req);
      return;
    }
  if (len > 0 && req->upload_fd < 0 && spec_of (req->route)->body == BODY_LINE_THEN_STDIN)
    req->upload_fd = open_staged_file (req->d);
  if (len > 0 && req->upload_fd < 0)
    {
      req->mid_body = TRUE;
      refuse_staging (req, "the command's stdin", errno);
      return;
    }
  for (gsize done = 0; done < len && req->upload_fd >= 0;)
    {
      ssize_t n = write (req->upload_fd, data + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          req->mid_body = TRUE;
          refuse_staging (req, "the written bytes", errno);
          return;
        }
      done += n;
    }
  req->upload_len += len;
}

static void
on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  Request *req = user_data;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (chunk, &len);
  RouteBody body;

  sandstepd_conn_body_progress (msg);
  if (req->refused)
    return;
  /* A refusal from here on (req->mid_body) is answered at once, the rest of the body never read. */
  body = spec_of (req->route)->body;
  if (body == BODY_ENTRIES && req->upload != NULL)
    {
      g_autoptr(GError) error = NULL;
      /* Whatever went wrong, the rest of the body is not read: it could be endless. */
      if (!sandstepd_upload_feed (req->upload, data, len, &error))
        {
          req->refused = TRUE;
          req->mid_body = TRUE;
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          sandstepd_answer_error (req, error);
        }
      return;
    }
  if (body == BODY_STAGED)
    {
      stage_bytes (req, data, len);
      return;
    }
  if (body == BODY_LINE_THEN_STDIN && !req->line_done)
    {
      /* The first line is the request; what follows it is the command's stdin. */
      const guint8 *nl = memchr (data, '\n', len);
      gsize line_len = nl != NULL ? (gsize) (nl - data) : len;

      if (req->body->len + line_len > req->limit)
        {
          req->mid_body = TRUE;
          refuse_large_body (req);
          return;
        }
      g_byte_array_append (req->body, data, line_len);
      if (nl == NULL)
        return;
      req->line_done = TRUE;
      stage_bytes (req, nl + 1, len - line_len - 1);
      return;
    }
  if (body == BODY_LINE_THEN_STDIN)
    {
      stage_bytes (req, data, len);
      return;
    }
  if (req->body->len + len > req->limit)
    {
      req->mid_body = TRUE;
      refuse_large_body (req);
      return;
    }
  g_byte_array_append (req->body, data, len);
}

static void
on_got_headers (SoupServerMessage *msg, gpointer user_data)
{
  Daemon *d = user_data;
  Request *req = g_new0 (Request, 1);
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  GUri *uri = soup_server_message_get_uri (msg);
  const char *why = NULL;
  const char *origin = soup_message_headers_get_one (headers, "Origin");
  const char *host = soup_message_headers_get_one (headers, "Host");
  const RouteSpec *spec;
  const char *content_type;
  gboolean bad_handle = FALSE;
  goffset length;

  sandstepd_conn_got_headers (msg);
  /* Made here, not when the connection waits for a request: a keep-alive
   * connection that closes instead never finishes that message. */
  req->refs = 1;              /* released when the exchange finishes */
  req->d = d;
  req->msg = g_object_ref (msg);
  req->upload_fd = -1;
  g_object_set_data (G_OBJECT (msg), "sandstepd-request", req);
  g_signal_connect (msg, "got-chunk", G_CALLBACK (on_got_chunk), req);
  g_signal_connect (msg, "finished", G_CALLBACK (sandstepd_request_finished), req);

  req->method = g_strdup (soup_server_message_get_method (msg));
  req->path = g_strdup (uri != NULL ? g_uri_get_path (uri) : "?");
  /* Everything the body brings is handled as it comes: nothing accumulates unbounded. */
  soup_message_body_set_accumulate (soup_server_message_get_request_body (msg), FALSE);
  req->body = g_byte_array_new ();
  req->limit = SANDSTEPD_MAX_JSON_BODY;

  if (soup_server_message_get_status (msg) != 0)
    {
      /* libsoup refused it already (e.g. ".." in an encoded path): say so in JSON. */
      req->refused = TRUE;
      sandstepd_answer_refusal (req, soup_server_message_get_status (msg), "bad-path",
                                "request /v1/... paths without '..' segments", SANDSTEP_USAGE_ERROR,
                                SANDSTEP_USAGE_ERROR_BAD_VALUE, "The request path is refused");
      return;
    }
  /* Browsers send Origin on every cross-site request; no client of ours does. */
  if (origin != NULL)
    {
      g_autofree char *shown = sandstep_escape (origin, -1, 200, SANDSTEP_ESCAPE_VALUE);
      req->refused = TRUE;
      sandstepd_say ("refused %s %s: it carried Origin '%s' (a web page)", req->method, req->path, shown);
      sandstepd_answer_refusal (req, SOUP_STATUS_FORBIDDEN, "origin", "call sandstepd from sandstep, not a web page",
                                SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                "The sandbox server refuses requests from web pages (Origin '%s')", shown);
      return;
    }
  if (!host_is_ours (d, host))
    {
      g_autofree char *shown = sandstep_escape (host != NULL ? host : "", -1, 200, SANDSTEP_ESCAPE_VALUE);
      req->refused = TRUE;
      sandstepd_say ("refused %s %s: Host '%s' is not this server's", req->method, req->path, shown);
      sandstepd_answer_refusal (req, SOUP_STATUS_FORBIDDEN, "bad-host",
                                "reach the server by an address it listens on, or start sandstepd with "
                                "--server-name=NAME (a name or the address clients use)",
                                SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                "The sandbox server does not answer to the name '%s' (Host); it answers to the "
                                "addresses it listens on, localhost, '%s' and the names given with --server-name",
                                shown,
                                g_get_host_name ());
      return;
    }
  if (sandstepd_e2b_is_path (req->path))
    {
      /* E2B's SDK sends its key as X-API-KEY and wants its errors in its own shape. */
      req->scope = sandstepd_e2b_authorized (d, msg, req->path, &why);
      if (req->scope == NULL)
        {
          req->refused = TRUE;
          sandstepd_say ("refused %s %s: %s", req->method, req->path, why);
          sandstepd_e2b_error (req, SOUP_STATUS_UNAUTHORIZED,
                               "The sandbox server refused the request: it carried %s; set E2B_API_KEY to a token "
                               "of sandstepd's token file (written e2b_ and hex)", why);
          return;
        }
      req->route = ROUTE_E2B;
      length = soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH
                 ? soup_message_headers_get_content_length (headers)
                 : -1;
      if (length > (goffset) req->limit)
        refuse_large_body (req);
      return;
    }
  req->scope = authorized (d, msg, &why);
  if (req->scope == NULL)
    {
      GInetSocketAddress *remote = G_INET_SOCKET_ADDRESS (soup_server_message_get_remote_address (msg));
      g_autofree char *from = remote != NULL ? g_inet_address_to_string (g_inet_socket_address_get_address (remote))
                                             : g_strdup ("?");
      req->refused = TRUE;
      sandstepd_say ("refused %s %s from %s: %s", req->method, req->path, from, why);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "WWW-Authenticate",
                                    "Bearer realm=\"sandstepd\"");
      sandstepd_answer_refusal (req, SOUP_STATUS_UNAUTHORIZED, "unauthorized",
                                "set SANDSTEP_TOKEN or SANDSTEP_TOKEN_FILE to the token sandstepd was started with",
                                SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                "The sandbox server refused the request: it carried %s; set " SANDSTEP_TOKEN_ENV " or "
                                SANDSTEP_TOKEN_FILE_ENV " to the token sandstepd was started with", why);
      return;
    }

  spec = route_for (req->path, &req->handle, &bad_handle);
  if (bad_handle)
    {
      req->refused = TRUE;
      sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "bad-handle", "pass the handle 'sandstep provision' printed",
                                SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                                "'%s' is not a sandbox handle (they look like sandstep-0123456789abcdef)", req->handle);
      return;
    }
  if (spec == NULL)
    {
      req->refused = TRUE;
      sandstepd_answer_refusal (req, SOUP_STATUS_NOT_FOUND, "no-route", SANDSTEPD_API_HINT,
                                SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "No such API: %s %s", req->method,
                                req->path);
      return;
    }
  req->route = spec->route;
  if (strcmp (req->method, spec->method) != 0)
    {
      g_autofree char *hint = g_strdup_printf ("use %s", spec->method);
      req->refused = TRUE;
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Allow", spec->method);
      sandstepd_answer_refusal (req, SOUP_STATUS_METHOD_NOT_ALLOWED, "method", hint, SANDSTEP_USAGE_ERROR,
                                SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s is not accepted on %s", req->method, req->path);
      return;
    }

  content_type = soup_message_headers_get_content_type (headers, NULL);
  if (spec->content_type != NULL && g_strcmp0 (content_type, spec->content_type) != 0)
    {
      g_autofree char *shown = sandstep_escape (content_type != NULL ? content_type : "(none)", -1, 200,
                                                SANDSTEP_ESCAPE_VALUE);
      req->refused = TRUE;
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
      sandstepd_answer_refusal (req, SOUP_STATUS_UNSUPPORTED_MEDIA_TYPE, "content-type", SANDSTEPD_API_HINT,
                                SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                "%s %s takes a body of type %s, not '%s'", req->method, req->path, spec->content_type,
                                shown);
      return;
    }

  length = soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH
             ? soup_message_headers_get_content_length (headers)
             : -1;
  if (spec->body == BODY_STAGED || spec->body == BODY_ENTRIES)
    {
      const char *claim = soup_message_headers_get_one (headers, SANDSTEP_CLAIM_HEADER);
      Lease *lease = claim != NULL ? g_hash_table_lookup (d->leases, claim) : NULL;
      GHashTable *query = g_uri_get_query (uri) != NULL ? soup_form_decode (g_uri_get_query (uri)) : NULL;
      g_autoptr(GError) error = NULL;

      if (query != NULL)
        g_object_set_data_full (G_OBJECT (msg), "sandstepd-query", query, (GDestroyNotify) g_hash_table_unref);
      /* Unclaimed uploads are refused before a byte is staged. */
      if (sandstepd_find_lease (req, claim) == NULL)
        {
          req->refused = TRUE;
          return;
        }
      req->lease = lease;
      if (length > 0 && (guint64) length > d->max_upload)
        {
          req->refused = TRUE;
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          sandstepd_answer_refusal (req, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body-too-large",
                                    "send less at a time, or start sandstepd with a larger --max-upload", SANDSTEP_PATH_ERROR,
                                    SANDSTEP_PATH_ERROR_TOO_LARGE,
                                    "The body is larger than the server's limit of %" G_GUINT64_FORMAT " bytes", d->max_upload);
          return;
        }
      if (spec->body == BODY_STAGED)
        {
          req->upload_fd = open_staged_file (d);
          if (req->upload_fd < 0)
            refuse_staging (req, "a write", errno);
        }
      else
        {
          const char *name = query != NULL ? g_hash_table_lookup (query, "name") : NULL;
          req->upload = sandstepd_upload_new (d->staging_fd, d->staging_dir, name, d->max_upload, &error);
          if (req->upload == NULL)
            {
              req->refused = TRUE;
              sandstepd_answer_error (req, error);
            }
        }
      return;
    }
  if (spec->body == BODY_LINE_THEN_STDIN)
    {
      if (length > 0 && (guint64) length > req->limit + d->max_upload)
        {
          refuse_upload_too_large (req);
          return;
        }
      /* Staged only once a byte of stdin comes. */
      return;
    }
  if (length > (goffset) req->limit)
    refuse_large_body (req);
}

void
sandstepd_on_request_started (SoupServer *server, SoupServerMessage *msg, gpointer user_data)
{
  g_signal_connect (msg, "got-headers", G_CALLBACK (on_got_headers), user_data);
}

/* The body is in: do the work (the refused ones never get here: libsoup skips a message with a status). */
void
sandstepd_on_request (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                      gpointer user_data)
{
  Request *req = g_object_get_data (G_OBJECT (msg), "sandstepd-request");

  sandstepd_conn_body_done (msg);
  if (req == NULL || req->refused || req->completed)
    return;
  if (req->d->debug)
    sandstepd_say ("%s %s", req->method, req->path);
  soup_server_message_pause (msg);
  req->paused = TRUE;
  spec_of (req->route)->handler (req);
}

static void
handle_health (Request *req)
{
  g_autoptr(JsonObject) object = json_object_new ();

  json_object_set_string_member (object, "sandstepd", SANDSTEP_VERSION);
  sandstepd_answer_json (req, SOUP_STATUS_OK, object);
}
