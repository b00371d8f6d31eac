/* sandstep-token.c: reading a token file, and comparing tokens by digest. */
#include "sandstep-token.h"

#include <string.h>

#include "sandstep-error.h"

void
sandstep_token_digest (const char *token, guint8 out[32])
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  gsize len = 32;

  g_checksum_update (sum, (const guchar *) "sandstep-token:", -1);
  g_checksum_update (sum, (const guchar *) token, strlen (token));
  g_checksum_get_digest (sum, out, &len);
}

gboolean
sandstep_token_digest_equal (const guint8 a[32], const guint8 b[32])
{
  volatile guint8 diff = 0;

  for (int i = 0; i < 32; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

char *
sandstep_token_read_file (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len = 0;
  char *newline;

  if (!g_file_get_contents (path, &text, &len, &local_error))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "Cannot read the token file '%s': %s", path, local_error->message);
      return NULL;
    }
  newline = strchr (text, '\n');
  if (newline != NULL)
    *newline = '\0';
  g_strstrip (text);
  if (text[0] == '\0' || len > 65536)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "The token file '%s' holds no token; write one line of random text into it "
                      "(e.g. head -c 32 /dev/urandom | base64 > FILE)", path);
      return NULL;
    }
  return g_steal_pointer (&text);
}
