/* sandstep-token-libc.c: the grammar of a token file's line (see the header). */
#include "sandstep-token-libc.h"

#include <string.h>

static int
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* The next word of [*p, end): its start and length; 0 when none is left. */
static int
next_word (const char **p, const char *end, const char **word, size_t *word_len)
{
  const char *s = *p;

  while (s < end && is_space (*s))
    s++;
  if (s == end || *s == '#')
    {
      *p = end;
      return 0;
    }
  *word = s;
  while (s < end && !is_space (*s))
    s++;
  *word_len = (size_t) (s - *word);
  *p = s;
  return 1;
}

static int
printable (const char *s, size_t len)
{
  for (size_t i = 0; i < len; i++)
    if ((unsigned char) s[i] < 0x21 || (unsigned char) s[i] >= 0x7f)
      return 0;
  return 1;
}

/* An owner prefix: ends in '/', no control character (UTF-8 passes through). */
static int
prefix_usable (const char *s, size_t len)
{
  if (len == 0 || s[len - 1] != '/')
    return 0;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] == 0x7f)
      return 0;
  return 1;
}

static int
is_scope_word (const char *s, size_t len)
{
  return (len == 5 && memcmp (s, "admin", 5) == 0) || (len >= 6 && memcmp (s, "owner=", 6) == 0);
}

SandstepTokenLineKind
sandstep_token_line_parse (const char *line, size_t len, SandstepTokenLine *out)
{
  const char *p = line, *end = line + len;
  const char *word = NULL, *scope = NULL, *extra = NULL;
  size_t word_len = 0, scope_len = 0, extra_len = 0;

  memset (out, 0, sizeof *out);
  if (memchr (line, '\0', len) != NULL || memchr (line, '\n', len) != NULL)
    return SANDSTEP_TOKEN_LINE_BAD;
  if (!next_word (&p, end, &word, &word_len))
    return SANDSTEP_TOKEN_LINE_EMPTY;
  /* A scope where the token belongs: its text would become an admin token's secret. */
  if (!printable (word, word_len) || is_scope_word (word, word_len))
    return SANDSTEP_TOKEN_LINE_BAD;
  if (next_word (&p, end, &scope, &scope_len))
    {
      if (next_word (&p, end, &extra, &extra_len))
        return SANDSTEP_TOKEN_LINE_BAD;
      if (scope_len == 5 && memcmp (scope, "admin", 5) == 0)
        scope = NULL;
      else if (scope_len >= 6 && memcmp (scope, "owner=", 6) == 0 && prefix_usable (scope + 6, scope_len - 6))
        {
          out->prefix = scope + 6;
          out->prefix_len = scope_len - 6;
        }
      else
        return SANDSTEP_TOKEN_LINE_BAD;
    }
  out->token = word;
  out->token_len = word_len;
  return SANDSTEP_TOKEN_LINE_ENTRY;
}
