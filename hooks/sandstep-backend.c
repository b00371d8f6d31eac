/* sandstep-backend.c: what every backend shares. */
#include "sandstep-backend.h"

#include <string.h>

#include "sandstep-remote.h"

#define HANDLE_HEX_DIGITS 16

gboolean
sandstep_handle_is_valid (const char *handle)
{
  /* A remote backend's handle names its server: http(s)://HOST[:PORT][/PREFIX]/sandstep-<16 hex>. */
  if (sandstep_handle_is_remote (handle))
    return sandstep_remote_handle_split (handle, NULL, NULL);
  if (handle == NULL || !g_str_has_prefix (handle, SANDSTEP_HANDLE_PREFIX))
    return FALSE;
  handle += strlen (SANDSTEP_HANDLE_PREFIX);
  for (int i = 0; i < HANDLE_HEX_DIGITS; i++)
    if (!g_ascii_isxdigit (handle[i]) || g_ascii_isupper (handle[i]))
      return FALSE;
  return handle[HANDLE_HEX_DIGITS] == '\0';
}
