/* sandstep-destination.h: where an export writes one file, in two steps.
 *
 * stage() copies the sandbox's file to where nobody sees it yet (an unnamed
 * file beside the destination, the parts of a multipart upload, a spool
 * file); commit() makes it appear in one step; abort() undoes a stage.  The
 * export (sandstep-export.c) stages every file before it commits any, so a
 * failure while staging changes no destination.
 *
 * file:// is here (sandstep-file-dest.c).  s3:// and http(s):// need libsoup
 * (sandstep-s3-dest.c, sandstep-http-dest.c) and are weak references: the
 * lean helper links without them and hands such an export to sandstep-net
 * (sandstep_destination_needs_net()).
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

typedef struct _SandstepDestination SandstepDestination;

/* What every destination of one export shares. */
typedef struct {
  guint64 max_bytes;         /* the largest file an export takes */
  gboolean no_clobber;       /* refuse to replace what exists (If-None-Match: *) */
  double read_timeout_s;     /* how long a server may leave a request unanswered */
  /* One S3 client for every s3:// destination (connections are reused); owned here. */
  gpointer s3_client;
  GDestroyNotify s3_client_free;
} SandstepExportContext;

typedef struct {
  const char *scheme;
  /* Commits run in this order, lowest first: those that send a body (and so
   * fail most often) go before those that only rename or complete. */
  int commit_rank;
  gboolean (*stage) (SandstepDestination *dest, SandstepAttachment *attachment, gint64 *out_bytes, GError **error);
  gboolean (*commit) (SandstepDestination *dest, GError **error);
  /* Undoes stage(); appends what it could not undo to @left ("a, b"). */
  void (*abort) (SandstepDestination *dest, GString *left);
  void (*free) (SandstepDestination *dest);
} SandstepDestinationClass;

struct _SandstepDestination {
  const SandstepDestinationClass *klass;
  SandstepExportContext *context;
  char *path;                /* the file in the sandbox */
  char *shown;               /* the destination in messages: never a credential or a signed query */
  int rank;                  /* the commit order: klass->commit_rank, which stage() may change */
};

/* Parses @url for the sandbox file @path; touches nothing yet.  A URL that
 * is not one sandstep writes is SANDSTEP_EXPORT_ERROR_BAD_URL. */
SandstepDestination *sandstep_destination_new (const char *url, const char *path, SandstepExportContext *context,
                                               GError **error);
void sandstep_destination_free (SandstepDestination *dest);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepDestination, sandstep_destination_free)

/* TRUE when @url is one this program cannot write (s3://, http(s):// without
 * libsoup linked in) and sandstep-net can. */
gboolean sandstep_destination_needs_net (const char *url);

/* For the implementations: sets the common members and returns @dest. */
SandstepDestination *sandstep_destination_init (SandstepDestination *dest, const SandstepDestinationClass *klass,
                                                const char *path, const char *shown, SandstepExportContext *context);

/* One per scheme. */
SandstepDestination *sandstep_file_destination_new (const char *url, const char *path, SandstepExportContext *context,
                                                    GError **error);
SandstepDestination *sandstep_s3_destination_new (const char *url, const char *path, SandstepExportContext *context,
                                                  GError **error);
SandstepDestination *sandstep_http_destination_new (const char *url, const char *path, SandstepExportContext *context,
                                                    GError **error);

G_END_DECLS
