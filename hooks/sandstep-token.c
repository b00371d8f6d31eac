/* sandstep-token.c: reading a token file, and comparing tokens by digest. */
#include "sandstep-token.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-token-libc.h"

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

/* The next line of @text from *@pos that holds a token, parsed into @out by the one grammar
 * (sandstep-token-libc.h); FALSE at the end, or with @error set for a line that is not one, naming
 * @path and the line's number, never its text. */
static gboolean
next_entry (const char *path, const char *text, gsize len, gsize *pos, guint *line_no, SandstepTokenLine *out,
            GError **error)
{
  while (*pos < len)
    {
      const char *start = text + *pos;
      const char *nl = memchr (start, '\n', len - *pos);
      gsize n = nl != NULL ? (gsize) (nl - start) : len - *pos;

      *pos += n + (nl != NULL ? 1 : 0);
      (*line_no)++;
      switch (sandstep_token_line_parse (start, n, out))
        {
        case SANDSTEP_TOKEN_LINE_EMPTY:
          continue;
        case SANDSTEP_TOKEN_LINE_ENTRY:
          return TRUE;
        case SANDSTEP_TOKEN_LINE_BAD:
        default:
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "Line %u of the token file '%s' is not 'TOKEN', 'TOKEN admin' or 'TOKEN owner=PREFIX/' "
                          "(a prefix of owners, ending in '/', such as owner=nightly/), each optionally followed "
                          "by a '# comment'; a token is printable ASCII and never 'admin' or 'owner=...': fix "
                          "that line", *line_no, path);
          return FALSE;
        }
    }
  return FALSE;
}

static char *
read_text (const char *path, gsize *out_len, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, &local_error))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "Cannot read the token file '%s': %s", path, local_error->message);
      return NULL;
    }
  if (len > 1024 * 1024 || memchr (text, '\0', len) != NULL)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "The token file '%s' is not a token file (over 1 MiB, or binary)", path);
      return NULL;
    }
  *out_len = len;
  return g_steal_pointer (&text);
}

char *
sandstep_token_read_file (const char *path, GError **error)
{
  gsize len = 0, pos = 0;
  guint line_no = 0;
  g_autofree char *text = read_text (path, &len, error);
  SandstepTokenLine entry;
  GError *local_error = NULL;
  char *token;

  if (text == NULL)
    return NULL;
  if (!next_entry (path, text, len, &pos, &line_no, &entry, &local_error))
    {
      explicit_bzero (text, len);
      if (local_error != NULL)
        g_propagate_error (error, local_error);
      else
        sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                        "The token file '%s' holds no token; write one line of random text into it "
                        "(e.g. head -c 32 /dev/urandom | base64 > FILE)", path);
      return NULL;
    }
  token = g_strndup (entry.token, entry.token_len);
  explicit_bzero (text, len);
  return token;
}

struct _SandstepTokenSet {
  GArray *entries;           /* SandstepTokenEntry */
};

static void
entry_clear (SandstepTokenEntry *entry)
{
  explicit_bzero (entry->digest, sizeof entry->digest);
  g_clear_pointer (&entry->owner_prefix, g_free);
}

static SandstepTokenSet *
token_set_new (void)
{
  SandstepTokenSet *set = g_new0 (SandstepTokenSet, 1);

  set->entries = g_array_new (FALSE, TRUE, sizeof (SandstepTokenEntry));
  g_array_set_clear_func (set->entries, (GDestroyNotify) entry_clear);
  return set;
}

void
sandstep_token_set_free (SandstepTokenSet *set)
{
  if (set == NULL)
    return;
  g_array_unref (set->entries);
  g_free (set);
}

guint
sandstep_token_set_size (const SandstepTokenSet *set)
{
  return set->entries->len;
}

SandstepTokenSet *
sandstep_token_set_new_admin (const char *token)
{
  SandstepTokenSet *set = token_set_new ();
  SandstepTokenEntry entry = { { 0 } };

  sandstep_token_digest (token, entry.digest);
  g_array_append_val (set->entries, entry);
  return set;
}

SandstepTokenSet *
sandstep_token_set_load (const char *path, GError **error)
{
  gsize len = 0, pos = 0;
  guint line_no = 0;
  g_autofree char *text = read_text (path, &len, error);
  g_autoptr(SandstepTokenSet) set = NULL;
  GError *local_error = NULL;
  SandstepTokenLine line;

  if (text == NULL)
    return NULL;
  set = token_set_new ();
  while (next_entry (path, text, len, &pos, &line_no, &line, &local_error))
    {
      g_autofree char *token = g_strndup (line.token, line.token_len);
      SandstepTokenEntry entry = { { 0 } };

      sandstep_token_digest (token, entry.digest);
      explicit_bzero (token, line.token_len);
      if (line.prefix != NULL)
        {
          entry.owner_prefix = g_strndup (line.prefix, line.prefix_len);
          if (!g_utf8_validate (entry.owner_prefix, -1, NULL))
            {
              entry_clear (&entry);
              explicit_bzero (text, len);
              sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                              "Line %u of the token file '%s' has an owner prefix that is not UTF-8; fix that line",
                              line_no, path);
              return NULL;
            }
        }
      g_array_append_val (set->entries, entry);
    }
  explicit_bzero (text, len);
  if (local_error != NULL)
    {
      g_propagate_error (error, local_error);
      return NULL;
    }
  if (set->entries->len == 0)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "The token file '%s' holds no token; write one line of random text into it "
                      "(e.g. head -c 32 /dev/urandom | base64 > FILE)", path);
      return NULL;
    }
  return g_steal_pointer (&set);
}

const SandstepTokenEntry *
sandstep_token_set_match (const SandstepTokenSet *set, const char *header)
{
  const SandstepTokenEntry *found = NULL;
  guint8 given[32];

  if (header == NULL || g_ascii_strncasecmp (header, "Bearer ", strlen ("Bearer ")) != 0)
    return NULL;
  sandstep_token_digest (header + strlen ("Bearer "), given);
  /* Every entry, whichever matches. */
  for (guint i = 0; i < set->entries->len; i++)
    {
      const SandstepTokenEntry *entry = &g_array_index (set->entries, SandstepTokenEntry, i);
      if (sandstep_token_digest_equal (given, entry->digest) && found == NULL)
        found = entry;
    }
  return found;
}

gboolean
sandstep_token_entry_covers (const SandstepTokenEntry *entry, const char *owner)
{
  return entry->owner_prefix == NULL || (owner != NULL && g_str_has_prefix (owner, entry->owner_prefix));
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
