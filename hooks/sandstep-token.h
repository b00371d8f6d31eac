/* sandstep-token.h: the bearer tokens between sandstepd and its clients, and of MCP servers.
 *
 * A token is text in a file (never on a command line); a server keeps only
 * digests and compares them in constant time.  A client's token file holds
 * its token as the first word of its first line.  A server's token file
 * holds one token a line, each with its scope:
 *
 *   # comments and blank lines are ignored
 *   TOKEN                      # an admin token: every owner, and gc of all
 *   TOKEN admin                # the same, said
 *   TOKEN owner=nightly/       # only owners that start with "nightly/"
 *
 * so the one-token file of before is one admin token.  Both read lines by
 * the one grammar of sandstep-token-libc.h, which the static front shares.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Fills @out with the SHA-256 of @token, for comparisons that take the same time whatever matches. */
void sandstep_token_digest (const char *token, guint8 out[32]);
/* Constant-time comparison of two digests. */
gboolean sandstep_token_digest_equal (const guint8 a[32], const guint8 b[32]);

/* The token in @path: that of its first line that is neither blank nor a
 * comment; an empty or unreadable file, or a line before it that is not a
 * token line, is an error naming @path (never the contents). */
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

/* One token of a server: its digest, and the owners it covers. */
typedef struct {
  guint8 digest[32];
  char *owner_prefix;        /* NULL: an admin token (every owner) */
} SandstepTokenEntry;

typedef struct _SandstepTokenSet SandstepTokenSet;

/* The tokens of a server's token file (the format above); a line that
 * cannot be read is an error naming @path and the line's number, never its
 * text.  An owner prefix must end in '/', so "nightly/" never covers
 * "nightly2/...". */
SandstepTokenSet *sandstep_token_set_load (const char *path, GError **error);
/* A set of one admin token. */
SandstepTokenSet *sandstep_token_set_new_admin (const char *token);
void sandstep_token_set_free (SandstepTokenSet *set);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepTokenSet, sandstep_token_set_free)
guint sandstep_token_set_size (const SandstepTokenSet *set);

/* The entry whose token @header ("Authorization"'s value, "Bearer TOKEN")
 * carries, or NULL; every entry is compared, in constant time each, so the
 * time tells nothing of which matched or how far. */
const SandstepTokenEntry *sandstep_token_set_match (const SandstepTokenSet *set, const char *header);

/* TRUE when @entry covers @owner: an admin token, or @owner starts with its prefix. */
gboolean sandstep_token_entry_covers (const SandstepTokenEntry *entry, const char *owner);

G_END_DECLS
