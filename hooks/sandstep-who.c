/* sandstep-who.c: what an owner or a holder may be; see the header. */
#include "sandstep-who.h"

#include <string.h>

#include "sandstep-error.h"

gboolean
sandstep_identity_check (const char *what, const char *value, GError **error)
{
  g_autofree char *upper = g_ascii_strup (what, -1);
  gsize len = strlen (value);

  if (!g_utf8_validate (value, -1, NULL))
    {
      g_autofree char *shown = g_utf8_make_valid (value, -1);
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "the %s '%s' is not valid UTF-8 (shown with U+FFFD where it is not); give it in UTF-8 "
                             "(--%s or SANDSTEP_%s)", what, shown, what, upper);
    }
  if (len == 0 || len > SANDSTEP_IDENTITY_MAX)
    {
      /* The head of a long one: enough to recognise it, without pages of it in the message. */
      g_autofree char *head = g_utf8_substring (value, 0, MIN (g_utf8_strlen (value, -1), 64));
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "the %s '%s%s' is %" G_GSIZE_FORMAT " bytes; give one of 1 to %d bytes (--%s or "
                             "SANDSTEP_%s)", what, head, len > 64 ? "..." : "", len, SANDSTEP_IDENTITY_MAX, what,
                             upper);
    }
  return TRUE;
}
