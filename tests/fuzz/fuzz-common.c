/* fuzz-common.c: what every fuzz target shares (see fuzz.h). */
#include "fuzz.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

static GLogWriterOutput
abort_on_warning (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  g_log_writer_default (level, fields, n_fields, data);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    abort ();
  return G_LOG_WRITER_HANDLED;
}

/* abort(), not GLib's breakpoint trap: libFuzzer keeps the input of an abort, not of a SIGTRAP. */
void
fuzz_init_glib (void)
{
  g_log_set_writer_func (abort_on_warning, NULL, NULL);
}

static int
memfd (void)
{
  static int fd = -1;

  if (fd < 0)
    {
      fd = memfd_create ("fuzz-input", MFD_CLOEXEC);
      if (fd < 0)
        {
          perror ("memfd_create");
          abort ();
        }
    }
  return fd;
}

int
fuzz_bytes_as_fd (const uint8_t *data, size_t size)
{
  int fd = memfd ();

  if (ftruncate (fd, 0) < 0 || (size > 0 && pwrite (fd, data, size, 0) != (ssize_t) size) ||
      lseek (fd, 0, SEEK_SET) != 0)
    {
      perror ("writing the fuzz input");
      abort ();
    }
  return fd;
}

const char *
fuzz_bytes_as_file (const uint8_t *data, size_t size)
{
  static char path[64];

  snprintf (path, sizeof path, "/proc/self/fd/%d", fuzz_bytes_as_fd (data, size));
  return path;
}

/* Sanitizers report on a dup of the real stderr, so a crash while fd 2 is /dev/null is still told. */
void __sanitizer_set_report_fd (void *fd) __attribute__ ((weak));

void
fuzz_quietly (void (*func) (void *data), void *data)
{
  static int report_fd = -1;
  int null = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  int out = fcntl (1, F_DUPFD_CLOEXEC, 3), err = fcntl (2, F_DUPFD_CLOEXEC, 3);

  if (null < 0 || out < 0 || err < 0)
    abort ();
  if (report_fd < 0 && __sanitizer_set_report_fd != NULL)
    {
      report_fd = fcntl (2, F_DUPFD_CLOEXEC, 3);
      __sanitizer_set_report_fd ((void *) (intptr_t) report_fd);
    }
  fflush (stdout);
  fflush (stderr);
  dup2 (null, 1);
  dup2 (null, 2);
  func (data);
  fflush (stdout);
  fflush (stderr);
  dup2 (out, 1);
  dup2 (err, 2);
  close (out);
  close (err);
  close (null);
}
