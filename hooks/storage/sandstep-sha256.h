/* sandstep-sha256.h: the SHA-256 of a payload, fed in pieces.
 *
 * Every S3 request signs its body's SHA-256 (x-amz-content-sha256), so an
 * export hashes each byte it uploads once.  Where the build found nettle
 * (GnuTLS's, so present wherever libsoup talks https) its SHA-256 does it,
 * about three times as fast as GChecksum's on CPUs with SHA extensions;
 * else GChecksum.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _SandstepSha256 SandstepSha256;

SandstepSha256 *sandstep_sha256_new (void);
void sandstep_sha256_update (SandstepSha256 *sha256, const void *data, gsize len);
/* The digest in lower-case hex; no more updates after it. */
char *sandstep_sha256_hex (SandstepSha256 *sha256);
void sandstep_sha256_free (SandstepSha256 *sha256);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepSha256, sandstep_sha256_free)

/* Which implementation this build uses: "nettle" or "GChecksum". */
const char *sandstep_sha256_implementation (void);

G_END_DECLS
