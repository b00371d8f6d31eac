/* sandstep-export-stream.h: a sandbox's file as a stream the caller reads.
 *
 * The backend writes a file into an fd (export_file); an upload wants to
 * read it in parts.  A thread runs export_file into a pipe and the caller
 * reads the other end, so memory stays bounded by what the caller holds,
 * and the same code serves the local tree and a sandstepd (whose client
 * writes what the server streams).  The backend's verdict on the file
 * (missing, too large, changed while read) comes at the end, from finish().
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

typedef struct _SandstepExportStream SandstepExportStream;

SandstepExportStream *sandstep_export_stream_start (SandstepAttachment *attachment, const char *path,
                                                    guint64 max_bytes, GError **error);
/* Fills @buffer with up to @len bytes, fewer only at the end of the file;
 * returns the count (0 at the end), or -1 with @error set. */
gssize sandstep_export_stream_read (SandstepExportStream *stream, void *buffer, gsize len, GError **error);
/* After read() returned fewer bytes than asked: waits for the copy to end;
 * the bytes it copied, or -1 with the backend's error. */
gint64 sandstep_export_stream_finish (SandstepExportStream *stream, GError **error);
/* Stops reading: a copy still running fails (EPIPE) and is waited for. */
void sandstep_export_stream_free (SandstepExportStream *stream);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepExportStream, sandstep_export_stream_free)

/* An unnamed file in TMPDIR (O_TMPFILE), for what must wait until the
 * export commits: it goes when its fd is closed, killed or not. */
int sandstep_export_spool_open (GError **error);

G_END_DECLS
