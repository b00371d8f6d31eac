/* sandstep-handle.c: local and remote handles, and sandbox server URLs. */
#include "sandstep-handle.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"

gboolean
sandstep_handle_is_local (const char *handle)
{
  return sandstep_handle_libc_is_local (handle);
}

gboolean
sandstep_handle_is_remote (const char *handle)
{
  return handle != NULL && (g_str_has_prefix (handle, "http://") || g_str_has_prefix (handle, "https://"));
}

gboolean
sandstep_handle_is_valid (const char *handle)
{
  if (sandstep_handle_is_remote (handle))
    return sandstep_handle_split (handle, NULL, NULL);
  return sandstep_handle_is_local (handle);
}

/* Checks a server URL (scheme, host, optional port and path prefix; nothing
 * else) and returns it without a trailing '/'. */
char *
sandstep_server_url_normalize (const char *url)
{
  g_autoptr(GUri) uri = NULL;
  g_autofree char *copy = NULL;
  const char *path;

  if (!sandstep_handle_is_remote (url) || strlen (url) > 2048)
    return NULL;
  for (const char *p = url; *p; p++)
    if ((guchar) *p <= ' ' || (guchar) *p >= 0x7f || strchr ("%?#\\@\"'<>`{}|^", *p) != NULL)
      return NULL;
  uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0' ||
      g_uri_get_userinfo (uri) != NULL || g_uri_get_query (uri) != NULL || g_uri_get_fragment (uri) != NULL)
    return NULL;
  /* The path as written (GUri has already removed dot segments from its copy). */
  path = strchr (strstr (url, "://") + 3, '/');
  if (path != NULL && (strstr (path, "//") != NULL || strstr (path, "/./") != NULL || strstr (path, "/../") != NULL ||
                       g_str_has_suffix (path, "/.") || g_str_has_suffix (path, "/..")))
    return NULL;
  copy = g_strdup (url);
  while (g_str_has_suffix (copy, "/") && !g_str_has_suffix (copy, "://"))
    copy[strlen (copy) - 1] = '\0';
  return g_steal_pointer (&copy);
}

gboolean
sandstep_handle_split (const char *handle, char **out_server, char **out_local)
{
  const char *slash;
  g_autofree char *server = NULL;
  g_autofree char *normalized = NULL;

  if (!sandstep_handle_is_remote (handle))
    return FALSE;
  slash = strrchr (handle, '/');
  if (slash == NULL || !sandstep_handle_is_local (slash + 1))
    return FALSE;
  server = g_strndup (handle, slash - handle);
  if (g_str_has_suffix (server, "/") || strstr (server, "://") == NULL)
    return FALSE;
  normalized = sandstep_server_url_normalize (server);
  if (normalized == NULL || strcmp (normalized, server) != 0)
    return FALSE;
  if (out_server != NULL)
    *out_server = g_steal_pointer (&server);
  if (out_local != NULL)
    *out_local = g_strdup (slash + 1);
  return TRUE;
}

static const char *
file_kind (mode_t mode)
{
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISCHR (mode) || S_ISBLK (mode))
    return "a device";
  if (S_ISSOCK (mode))
    return "a socket";
  return "not a regular file";
}

char *
sandstep_handle_read_file (const char *path, GError **error)
{
  g_autofree char *shown = sandstep_escape (path, -1, 0, SANDSTEP_ESCAPE_VALUE);
  char buf[SANDSTEP_HANDLE_FILE_MAX + 1];
  struct stat st;
  gsize len = 0;
  int fd;

  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    {
      int errsv = errno;
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                      "The handle file '%s' cannot be read (%s): the step that provisions the sandbox has not "
                      "run; make this step depend on it", shown, g_strerror (errsv));
      return NULL;
    }
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                      "The handle file '%s' is %s, not a file holding a handle; it should be the file that "
                      "'sandstep provision' wrote (one line)", shown, file_kind (st.st_mode));
      return NULL;
    }
  while (len < sizeof buf)
    {
      ssize_t n = read (fd, buf + len, sizeof buf - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          close (fd);
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                          "The handle file '%s' cannot be read (%s)", shown, g_strerror (errsv));
          return NULL;
        }
      if (n == 0)
        break;
      len += n;
    }
  close (fd);
  /* Never the content: the path may be a link to a file that is no handle at all (/etc/shadow). */
  if (len > SANDSTEP_HANDLE_FILE_MAX || memchr (buf, '\0', len) != NULL)
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                      "The handle file '%s' does not hold a handle (%s; its content is not shown); it should hold "
                      "the one line that 'sandstep provision' printed", shown,
                      len > SANDSTEP_HANDLE_FILE_MAX ? "over " G_STRINGIFY (SANDSTEP_HANDLE_FILE_MAX) " bytes"
                                                     : "a NUL byte inside");
      return NULL;
    }
  return g_strndup (buf, len);
}

char *
sandstep_handle_new (void)
{
  guint8 bytes[8];

  if (getrandom (bytes, sizeof bytes, 0) != sizeof bytes)
    for (gsize i = 0; i < sizeof bytes; i++)
      bytes[i] = g_random_int_range (0, 256);
  return g_strdup_printf (SANDSTEP_HANDLE_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2],
                          bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]);
}
