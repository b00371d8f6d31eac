/* sandstep-export.h: copying files out of a sandbox to destinations, all or none.
 *
 * Every file is first staged as a hidden sibling of its destination
 * (".NAME.<12 hex>.partial", so a consumer globbing the real name never sees
 * it); only when every file is staged are they renamed into place.  On any
 * staging failure every staging file is removed and no destination changes.
 * Destinations are file:// URLs for now.
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

#define SANDSTEP_DEFAULT_EXPORT_MAX (1024ULL * 1024 * 1024)

/* A local path for a file:// URL; SANDSTEP_EXPORT_ERROR_BAD_URL otherwise. */
char *sandstep_export_destination (const char *url, GError **error);

/* @pairs: "PATH=URL" strings.  Calls @progress (may be NULL) after each file is staged. */
gboolean sandstep_export_files (SandstepAttachment *attachment, GPtrArray *pairs, guint64 max_bytes,
                                void (*progress) (const char *path, const char *dest, gint64 bytes, gpointer data),
                                gpointer progress_data, GError **error);

G_END_DECLS
