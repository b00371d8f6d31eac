/* sandstep-progress.c: how far this process's transfer has come; see sandstep-progress.h. */
#include "sandstep-progress.h"

/* While watched: a piece a few milliseconds long, so that a line shows it move. */
#define WATCHED_PIECE (8 * 1024 * 1024)

static guint64 done;
static guint64 expected;
static gint watched;

void
sandstep_progress_add (guint64 bytes)
{
  __atomic_add_fetch (&done, bytes, __ATOMIC_RELAXED);
}

void
sandstep_progress_expect (guint64 bytes)
{
  __atomic_add_fetch (&expected, bytes, __ATOMIC_RELAXED);
}

void
sandstep_progress_get (guint64 *out_done, guint64 *out_expected)
{
  *out_done = __atomic_load_n (&done, __ATOMIC_RELAXED);
  *out_expected = __atomic_load_n (&expected, __ATOMIC_RELAXED);
}

void
sandstep_progress_watch (gboolean on)
{
  g_atomic_int_set (&watched, on ? 1 : 0);
}

guint64
sandstep_progress_piece (guint64 unwatched)
{
  return g_atomic_int_get (&watched) ? MIN (unwatched, WATCHED_PIECE) : unwatched;
}
