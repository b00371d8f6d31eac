/* sandstep-meter.h: the progress line of put, get --to and export.
 *
 * On a terminal, a transfer of more than a few MB redraws one line on
 * stderr (bytes, rate, time left) as it goes, from the counts the backends
 * keep (hooks/sandstep-progress.h), and ends with a line of what it moved;
 * off a terminal only that last line is printed, unless the operator has a
 * last line of its own (export's "published").  A smaller transfer prints
 * nothing of this.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What counts as large: from here on a transfer shows its progress. */
#define SANDSTEP_METER_THRESHOLD (4 * 1024 * 1024)
/* How often the line is redrawn, in seconds (default 0.2). */
#define SANDSTEP_METER_INTERVAL_ENV "SANDSTEP_PROGRESS_INTERVAL"

typedef struct _SandstepMeter SandstepMeter;

/* Starts watching for `sandstep @op_name`; @expected: the bytes known to
 * come (0: the backend says as it opens each source); @summary: print the
 * last line off a terminal too. */
SandstepMeter *sandstep_meter_start (const char *op_name, guint64 expected, gboolean summary);
/* A line of the operator's own, printed above the progress line. */
void sandstep_meter_say (SandstepMeter *meter, const char *line);
/* Stops drawing, and says what moved when it was large and @ok; frees @meter. */
void sandstep_meter_finish (SandstepMeter *meter, gboolean ok);

/* "12.0MB of 48.0MB, 6.0MB/s, 6s left" (or without "of" and "left" when
 * @expected is 0, or without a rate before any time has passed). */
char *sandstep_meter_format (guint64 done, guint64 expected, double elapsed_s);

G_END_DECLS
