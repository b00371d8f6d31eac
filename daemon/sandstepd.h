/* sandstepd.h: what the daemon's files share. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The worker process (sandstepd --worker): serves one claim over @sock. */
int sandstepd_worker_main (int sock, const char *state_dir, int parent);

/* ---- uploads of `put`: a stream of entries rebuilt as a tree in a staging directory ----
 *
 * The stream is a sequence of entries (SandstepWirePutEntry in
 * sandstep-wire.h), each a JSON line followed, for a file, by exactly its
 * size in bytes; the first entry has path "" (the top, named @name), and an
 * end line closes the stream.  Paths are
 * relative, with no empty, "." or ".." component, and never resolve through a
 * link (openat2 RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH). */
typedef struct _SandstepdUpload SandstepdUpload;

/* A new upload in a fresh directory under @staging_fd (named for messages by @staging_dir). */
SandstepdUpload *sandstepd_upload_new (int staging_fd, const char *staging_dir, const char *name,
                                       guint64 max_bytes, GError **error);
/* Feeds bytes of the stream; after the first error every later call fails with it. */
gboolean sandstepd_upload_feed (SandstepdUpload *upload, const guint8 *data, gsize len, GError **error);
/* TRUE if the stream was complete; the staged tree is then at sandstepd_upload_path(). */
gboolean sandstepd_upload_finish (SandstepdUpload *upload, GError **error);
const char *sandstepd_upload_path (SandstepdUpload *upload);
/* Removes the staged tree. */
void sandstepd_upload_free (SandstepdUpload *upload);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepdUpload, sandstepd_upload_free)

G_END_DECLS
