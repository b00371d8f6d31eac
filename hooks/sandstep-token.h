/* sandstep-token.h: the bearer token between sandstepd and its clients.
 *
 * A token is one line of text in a file (never on a command line); the
 * server keeps only its digest and compares digests in constant time.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Fills @out with the SHA-256 of @token, for comparisons that take the same time whatever matches. */
void sandstep_token_digest (const char *token, guint8 out[32]);
/* Constant-time comparison of two digests. */
gboolean sandstep_token_digest_equal (const guint8 a[32], const guint8 b[32]);

/* The token in @path: its first line, surrounding whitespace removed; an
 * empty or unreadable file is an error naming @path (never the contents). */
char *sandstep_token_read_file (const char *path, GError **error);

G_END_DECLS
