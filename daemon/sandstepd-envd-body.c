/* sandstepd-envd-body.c: the files of a POST /files body (E2B's files.write), each held in a memfd.
 *
 * The SDK sends one file as application/octet-stream (gzip-compressed with {gzip: true}), named by the query's
 * path; or one or several as multipart/form-data, each part named by its filename (files.write([...])), or by
 * the query's path when there is one part.  What a gzip body unpacks to is bounded as the body is
 * (--max-upload): a small body must not become a full disk.
 */
#include "sandstepd-private.h"
#include "sandstepd-envd.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandstep-error.h"

/* Parts of one multipart body at most: each is a write under one claim. */
#define MAX_PARTS 1000

void
sandstepd_envd_file_free (EnvdFile *file)
{
  g_free (file->path);
  if (file->fd >= 0)
    close (file->fd);
  g_free (file);
}

static gboolean
write_all (int fd, const guint8 *data, gsize len)
{
  for (gsize done = 0; done < len;)
    {
      ssize_t n = write (fd, data + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      done += n;
    }
  return TRUE;
}

static int
new_memfd (GError **error)
{
  int fd = memfd_create ("sandstepd-e2b-write", MFD_CLOEXEC);

  if (fd < 0)
    sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                          "Cannot hold the file to write");
  return fd;
}

/* @path's file holding @data (gunzipped first when @gzip, to at most @max bytes), appended to @files. */
static gboolean
add_file (GPtrArray *files, const char *path, GBytes *data, gboolean gzip, guint64 max, guint *out_status,
          GError **error)
{
  g_autoptr(EnvdFile) file = g_new0 (EnvdFile, 1);
  gsize len = 0;
  const guint8 *bytes = g_bytes_get_data (data, &len);

  file->path = g_strdup (path);
  *out_status = SOUP_STATUS_INTERNAL_SERVER_ERROR;
  file->fd = new_memfd (error);
  if (file->fd < 0)
    return FALSE;
  if (!gzip)
    {
      if (!write_all (file->fd, bytes, len))
        return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                     "Cannot hold the file '%s' to write", path);
    }
  else
    {
      g_autoptr(GZlibDecompressor) gunzip = g_zlib_decompressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP);
      guint8 out[64 * 1024];
      guint64 total = 0;
      GConverterResult result = G_CONVERTER_CONVERTED;

      while (result != G_CONVERTER_FINISHED)
        {
          g_autoptr(GError) local = NULL;
          gsize read = 0, written = 0;

          result = g_converter_convert (G_CONVERTER (gunzip), bytes, len, out, sizeof out, G_CONVERTER_INPUT_AT_END,
                                        &read, &written, &local);
          *out_status = SOUP_STATUS_BAD_REQUEST;
          if (result == G_CONVERTER_ERROR)
            return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                   "The body for '%s' says Content-Encoding: gzip but is not gzip data (%s); send "
                                   "it compressed, or without the header", path, local->message);
          bytes += read;
          len -= read;
          total += written;
          *out_status = SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE;
          if (total > max)
            return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                   "The gzip body for '%s' unpacks to more than the server's limit of %"
                                   G_GUINT64_FORMAT " bytes (--max-upload); send a smaller file", path, max);
          *out_status = SOUP_STATUS_INTERNAL_SERVER_ERROR;
          if (!write_all (file->fd, out, written))
            return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                         "Cannot hold the file '%s' to write", path);
        }
    }
  lseek (file->fd, 0, SEEK_SET);
  g_ptr_array_add (files, g_steal_pointer (&file));
  return TRUE;
}

GPtrArray *
sandstepd_envd_body_files (Request *req, const char *query_path, guint *out_status, GError **error)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (req->msg);
  const char *content_type = soup_message_headers_get_content_type (headers, NULL);
  const char *encoding = soup_message_headers_get_one (headers, "Content-Encoding");
  g_autoptr(GBytes) body = g_bytes_new_static (req->body->data, req->body->len);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstepd_envd_file_free);
  gboolean gzip = g_strcmp0 (encoding, "gzip") == 0;

  *out_status = SOUP_STATUS_BAD_REQUEST;

  if (encoding != NULL && !gzip && g_ascii_strcasecmp (encoding, "identity") != 0)
    {
      g_autofree char *shown = sandstep_escape (encoding, -1, 100, SANDSTEP_ESCAPE_VALUE);
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "POST /files takes Content-Encoding gzip or none, not '%s'", shown);
      return NULL;
    }
  if (g_strcmp0 (content_type, "application/octet-stream") == 0)
    {
      if (query_path == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files: no path; add ?path=PATH");
          return NULL;
        }
      return add_file (files, query_path, body, gzip, req->d->max_upload, out_status, error) ? g_steal_pointer (&files) : NULL;
    }
  if (g_strcmp0 (content_type, "multipart/form-data") == 0)
    {
      g_autoptr(SoupMultipart) multipart = gzip ? NULL : soup_multipart_new_from_message (headers, body);
      int n = multipart != NULL ? soup_multipart_get_length (multipart) : 0;

      if (gzip)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files takes gzip as application/octet-stream only (files.write with "
                          "{useOctetStream: true, gzip: true}); send a multipart body uncompressed");
          return NULL;
        }
      if (n < 1 || n > MAX_PARTS)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files takes a multipart body of 1 to %d files, not %d", MAX_PARTS, n);
          return NULL;
        }
      /* The query's path names one file: several name themselves. */
      if (n > 1 && query_path != NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files?path= takes one file, not %d; name each of several in its part's filename, "
                          "as files.write([...]) does", n);
          return NULL;
        }
      for (int i = 0; i < n; i++)
        {
          SoupMessageHeaders *part_headers = NULL;
          GBytes *part = NULL;
          g_autoptr(GHashTable) params = NULL;
          const char *disposition, *filename = NULL;

          if (!soup_multipart_get_part (multipart, i, &part_headers, &part))
            {
              sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                              "POST /files: the multipart body's part %d cannot be read", i + 1);
              return NULL;
            }
          /* Read from the header itself: libsoup's reader keeps only a filename's last component, and here it is
           * the file's whole path in the sandbox. */
          disposition = soup_message_headers_get_one (part_headers, "Content-Disposition");
          if (disposition != NULL && strchr (disposition, ';') != NULL)
            params = soup_header_parse_semi_param_list (strchr (disposition, ';') + 1);
          if (params != NULL)
            filename = g_hash_table_lookup (params, "filename");
          if (query_path == NULL && (filename == NULL || filename[0] == '\0'))
            {
              sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                              "POST /files: the multipart body's part %d names no file; give it a filename, or "
                              "add ?path=PATH for one file", i + 1);
              return NULL;
            }
          if (!add_file (files, query_path != NULL ? query_path : filename, part, FALSE, req->d->max_upload,
                         out_status, error))
            return NULL;
        }
      return g_steal_pointer (&files);
    }
  {
    g_autofree char *shown = sandstep_escape (content_type != NULL ? content_type : "(none)", -1, 200,
                                              SANDSTEP_ESCAPE_VALUE);
    *out_status = SOUP_STATUS_UNSUPPORTED_MEDIA_TYPE;
    sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                    "POST /files takes multipart/form-data or application/octet-stream, not '%s'", shown);
  }
  return NULL;
}
