/* sandstep-progress.h: how far this process's transfer has come.
 *
 * The copy loops of the backends (a put, a read, an export) count the bytes
 * they move, and the size they learn a source has; a command-line operator
 * reads the two to draw its progress line (operators/sandstep-meter.h).
 * Counters for the whole process, updated atomically from any thread: one
 * transfer at a time is what a helper run does.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void sandstep_progress_add (guint64 bytes);
/* A source of @bytes is about to be copied: add it to what is expected. */
void sandstep_progress_expect (guint64 bytes);
void sandstep_progress_get (guint64 *out_done, guint64 *out_expected);
/* Someone is watching: copies come in pieces small enough to be seen moving. */
void sandstep_progress_watch (gboolean watched);
/* The most a copy loop moves in one call: small while watched, else @unwatched. */
guint64 sandstep_progress_piece (guint64 unwatched);
/* The watcher looked (each tick of its line, drawn or not).  Under the test hook SANDSTEP_TEST_PROGRESS_LOCKSTEP
 * (build tree only), each piece counted while watched waits for the next look, so that a test sees the line
 * move however fast the copy. */
void sandstep_progress_looked (void);

G_END_DECLS
