/* sandstep-meter.c: the progress line of put, get --to and export; see sandstep-meter.h. */
#include "sandstep-meter.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "sandstep-progress.h"
#include "sandstep-units.h"

#define DEFAULT_INTERVAL_S 0.2

struct _SandstepMeter {
  char *op_name;
  guint64 given;         /* expected bytes the operator knew */
  guint64 done0;         /* the counters when the meter started */
  guint64 expected0;
  gint64 start_us;
  gboolean terminal;
  gboolean summary;      /* the last line off a terminal too */
  double interval_s;
  GMutex lock;
  GCond cond;
  gboolean stop;
  gboolean drawn;        /* a progress line is on the screen */
  GThread *thread;
};

static void
counts (SandstepMeter *m, guint64 *out_done, guint64 *out_expected)
{
  guint64 done, expected;

  sandstep_progress_get (&done, &expected);
  *out_done = done - m->done0;
  *out_expected = m->given + (expected - m->expected0);
}

static char *
format_duration (double seconds)
{
  gint64 s = (gint64) ceil (MAX (seconds, 0));

  if (s < 60)
    return g_strdup_printf ("%" G_GINT64_FORMAT "s", s);
  if (s < 3600)
    return g_strdup_printf ("%" G_GINT64_FORMAT "m%02" G_GINT64_FORMAT "s", s / 60, s % 60);
  return g_strdup_printf ("%" G_GINT64_FORMAT "h%02" G_GINT64_FORMAT "m", s / 3600, s % 3600 / 60);
}

char *
sandstep_meter_format (guint64 done, guint64 expected, double elapsed_s)
{
  GString *out = g_string_new (NULL);
  g_autofree char *done_text = sandstep_format_size (done);

  g_string_append (out, done_text);
  if (expected > 0)
    {
      g_autofree char *expected_text = sandstep_format_size (MAX (expected, done));
      g_string_append_printf (out, " of %s", expected_text);
    }
  if (elapsed_s > 0 && done > 0)
    {
      double rate = done / elapsed_s;
      g_autofree char *rate_text = sandstep_format_size ((guint64) rate);

      g_string_append_printf (out, ", %s/s", rate_text);
      if (expected > done)
        {
          g_autofree char *left = format_duration ((expected - done) / rate);
          g_string_append_printf (out, ", %s left", left);
        }
    }
  return g_string_free (out, FALSE);
}

/* Under the lock. */
static void
draw (SandstepMeter *m)
{
  guint64 done, expected;
  g_autofree char *text = NULL;

  counts (m, &done, &expected);
  if (MAX (done, expected) < SANDSTEP_METER_THRESHOLD)
    return;
  text = sandstep_meter_format (done, expected, (g_get_monotonic_time () - m->start_us) / (double) G_USEC_PER_SEC);
  fprintf (stderr, "\rsandstep %s: %s\033[K", m->op_name, text);
  fflush (stderr);
  m->drawn = TRUE;
}

static void
clear (SandstepMeter *m)
{
  if (!m->drawn)
    return;
  fputs ("\r\033[K", stderr);
  m->drawn = FALSE;
}

static gpointer
meter_thread (gpointer data)
{
  SandstepMeter *m = data;

  g_mutex_lock (&m->lock);
  while (!m->stop)
    {
      gint64 until = g_get_monotonic_time () + (gint64) (m->interval_s * G_USEC_PER_SEC);

      while (!m->stop && g_cond_wait_until (&m->cond, &m->lock, until))
        ;
      if (!m->stop)
        {
          draw (m);
          sandstep_progress_looked ();
        }
    }
  g_mutex_unlock (&m->lock);
  return NULL;
}

SandstepMeter *
sandstep_meter_start (const char *op_name, guint64 expected, gboolean summary)
{
  SandstepMeter *m = g_new0 (SandstepMeter, 1);
  const char *interval = g_getenv (SANDSTEP_METER_INTERVAL_ENV);

  m->op_name = g_strdup (op_name);
  m->given = expected;
  m->summary = summary;
  sandstep_progress_get (&m->done0, &m->expected0);
  m->start_us = g_get_monotonic_time ();
  m->terminal = isatty (STDERR_FILENO);
  m->interval_s = DEFAULT_INTERVAL_S;
  if (interval != NULL && !sandstep_parse_seconds (SANDSTEP_METER_INTERVAL_ENV, interval, FALSE, &m->interval_s, NULL))
    m->interval_s = DEFAULT_INTERVAL_S;
  g_mutex_init (&m->lock);
  g_cond_init (&m->cond);
  if (m->terminal)
    {
      sandstep_progress_watch (TRUE);
      m->thread = g_thread_new ("sandstep-meter", meter_thread, m);
    }
  return m;
}

void
sandstep_meter_say (SandstepMeter *m, const char *line)
{
  if (m == NULL)
    {
      g_printerr ("%s\n", line);
      return;
    }
  g_mutex_lock (&m->lock);
  clear (m);
  fprintf (stderr, "%s\n", line);
  fflush (stderr);
  g_mutex_unlock (&m->lock);
}

void
sandstep_meter_finish (SandstepMeter *m, gboolean ok)
{
  guint64 done, expected;
  double elapsed_s;

  if (m == NULL)
    return;
  g_mutex_lock (&m->lock);
  m->stop = TRUE;
  g_cond_signal (&m->cond);
  g_mutex_unlock (&m->lock);
  if (m->thread != NULL)
    g_thread_join (m->thread);
  sandstep_progress_watch (FALSE);
  clear (m);
  counts (m, &done, &expected);
  elapsed_s = (g_get_monotonic_time () - m->start_us) / (double) G_USEC_PER_SEC;
  if (ok && done >= SANDSTEP_METER_THRESHOLD && (m->terminal || m->summary))
    {
      g_autofree char *size = sandstep_format_size (done);
      g_autofree char *rate = sandstep_format_size ((guint64) (done / MAX (elapsed_s, 1e-3)));
      g_autofree char *took = g_strdup_printf ("%.1fs", elapsed_s);

      fprintf (stderr, "sandstep %s: moved %s in %s (%s/s)\n", m->op_name, size, took, rate);
    }
  fflush (stderr);
  g_mutex_clear (&m->lock);
  g_cond_clear (&m->cond);
  g_free (m->op_name);
  g_free (m);
}
