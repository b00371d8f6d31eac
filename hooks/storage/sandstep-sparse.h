/* sandstep-sparse.h: writing a stream into a file, leaving holes where it is zero.
 *
 * For exports whose bytes arrive as a stream (from sandstepd): a block of
 * zeros becomes a hole when the destination is a regular file written at
 * its offset, so a sparse file stays sparse; the content is the same.
 * Anything else (a pipe, O_APPEND) is written as it comes.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  int fd;
  gboolean holes;          /* the destination can take them */
  gboolean ends_in_hole;   /* the last block was skipped: finish() sets the length */
} SandstepSparseWriter;

void sandstep_sparse_writer_init (SandstepSparseWriter *writer, int fd);
/* Writes @len bytes; FALSE with errno set. */
gboolean sandstep_sparse_write (SandstepSparseWriter *writer, const void *data, gsize len);
/* Call once after the last write; FALSE with errno set. */
gboolean sandstep_sparse_finish (SandstepSparseWriter *writer);

G_END_DECLS
