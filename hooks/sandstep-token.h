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

/* A fresh token: 32 random bytes (256 bits, from getrandom()) as 64
 * lowercase hex digits. */
char *sandstep_token_new (void);

/* Writes @token and a newline to @path, mode 0600 whatever the umask: a new
 * file, or a regular file of ours that it replaces (never through a link). */
gboolean sandstep_token_write_file (const char *path, const char *token, GError **error);

/* TRUE when @header ("Authorization"'s value) is "Bearer " and a token whose
 * digest is @digest; compared in constant time. */
gboolean sandstep_token_header_matches (const char *header, const guint8 digest[32]);

G_END_DECLS
