/* sandstep-export.h: copying files out of a sandbox to destinations, all or none.
 *
 * Every file is first staged where nobody sees it (sandstep-destination.h);
 * only when every file is staged are they committed, each in one step.  On
 * any staging failure every stage is undone and no destination changes.  A
 * commit that fails after others succeeded says which are already in place;
 * the rest are undone.
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

#define SANDSTEP_DEFAULT_EXPORT_MAX (1024ULL * 1024 * 1024)
#define SANDSTEP_DEFAULT_EXPORT_READ_TIMEOUT_S 60.0

typedef struct {
  guint64 max_bytes;         /* 0: SANDSTEP_DEFAULT_EXPORT_MAX */
  gboolean no_clobber;       /* an existing destination is refused, never replaced */
  double read_timeout_s;     /* <= 0: SANDSTEP_DEFAULT_EXPORT_READ_TIMEOUT_S */
} SandstepExportOptions;

/* TRUE when a URL of the "PATH=URL" @pairs needs what only sandstep-net has
 * (the object-storage client, libsoup): the helper hands the export to it. */
gboolean sandstep_export_needs_net (GPtrArray *pairs);

/* Checks every "PATH=URL" pair as the export would, touching nothing: the
 * form, the scheme, the object store's configuration. */
gboolean sandstep_export_check (GPtrArray *pairs, const SandstepExportOptions *options, GError **error);

/* @pairs: "PATH=URL" strings.  Calls @progress (may be NULL) after each file is staged. */
gboolean sandstep_export_files (SandstepAttachment *attachment, GPtrArray *pairs, const SandstepExportOptions *options,
                                void (*progress) (const char *path, const char *dest, gint64 bytes, gpointer data),
                                gpointer progress_data, GError **error);

G_END_DECLS
