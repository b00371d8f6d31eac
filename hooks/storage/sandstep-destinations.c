/* sandstep-destinations.c: the table of destinations, from a URL to the destination that writes it. */
#include "sandstep-destination.h"

#include <string.h>

#include "sandstep-error.h"

/* Defined in sandstep-s3-dest.c and sandstep-http-dest.c, which need libsoup:
 * linked into sandstep-net (operators/meson.build), absent from the lean
 * helper and the make plugin, where these are NULL. */
#pragma weak sandstep_s3_destination_new
#pragma weak sandstep_http_destination_new

typedef SandstepDestination *(*DestinationNew) (const char *url, const char *path, SandstepExportContext *context,
                                                GError **error);

static DestinationNew
constructor_for (const char *url, gboolean *out_known)
{
  *out_known = TRUE;
  if (g_ascii_strncasecmp (url, "file://", 7) == 0)
    return sandstep_file_destination_new;
  if (g_ascii_strncasecmp (url, "s3://", 5) == 0)
    return sandstep_s3_destination_new;
  if (g_ascii_strncasecmp (url, "https://", 8) == 0 || g_ascii_strncasecmp (url, "http://", 7) == 0)
    return sandstep_http_destination_new;
  *out_known = FALSE;
  return NULL;
}

gboolean
sandstep_destination_needs_net (const char *url)
{
  gboolean known;

  return url != NULL && constructor_for (url, &known) == NULL && known;
}

SandstepDestination *
sandstep_destination_new (const char *url, const char *path, SandstepExportContext *context, GError **error)
{
  DestinationNew constructor;
  gboolean known;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (context != NULL, NULL);

  if (url == NULL || strstr (url, "://") == NULL)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' is not a URL; write file:///absolute/path, s3://BUCKET/KEY or "
                           "https://HOST/PATH", url ? url : ""), NULL;
  constructor = constructor_for (url, &known);
  if (!known)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' uses a scheme sandstep cannot write; use file:///absolute/path, "
                           "s3://BUCKET/KEY or https://HOST/PATH", url), NULL;
  if (constructor == NULL)
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                           "this program was built without the object-storage client that '%s' needs; "
                           "run the export through 'sandstep', which hands it to sandstep-net", url), NULL;
  return constructor (url, path, context, error);
}
