/* sandstep-sha256.c: SHA-256 through nettle where the build has it, else GChecksum. */
#include "sandstep-sha256.h"

#if SANDSTEP_HAVE_NETTLE
#include <nettle/sha2.h>

struct _SandstepSha256 {
  struct sha256_ctx ctx;
};

SandstepSha256 *
sandstep_sha256_new (void)
{
  SandstepSha256 *s = g_new (SandstepSha256, 1);

  sha256_init (&s->ctx);
  return s;
}

void
sandstep_sha256_update (SandstepSha256 *s, const void *data, gsize len)
{
  sha256_update (&s->ctx, len, data);
}

char *
sandstep_sha256_hex (SandstepSha256 *s)
{
  guint8 digest[SHA256_DIGEST_SIZE];
  char *hex = g_malloc (2 * SHA256_DIGEST_SIZE + 1);

  sha256_digest (&s->ctx, sizeof digest, digest);
  for (gsize i = 0; i < sizeof digest; i++)
    g_snprintf (hex + 2 * i, 3, "%02x", digest[i]);
  return hex;
}

void
sandstep_sha256_free (SandstepSha256 *s)
{
  g_free (s);
}

const char *
sandstep_sha256_implementation (void)
{
  return "nettle";
}

#else

struct _SandstepSha256 {
  GChecksum *checksum;
};

SandstepSha256 *
sandstep_sha256_new (void)
{
  SandstepSha256 *s = g_new (SandstepSha256, 1);

  s->checksum = g_checksum_new (G_CHECKSUM_SHA256);
  return s;
}

void
sandstep_sha256_update (SandstepSha256 *s, const void *data, gsize len)
{
  g_checksum_update (s->checksum, data, len);
}

char *
sandstep_sha256_hex (SandstepSha256 *s)
{
  return g_strdup (g_checksum_get_string (s->checksum));
}

void
sandstep_sha256_free (SandstepSha256 *s)
{
  if (s == NULL)
    return;
  g_checksum_free (s->checksum);
  g_free (s);
}

const char *
sandstep_sha256_implementation (void)
{
  return "GChecksum";
}

#endif
