/* sandstep-json-libc.c: compact JSON that sandstep wrote, read with libc alone (see the header). */
#include "sandstep-json-libc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
sandstep_json_libc_space (const char *p)
{
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

/* The end of the string starting at @p ('"'), or NULL. */
const char *
sandstep_json_libc_skip_string (const char *p)
{
  for (p++; *p != '\0'; p++)
    {
      if (*p == '\\')
        {
          if (*++p == '\0')
            return NULL;
        }
      else if (*p == '"')
        return p + 1;
    }
  return NULL;
}

/* The end of the value at @p, or NULL. */
const char *
sandstep_json_libc_skip_value (const char *p)
{
  int depth = 0;

  p = sandstep_json_libc_space (p);
  do
    {
      if (*p == '"')
        {
          if ((p = sandstep_json_libc_skip_string (p)) == NULL)
            return NULL;
          continue;
        }
      if (*p == '{' || *p == '[')
        depth++;
      else if (*p == '}' || *p == ']')
        {
          if (--depth < 0)
            return NULL;
        }
      else if (*p == '\0')
        return NULL;
      else if (depth == 0)
        {
          /* A number, true, false or null. */
          while (*p != '\0' && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n')
            p++;
          return p;
        }
      p++;
    }
  while (depth > 0);
  return p;
}

/* The value of member @key of the object at @p, or NULL. */
const char *
sandstep_json_libc_member (const char *p, const char *key)
{
  size_t key_len = strlen (key);

  if (p == NULL || *(p = sandstep_json_libc_space (p)) != '{')
    return NULL;
  p = sandstep_json_libc_space (p + 1);
  while (*p == '"')
    {
      const char *end = sandstep_json_libc_skip_string (p);
      const char *value;
      if (end == NULL)
        return NULL;
      value = sandstep_json_libc_space (end);
      if (*value != ':')
        return NULL;
      value = sandstep_json_libc_space (value + 1);
      if ((size_t) (end - p) == key_len + 2 && memcmp (p + 1, key, key_len) == 0)
        return value;
      if ((p = sandstep_json_libc_skip_value (value)) == NULL)
        return NULL;
      p = sandstep_json_libc_space (p);
      if (*p != ',')
        return NULL;
      p = sandstep_json_libc_space (p + 1);
    }
  return NULL;
}

double
sandstep_json_libc_number (const char *p, double fallback)
{
  char *end;
  double n;

  if (p == NULL)
    return fallback;
  n = strtod (p, &end);
  return end != p ? n : fallback;
}

int
sandstep_json_libc_boolean (const char *p)
{
  return p != NULL && strncmp (p, "true", 4) == 0;
}

static void
put_utf8 (char **out, char *end, unsigned cp)
{
  char buf[4];
  int n;

  if (cp < 0x80)
    buf[0] = (char) cp, n = 1;
  else if (cp < 0x800)
    buf[0] = (char) (0xc0 | cp >> 6), buf[1] = (char) (0x80 | (cp & 0x3f)), n = 2;
  else if (cp < 0x10000)
    buf[0] = (char) (0xe0 | cp >> 12), buf[1] = (char) (0x80 | (cp >> 6 & 0x3f)),
    buf[2] = (char) (0x80 | (cp & 0x3f)), n = 3;
  else
    buf[0] = (char) (0xf0 | cp >> 18), buf[1] = (char) (0x80 | (cp >> 12 & 0x3f)),
    buf[2] = (char) (0x80 | (cp >> 6 & 0x3f)), buf[3] = (char) (0x80 | (cp & 0x3f)), n = 4;
  if (end - *out > n)
    {
      memcpy (*out, buf, n);
      *out += n;
    }
}

/* The four hex digits at @p into *@cp; 0 when one is not a hex digit.  Byte
 * by byte, so a string's NUL stops it before it reads past the line. */
static int
hex4 (const char *p, unsigned *cp)
{
  unsigned v = 0;

  for (int i = 0; i < 4; i++)
    {
      char c = p[i];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

      if (d < 0)
        return 0;
      v = v << 4 | (unsigned) d;
    }
  *cp = v;
  return 1;
}

/* The string at @p, unescaped, into @out (cut to @size); 0 when it is no string. */
int
sandstep_json_libc_string (const char *p, char *out, size_t size)
{
  char *o = out, *end = out + size;

  if (p == NULL || *p != '"' || size == 0)
    return 0;
  for (p++; *p != '"'; p++)
    {
      unsigned cp, low;

      if (*p == '\0')
        return 0;
      if (*p != '\\')
        {
          /* A character, or a byte of one in UTF-8: as it is. */
          if (end - o > 1)
            *o++ = *p;
          continue;
        }
      switch (*++p)
        {
        case '\0': return 0;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
          if (!hex4 (p + 1, &cp))
            return 0;
          p += 4;
          if (cp >= 0xd800 && cp < 0xdc00 && p[1] == '\\' && p[2] == 'u' && hex4 (p + 3, &low) && low >= 0xdc00 &&
              low < 0xe000)
            {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
              p += 6;
            }
          break;
        default: cp = (unsigned char) *p; break;
        }
      put_utf8 (&o, end, cp);
    }
  *o = '\0';
  return 1;
}

/* @text as a JSON string; 0 when it holds a byte this program will not judge (non-ASCII). */
int
sandstep_json_libc_append_string (char *out, size_t size, size_t *len, const char *text)
{
  size_t n = *len;

  if (n + 2 > size)
    return 0;
  out[n++] = '"';
  for (const unsigned char *p = (const unsigned char *) text; *p != '\0'; p++)
    {
      if (*p >= 0x80 || n + 7 > size)
        return 0;
      if (*p == '"' || *p == '\\')
        {
          out[n++] = '\\';
          out[n++] = (char) *p;
        }
      else if (*p < 0x20 || *p == 0x7f)
        n += (size_t) snprintf (out + n, size - n, "\\u%04x", *p);
      else
        out[n++] = (char) *p;
    }
  if (n + 1 > size)
    return 0;
  out[n++] = '"';
  *len = n;
  return 1;
}

size_t
sandstep_json_libc_base64_decode (const char *in, size_t len, unsigned char *out)
{
  unsigned value = 0;
  int bits = 0;
  size_t n = 0;

  for (size_t i = 0; i < len; i++)
    {
      int c = (unsigned char) in[i], d;
      if (c >= 'A' && c <= 'Z')
        d = c - 'A';
      else if (c >= 'a' && c <= 'z')
        d = c - 'a' + 26;
      else if (c >= '0' && c <= '9')
        d = c - '0' + 52;
      else if (c == '+')
        d = 62;
      else if (c == '/')
        d = 63;
      else
        continue;
      value = (value << 6) | (unsigned) d;
      bits += 6;
      if (bits >= 8)
        {
          bits -= 8;
          out[n++] = (unsigned char) (value >> bits);
        }
    }
  return n;
}

