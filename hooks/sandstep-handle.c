/* sandstep-handle.c: local and remote handles, and sandbox server URLs. */
#include "sandstep-handle.h"

#include <string.h>

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
