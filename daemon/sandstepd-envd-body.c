/* sandstepd-envd-body.c: the files of a POST /files body (E2B's files.write).
 *
 * The SDK sends one file as application/octet-stream (gzip-compressed with {gzip: true}), named by the query's
 * path; or one or several as multipart/form-data, each part named by its filename (files.write([...])), or by
 * the query's path when there is one part.  The body is at most SANDSTEPD_MAX_JSON_BODY, and so is what a gzip
 * body unpacks to: a small body must not become a large file, nor stall the main loop unpacking it.  Each file's
 * bytes go into a memfd only when its turn comes (sandstepd_envd_file_memfd()), so a body of many parts holds
 * one fd at a time.
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
/* What one file of a body may hold, unpacked or not. */
#define MAX_FILE SANDSTEPD_MAX_JSON_BODY

void
sandstepd_envd_file_free (EnvdFile *file)
{
  g_free (file->path);
  if (file->data != NULL)
    g_bytes_unref (file->data);
  g_free (file);
}

int
sandstepd_envd_file_memfd (const EnvdFile *file, GError **error)
{
  int fd = memfd_create ("sandstepd-e2b-write", MFD_CLOEXEC);
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (file->data, &len);

  for (gsize done = 0; fd >= 0 && done < len;)
    {
      ssize_t n = write (fd, data + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int errsv = n < 0 ? errno : EIO;
          close (fd);
          fd = -1;
          errno = errsv;
        }
      else
        done += n;
    }
  if (fd < 0)
    {
      g_autofree char *shown = sandstep_escape (file->path, -1, 200, SANDSTEP_ESCAPE_VALUE);
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Cannot hold '%s' to write it (the server's memory); try again, or write it with put",
                            shown);
      return -1;
    }
  lseek (fd, 0, SEEK_SET);
  return fd;
}

/* @data gunzipped, or NULL (@out_status and @error say why): past MAX_FILE bytes it stops. */
static GBytes *
gunzip (const char *path, GBytes *data, guint *out_status, GError **error)
{
  g_autoptr(GZlibDecompressor) decompressor = g_zlib_decompressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP);
  g_autoptr(GByteArray) out = g_byte_array_new ();
  gsize len = 0;
  const guint8 *in = g_bytes_get_data (data, &len);
  GConverterResult result = G_CONVERTER_CONVERTED;
  g_autofree char *shown = sandstep_escape (path, -1, 200, SANDSTEP_ESCAPE_VALUE);

  while (result != G_CONVERTER_FINISHED)
    {
      g_autoptr(GError) local = NULL;
      guint8 chunk[64 * 1024];
      gsize read = 0, written = 0;

      result = g_converter_convert (G_CONVERTER (decompressor), in, len, chunk, sizeof chunk,
                                    G_CONVERTER_INPUT_AT_END, &read, &written, &local);
      if (result == G_CONVERTER_ERROR)
        {
          *out_status = SOUP_STATUS_BAD_REQUEST;
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "The body for '%s' says Content-Encoding: gzip but is not gzip data (%s); send it "
                          "compressed, or without the header", shown, local->message);
          return NULL;
        }
      in += read;
      len -= read;
      if (out->len + written > MAX_FILE)
        {
          *out_status = SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE;
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "The gzip body for '%s' unpacks to more than %d bytes, the most one file of a /files "
                          "body holds; write it in parts, or with sandstep put", shown, MAX_FILE);
          return NULL;
        }
      g_byte_array_append (out, chunk, written);
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

static void
add_file (GPtrArray *files, const char *path, GBytes *data)
{
  EnvdFile *file = g_new0 (EnvdFile, 1);

  file->path = g_strdup (path);
  file->data = g_bytes_ref (data);
  g_ptr_array_add (files, file);
}

/* The multipart body's parts as files of @files; FALSE (and @error) when one names none or cannot be read. */
static gboolean
add_parts (GPtrArray *files, SoupMultipart *multipart, const char *query_path, GError **error)
{
  int n = soup_multipart_get_length (multipart);

  if (n < 1 || n > MAX_PARTS)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "POST /files takes a multipart body of 1 to %d files, not %d; write more in several "
                           "calls", MAX_PARTS, n);
  /* The query's path names one file: several name themselves. */
  if (n > 1 && query_path != NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "POST /files?path= takes one file, not %d; name each of several in its part's filename, "
                           "as files.write([...]) does", n);
  for (int i = 0; i < n; i++)
    {
      SoupMessageHeaders *part_headers = NULL;
      GBytes *part = NULL;
      g_autoptr(GHashTable) params = NULL;
      const char *disposition, *filename = NULL;

      if (!soup_multipart_get_part (multipart, i, &part_headers, &part))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "POST /files: part %d of the multipart body cannot be read; send each file as a "
                               "part of its own", i + 1);
      /* Read from the header itself: libsoup's reader keeps only a filename's last component, and here it is
       * the file's whole path in the sandbox. */
      disposition = soup_message_headers_get_one (part_headers, "Content-Disposition");
      if (disposition != NULL && strchr (disposition, ';') != NULL)
        params = soup_header_parse_semi_param_list (strchr (disposition, ';') + 1);
      if (params != NULL)
        filename = g_hash_table_lookup (params, "filename");
      if (query_path == NULL && (filename == NULL || filename[0] == '\0'))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "POST /files: part %d of the multipart body names no file; give it a filename (the "
                               "file's path), or add ?path=PATH for one file", i + 1);
      add_file (files, query_path != NULL ? query_path : filename, part);
    }
  return TRUE;
}

GPtrArray *
sandstepd_envd_body_files (Request *req, const char *query_path, guint *out_status, GError **error)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (req->msg);
  const char *content_type = soup_message_headers_get_content_type (headers, NULL);
  const char *encoding = soup_message_headers_get_one (headers, "Content-Encoding");
  g_autoptr(GBytes) body = g_bytes_new (req->body->data, req->body->len);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstepd_envd_file_free);
  gboolean gzip = encoding != NULL && g_ascii_strcasecmp (encoding, "gzip") == 0;

  *out_status = SOUP_STATUS_BAD_REQUEST;
  if (encoding != NULL && !gzip && g_ascii_strcasecmp (encoding, "identity") != 0)
    {
      g_autofree char *shown = sandstep_escape (encoding, -1, 100, SANDSTEP_ESCAPE_VALUE);
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "POST /files takes Content-Encoding gzip or none, not '%s'; send the file uncompressed", shown);
      return NULL;
    }
  if (g_strcmp0 (content_type, "application/octet-stream") == 0)
    {
      g_autoptr(GBytes) data = NULL;

      if (query_path == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files: no path; add ?path=PATH");
          return NULL;
        }
      data = gzip ? gunzip (query_path, body, out_status, error) : g_bytes_ref (body);
      if (data == NULL)
        return NULL;
      add_file (files, query_path, data);
      return g_steal_pointer (&files);
    }
  if (g_strcmp0 (content_type, "multipart/form-data") == 0)
    {
      g_autoptr(SoupMultipart) multipart = NULL;

      if (gzip)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files takes gzip as application/octet-stream only (files.write with "
                          "{useOctetStream: true, gzip: true}); send a multipart body uncompressed");
          return NULL;
        }
      multipart = soup_multipart_new_from_message (headers, body);
      if (multipart == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "POST /files: the multipart body does not parse (its boundary, or its parts); send it "
                          "as multipart/form-data with a boundary, or as application/octet-stream");
          return NULL;
        }
      return add_parts (files, multipart, query_path, error) ? g_steal_pointer (&files) : NULL;
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
