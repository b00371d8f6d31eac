/* sandstep-progress.c: how far this process's transfer has come; see sandstep-progress.h. */
#include "sandstep-progress.h"
#include "sandstep-test-hooks.h"

/* While watched: a piece a few milliseconds long, so that a line shows it move. */
#define WATCHED_PIECE (8 * 1024 * 1024)

/* How long a piece waits for a look under the lockstep hook, at most. */
#define LOCKSTEP_WAIT_US (10 * G_USEC_PER_SEC)

static guint64 done;
static guint64 expected;
static gint watched;
static gint lockstep;
static gint looks;

void
sandstep_progress_add (guint64 bytes)
{
  __atomic_add_fetch (&done, bytes, __ATOMIC_RELAXED);
  if (g_atomic_int_get (&watched) && g_atomic_int_get (&lockstep))
    {
      int seen = g_atomic_int_get (&looks);
      gint64 until = g_get_monotonic_time () + LOCKSTEP_WAIT_US;

      while (g_atomic_int_get (&looks) == seen && g_get_monotonic_time () < until)
        g_usleep (200);
    }
}

void
sandstep_progress_looked (void)
{
  g_atomic_int_inc (&looks);
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
  g_atomic_int_set (&lockstep, on && sandstep_test_hook ("SANDSTEP_TEST_PROGRESS_LOCKSTEP") != NULL);
  g_atomic_int_set (&watched, on ? 1 : 0);
}

guint64
sandstep_progress_piece (guint64 unwatched)
{
  return g_atomic_int_get (&watched) ? MIN (unwatched, WATCHED_PIECE) : unwatched;
}
