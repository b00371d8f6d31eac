/* sandstep-http-dest.c: https:// destinations (and http:// to this machine), one plain PUT each.
 *
 * For presigned URLs and simple stores: no credentials of ours are sent,
 * and the URL's query (a presigned URL's signature) never reaches a
 * message.  The file waits in an unnamed spool file until the commit, so
 * its PUT, which makes it visible at once, comes only when every file of
 * the export is staged.  http:// is taken only to a loopback address, where
 * nothing on the way can read or change it.
 */
#include "sandstep-destination.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <libsoup/soup.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-aws-config.h"
#include "sandstep-error.h"
#include "sandstep-export-stream.h"

typedef struct {
  SandstepDestination parent;
  GUri *uri;
  int spool_fd;
  gint64 size;
} HttpDestination;

static gboolean
http_stage (SandstepDestination *parent, SandstepAttachment *attachment, gint64 *out_bytes, GError **error)
{
  HttpDestination *d = (HttpDestination *) parent;

  d->spool_fd = sandstep_export_spool_open (error);
  if (d->spool_fd < 0)
    return FALSE;
  d->size = sandstep_attachment_export_file (attachment, parent->path, d->spool_fd,
                                                     parent->context->max_bytes, error);
  if (d->size < 0)
    return FALSE;
  *out_bytes = d->size;
  return TRUE;
}

/* The Code and Message of an S3-style <Error> answer, if that is what came. */
static char *
error_detail (GBytes *body)
{
  gsize len = 0;
  const char *text = body != NULL ? g_bytes_get_data (body, &len) : NULL;
  g_autofree char *copy = text != NULL ? g_strndup (text, MIN (len, 4096)) : NULL;
  const char *code, *message;
  g_autoptr(GString) out = g_string_new (NULL);

  if (copy == NULL || (code = strstr (copy, "<Code>")) == NULL)
    return NULL;
  code += strlen ("<Code>");
  g_string_append_len (out, code, strcspn (code, "<"));
  if ((message = strstr (copy, "<Message>")) != NULL)
    {
      message += strlen ("<Message>");
      g_string_append (out, ": \"");
      g_string_append_len (out, message, MIN (strcspn (message, "<"), 300));
      g_string_append (out, "\"");
    }
  for (gsize i = 0; i < out->len; i++)
    if ((guchar) out->str[i] < 0x20)
      out->str[i] = ' ';
  if (!g_utf8_validate (out->str, out->len, NULL))
    return NULL;
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static gboolean
http_commit (SandstepDestination *parent, GError **error)
{
  HttpDestination *d = (HttpDestination *) parent;
  guint timeout = (guint) (parent->context->read_timeout_s + 0.999);
  g_autoptr(GProxyResolver) proxies = sandstep_aws_proxy_resolver ();
  g_autoptr(SoupSession) session = soup_session_new_with_options ("timeout", MAX (timeout, 1u), "user-agent",
                                                                   "sandstep", "proxy-resolver", proxies, NULL);
  g_autoptr(SoupMessage) msg = soup_message_new_from_uri ("PUT", d->uri);
  g_autoptr(GInputStream) body_stream = NULL;
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autofree char *detail = NULL;
  int fd = fcntl (d->spool_fd, F_DUPFD_CLOEXEC, 3);
  guint status;

  if (fd < 0 || lseek (fd, 0, SEEK_SET) < 0)
    {
      int errsv = errno;
      if (fd >= 0)
        close (fd);
      return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errsv,
                                   "Cannot read back the spool of '%s'", parent->path);
    }
  body_stream = g_unix_input_stream_new (fd, TRUE);
  soup_message_set_request_body (msg, "application/octet-stream", body_stream, d->size);
  if (parent->context->no_clobber)
    soup_message_headers_replace (soup_message_get_request_headers (msg), "If-None-Match", "*");
  answer = soup_session_send_and_read (session, msg, NULL, &local_error);
  if (answer == NULL)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                           "'%s' did not take the PUT of '%s': %s; %s", parent->shown, parent->path,
                           local_error->message,
                           g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)
                             ? "check that it is up, or raise --read-timeout"
                             : "check the URL and the network");
  status = soup_message_get_status (msg);
  if (status >= 200 && status < 300)
    return TRUE;
  detail = error_detail (answer);
  return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                         "'%s' refused the PUT of '%s': %u %s%s%s", parent->shown, parent->path, status,
                         detail != NULL ? detail : soup_status_get_phrase (status),
                         status == 412 ? "; it exists, and --no-clobber keeps it" : "",
                         status == 403 ? "; a presigned URL may have expired or be for another method" : "");
}

static void
http_abort (SandstepDestination *parent, GString *left)
{
  HttpDestination *d = (HttpDestination *) parent;

  if (d->spool_fd >= 0)
    close (g_steal_fd (&d->spool_fd));
}

static void
http_free (SandstepDestination *parent)
{
  HttpDestination *d = (HttpDestination *) parent;

  if (d->spool_fd >= 0)
    close (d->spool_fd);
  g_uri_unref (d->uri);
  g_free (d);
}

static const SandstepDestinationClass http_class = {
  .scheme = "https",
  .commit_rank = 0,
  .stage = http_stage,
  .commit = http_commit,
  .abort = http_abort,
  .free = http_free,
};

static gboolean
is_loopback (const char *host)
{
  g_autoptr(GInetAddress) address = g_inet_address_new_from_string (host);

  if (address != NULL)
    return g_inet_address_get_is_loopback (address);
  return g_ascii_strcasecmp (host, "localhost") == 0;
}

SandstepDestination *
sandstep_http_destination_new (const char *url, const char *path, SandstepExportContext *context, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GUri) uri = g_uri_parse (url, SOUP_HTTP_URI_FLAGS, &local_error);
  g_autofree char *shown = NULL;
  const char *scheme, *host;
  HttpDestination *d;

  if (uri == NULL || g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0')
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' is not an https:// URL of a host; write https://HOST/PATH",
                           g_uri_peek_scheme (url) ? url : ""), NULL;
  scheme = g_uri_get_scheme (uri);
  host = g_uri_get_host (uri);
  /* What the messages show: no user:password@, no signed query, no fragment. */
  {
    gboolean ipv6 = strchr (host, ':') != NULL;
    g_autofree char *port = g_uri_get_port (uri) > 0 ? g_strdup_printf (":%d", g_uri_get_port (uri)) : g_strdup ("");

    shown = g_strdup_printf ("%s://%s%s%s%s%s%s", scheme, ipv6 ? "[" : "", host, ipv6 ? "]" : "", port,
                             g_uri_get_path (uri), g_uri_get_query (uri) != NULL ? "?…" : "");
  }
  if (g_uri_get_userinfo (uri) != NULL)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' carries a user name or password; sandstep sends none: use a "
                           "presigned URL", shown), NULL;
  if (g_ascii_strcasecmp (scheme, "http") == 0 && !is_loopback (host))
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' is plain http:// to another machine, where anyone on the way can read "
                           "and change it; use https://, or http:// only to 127.0.0.1, ::1 or localhost",
                           shown), NULL;
  if (g_uri_get_path (uri)[0] == '\0' || strcmp (g_uri_get_path (uri), "/") == 0)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' names no object; write https://HOST/PATH", shown), NULL;

  d = g_new0 (HttpDestination, 1);
  d->uri = g_steal_pointer (&uri);
  d->spool_fd = -1;
  return sandstep_destination_init (&d->parent, &http_class, path, shown, context);
}
