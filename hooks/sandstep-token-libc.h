/* sandstep-token-libc.h: one line of a token file, in plain C.
 *
 * sandstepd's token file (hooks/sandstep-token.c), a client's token file
 * (the same reader) and the static front's (operators/sandstep-front-remote.c)
 * read lines by this one grammar:
 *
 *   LINE    = blank | COMMENT | TOKEN [SCOPE] [COMMENT]
 *   COMMENT = a word that starts with '#', and the rest of the line
 *   SCOPE   = "admin" | "owner=" PREFIX, a PREFIX ending in '/'
 *
 * A token is printable ASCII without spaces (it travels in an HTTP header),
 * and is never a scope or a comment: a line holding only "owner=nightly/"
 * is an error, not an admin token whose secret is that text.
 */
#pragma once

#include <stddef.h>

typedef enum {
  SANDSTEP_TOKEN_LINE_EMPTY,     /* blank, or only a comment */
  SANDSTEP_TOKEN_LINE_ENTRY,     /* a token, and its scope */
  SANDSTEP_TOKEN_LINE_BAD,       /* anything else: refuse the file */
} SandstepTokenLineKind;

typedef struct {
  const char *token;             /* into the line; not NUL-terminated */
  size_t token_len;
  const char *prefix;            /* the owner prefix, into the line; NULL for an admin token */
  size_t prefix_len;
} SandstepTokenLine;

/* Reads the @len bytes of @line (without its newline). */
SandstepTokenLineKind sandstep_token_line_parse (const char *line, size_t len, SandstepTokenLine *out);
