/* sandstep-units.c: parsing and printing durations, seconds, sizes, counts and ADDR:PORT. */
#include "sandstep-units.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "sandstep-error.h"

static gboolean
bad_value (GError **error, const char *name, const char *value, const char *expected)
{
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "%s '%s' is not %s", name,
                         value, expected);
}

/* Numbers are decimal only, read one way: "010" is 8 to some readers (C, shells) and 10 to others, so a zero
 * before another digit is refused rather than read either way.  (Hex, "0x10", has no digit after its zero and
 * is refused by each parser as a stray "x".) */
static gboolean
leading_zero (const char *text)
{
  return text[0] == '0' && g_ascii_isdigit (text[1]);
}

static gboolean
refuse_leading_zero (GError **error, const char *name, const char *value, const char *expected)
{
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "%s '%s' is not %s: numbers are decimal, written without a leading zero (sandstep reads "
                         "no octal or hex)", name, value, expected);
}

/* A decimal number as strtod would take it, but only in plain decimal: digits, then optionally a fraction and
 * an exponent ("2.5", "30", "1e3"); no sign, blank, hex, "inf" or "nan", which strtod also takes. */
static gboolean
plain_decimal (const char *p)
{
  if (!g_ascii_isdigit (*p))
    return FALSE;
  while (g_ascii_isdigit (*p))
    p++;
  if (*p == '.')
    {
      if (!g_ascii_isdigit (*++p))
        return FALSE;
      while (g_ascii_isdigit (*p))
        p++;
    }
  if (*p == 'e' || *p == 'E')
    {
      p++;
      if (*p == '+' || *p == '-')
        p++;
      if (!g_ascii_isdigit (*p))
        return FALSE;
      while (g_ascii_isdigit (*p))
        p++;
    }
  return *p == '\0';
}

gboolean
sandstep_parse_duration (const char *text, gboolean allow_zero, gint64 *out_seconds, GError **error)
{
  static const struct { char suffix; gint64 scale; } units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
  const char *expected = allow_zero ? "a duration: 0, seconds, or a number with s, m, h or d (30m, 2h)"
                                    : "a duration: seconds, or a number with s, m, h or d (30m, 2h), above 0";
  char *end = NULL;
  gint64 scale = 1;
  guint64 value;

  if (text == NULL || !g_ascii_isdigit (text[0]))
    return bad_value (error, "duration", text ? text : "", expected);
  if (leading_zero (text))
    return refuse_leading_zero (error, "duration", text, expected);
  errno = 0;
  value = g_ascii_strtoull (text, &end, 10);
  if (errno != 0)
    return bad_value (error, "duration", text, expected);
  if (*end != '\0')
    {
      gsize i;
      for (i = 0; i < G_N_ELEMENTS (units); i++)
        if (end[0] == units[i].suffix && end[1] == '\0')
          break;
      if (i == G_N_ELEMENTS (units))
        return bad_value (error, "duration", text, expected);
      scale = units[i].scale;
    }
  if ((value == 0 && !allow_zero) || value > (guint64) SANDSTEP_MAX_DURATION_S / scale)
    return bad_value (error, "duration", text, expected);
  *out_seconds = (gint64) value * scale;
  return TRUE;
}

gboolean
sandstep_parse_seconds (const char *name, const char *text, gboolean allow_zero, double *out, GError **error)
{
  char *end = NULL;
  double value;

  if (text == NULL || text[0] == '\0')
    return bad_value (error, name, "", allow_zero ? "a number of seconds, 0 or more" : "a number of seconds above 0");
  if (leading_zero (text))
    return refuse_leading_zero (error, name, text, "a number of seconds");
  value = g_ascii_strtod (text, &end);
  if (*end != '\0' || !isfinite (value) || value < 0 || (value == 0 && !allow_zero) || g_ascii_isspace (text[0]))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "%s must be a %s finite number of seconds, got '%s'", name,
                           allow_zero ? "non-negative" : "positive", text);
  if (!plain_decimal (text))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "%s '%s' is not a decimal number of seconds (30, 2.5): numbers are decimal only, with no "
                           "sign (sandstep reads no hex)", name, text);
  if (value > SANDSTEP_MAX_DURATION_S)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "%s '%s' is more than ten years (%" G_GINT64_FORMAT " seconds); give fewer seconds",
                           name, text, SANDSTEP_MAX_DURATION_S);
  *out = value;
  return TRUE;
}

gboolean
sandstep_parse_size (const char *text, guint64 *out, GError **error)
{
  const char *expected = "a size: bytes, or a number with K, M or G (5M), above 0";
  char *end = NULL;
  guint64 value, scale = 1;

  if (text == NULL || !g_ascii_isdigit (text[0]))
    return bad_value (error, "size", text ? text : "", expected);
  if (leading_zero (text))
    return refuse_leading_zero (error, "size", text, expected);
  errno = 0;
  value = g_ascii_strtoull (text, &end, 10);
  if (errno != 0)
    return bad_value (error, "size", text, expected);
  if (*end != '\0')
    {
      switch (g_ascii_toupper (*end))
        {
        case 'K': scale = 1ULL << 10; break;
        case 'M': scale = 1ULL << 20; break;
        case 'G': scale = 1ULL << 30; break;
        default: return bad_value (error, "size", text, expected);
        }
      if (end[1] != '\0' && !(g_ascii_toupper (end[1]) == 'B' && end[2] == '\0') &&
          !(end[1] == 'i' && end[2] == 'B' && end[3] == '\0'))
        return bad_value (error, "size", text, expected);
    }
  if (value == 0 || value > G_MAXUINT64 / scale / 2)
    return bad_value (error, "size", text, expected);
  *out = value * scale;
  return TRUE;
}

gboolean
sandstep_parse_count (const char *text, guint64 max, guint64 *out)
{
  char *end = NULL;
  guint64 n;

  if (text == NULL || !g_ascii_isdigit (text[0]) || leading_zero (text))
    return FALSE;
  errno = 0;
  n = g_ascii_strtoull (text, &end, 10);
  if (errno != 0 || *end != '\0' || n < 1 || n > max)
    return FALSE;
  *out = n;
  return TRUE;
}

char *
sandstep_host_header_host (const char *value)
{
  const char *colon;
  char *host;
  gsize len;

  if (value == NULL || value[0] == '\0')
    return NULL;
  if (value[0] == '[')
    {
      const char *end = strchr (value, ']');
      if (end == NULL || (end[1] != '\0' && end[1] != ':'))
        return NULL;
      return g_ascii_strdown (value + 1, end - value - 1);
    }
  colon = strchr (value, ':');
  if (colon != NULL && strchr (colon + 1, ':') != NULL)
    return NULL;
  host = g_ascii_strdown (value, colon != NULL ? colon - value : -1);
  len = strlen (host);
  if (len > 0 && host[len - 1] == '.')
    host[len - 1] = '\0';
  return host;
}

gboolean
sandstep_parse_host_port (const char *text, gboolean port_alone, char **out_host, guint16 *out_port)
{
  g_autofree char *host = NULL;
  const char *port_text;
  char *end = NULL;
  guint64 port;

  if (text == NULL)
    return FALSE;
  if (text[0] == '[')
    {
      const char *close = strchr (text, ']');
      if (close == NULL || close[1] != ':')
        return FALSE;
      host = g_strndup (text + 1, close - text - 1);
      port_text = close + 2;
    }
  else if (strrchr (text, ':') != NULL)
    {
      const char *colon = strrchr (text, ':');
      host = g_strndup (text, colon - text);
      port_text = colon + 1;
    }
  else if (port_alone)
    {
      host = g_strdup ("");
      port_text = text;
    }
  else
    return FALSE;
  if (!g_ascii_isdigit (port_text[0]))
    return FALSE;
  errno = 0;
  port = g_ascii_strtoull (port_text, &end, 10);
  if (errno != 0 || *end != '\0' || port > 65535)
    return FALSE;
  *out_host = g_steal_pointer (&host);
  *out_port = (guint16) port;
  return TRUE;
}

char *
sandstep_format_size (guint64 n)
{
  if (n >= 1024 * 1024)
    return g_strdup_printf ("%.1fMB", (double) n / (1024.0 * 1024.0));
  if (n >= 1024)
    return g_strdup_printf ("%.1fKB", (double) n / 1024.0);
  return g_strdup_printf ("%" G_GUINT64_FORMAT "B", n);
}

char *
sandstep_format_size_option (guint64 n)
{
  if (n % (1ULL << 30) == 0)
    return g_strdup_printf ("%" G_GUINT64_FORMAT "G", n >> 30);
  if (n % (1ULL << 20) == 0)
    return g_strdup_printf ("%" G_GUINT64_FORMAT "M", n >> 20);
  if (n % (1ULL << 10) == 0)
    return g_strdup_printf ("%" G_GUINT64_FORMAT "K", n >> 10);
  return g_strdup_printf ("%" G_GUINT64_FORMAT, n);
}

char *
sandstep_format_seconds (double seconds)
{
  double tenths = round (seconds * 10) / 10;

  if (!isfinite (tenths))
    return sandstep_format_number (seconds);
  if (tenths == floor (tenths))
    return g_strdup_printf ("%.0f", tenths == 0 ? 0.0 : tenths);
  return g_strdup_printf ("%.1f", tenths);
}

char *
sandstep_format_number (double value)
{
  if (isnan (value))
    return g_strdup ("nan");
  if (isinf (value))
    return g_strdup (value > 0 ? "inf" : "-inf");
  if (value == floor (value) && fabs (value) < 1e15)
    return g_strdup_printf ("%.0f", value == 0 ? 0.0 : value);
  /* The shortest form that reads back as the same double. */
  for (int precision = 1; precision <= 17; precision++)
    {
      char *text = g_strdup_printf ("%.*g", precision, value);
      if (g_ascii_strtod (text, NULL) == value)
        return text;
      g_free (text);
    }
  return g_strdup_printf ("%.17g", value);
}
