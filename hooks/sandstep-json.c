/* sandstep-json.c: size and depth checked before json-glib parses (see the header). */
#include "sandstep-json.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

gboolean
sandstep_json_check (const char *data, gsize len, gsize max_bytes, GError **error)
{
  gboolean in_string = FALSE;
  gboolean escaped = FALSE;
  guint depth = 0;

  if (len > max_bytes)
    {
      g_set_error (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                   "the document is %" G_GSIZE_FORMAT " bytes, over the limit of %" G_GSIZE_FORMAT, len, max_bytes);
      return FALSE;
    }
  /* Brackets inside strings do not nest; nothing else matters to the depth. */
  for (gsize i = 0; i < len; i++)
    {
      char c = data[i];

      if (in_string)
        {
          if (escaped)
            escaped = FALSE;
          else if (c == '\\')
            escaped = TRUE;
          else if (c == '"')
            in_string = FALSE;
          continue;
        }
      if (c == '"')
        in_string = TRUE;
      else if (c == '[' || c == '{')
        {
          if (++depth > SANDSTEP_JSON_MAX_DEPTH)
            {
              g_set_error (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                           "the document nests arrays and objects deeper than %d levels (at byte %" G_GSIZE_FORMAT
                           ")", SANDSTEP_JSON_MAX_DEPTH, i);
              return FALSE;
            }
        }
      else if ((c == ']' || c == '}') && depth > 0)
        depth--;
    }
  return TRUE;
}

JsonNode *
sandstep_json_parse (const char *data, gsize len, gsize max_bytes, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;

  if (!sandstep_json_check (data, len, max_bytes, error))
    return NULL;
  if (len > G_MAXSSIZE)
    len = G_MAXSSIZE;
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, data, (gssize) len, error))
    return NULL;
  if (json_parser_get_root (parser) == NULL)
    {
      g_set_error_literal (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA, "the document is empty");
      return NULL;
    }
  return json_node_ref (json_parser_get_root (parser));
}

JsonNode *
sandstep_json_load_file (const char *path, gsize max_bytes, GError **error)
{
  g_autoptr(GByteArray) buf = NULL;
  struct stat st;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);

  if (fd < 0)
    {
      int errsv = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s", g_strerror (errsv));
      return NULL;
    }
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error_literal (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA, "it is not a regular file");
      return NULL;
    }
  if ((guint64) st.st_size > max_bytes)
    {
      close (fd);
      g_set_error (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                   "the file is %" G_GUINT64_FORMAT " bytes, over the limit of %" G_GSIZE_FORMAT,
                   (guint64) st.st_size, max_bytes);
      return NULL;
    }
  /* Read to the end, but never more than one byte over the limit (a file that grew meanwhile). */
  buf = g_byte_array_sized_new ((guint) st.st_size + 1);
  while (buf->len <= max_bytes)
    {
      guint8 chunk[16384];
      ssize_t n = read (fd, chunk, MIN (sizeof chunk, max_bytes + 1 - buf->len));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          close (fd);
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s", g_strerror (errsv));
          return NULL;
        }
      if (n == 0)
        break;
      g_byte_array_append (buf, chunk, n);
    }
  close (fd);
  return sandstep_json_parse ((const char *) buf->data, buf->len, max_bytes, error);
}
