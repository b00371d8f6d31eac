/* sandstep-s3.c: S3 requests over libsoup, signed with SigV4. */
#include "sandstep-s3.h"

#include <libsoup/soup.h>
#include <string.h>

#include "sandstep-fd-stream.h"
#include "sandstep-sigv4.h"

G_DEFINE_QUARK (sandstep-s3-error-quark, sandstep_s3_error)

/* g_set_str() is GLib 2.76. */
static void
set_str (char **where, const char *value)
{
  g_free (*where);
  *where = g_strdup (value);
}

#define MAX_KEY_BYTES 1024
#define MAX_QUOTED 400        /* of a server's message */

struct _SandstepS3Client {
  SandstepAwsConfig *config;
  SoupSession *session;
  char *scheme;               /* "http" or "https" */
  char *host;                 /* the endpoint's host, without port */
  int port;                   /* -1: the scheme's */
  char *base_path;            /* the endpoint's path, without a trailing '/' ("" mostly) */
  char *shown;                /* scheme://host[:port][path], for messages */
  gboolean on_aws;            /* no endpoint configured: AWS's own */
};

void
sandstep_s3_client_free (SandstepS3Client *client)
{
  if (client == NULL)
    return;
  sandstep_aws_config_free (client->config);
  g_clear_object (&client->session);
  g_free (client->scheme);
  g_free (client->host);
  g_free (client->base_path);
  g_free (client->shown);
  g_free (client);
}

SandstepS3Client *
sandstep_s3_client_new (SandstepAwsConfig *config, double read_timeout_s, GError **error)
{
  g_autoptr(SandstepS3Client) client = g_new0 (SandstepS3Client, 1);
  g_autofree char *endpoint = NULL;
  g_autoptr(GUri) uri = NULL;
  g_autoptr(GError) local_error = NULL;
  const char *path;
  guint timeout = read_timeout_s >= 1 ? (guint) (read_timeout_s + 0.999) : 1;

  client->config = config;
  client->on_aws = config->endpoint == NULL;
  endpoint = config->endpoint != NULL ? g_strdup (config->endpoint)
                                      : g_strdup_printf ("https://s3.%s.amazonaws.com", config->region);
  uri = g_uri_parse (endpoint, SOUP_HTTP_URI_FLAGS, &local_error);
  if (uri == NULL || g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0' ||
      (g_strcmp0 (g_uri_get_scheme (uri), "http") != 0 && g_strcmp0 (g_uri_get_scheme (uri), "https") != 0) ||
      g_uri_get_query (uri) != NULL || g_uri_get_userinfo (uri) != NULL)
    return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_BAD_VALUE,
                        "The S3 endpoint '%s' (%s) is not an http:// or https:// URL of a host; write for "
                        "example https://s3.example.com or http://127.0.0.1:9000", endpoint,
                        config->endpoint_from ? config->endpoint_from : "default"), NULL;
  client->scheme = g_strdup (g_uri_get_scheme (uri));
  client->host = g_strdup (g_uri_get_host (uri));
  client->port = g_uri_get_port (uri);
  path = g_uri_get_path (uri);
  client->base_path = g_strdup (path != NULL ? path : "");
  while (g_str_has_suffix (client->base_path, "/"))
    client->base_path[strlen (client->base_path) - 1] = '\0';
  {
    gboolean ipv6 = strchr (client->host, ':') != NULL;
    g_autofree char *port = client->port > 0 ? g_strdup_printf (":%d", client->port) : g_strdup ("");

    client->shown = g_strdup_printf ("%s://%s%s%s%s%s", client->scheme, ipv6 ? "[" : "", client->host,
                                     ipv6 ? "]" : "", port, client->base_path);
  }
  {
    g_autoptr(GProxyResolver) proxies = sandstep_aws_proxy_resolver ();
    /* Parts go up several at once (sandstep-s3-dest.c), each on a connection of its own. */
    client->session = soup_session_new_with_options ("timeout", timeout, "user-agent", "sandstep", "proxy-resolver",
                                                     proxies, "max-conns-per-host", SANDSTEP_S3_MAX_CONNS,
                                                     "max-conns", SANDSTEP_S3_MAX_CONNS, NULL);
  }
  return g_steal_pointer (&client);
}

const char *
sandstep_s3_client_endpoint (SandstepS3Client *client)
{
  return client->shown;
}

/* ---- names ---- */

gboolean
sandstep_s3_check_names (const char *bucket, const char *key, GError **error)
{
  gsize len = strlen (bucket);

  if (len < 3 || len > 255)
    return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_BAD_NAME,
                        "'%s' is not a bucket name: S3 takes 3 to 63 characters", bucket), FALSE;
  for (const char *p = bucket; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '.' && *p != '_')
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_BAD_NAME,
                          "'%s' is not a bucket name: S3 takes letters, digits, '-' and '.'", bucket), FALSE;
  if (key == NULL)
    return TRUE;
  if (key[0] == '\0' || strlen (key) > MAX_KEY_BYTES || !g_utf8_validate (key, -1, NULL))
    return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_BAD_NAME,
                        "the key of s3://%s/ must be 1 to %d bytes of UTF-8", bucket, MAX_KEY_BYTES), FALSE;
  {
    /* HTTP stacks and signers on the way may rewrite such segments, so the
     * object would not be the one named, or the signature would not match. */
    g_auto(GStrv) segments = g_strsplit (key, "/", -1);
    for (guint i = 0; segments[i] != NULL; i++)
      if (strcmp (segments[i], ".") == 0 || strcmp (segments[i], "..") == 0)
        return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_BAD_NAME,
                            "the key '%s' has a '%s' segment, which HTTP clients and servers may rewrite; "
                            "name the object without it", key, segments[i]), FALSE;
  }
  for (const char *p = key; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_BAD_NAME,
                          "the key of s3://%s/ holds a control character; name the object without it",
                          bucket), FALSE;
  return TRUE;
}

/* Virtual-hosted names must be one DNS label; over https no dots either
 * (AWS's certificate covers one level). */
static gboolean
dns_safe (const char *bucket, gboolean https)
{
  gsize len = strlen (bucket);

  if (len < 3 || len > 63 || bucket[0] == '-' || bucket[len - 1] == '-')
    return FALSE;
  for (const char *p = bucket; *p != '\0'; p++)
    if (!(g_ascii_islower (*p) || g_ascii_isdigit (*p) || *p == '-' || (*p == '.' && !https)))
      return FALSE;
  return TRUE;
}

static gboolean
use_virtual_host (SandstepS3Client *client, const char *bucket)
{
  switch (client->config->addressing)
    {
    case SANDSTEP_S3_ADDRESSING_PATH:
      return FALSE;
    case SANDSTEP_S3_ADDRESSING_VIRTUAL:
      return TRUE;
    case SANDSTEP_S3_ADDRESSING_AUTO:
      /* Other S3-compatible servers mostly have no wildcard DNS: path-style there. */
      return client->on_aws && dns_safe (bucket, strcmp (client->scheme, "https") == 0);
    }
  return FALSE;
}

/* ---- one request ---- */

typedef struct {
  const char *op;             /* "PutObject", for messages */
  const char *method;
  const char *bucket;
  const char *key;            /* NULL: the bucket itself */
  const char *const *query;   /* name, value, ..., NULL */
  GBytes *body;               /* NULL: none, or body_stream */
  GInputStream *body_stream;  /* of body_len bytes; sha256_hex must be given */
  goffset body_len;
  const char *sha256_hex;     /* of body; NULL: computed */
  const char *content_type;
  gboolean if_none_match;
  guint part;                 /* for messages; 0: none */
} Request;

typedef struct {
  guint status;
  GBytes *body;
  char *etag;
} Response;

static void
response_clear (Response *r)
{
  g_clear_pointer (&r->body, g_bytes_unref);
  g_free (r->etag);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Response, response_clear)

static char *
object_name (const Request *req)
{
  return req->key != NULL ? g_strdup_printf ("s3://%s/%s", req->bucket, req->key)
                          : g_strdup_printf ("s3://%s", req->bucket);
}

static char *
what (const Request *req)
{
  g_autofree char *name = object_name (req);

  return req->part > 0 ? g_strdup_printf ("%s (part %u) of '%s'", req->op, req->part, name)
                       : g_strdup_printf ("%s of '%s'", req->op, name);
}

/* A server's text made safe to quote: no credential, no control character, not too long. */
static char *
scrub (SandstepS3Client *client, const char *text)
{
  g_autoptr(GString) out = g_string_new (text != NULL ? text : "");
  const char *secrets[] = { client->config->secret_access_key, client->config->session_token,
                            client->config->access_key_id };

  for (gsize i = 0; i < G_N_ELEMENTS (secrets); i++)
    if (secrets[i] != NULL && secrets[i][0] != '\0')
      g_string_replace (out, secrets[i], "[redacted]", 0);
  for (gsize i = 0; i < out->len; i++)
    if ((guchar) out->str[i] < 0x20 || out->str[i] == 0x7f)
      out->str[i] = ' ';
  if (!g_utf8_validate (out->str, out->len, NULL))
    {
      g_autofree char *valid = g_utf8_make_valid (out->str, out->len);
      g_string_assign (out, valid);
    }
  if (g_utf8_strlen (out->str, -1) > MAX_QUOTED)
    {
      g_string_truncate (out, g_utf8_offset_to_pointer (out->str, MAX_QUOTED) - out->str);
      g_string_append (out, "…");
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* ---- XML answers ---- */

typedef struct {
  GString *text;
  GPtrArray *path;               /* element names, outermost first */
  void (*on_end) (const char *const *path, guint depth, const char *text, gpointer data);
  gpointer data;
} XmlWalk;

static void
xml_start (GMarkupParseContext *context, const char *name, const char **attr_names, const char **attr_values,
           gpointer data, GError **error)
{
  XmlWalk *w = data;

  g_ptr_array_add (w->path, g_strdup (name));
  g_string_truncate (w->text, 0);
}

static void
xml_end (GMarkupParseContext *context, const char *name, gpointer data, GError **error)
{
  XmlWalk *w = data;

  g_ptr_array_add (w->path, NULL);
  w->on_end ((const char *const *) w->path->pdata, w->path->len - 1, w->text->str, w->data);
  g_ptr_array_remove_index (w->path, w->path->len - 1);
  g_ptr_array_remove_index (w->path, w->path->len - 1);
  g_string_truncate (w->text, 0);
}

static void
xml_text (GMarkupParseContext *context, const char *text, gsize len, gpointer data, GError **error)
{
  g_string_append_len (((XmlWalk *) data)->text, text, len);
}

static gboolean
xml_walk (GBytes *body, void (*on_end) (const char *const *, guint, const char *, gpointer), gpointer data)
{
  static const GMarkupParser parser = { xml_start, xml_end, xml_text, NULL, NULL };
  XmlWalk w = { g_string_new (NULL), g_ptr_array_new_with_free_func (g_free), on_end, data };
  GMarkupParseContext *context = g_markup_parse_context_new (&parser, 0, &w, NULL);
  gsize len = 0;
  const char *xml = body != NULL ? g_bytes_get_data (body, &len) : NULL;
  gboolean ok = xml != NULL && len > 0 && g_markup_parse_context_parse (context, xml, len, NULL) &&
                g_markup_parse_context_end_parse (context, NULL);

  g_markup_parse_context_free (context);
  g_string_free (w.text, TRUE);
  g_ptr_array_unref (w.path);
  return ok;
}

typedef struct {
  char *code;
  char *message;
} ErrorAnswer;

static void
on_error_element (const char *const *path, guint depth, const char *text, gpointer data)
{
  ErrorAnswer *e = data;

  if (depth == 2 && strcmp (path[0], "Error") == 0 && strcmp (path[1], "Code") == 0)
    set_str (&e->code, text);
  else if (depth == 2 && strcmp (path[0], "Error") == 0 && strcmp (path[1], "Message") == 0)
    set_str (&e->message, text);
}

/* An <Error> answer, which S3 also sends with 200 to a CompleteMultipartUpload. */
static gboolean
parse_error_answer (GBytes *body, ErrorAnswer *out)
{
  memset (out, 0, sizeof *out);
  return xml_walk (body, on_error_element, out) && out->code != NULL;
}

static const char *
hint_for (const char *code)
{
  static const struct { const char *code; const char *hint; } hints[] = {
    { "SignatureDoesNotMatch", "check the secret access key" },
    { "InvalidAccessKeyId", "check the access key id" },
    { "InvalidClientTokenId", "check the access key id" },
    { "AccessDenied", "check what the credentials' policy allows" },
    { "ExpiredToken", "refresh AWS_SESSION_TOKEN" },
    { "InvalidToken", "check AWS_SESSION_TOKEN" },
    { "NoSuchBucket", "create the bucket, or fix the URL" },
    { "NoSuchUpload", "the upload is gone: export again" },
    { "PermanentRedirect", "the bucket is in another region: set AWS_REGION to it" },
    { "AuthorizationHeaderMalformed", "set AWS_REGION to the bucket's region" },
    { "RequestTimeTooSkewed", "set this machine's clock right" },
  };

  for (gsize i = 0; code != NULL && i < G_N_ELEMENTS (hints); i++)
    if (strcmp (hints[i].code, code) == 0)
      return hints[i].hint;
  return NULL;
}

static gboolean
throw_refused (SandstepS3Client *client, const Request *req, guint status, GBytes *body, GError **error)
{
  g_autofree char *doing = what (req);
  g_autofree char *code = NULL;
  g_autofree char *message = NULL;
  g_autofree char *source = NULL;
  ErrorAnswer answer;
  const char *hint;

  if (parse_error_answer (body, &answer))
    {
      code = scrub (client, answer.code);
      message = answer.message != NULL ? scrub (client, answer.message) : NULL;
      g_free (answer.code);
      g_free (answer.message);
    }
  else
    code = g_strdup (soup_status_get_phrase (status));
  hint = status == 412 ? "it exists, and --no-clobber keeps it" : hint_for (code);
  /* Say where the credentials came from, never what they are. */
  if (hint != NULL && (strstr (hint, " key") != NULL || strstr (hint, "TOKEN") != NULL))
    source = g_strdup_printf (" (from %s)", client->config->credentials_from);
  g_set_error (error, SANDSTEP_S3_ERROR, status == 412 ? SANDSTEP_S3_ERROR_PRECONDITION : SANDSTEP_S3_ERROR_REFUSED,
               "The object store at '%s' refused %s: %u %s%s%s%s%s%s%s", client->shown, doing, status,
               code != NULL ? code : "", message != NULL ? ": \"" : "", message != NULL ? message : "",
               message != NULL ? "\"" : "", hint != NULL ? "; " : "", hint != NULL ? hint : "",
               source != NULL ? source : "");
  return FALSE;
}

static SoupMessage *
build_message (SandstepS3Client *client, const Request *req, GError **error)
{
  g_autofree char *encoded_key = req->key != NULL ? sandstep_sigv4_uri_encode (req->key, TRUE) : NULL;
  g_autofree char *query = sandstep_sigv4_canonical_query (req->query);
  g_autofree char *host = NULL;
  g_autofree char *host_header = NULL;
  g_autofree char *path = NULL;
  g_autofree char *url = NULL;
  g_autofree char *amz_date = NULL;
  g_autofree char *payload_hash = NULL;
  g_autofree char *authorization = NULL;
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autoptr(GUri) uri = NULL;
  g_autoptr(GPtrArray) headers = g_ptr_array_new ();
  SandstepSigV4Key key = { client->config->access_key_id, client->config->secret_access_key,
                           client->config->region, "s3" };
  SoupMessageHeaders *h;
  SoupMessage *msg;
  gboolean ipv6 = strchr (client->host, ':') != NULL;

  if (use_virtual_host (client, req->bucket))
    {
      host = g_strdup_printf ("%s.%s", req->bucket, client->host);
      path = g_strdup_printf ("%s/%s", client->base_path, encoded_key != NULL ? encoded_key : "");
    }
  else
    {
      host = g_strdup (client->host);
      path = g_strdup_printf ("%s/%s%s%s", client->base_path, req->bucket, encoded_key != NULL ? "/" : "",
                              encoded_key != NULL ? encoded_key : "");
    }
  host_header = client->port > 0 ? g_strdup_printf ("%s%s%s:%d", ipv6 ? "[" : "", host, ipv6 ? "]" : "", client->port)
                                 : g_strdup_printf ("%s%s%s", ipv6 ? "[" : "", host, ipv6 ? "]" : "");
  url = g_strdup_printf ("%s://%s%s%s%s", client->scheme, host_header, path, query[0] != '\0' ? "?" : "", query);
  uri = g_uri_parse (url, SOUP_HTTP_URI_FLAGS, error);
  if (uri == NULL)
    return NULL;

  amz_date = sandstep_sigv4_amz_date (now);
  if (req->sha256_hex != NULL)
    payload_hash = g_strdup (req->sha256_hex);
  else if (req->body != NULL)
    payload_hash = sandstep_sigv4_sha256_hex (g_bytes_get_data (req->body, NULL), g_bytes_get_size (req->body));
  else
    payload_hash = g_strdup (SANDSTEP_SIGV4_EMPTY_SHA256);

  /* Every header we set is signed, and sent exactly as signed. */
  g_ptr_array_add (headers, (char *) "host");
  g_ptr_array_add (headers, host_header);
  g_ptr_array_add (headers, (char *) "x-amz-content-sha256");
  g_ptr_array_add (headers, payload_hash);
  g_ptr_array_add (headers, (char *) "x-amz-date");
  g_ptr_array_add (headers, amz_date);
  if (client->config->session_token != NULL)
    {
      g_ptr_array_add (headers, (char *) "x-amz-security-token");
      g_ptr_array_add (headers, client->config->session_token);
    }
  if (req->if_none_match)
    {
      g_ptr_array_add (headers, (char *) "if-none-match");
      g_ptr_array_add (headers, (char *) "*");
    }
  if (req->content_type != NULL)
    {
      g_ptr_array_add (headers, (char *) "content-type");
      g_ptr_array_add (headers, (char *) req->content_type);
    }
  g_ptr_array_add (headers, NULL);
  authorization = sandstep_sigv4_authorization (&key, amz_date, req->method, path, query,
                                                (const char *const *) headers->pdata, payload_hash, NULL, NULL);

  msg = soup_message_new_from_uri (req->method, uri);
  h = soup_message_get_request_headers (msg);
  for (guint i = 0; i + 1 < headers->len && headers->pdata[i] != NULL; i += 2)
    if (strcmp (headers->pdata[i], "content-type") != 0)
      soup_message_headers_replace (h, headers->pdata[i], headers->pdata[i + 1]);
  soup_message_headers_replace (h, "Authorization", authorization);
  memset (authorization, 0, strlen (authorization));
  if (req->body_stream != NULL)
    soup_message_set_request_body (msg, req->content_type, req->body_stream, req->body_len);
  else if (req->body != NULL)
    soup_message_set_request_body_from_bytes (msg, req->content_type, req->body);
  else if (strcmp (req->method, "PUT") == 0 || strcmp (req->method, "POST") == 0)
    soup_message_headers_set_content_length (h, 0);
  return msg;
}

/* Sends @req; an error status is an error, except @ok_status (0: none). */
static gboolean
send_request (SandstepS3Client *client, const Request *req, guint ok_status, Response *out, GError **error)
{
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GBytes) body = NULL;
  g_autofree char *doing = NULL;
  const char *etag;
  guint status;

  memset (out, 0, sizeof *out);
  msg = build_message (client, req, &local_error);
  if (msg == NULL)
    {
      doing = what (req);
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_BAD_NAME, "Cannot build %s: %s", doing,
                          local_error->message), FALSE;
    }
  body = soup_session_send_and_read (client->session, msg, NULL, &local_error);
  if (body == NULL && local_error->domain == SANDSTEP_FD_STREAM_ERROR)
    {
      doing = what (req);
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_FAILED,
                          "Cannot send %s: its spool file in TMPDIR ('%s'): %s; check the disk TMPDIR is on",
                          doing, g_get_tmp_dir (), local_error->message), FALSE;
    }
  if (body == NULL)
    {
      g_autofree char *cause = scrub (client, local_error->message);
      gboolean timed_out = g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);

      doing = what (req);
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_UNREACHABLE,
                          "The object store at '%s' did not answer %s: %s; %s", client->shown, doing, cause,
                          timed_out ? "check that it is up, or raise --read-timeout"
                                    : "check the endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL) and the network"),
             FALSE;
    }
  status = soup_message_get_status (msg);
  if ((status < 200 || status >= 300) && status != ok_status)
    return throw_refused (client, req, status, body, error);
  out->status = status;
  etag = soup_message_headers_get_one (soup_message_get_response_headers (msg), "ETag");
  out->etag = g_strdup (etag);
  out->body = g_steal_pointer (&body);
  return TRUE;
}

/* ---- the calls ---- */

gboolean
sandstep_s3_put_object (SandstepS3Client *client, const char *bucket, const char *key, GBytes *body,
                        const char *sha256_hex, gboolean if_none_match, GError **error)
{
  Request req = { .op = "PutObject", .method = "PUT", .bucket = bucket, .key = key, .body = body,
                  .sha256_hex = sha256_hex, .if_none_match = if_none_match };
  g_auto(Response) r = { 0 };

  return send_request (client, &req, 0, &r, error);
}

gboolean
sandstep_s3_head_object (SandstepS3Client *client, const char *bucket, const char *key, gboolean *out_exists,
                         GError **error)
{
  Request req = { .op = "HeadObject", .method = "HEAD", .bucket = bucket, .key = key };
  g_auto(Response) r = { 0 };

  if (!send_request (client, &req, 404, &r, error))
    return FALSE;
  *out_exists = r.status != 404;
  return TRUE;
}

typedef struct {
  char *upload_id;
} CreateAnswer;

static void
on_create_element (const char *const *path, guint depth, const char *text, gpointer data)
{
  if (depth == 2 && strcmp (path[0], "InitiateMultipartUploadResult") == 0 && strcmp (path[1], "UploadId") == 0)
    set_str (&((CreateAnswer *) data)->upload_id, text);
}

char *
sandstep_s3_create_multipart_upload (SandstepS3Client *client, const char *bucket, const char *key, GError **error)
{
  const char *query[] = { "uploads", NULL, NULL };
  Request req = { .op = "CreateMultipartUpload", .method = "POST", .bucket = bucket, .key = key, .query = query };
  g_auto(Response) r = { 0 };
  CreateAnswer answer = { NULL };

  if (!send_request (client, &req, 0, &r, error))
    return NULL;
  if (!xml_walk (r.body, on_create_element, &answer) || answer.upload_id == NULL || answer.upload_id[0] == '\0')
    {
      g_autofree char *doing = what (&req);
      g_free (answer.upload_id);
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_PROTOCOL,
                          "The object store at '%s' answered %s without an UploadId; is it S3-compatible?",
                          client->shown, doing), NULL;
    }
  return answer.upload_id;
}

char *
sandstep_s3_upload_part_from_fd (SandstepS3Client *client, const char *bucket, const char *key,
                                 const char *upload_id, guint part_number, int fd, goffset len,
                                 const char *sha256_hex, GError **error)
{
  g_autoptr(GInputStream) stream = sandstep_fd_stream_new (fd, len, error);
  g_autofree char *number = g_strdup_printf ("%u", part_number);
  const char *query[] = { "partNumber", number, "uploadId", upload_id, NULL };
  Request req = { .op = "UploadPart", .method = "PUT", .bucket = bucket, .key = key, .query = query,
                  .body_stream = stream, .body_len = len, .sha256_hex = sha256_hex, .part = part_number };
  g_auto(Response) r = { 0 };

  if (stream == NULL || !send_request (client, &req, 0, &r, error))
    return NULL;
  if (r.etag == NULL || r.etag[0] == '\0')
    {
      g_autofree char *doing = what (&req);
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_PROTOCOL,
                          "The object store at '%s' answered %s without an ETag; is it S3-compatible?",
                          client->shown, doing), NULL;
    }
  return g_steal_pointer (&r.etag);
}

gboolean
sandstep_s3_put_object_from_fd (SandstepS3Client *client, const char *bucket, const char *key, int fd, goffset len,
                                const char *sha256_hex, gboolean if_none_match, GError **error)
{
  g_autoptr(GInputStream) stream = sandstep_fd_stream_new (fd, len, error);
  Request req = { .op = "PutObject", .method = "PUT", .bucket = bucket, .key = key, .body_stream = stream,
                  .body_len = len, .sha256_hex = sha256_hex, .if_none_match = if_none_match };
  g_auto(Response) r = { 0 };

  if (stream == NULL)
    return FALSE;
  return send_request (client, &req, 0, &r, error);
}

gboolean
sandstep_s3_complete_multipart_upload (SandstepS3Client *client, const char *bucket, const char *key,
                                       const char *upload_id, GPtrArray *etags, gboolean if_none_match,
                                       GError **error)
{
  const char *query[] = { "uploadId", upload_id, NULL };
  g_autoptr(GString) xml = g_string_new ("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
  g_autoptr(GBytes) body = NULL;
  Request req = { .op = "CompleteMultipartUpload", .method = "POST", .bucket = bucket, .key = key, .query = query,
                  .content_type = "application/xml", .if_none_match = if_none_match };
  g_auto(Response) r = { 0 };
  ErrorAnswer answer;

  for (guint i = 0; i < etags->len; i++)
    {
      g_autofree char *etag = g_markup_escape_text (etags->pdata[i], -1);
      g_string_append_printf (xml, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", i + 1, etag);
    }
  g_string_append (xml, "</CompleteMultipartUpload>");
  body = g_bytes_new (xml->str, xml->len);
  req.body = body;
  if (!send_request (client, &req, 0, &r, error))
    return FALSE;
  /* S3 may answer 200 and still have failed: the error is in the body. */
  if (parse_error_answer (r.body, &answer))
    {
      g_free (answer.code);
      g_free (answer.message);
      return throw_refused (client, &req, 500, r.body, error);
    }
  return TRUE;
}

gboolean
sandstep_s3_abort_multipart_upload (SandstepS3Client *client, const char *bucket, const char *key,
                                    const char *upload_id, GError **error)
{
  const char *query[] = { "uploadId", upload_id, NULL };
  Request req = { .op = "AbortMultipartUpload", .method = "DELETE", .bucket = bucket, .key = key, .query = query };
  g_auto(Response) r = { 0 };

  return send_request (client, &req, 0, &r, error);
}

gboolean
sandstep_s3_create_bucket (SandstepS3Client *client, const char *bucket, GError **error)
{
  Request req = { .op = "CreateBucket", .method = "PUT", .bucket = bucket };
  g_autoptr(GBytes) body = NULL;
  g_auto(Response) r = { 0 };

  /* Outside us-east-1 the region is named in the body. */
  if (strcmp (client->config->region, "us-east-1") != 0)
    {
      g_autofree char *xml = g_strdup_printf ("<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/"
                                              "2006-03-01/\"><LocationConstraint>%s</LocationConstraint>"
                                              "</CreateBucketConfiguration>", client->config->region);
      body = g_bytes_new (xml, strlen (xml));
      req.body = body;
    }
  return send_request (client, &req, 0, &r, error);
}

GBytes *
sandstep_s3_get_object (SandstepS3Client *client, const char *bucket, const char *key, char **out_etag,
                        GError **error)
{
  Request req = { .op = "GetObject", .method = "GET", .bucket = bucket, .key = key };
  g_auto(Response) r = { 0 };

  if (!send_request (client, &req, 0, &r, error))
    return NULL;
  if (out_etag != NULL)
    *out_etag = g_steal_pointer (&r.etag);
  return g_steal_pointer (&r.body);
}

gboolean
sandstep_s3_delete_object (SandstepS3Client *client, const char *bucket, const char *key, GError **error)
{
  Request req = { .op = "DeleteObject", .method = "DELETE", .bucket = bucket, .key = key };
  g_auto(Response) r = { 0 };

  return send_request (client, &req, 0, &r, error);
}

typedef struct {
  GPtrArray *out;
  char *key;
  char *upload_id;
} ListAnswer;

static void
on_list_element (const char *const *path, guint depth, const char *text, gpointer data)
{
  ListAnswer *l = data;

  if (depth == 3 && strcmp (path[1], "Contents") == 0 && strcmp (path[2], "Key") == 0)
    g_ptr_array_add (l->out, g_strdup (text));
  if (depth == 3 && strcmp (path[1], "Upload") == 0 && strcmp (path[2], "Key") == 0)
    set_str (&l->key, text);
  if (depth == 3 && strcmp (path[1], "Upload") == 0 && strcmp (path[2], "UploadId") == 0)
    set_str (&l->upload_id, text);
  if (depth == 2 && strcmp (path[1], "Upload") == 0 && l->key != NULL && l->upload_id != NULL)
    {
      g_ptr_array_add (l->out, g_strdup_printf ("%s %s", l->key, l->upload_id));
      g_clear_pointer (&l->key, g_free);
      g_clear_pointer (&l->upload_id, g_free);
    }
}

static GPtrArray *
list (SandstepS3Client *client, const char *bucket, const char *op, const char *const *query, GError **error)
{
  Request req = { .op = op, .method = "GET", .bucket = bucket, .query = query };
  g_auto(Response) r = { 0 };
  ListAnswer answer = { g_ptr_array_new_with_free_func (g_free), NULL, NULL };

  if (!send_request (client, &req, 0, &r, error))
    {
      g_ptr_array_unref (answer.out);
      return NULL;
    }
  if (!xml_walk (r.body, on_list_element, &answer))
    {
      g_autofree char *doing = what (&req);
      g_ptr_array_unref (answer.out);
      g_free (answer.key);
      g_free (answer.upload_id);
      return g_set_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_PROTOCOL,
                          "The object store at '%s' answered %s with XML this client cannot read", client->shown,
                          doing), NULL;
    }
  g_free (answer.key);
  g_free (answer.upload_id);
  return answer.out;
}

GPtrArray *
sandstep_s3_list_objects (SandstepS3Client *client, const char *bucket, GError **error)
{
  const char *query[] = { "list-type", "2", NULL };

  return list (client, bucket, "ListObjectsV2", query, error);
}

GPtrArray *
sandstep_s3_list_multipart_uploads (SandstepS3Client *client, const char *bucket, GError **error)
{
  const char *query[] = { "uploads", NULL, NULL };

  return list (client, bucket, "ListMultipartUploads", query, error);
}
