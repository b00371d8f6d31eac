/* sandstep-token.c: reading a token file, and comparing tokens by digest. */
#include "sandstep-token.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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

char *
sandstep_token_new (void)
{
  guint8 bytes[32];
  GString *out = g_string_sized_new (2 * sizeof bytes);
  gsize got = 0;

  while (got < sizeof bytes)
    {
      ssize_t n = getrandom (bytes + got, sizeof bytes - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        g_error ("getrandom() failed: %s", g_strerror (errno));
      got += n;
    }
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (out, "%02x", bytes[i]);
  explicit_bzero (bytes, sizeof bytes);
  return g_string_free (out, FALSE);
}

gboolean
sandstep_token_write_file (const char *path, const char *token, GError **error)
{
  g_autofree char *line = g_strconcat (token, "\n", NULL);
  struct stat st;
  gsize done = 0;
  int fd = open (path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);

  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, errno,
                                 "Cannot write the token file '%s'", path);
  /* Someone else's file, or not a file: never ours to fill with a secret. */
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != geteuid ())
    {
      close (fd);
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "Cannot write the token file '%s': it exists and is not a regular file of this user; "
                             "name a new file", path);
    }
  if (fchmod (fd, 0600) < 0 || ftruncate (fd, 0) < 0)
    {
      int errsv = errno;
      close (fd);
      return sandstep_throw_errno (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, errsv,
                                   "Cannot write the token file '%s'", path);
    }
  while (done < strlen (line))
    {
      ssize_t n = write (fd, line + done, strlen (line) - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int errsv = errno;
          close (fd);
          return sandstep_throw_errno (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, errsv,
                                       "Cannot write the token file '%s'", path);
        }
      done += n;
    }
  explicit_bzero (line, strlen (line));
  if (close (fd) < 0)
    return sandstep_throw_errno (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, errno,
                                 "Cannot write the token file '%s'", path);
  return TRUE;
}

gboolean
sandstep_token_header_matches (const char *header, const guint8 digest[32])
{
  guint8 given[32];

  if (header == NULL || g_ascii_strncasecmp (header, "Bearer ", strlen ("Bearer ")) != 0)
    return FALSE;
  sandstep_token_digest (header + strlen ("Bearer "), given);
  return sandstep_token_digest_equal (given, digest);
}
